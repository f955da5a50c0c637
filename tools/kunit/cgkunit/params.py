"""The suite's module parameters: their names, read from the C sources, the values each
accepts (the rules of its set() function, checked against the C sources by the tests), and
the check of the cgroup_kunit.* words of a kernel command line (and of insmod's words)
against them (issue 12: the kernel drops a dotted parameter that matches nothing without a
word, and a value the suite refuses leaves the default in place); the suites and their
cases, and the check of a KUnit filter glob against them; the cases of the suite that the
dynmods parameter lets run; the suite's seed: drawn for each boot, or read from the kernel
arguments."""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Callable, Iterator, Sequence

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
# (else each skips); both migrate suites run the cases its CGK_CASE(<name>) lines list
DYNMODS = "dynmods"
DYNMODS_ON = f"{SUITE_MODULE}.{DYNMODS}=1"
DYNMODS_SUITE = "cgroup_migrate_dynmods"
# reach_kunit.c's suite that prints lockdep's usage bits in that boot, after it: its name
# starts with DYNMODS_SUITE's, so that the boot's filter can select both
DYNMODS_REACH_SUITE = "cgroup_migrate_dynmods_reach"
MIGRATE = SUITE_DIR / "migrate_kunit.c"
# harness.c's selfcheck: the oracle's self-checks that provoke real reports (which taint the
# kernel) run only with selfcheck=1; the driver's boots set it unless told otherwise
SELFCHECK = "selfcheck"
SELFCHECK_ON = f"{SUITE_MODULE}.{SELFCHECK}=1"
# kstrtouint(val, 0, ...): an optional '+', then hex (0x), octal (leading 0) or decimal, and
# an optional trailing newline
KSTRTOUINT = re.compile(r"\+?(?:0[xX]([0-9a-fA-F]+)|0([0-7]*)|([1-9][0-9]*))\n?")
# struct kunit_suite <x> = { ... .name = "<suite>", ... .test_cases = <array>, ... }: the
# suites, by the name KUnit and its filter glob use, and the array of their cases
SUITE_STRUCT = re.compile(r"struct\s+kunit_suite\s+\w+\s*=\s*\{(.*?)\};", re.DOTALL)
SUITE_NAME = re.compile(r'\.name\s*=\s*"([^"]+)"')
SUITE_CASES = re.compile(r"\.test_cases\s*=\s*([A-Za-z_]\w*)")
# struct kunit_case <array>[] = { <entry>, ..., {} }: each entry a case macro whose first
# argument is the case's name (KUNIT_CASE, KUNIT_CASE_SLOW, KUNIT_CASE_PARAM(_ATTR), harness.h's
# CGK_CASE, ...) or a { .name = "<case>", ... } initializer
CASE_ARRAY = re.compile(r"struct\s+kunit_case\s+([A-Za-z_]\w*)\s*\[\s*\]\s*=\s*\{")
CASE_MACRO = re.compile(r"[A-Za-z_]\w*\s*\(\s*([A-Za-z_]\w*)")
# #define M(array) ...struct kunit_case array[] = {...}: one list of cases that several
# arrays are made of (migrate_kunit.c's MG_CASES(cgroup_migrate_cases);)
CASES_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(\s*(\w+)\s*\)((?:[^\n]*\\\n)*[^\n]*)",
                          re.MULTILINE)
# C comments (the reader blanks them), and the strings and characters it keeps as they are
C_COMMENT = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*',
                       re.DOTALL)
# a KUnit filter glob: 'suite_glob[.case_glob]' of names and glob(7) characters; anything else
# (a blank, a quote, a newline, a ';') would split it into more kernel or shell words
FILTER_CHARS = re.compile(r"[A-Za-z0-9_.*?\[\]!^-]+")


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


def param_name(word: str) -> str:
    """The kernel parameter a command-line word sets ('-' and '_' are the same to the kernel)."""
    return word.split("=", 1)[0].replace("-", "_")


def _name(word: str) -> str | None:
    """The parameter a command-line word sets in the suite module (the kernel takes '-' for
    '_' in names), '' for a bare 'cgroup_kunit.', None for any other word."""
    key = param_name(word)
    prefix = SUITE_MODULE + "."
    return key[len(prefix):] if key.startswith(prefix) else None


def check_kernel_args(words: Sequence[str], repo: Path, what: str = "KERNEL_ARGS",
                      refusals: Sequence[str] | None = ()) -> None:
    """DriverError naming the first cgroup_kunit.* word that sets no parameter of the suite
    (an unknown name, or no '=value') or gives it a value the suite refuses (refused_value),
    unless refusals (console lines a check expects) name that refusal; refusals None:
    names only. The C sources are read only when there is such a word."""
    ours = [(w, n) for w in words if (n := _name(w)) is not None]
    if not ours:
        return
    known = suite_parameters(repo)
    rules = param_rules(repo)
    for word, name in ours:
        shown = word.split("=", 1)[0]
        if name not in known:
            raise DriverError(f"{what}: unknown parameter {shown} "
                              f"(the suite has: {', '.join(known)})")
        if "=" not in word:
            raise DriverError(f"{what}: {shown} needs a value: {shown}=<value>")
        value = word.split("=", 1)[1]
        want = refused_value(name, value, rules)
        said = f"{name}={value}: want"
        if want and refusals is not None and not any(said in r for r in refusals):
            raise DriverError(f"{what}: {shown}={value}: the suite wants {want}")


# --- the values each parameter accepts ----------------------------------------------------


def _kstrto(value: str, bits: int) -> int | None:
    """value as the kernel's kstrtou<bits>(value, 0, ...) reads it; None when it refuses it."""
    m = KSTRTOUINT.fullmatch(value)
    if m is None:
        return None
    hex_digits, octal, decimal = m.groups()
    number = int(hex_digits, 16) if hex_digits is not None else \
        int(octal or "0", 8) if octal is not None else int(decimal)
    return number if number < 1 << bits else None


def _uint_in(low: int, high: int) -> Callable[[str], bool]:
    """kstrtouint() and a range: what harness.c's and bench_kunit.c's set() functions do."""
    def ok(value: str) -> bool:
        n = _kstrto(value, 32)
        return n is not None and low <= n <= high
    return ok


def _kstrtobool(value: str) -> bool:
    """What kstrtobool() (param_set_bool) accepts: it reads the first one or two characters."""
    first, second = value[:1].lower(), value[1:2].lower()
    return first in ("y", "t", "1", "n", "f", "0") or (first == "o" and second in ("n", "f"))


PROVOKE_WORDS = ("lockdep", "kcsan", "warn")
PROVOKE_MAX = 31  # harness.c: provoke_param[32], NUL included


def _provoke(value: str) -> bool:
    """harness.c's provoke_set(): up to the first newline, a comma-separated list of
    PROVOKE_WORDS (no empty word; a trailing comma is fine), shorter than its buffer."""
    text = value.split("\n", 1)[0]
    if len(text) > PROVOKE_MAX:
        return False
    words = text.split(",")
    if words and words[-1] == "" and len(words) > 1:
        words.pop()
    return text == "" or all(w in PROVOKE_WORDS for w in words)


@dataclass(frozen=True)
class ValueRule:
    """What one parameter's set() accepts, and what it says it wants when it refuses."""
    accepts: Callable[[str], bool]
    want: str


MAX_THREADS = 64  # harness.h CGK_MAX_THREADS
# harness.c's and migrate_kunit.c's parameters (a test holds them against the C sources)
PARAM_RULES: dict[str, ValueRule] = {
    "seed": ValueRule(lambda v: _kstrto(v, 64) is not None,
                      "an unsigned 64-bit number (0 picks one at random)"),
    "threads": ValueRule(_uint_in(0, MAX_THREADS),
                         f"1..{MAX_THREADS}, or 0 for each case's own list"),
    DURATION: ValueRule(_uint_in(*DURATION_RANGE), f"{DURATION_RANGE[0]}..{DURATION_RANGE[1]}"),
    "provoke": ValueRule(_provoke, f"a comma-separated list of {', '.join(PROVOKE_WORDS)}"),
    DYNMODS: ValueRule(_kstrtobool, "1 or 0 (y or n)"),
    SELFCHECK: ValueRule(_kstrtobool, "1 or 0 (y or n)"),
}
# The benchmarks' parameters (bench_kunit.c) are ranges that change with the benchmarks:
# read from their set() functions, `return <x>_uint_set(val, kp, LOW, HIGH);`.
UINT_RANGE_SET = re.compile(r"static int (\w+?)_set\(const char \*val, const struct kernel_param "
                            r"\*kp\)\s*\{\s*return \w+_uint_set\(val, kp, (\d+), (\d+)\);\s*\}")


def param_rules(repo: Path) -> dict[str, ValueRule]:
    """What each of the suite's parameters accepts: PARAM_RULES, and the ranges of the
    parameters whose set() is a plain range check in lib/kunit-cgroup/*.c."""
    rules = dict(PARAM_RULES)
    for path in sorted((repo / SUITE_DIR).glob("*.c")):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for name, low, high in UINT_RANGE_SET.findall(text):
            rules[name] = ValueRule(_uint_in(int(low), int(high)), f"{low}..{high}")
    return rules


def refused_value(name: str, value: str, rules: dict[str, ValueRule]) -> str | None:
    """What the suite wants for parameter name when it would refuse value (its own words),
    None when it takes it (or has no rule for the name: only its name is checked)."""
    rule = rules.get(name)
    return None if rule is None or rule.accepts(value) else rule.want


# --- suites and the filter glob -----------------------------------------------------------

def _braced(text: str, start: int) -> str:
    """What is between the '{' before text[start] and its matching '}' (to the end when the
    braces do not close)."""
    depth = 1
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i]
    return text[start:]


def _entries(body: str) -> list[str]:
    """The names of the cases in the body of a struct kunit_case array, in order."""
    names: list[str] = []
    entry: list[str] = []
    depth = 0
    for c in body + ",":
        if c == "," and depth == 0:
            text = "".join(entry).strip()
            entry = []
            named = SUITE_NAME.search(text) if text.startswith("{") else CASE_MACRO.match(text)
            if named:
                names.append(named.group(1))
            continue
        depth += {"(": 1, "{": 1, ")": -1, "}": -1}.get(c, 0)
        entry.append(c)
    return names


def _arrays(text: str) -> dict[str, list[str]]:
    """Each struct kunit_case array of a C file (comments removed): its cases, by its name."""
    arrays: dict[str, list[str]] = {}
    for name, param, body in CASES_DEFINE.findall(text):
        inner = body.replace("\\\n", "\n")
        m = CASE_ARRAY.search(inner)
        if m is None or m.group(1) != param:
            continue
        cases = _entries(_braced(inner, m.end()))
        for array in re.findall(rf"^[ \t]*{name}\(\s*(\w+)\s*\)\s*;", text, re.MULTILINE):
            arrays[array] = cases
    outside = CASES_DEFINE.sub("", text)
    for m in CASE_ARRAY.finditer(outside):
        arrays[m.group(1)] = _entries(_braced(outside, m.end()))
    return arrays


def suite_cases(repo: Path) -> dict[str, list[str]]:
    """The suite's KUnit suites (struct kunit_suite's .name in lib/kunit-cgroup/*.c), each
    with the names of its cases (its .test_cases array's entries; empty when they cannot be
    read). The one reader of the suites' sources: empty when none can be read."""
    suites: dict[str, list[str]] = {}
    for path in sorted((repo / SUITE_DIR).glob("*.c")):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        text = C_COMMENT.sub(lambda m: " " if m.group(0)[0] == "/" else m.group(0), text)
        arrays = _arrays(text)
        for body in SUITE_STRUCT.findall(text):
            for name in SUITE_NAME.findall(body)[:1]:
                array = SUITE_CASES.search(body)
                suites[name] = arrays.get(array.group(1), []) if array else []
    return suites


def suite_names(repo: Path) -> list[str]:
    """The names of the suite's KUnit suites, sorted; empty when none can be read."""
    return sorted(suite_cases(repo))


def _some(names: Sequence[str], most: int = 4) -> str:
    """names, comma-separated, the first most of them only (and how many there are)."""
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown}, ... {len(names)} in all"


def check_filter(glob: str, where: str = "filter", repo: Path | None = None) -> str:
    """A KUnit filter glob for kunit.py's command line ('' for all); DriverError naming where
    when it would be read as an option, holds a character that is neither a name's nor a
    glob's (a blank, quote or newline would make more kernel or shell words of it), or,
    with repo, when it selects no case of the suite: KUnit splits it at the first '.' into
    a suite glob and a case glob, and runs the cases whose names match both (a suite whose
    cases cannot be read may have any case)."""
    if not glob:
        return glob
    if glob.startswith("-"):
        raise DriverError(f"bad {where} {glob!r}: a KUnit filter glob cannot start with '-'")
    if not FILTER_CHARS.fullmatch(glob):
        bad = next(c for c in glob if not FILTER_CHARS.fullmatch(c))
        raise DriverError(f"bad {where} {glob!r}: {bad!r} is not part of a KUnit filter glob "
                          "('suite.case', names with * ? [...] wildcards)")
    if repo is None:
        return glob
    suites = suite_cases(repo)
    part, dot, case = glob.partition(".")
    matched = [s for s in sorted(suites) if fnmatchcase(s, part)]
    if suites and not matched:
        raise DriverError(f"bad {where} {glob!r}: {part!r} matches none of the suites "
                          f"({', '.join(sorted(suites))})")
    if dot and matched and all(suites[s] for s in matched) and \
            not any(fnmatchcase(c, case) for s in matched for c in suites[s]):
        whose = f"{matched[0]} ({_some(suites[matched[0]])})" if len(matched) == 1 else \
            f"the {len(matched)} suites {part!r} matches"
        raise DriverError(f"bad {where} {glob!r}: {case!r} matches no case of {whose}")
    return glob


def sets(words: Sequence[str], name: str) -> bool:
    """Whether a kernel command line sets the suite's parameter name (to any value)."""
    return any(_name(w) == name for w in words)


def with_selfcheck(words: Sequence[str]) -> list[str]:
    """A kernel command line with the oracle's self-checks on (SELFCHECK_ON appended), unless
    it sets selfcheck itself (cgroup_kunit.selfcheck=0: a default boot, no report provoked)."""
    return list(words) if sets(words, SELFCHECK) else [*words, SELFCHECK_ON]


def dynmods_cases(repo: Path) -> list[str] | None:
    """The cases of cgroup_migrate_dynmods (migrate_kunit.c's list, as suite_cases() reads
    it); None when they cannot be read (then any case may be there)."""
    return suite_cases(repo).get(DYNMODS_SUITE) or None


def duration_ms(words: Sequence[str]) -> int:
    """The time bound, in ms, of each gang the suite runs with this kernel command line: the
    last cgroup_kunit.duration_ms= value harness.c's duration_set() accepts (a refused value
    leaves the one before it), else the default."""
    low, high = DURATION_RANGE
    duration = DEFAULT_DURATION_MS
    for word in words:
        if _name(word) == DURATION and "=" in word:
            value = _kstrto(word.split("=", 1)[1], 32)
            if value is not None and low <= value <= high:
                duration = value
    return duration


# --- the seed ----------------------------------------------------------------------------------

SEED_PARAM = f"{SUITE_MODULE}.seed"
MAX_SEED = 2**64 - 1  # harness.c's seed: an unsigned 64-bit number (0: it picks one itself)


def draw_seeds(fixed: int | None, rng: random.Random | None = None) -> Iterator[int]:
    """The suite seed of each boot: fixed every time, else a fresh one in 1..MAX_SEED
    (0 would ask the suite to pick one) from rng (default: seeded by the OS)."""
    rng = rng or random.Random()
    while True:
        yield fixed if fixed is not None else rng.randrange(1, MAX_SEED + 1)


def seed_in_args(words: Sequence[str], what: str = "KERNEL_ARGS") -> int | None:
    """The seed a cgroup_kunit.seed= word of the kernel arguments asks for (the last one);
    None without one or for 0 (the suite picks a seed); DriverError for a non-number."""
    value: str | None = None
    for w in words:
        if param_name(w) == SEED_PARAM and "=" in w:
            value = w.split("=", 1)[1]
    if value is None:
        return None
    try:
        seed = int(value, 16) if value.lower().startswith("0x") else int(value, 10)
    except ValueError:
        raise DriverError(f"{what}: {SEED_PARAM}={value}: want a number in 0..{MAX_SEED}") from None
    if not 0 <= seed <= MAX_SEED:
        raise DriverError(f"{what}: {SEED_PARAM}={value}: want a number in 0..{MAX_SEED}")
    return seed or None


def without_seed(words: Sequence[str]) -> list[str]:
    """The kernel arguments without their cgroup_kunit.seed words (the caller sets the seed)."""
    return [w for w in words if param_name(w) != SEED_PARAM]
