"""The report-title table, lib/kunit-cgroup/report_titles.h: the suite's console oracle
(harness.c, the kernel's glob_match()) and the report reader (console.py, fnmatch) read the
same entries and give every line the same kind."""
from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from cgkunit import console as cr
from cgkunit import titles
from cgkunit.common import DriverError
from conftest import DATA

REPO = Path(__file__).resolve().parents[3]
HARNESS = REPO / "lib" / "kunit-cgroup" / "harness.c"
TITLE_LEN = 160  # harness.h's CGK_FAILURE_LEN: the probe matches a copy of that size
TABLE = titles.table()  # report_titles.h as the report reader matches it


def glob_match(pat: str, text: str) -> bool:
    """lib/glob.c's glob_match(), statement for statement, over NUL-terminated bytes."""
    p, s = pat.encode() + b"\0", text.encode() + b"\0"
    pi = si = 0
    back_pat: int | None = None
    back_str = 0
    while True:
        c, d = s[si], p[pi]
        pi += 1
        si += 1
        literal = True
        if d == ord("?"):
            if c == 0:
                return False
            continue
        if d == ord("*"):
            if p[pi] == 0:
                return True
            back_pat = pi
            si -= 1
            back_str = si
            continue
        if d == ord("["):
            if c == 0:
                return False
            match, inverted = False, p[pi] == ord("!")
            cls = pi + 1 if inverted else pi
            a = p[cls]
            cls += 1
            while True:
                b = a
                if a == 0:
                    break  # malformed: '[' is a literal
                if p[cls] == ord("-") and p[cls + 1] != ord("]"):
                    b = p[cls + 1]
                    if b == 0:
                        break
                    cls += 2
                if a <= c <= b:
                    match = True
                a = p[cls]
                cls += 1
                if a == ord("]"):
                    literal = False
                    break
            if not literal and match != inverted:
                pi = cls
                continue
        elif d == ord("\\"):
            d = p[pi]
            pi += 1
        if literal and c == d:
            if d == 0:
                return True
            continue
        if c == 0 or back_pat is None:
            return False
        pi = back_pat
        back_str += 1
        si = back_str


def oracle_kind(line: str) -> str | None:
    """The kind harness.c's console probe gives a line: leading blanks skipped, the line cut
    to its title buffer, the first entry whose pattern glob_match()es it."""
    text = line.lstrip(" \t").encode()[:TITLE_LEN - 1].decode(errors="ignore")
    return next((t.kind for t in TABLE.entries if glob_match(t.pattern, text)), None)


def sample(pattern: str) -> str:
    """A line that pattern matches: '*' and '?' as 'x', a class as its first printable match."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        end = pattern.find("]", i + 2) if ch == "[" else -1
        if ch in "*?":
            out.append("x")
        elif end > 0:
            cls = pattern[i:end + 1]
            out.append(next(chr(c) for c in range(0x20, 0x7f) if fnmatch.fnmatchcase(chr(c), cls)))
            i = end
        else:
            out.append(ch)
        i += 1
    return "".join(out)


# Title lines of the golden consoles in tests/data, with the kind both sides give them
REAL_TITLES = [
    ("BUG: KCSAN: data-race in inc_ucount / inc_ucount", "kcsan"),
    ("BUG: KCSAN: data-race in cgk_worker_fn / cgk_worker_fn", "kcsan"),
    ("BUG: KASAN: slab-use-after-free in cs_step+0x1e83/0x2220", "kasan"),
    ("refcount_t: underflow; use-after-free.", "refcount"),
    ("refcount_t: saturated; leaking memory.", "refcount"),
    ("WARNING: possible circular locking dependency detected", "lockdep"),
    ("WARNING: inconsistent lock state", "lockdep"),
    ("WARNING: suspicious RCU usage", "lockdep"),
    ("Kernel panic - not syncing: Fatal exception", "panic"),
    ("BUG: kernel NULL pointer dereference, address: 0000000000000008", "bug"),
    ("WARNING: kernel/cgroup/cgroup.c:6412 at cgroup_init+0x3c1/0x4a0, CPU#0: swapper/0", "warning"),
    ("WARNING: lib/refcount.c:28 at refcount_warn_saturate+0x8e/0x130, CPU#2: kunit_try_catch/112",
     "warning"),
    ("WARNING: ../../trees/debian-7.3.4-1~bpo13+1/lib/kunit-cgroup/oracle_kunit.c:116 at "
     "oracle_sees_warning+0xf/0x40, CPU#3: kunit_try_catch/83", "warning"),
    ("Oops: Oops: 0002 [#1] SMP NOPTI", "oops"),
    ("Oops: general protection fault, probably for non-canonical address 0xe06b3c03a000001b: "
     "0000 [#1] SMP KASAN NOPTI", "oops"),
]
# Titles the table knows beyond the consoles: the kinds harness.c's old table had not, the
# 7.x hard-lockup line and a hung task in I/O wait
MORE_TITLES = [
    ("WARNING: CPU: 1 PID: 42 at kernel/ucount.c:261 dec_ucount+0x6f/0x80", "warning"),
    ("WARNING: at dec_ucount+0x6f/0x80, CPU#1: kunit_try_catch/114", "warning"),
    ("INFO: possible recursive locking detected", "lockdep"),
    ("WARNING: kunit_try_catch/42 still has locks held!", "lockdep"),
    ("WARNING: HARDIRQ-safe -> HARDIRQ-unsafe lock order detected", "lockdep"),
    ("INFO: trying to register non-static key.", "lockdep"),
    ("DEBUG_LOCKS_WARN_ON(1)", "lockdep"),
    ("watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [kworker/0:1:42]", "lockup"),
    ("watchdog: CPU1: Watchdog detected hard LOCKUP on cpu 1", "lockup"),
    ("NMI watchdog: Watchdog detected hard LOCKUP on cpu 0", "lockup"),
    ("kernel BUG at kernel/ucount.c:12!", "bug"),
    ("general protection fault: 0000 [#1] SMP", "oops"),
    ("Internal error: Oops - BUG: 00000000f2000800 [#1] SMP", "oops"),
    ("Oops", "oops"),
    ("INFO: task kworker/0:1:42 blocked for more than 120 seconds.", "hung"),
    ("INFO: task kworker/0:1:42 blocked in I/O wait for more than 120 seconds.", "hung"),
    ("rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", "rcu-stall"),
    ("INFO: rcu_sched self-detected stall on CPU", "rcu-stall"),
    ("UBSAN: array-index-out-of-bounds in kernel/ucount.c:99:3", "ubsan"),
]
NOT_TITLES = [
    "INFO: lockdep is turned off.",
    "INFO: rcu_preempt detected expedited stalls on CPUs/tasks: {",
    "WARNING: CPU does not support IBPB.",
    "WARNING: Flushing system-wide workqueues will be prohibited in near future.",
    "Warning: unrelated",
    "Oopsie",
    "BUG:no blank",
    "oracle: KCSAN report while the case ran: BUG: KCSAN: data-race in a / b",
    "random: crng init done",
    "",
]
# harness.c's names before the table was shared: old consoles print them, old and new parse
OLD_ORACLE_KINDS = {"WARNING": "warning", "lockdep": "lockdep", "KCSAN": "kcsan",
                    "KASAN": "kasan", "refcount_t": "refcount", "BUG": "bug", "Oops": "oops"}


def golden_lines() -> list[str]:
    """Every line of the golden consoles, less its printk prefix, that is not indented."""
    lines = {cr.strip_prefix(raw) for f in sorted(DATA.glob("*.log"))
             for raw in f.read_text(errors="replace").splitlines()}
    return sorted(t for t in lines if t and not t[0].isspace())


def test_the_header_gives_every_kind_one_name() -> None:
    kinds = {t.kind: t.name for t in TABLE.entries}
    assert set(kinds) == {"kcsan", "kasan", "refcount", "lockdep", "panic", "lockup", "bug",
                          "warning", "oops", "hung", "rcu-stall", "ubsan"}
    assert list(TABLE.any_title.groupindex) == [f"t{i}" for i in range(len(TABLE.entries))]
    assert OLD_ORACLE_KINDS.items() <= TABLE.oracle_kinds.items()
    assert TABLE.oracle_kinds == {name: kind for kind, name in kinds.items()}
    for name, kind in TABLE.oracle_kinds.items():
        m = cr.EXPECTED_REPORT.search(f"# c: oracle: expected {name} report captured (2): X")
        assert m is not None and TABLE.oracle_kinds[m.group(1)] == kind


def test_harness_includes_the_header_and_no_title_of_its_own() -> None:
    text = HARNESS.read_text()
    assert '#include "report_titles.h"' in text
    assert "#define CGK_REPORT(kind, name, pattern)" in text
    for t in TABLE.entries:
        assert f'"{t.pattern}"' not in text and f'"{t.pattern.rstrip("*")}"' not in text


@pytest.mark.parametrize("entry", TABLE.entries, ids=lambda t: t.pattern)
def test_each_entry_matches_alike_and_is_reached(entry: titles.ReportTitle) -> None:
    line = sample(entry.pattern)
    assert glob_match(entry.pattern, line) and fnmatch.fnmatchcase(line, entry.pattern)
    assert entry.matches(line)
    # no entry of another kind before it takes its lines
    assert cr.classify(line) == oracle_kind(line) == entry.kind
    for other in TABLE.entries:
        assert glob_match(other.pattern, line) == fnmatch.fnmatchcase(line, other.pattern) \
            == other.matches(line), (other.pattern, line)


@pytest.mark.parametrize("line,kind", REAL_TITLES + MORE_TITLES + [(t, None) for t in NOT_TITLES])
def test_title_lines(line: str, kind: str | None) -> None:
    assert cr.classify(line) == oracle_kind(line) == kind
    for t in TABLE.entries:
        assert glob_match(t.pattern, line) == fnmatch.fnmatchcase(line, t.pattern), t.pattern


def test_real_titles_are_in_the_golden_consoles() -> None:
    lines = set(golden_lines())
    assert [line for line, _ in REAL_TITLES if line not in lines] == []


def test_every_golden_line_gets_the_same_kind_from_both_sides() -> None:
    lines = golden_lines()
    assert len(lines) > 1000
    differ = [(line, cr.classify(line), oracle_kind(line)) for line in lines
              if cr.classify(line) != oracle_kind(line)]
    assert differ == []
    # classify()'s one regex of all titles is the first of TITLES that matches
    assert TABLE.any_title.groups == len(TABLE.entries)
    assert [cr.classify(line) for line in lines] == \
        [next((t.kind for t in TABLE.entries if t.regex.match(line)), None) for line in lines]
    assert sum(cr.classify(line) is not None for line in lines) >= 25


def test_glob_match_transcription() -> None:
    for pat, text, want in [("a*b?c", "axxbyc", True), ("a*b?c", "abc", False),
                            ("[!a-c]x", "dx", True), ("[!a-c]x", "bx", False),
                            ("[]]", "]", True), ("[a-", "[a-", True), ("\\*", "*", True),
                            ("*a*a", "aaaa", True), ("*", "", True), ("?", "", False)]:
        assert glob_match(pat, text) is want, (pat, text)


@pytest.mark.parametrize("text,message", [
    ('CGK_REPORT("kcsan", "KCSAN", "BUG: KCSAN: *"', 'x.h:2: not CGK_REPORT("kind"'),
    ('CGK_REPORT("kcsan", "KCSAN", "a\\"b*")', 'x.h:2: not CGK_REPORT("kind"'),
    ('CGK_REPORT("KCSAN", "KCSAN", "BUG: *")', "x.h:2: the kind is not a lower-case word"),
    ('CGK_REPORT("hung", "hung task", "INFO: *")', "x.h:2: the name is empty or has a blank"),
    ('CGK_REPORT("bug", "BUG", "")', "x.h:2: the pattern is empty or not ASCII"),
    ('CGK_REPORT("kcsan", "KCSAN2", "x*")', "x.h:2: kind kcsan is already called KCSAN"),
    ('CGK_REPORT("kasan", "KCSAN", "x*")', "x.h:2: name KCSAN already stands for kcsan"),
])
def test_bad_entries(text: str, message: str) -> None:
    header = f'CGK_REPORT("kcsan", "KCSAN", "BUG: KCSAN: *")\n{text}\n'
    with pytest.raises(DriverError, match=message.replace("(", r"\(")):
        titles.parse(header, "x.h")


def test_no_entries_and_a_missing_header(tmp_path: Path) -> None:
    with pytest.raises(DriverError, match=r"x.h: no CGK_REPORT\(...\) entry"):
        titles.parse("/* CGK_REPORT(kind, name, pattern) in a comment */\n", "x.h")
    with pytest.raises(DriverError, match="report_titles.h"):
        titles.load(tmp_path)
    entries = titles.load(REPO)
    assert [(t.kind, t.name, t.pattern) for t in entries] == \
        [(t.kind, t.name, t.pattern) for t in TABLE.entries]
