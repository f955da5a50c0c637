"""The titles of kernel reports, from lib/kunit-cgroup/report_titles.h: the one table the
suite's console oracle (harness.c, with the kernel's glob_match()) and the report reader
(console.py) both match console lines against, first match wins.

Each line CGK_REPORT("kind", "name", "pattern") of the header is an entry: kind is the
driver's word for the report (Splat.kind, failure signatures), name the oracle's (what it
prints: 'oracle: <name> report while the case ran: ...'), pattern a glob(7) over the whole
line. fnmatch.fnmatchcase() matches as glob_match() does for the patterns the header may
hold (* ? [...] [!...], no backslash) on ASCII lines. The project's table is read once,
when first needed (table()): cli.main asks for it before anything else, so a missing or
broken header is bad input whatever the command."""
from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from .common import DRIVER_REPO, DriverError, read_text_file
from .params import SUITE_DIR

HEADER = SUITE_DIR / "report_titles.h"
MACRO = "CGK_REPORT"
# CGK_REPORT("kind", "name", "pattern"), alone on its line: C strings without escapes
ENTRY = re.compile(rf'^{MACRO}\(\s*"([^"\\]*)"\s*,\s*"([^"\\]*)"\s*,\s*"([^"\\]*)"\s*\)$')
KIND = re.compile(r"[a-z][a-z0-9_-]*")
WHERE_SUFFIX = re.compile(r",? CPU#\d+: \S+$|CPU: \d+ PID: \d+ ")


@dataclass(frozen=True)
class ReportTitle:
    """One CGK_REPORT entry."""
    kind: str
    name: str
    pattern: str
    regex: re.Pattern[str]  # the pattern, as fnmatch.fnmatchcase() compiles it

    def matches(self, line: str) -> bool:
        return self.regex.match(line) is not None


def _problem(kind: str, name: str, pattern: str, names: dict[str, str],
             kinds: dict[str, str]) -> str:
    """What is wrong with an entry, given the names and kinds of the entries before it."""
    if not KIND.fullmatch(kind):
        return "the kind is not a lower-case word"
    if not name or any(c.isspace() for c in name):
        return "the name is empty or has a blank"
    if not pattern or not pattern.isascii():
        return "the pattern is empty or not ASCII"
    if names.setdefault(kind, name) != name:
        return f"kind {kind} is already called {names[kind]}"
    if kinds.setdefault(name, kind) != kind:
        return f"name {name} already stands for {kinds[name]}"
    return ""


def parse(text: str, where: str) -> list[ReportTitle]:
    """The entries of a report_titles.h text, in order; DriverError naming where:line for a
    CGK_REPORT line that is not one, a bad kind, name or pattern, a kind with two names or a
    name with two kinds, or no entry at all."""
    entries: list[ReportTitle] = []
    names: dict[str, str] = {}
    kinds: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line.startswith(MACRO):
            continue
        m = ENTRY.match(line)
        if m is None:
            raise DriverError(f'{where}:{n}: not {MACRO}("kind", "name", "pattern"): {line}')
        kind, name, pattern = m.groups()
        problem = _problem(kind, name, pattern, names, kinds)
        if problem:
            raise DriverError(f"{where}:{n}: {problem}: {line}")
        entries.append(ReportTitle(kind=kind, name=name, pattern=pattern,
                                   regex=re.compile(fnmatch.translate(pattern))))
    if not entries:
        raise DriverError(f"{where}: no {MACRO}(...) entry")
    return entries


def load(repo: Path | None = None) -> list[ReportTitle]:
    """The entries of repo's header (default: the project this driver is in, whatever else
    of it is missing: table() reads it before anything else is looked for)."""
    path = (repo if repo is not None else DRIVER_REPO) / HEADER
    return parse(read_text_file(path), str(path))


@dataclass(frozen=True)
class Table:
    """The entries as the report reader matches them: all patterns in one regex, a named
    group each (t<index>), so one match a line finds the first entry that fits it."""
    entries: tuple[ReportTitle, ...]
    any_title: re.Pattern[str]
    oracle_kinds: dict[str, str]  # the oracle's name of each kind (what harness.c prints) -> kind

    @classmethod
    def of(cls, entries: list[ReportTitle]) -> "Table":
        return cls(entries=tuple(entries),
                   any_title=re.compile("|".join(f"(?P<t{i}>{t.regex.pattern})"
                                                 for i, t in enumerate(entries))),
                   oracle_kinds={t.name: t.kind for t in entries})

    def kind(self, line: str) -> str | None:
        """The kind of the first entry whose pattern matches line; None when none does."""
        m = self.any_title.match(line)
        return self.entries[int(m.lastgroup[1:])].kind if m is not None and m.lastgroup else None


@functools.cache
def table() -> Table:
    """The table of the project this driver is in, read when first asked for."""
    return Table.of(load())


def title_key(title: str) -> str:
    """A title without the CPU and task it happened on, which vary per report."""
    return WHERE_SUFFIX.sub("", title)
