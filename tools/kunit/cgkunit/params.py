"""The suite's module parameters: their names, read from the C sources, and the check of
the cgroup_kunit.* words of a kernel command line against them (issue 12: the kernel
drops a dotted parameter that matches nothing without a word); the cases of the suite that
the dynmods parameter lets run."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from .common import DriverError, read_text_file

SUITE_MODULE = "cgroup_kunit"
SUITE_DIR = Path("lib") / "kunit-cgroup"
HARNESS = SUITE_DIR / "harness.c"
# module_param(name, ...), module_param_cb(name, ...), module_param_named(name, ...), ...:
# the first argument is the name on the command line (a declaration, not a comment line).
DECLARATION = re.compile(r"^[ \t]*module_param\w*\s*\(\s*([A-Za-z_]\w*)\s*,", re.MULTILINE)
# harness.c's duration_ms: each gang's time bound, its default and what duration_set() accepts
DURATION = "duration_ms"
DEFAULT_DURATION_MS = 1000
DURATION_RANGE = (10, 600_000)
# migrate_kunit.c's dynmods: cgroup_migrate_dynmods switches the default hierarchy to
# favordynmods, which the kernel cannot switch off again, so its cases run only with dynmods=1
# (else each skips); both migrate suites run the cases its MG_CASE(<name>) lines list
DYNMODS = "dynmods"
DYNMODS_ON = f"{SUITE_MODULE}.{DYNMODS}=1"
DYNMODS_SUITE = "cgroup_migrate_dynmods"
MIGRATE = SUITE_DIR / "migrate_kunit.c"
MG_CASE = re.compile(r"^[ \t]*MG_CASE\(\s*([A-Za-z_]\w*)\s*\)", re.MULTILINE)
# kstrtouint(val, 0, ...): an optional '+', then hex (0x), octal (leading 0) or decimal, and
# an optional trailing newline
KSTRTOUINT = re.compile(r"\+?(?:0[xX]([0-9a-fA-F]+)|0([0-7]*)|([1-9][0-9]*))\n?")


def suite_parameters(repo: Path) -> list[str]:
    """The names of the suite module's parameters, sorted: what harness.c declares, and the
    other lib/kunit-cgroup/*.c files linked into the same module (the benchmarks'
    bench_reps, bench_migrations); DriverError when harness.c cannot be read or none is found."""
    harness = repo / HARNESS
    sources = [harness] + sorted(p for p in (repo / SUITE_DIR).glob("*.c") if p != harness)
    names: set[str] = set()
    for path in sources:
        names.update(DECLARATION.findall(read_text_file(path)))
    if not names:
        raise DriverError(f"{harness}: no module_param_cb(...) or module_param(...) found: "
                          f"cannot check the {SUITE_MODULE}.* kernel arguments")
    return sorted(names)


def _name(word: str) -> str | None:
    """The parameter a command-line word sets in the suite module (the kernel takes '-' for
    '_' in names), '' for a bare 'cgroup_kunit.', None for any other word."""
    key = word.split("=", 1)[0].replace("-", "_")
    prefix = SUITE_MODULE + "."
    return key[len(prefix):] if key.startswith(prefix) else None


def check_kernel_args(words: Sequence[str], repo: Path, what: str = "KERNEL_ARGS") -> None:
    """DriverError naming the first cgroup_kunit.* word that sets no parameter of the suite
    (an unknown name, or no '=value'); the C sources are read only when there is one."""
    ours = [(w, n) for w in words if (n := _name(w)) is not None]
    if not ours:
        return
    known = suite_parameters(repo)
    for word, name in ours:
        shown = word.split("=", 1)[0]
        if name not in known:
            raise DriverError(f"{what}: unknown parameter {shown} "
                              f"(the suite has: {', '.join(known)})")
        if "=" not in word:
            raise DriverError(f"{what}: {shown} needs a value: {shown}=<value>")


def sets(words: Sequence[str], name: str) -> bool:
    """Whether a kernel command line sets the suite's parameter name (to any value)."""
    return any(_name(w) == name for w in words)


def dynmods_cases(repo: Path) -> list[str] | None:
    """The cases of cgroup_migrate_dynmods (migrate_kunit.c's MG_CASE list); None when the
    file cannot be read or lists none (then any case may be there)."""
    try:
        text = (repo / MIGRATE).read_text(errors="replace")
    except OSError:
        return None
    return MG_CASE.findall(text) or None


def _kstrtouint(value: str) -> int | None:
    """value as the kernel's kstrtouint(value, 0, ...) reads it; None when it refuses it."""
    m = KSTRTOUINT.fullmatch(value)
    if m is None:
        return None
    hex_digits, octal, decimal = m.groups()
    number = int(hex_digits, 16) if hex_digits is not None else \
        int(octal or "0", 8) if octal is not None else int(decimal)
    return number if number < 1 << 32 else None


def duration_ms(words: Sequence[str]) -> int:
    """The time bound, in ms, of each gang the suite runs with this kernel command line: the
    last cgroup_kunit.duration_ms= value harness.c's duration_set() accepts (a refused value
    leaves the one before it), else the default."""
    low, high = DURATION_RANGE
    duration = DEFAULT_DURATION_MS
    for word in words:
        if _name(word) == DURATION and "=" in word:
            value = _kstrtouint(word.split("=", 1)[1])
            if value is not None and low <= value <= high:
                duration = value
    return duration
