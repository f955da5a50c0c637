"""Console log -> report, in two passes: what each line is (ConsoleState, which the boot
watchdog also feeds live), then the tests and what the lines before each result line say
about its test (_Tree, _attribute); verdicts and the run's status. build_report reads a
results directory: its console.log, and the watchdog's stops and the run's arguments from
the exec.json beside it."""
from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from . import titles
from .common import read_json
from .params import SUITE_MODULE
from .report import (INTERRUPTED, POINT_LEVELS, STOPPED, BadParameter, Counts, NotRun, Report,
                     Splat, TestResult, display, short_verdict, stop_where)

# --- line classification ---------------------------------------------------

PREFIX = re.compile(r"^(?:\[\s*\d+\.\d+\])?(?:\[\s*[TC]\d+\])?")
KTAP_HEADER = re.compile(r"^(\s*)K?TAP version \d+\s*$")
SUBTEST = re.compile(r"^(\s*)# Subtest: (.*?)\s*$")
PLAN = re.compile(r"^(\s*)1\.\.(\d+)\b")
RESULT = re.compile(r"^(\s*)(ok|not ok) (\d+)\b(?: -)? ?(.*)$")
DIRECTIVE = re.compile(r"^(.*?)\s*#\s*(SKIP|TODO)\b\s*(.*)$", re.IGNORECASE)
DIAG = re.compile(r"^(\s*)#(?: (.*))?$")
STATS = re.compile(r"(?:^|: )pass:\d+ fail:\d+ skip:\d+ total:\d+$|^Totals: ")
KV = re.compile(r"([A-Za-z_][\w.]*)=(\S+)")
METRIC = re.compile(r"(?:^|: )metric: ([A-Za-z_]\w*)((?:\s+\S+)*)\s*$")
# oracle_kunit.c's self-checks, after taking the report they provoked off the oracle:
# '# oracle_sees_warning: oracle: expected WARNING report captured (1): WARNING: CPU: ...'
EXPECTED_REPORT = re.compile(r"(?:^|: )oracle: expected (\S+) report captured \((\d+)\): ")
# harness.c's heartbeat while a gang runs: '# <case>: running 40 s of 600 s, 123456 steps'
HEARTBEAT = re.compile(r"(?:^|#\s)\s*([A-Za-z_]\w*): running \d+ s of \d+ s, (\d+) steps\s*$")
INTEGER = re.compile(r"-?\d+")
# cgroup_reach (reach_kunit.c): what lockdep recorded for the target lock classes.
# '# lockdep_usage: reach: class usage={-.-.} fd=34 bd=52 name=css_set_lock'
# '# lockdep_usage: reach: class usage=none name=cpuset_mutex'
# '# lockdep_usage: reach: lockdep debug_locks=1 classes=1873 targets=26'
# '# lockdep_usage: reach: end matched=21'
REACH = re.compile(r"(?:^|: )reach: (class|lockdep|end)\b\s*(.*?)\s*$")
REACH_CLASS = re.compile(r"usage=(?:\{([.+?-]*)\}|(none))(?: fd=(\d+) bd=(\d+))? name=(\S.*)$")
KUNIT_TIMEOUT = re.compile(r"^Command .* timed out after \d+")
KUNIT_BOOT = re.compile(r"^(?:\[[\d:]+\] )?Starting KUnit Kernel \((\d+)/(\d+)\)")
# A parameter's set() refusing a value (harness.c's pr_fmt is "cgroup_kunit: "; a
# callback that prints kp->name gives "cgroup_kunit.<name>" when the suite is built in)
REFUSAL = re.compile(rf"^{SUITE_MODULE}: (?:{SUITE_MODULE}\.)?([A-Za-z_]\w*)=(.*?): want (.+?)\s*$")
CUT_HERE = "------------[ cut here ]------------"
WINDOW = 8

SECONDARY = ("warning", "oops")
UPGRADES = ("refcount", "lockdep")
TRACE_LINES = ("Modules linked in", "CPU:", "Hardware name", "Call Trace", "RIP:", "Stack:",
               "---[", "Tainted", "pc :", "Workqueue:")


def classify(text: str) -> str | None:
    """Splat kind when text (prefix stripped) is a report title line: the kind of the first
    entry of report_titles.h whose pattern matches it (titles.table())."""
    if not text or text[0].isspace():
        return None
    return titles.table().kind(text)


def strip_prefix(line: str) -> str:
    """Drop a printk '[ time]' / '[ T1]' prefix and trailing whitespace."""
    line = line.rstrip("\r\n\x00 \t")
    m = PREFIX.match(line)
    if m and m.end():
        line = line[m.end():]
        if line.startswith(" "):
            line = line[1:]
    return line


def parse_metric(text: str) -> dict[str, int | str] | None:
    """A benchmark diagnostic '<case>: metric: <name> k=v ...' as {"name": .., k: v}.

    Integer values become ints, other tokens stay strings; words without '='
    are ignored. None when text is not a metric line.
    """
    m = METRIC.search(text)
    if m is None:
        return None
    record: dict[str, int | str] = {"name": m.group(1)}
    for key, value in KV.findall(m.group(2)):
        if key != "name":
            record[key] = int(value) if INTEGER.fullmatch(value) else value
    return record


def parse_reach(text: str) -> dict[str, int | str] | None:
    """A reach diagnostic of cgroup_reach as a record: {"kind": "class", "name": ..,
    "usage": "-.-." or "" for a class lockdep never registered, "fd", "bd"},
    {"kind": "lockdep", "debug_locks": .., "classes": .., "targets": ..} or
    {"kind": "end", "matched": ..}. None for any other line, and for a reach line that
    does not parse (the reach command counts on "end" to see one was lost)."""
    m = REACH.search(text)
    if m is None:
        return None
    kind, rest = m.group(1), m.group(2)
    if kind == "class":
        c = REACH_CLASS.fullmatch(rest)
        if c is None or (c.group(1) is not None and len(c.group(1)) % 2):
            return None
        record: dict[str, int | str] = {"kind": "class", "name": c.group(5).strip(),
                                        "usage": c.group(1) or ""}
        if c.group(3) is not None:
            record["fd"], record["bd"] = int(c.group(3)), int(c.group(4))
        return record
    record = {"kind": kind}
    for key, value in KV.findall(rest):
        record[key] = int(value) if INTEGER.fullmatch(value) else value
    return record


def heartbeat(text: str) -> tuple[str, int] | None:
    """(case, steps so far) of the harness's heartbeat diagnostic, printed while a gang runs
    (whole KTAP line or its text after '# '); None for any other line."""
    m = HEARTBEAT.search(text)
    return (m.group(1), int(m.group(2))) if m else None


def boot_line(text: str) -> tuple[int, int] | None:
    """(n, total) of kunit.py's 'Starting KUnit Kernel (n/total)...' line."""
    m = KUNIT_BOOT.match(text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def numbered_boot(line: str, number: int, total: int) -> str:
    """line as boot number of total when it is kunit.py's 'Starting KUnit Kernel (n/N)' line
    (a run that joins the consoles of several kunit.py execs numbers their boots across it)."""
    m = KUNIT_BOOT.match(line)
    return f"{line[:m.start(1)]}{number}/{total}{line[m.end(2):]}" if m else line


def _indent(ws: str) -> int:
    return len(ws.expandtabs(4))


# --- pass 1: what each console line is -------------------------------------------

KTAP_AFTER_PREFIX = re.compile(r"K?TAP version \d+\s*$")
KTAP_KINDS = ("header", "subtest", "plan", "result", "diag")
FAILURE_MORE = 6  # lines of a KUnit failure message printed after it without '# case:'


@dataclass(frozen=True)
class Event:
    """A console line pass 1 found meaning in: KTAP (KTAP_KINDS), a line of a KUnit failure
    message past its first ("more"), or kunit.py starting a kernel ("boot")."""
    kind: str
    line: int          # 0-based console line
    text: str          # the line, printk (and kunit.py) prefix off
    indent: int = 0
    name: str = ""     # subtest, result: the test's name; diag, more: the message
    number: int = 0    # plan: tests planned; result: its number; boot: which boot
    total: int = 0     # boot: how many boots kunit.py starts
    status: str = ""   # result: PASS, FAIL or SKIP
    reason: str = ""   # result: why it was skipped


def ktap_event(text: str, i: int, started: bool) -> Event | None:
    """The KTAP event of line i (prefixes off); before KTAP started only a header is KTAP."""
    m = KTAP_HEADER.match(text)
    if m:
        return Event("header", i, text, _indent(m.group(1)))
    if not started:
        return None
    m = SUBTEST.match(text)
    if m:
        return Event("subtest", i, text, _indent(m.group(1)), name=m.group(2))
    m = PLAN.match(text)
    if m:
        return Event("plan", i, text, _indent(m.group(1)), number=int(m.group(2)))
    m = RESULT.match(text)
    if m:
        d = DIRECTIVE.match(m.group(4))
        skip = d is not None and d.group(2).upper() == "SKIP"
        return Event("result", i, text, _indent(m.group(1)),
                     name=(d.group(1) if d else m.group(4)).strip(), number=int(m.group(3)),
                     status="SKIP" if skip else ("PASS" if m.group(2) == "ok" else "FAIL"),
                     reason=d.group(3).strip() if d and skip else "")
    m = DIAG.match(text)
    if m:
        return Event("diag", i, text, _indent(m.group(1)), name=(m.group(2) or "").strip())
    return None


class _Spans:
    """Report titles and how far each report goes: a title within WINDOW lines of the open
    report (until a cut here, end trace, ==== or KTAP line closes it) may be part of it."""

    def __init__(self) -> None:
        self.open: Splat | None = None
        self.open_line = -1
        self.cut_line, self.cut_msg = -10, ""

    def line(self, text: str, i: int) -> Splat | None:
        """The report line i starts, if any (else it may end or add to the open one)."""
        if CUT_HERE in text:
            self.open, self.cut_line, self.cut_msg = None, i, ""
            return None
        if text.startswith("---[ end ") or re.fullmatch(r"={20,}", text.strip()):
            self.open = None
            return None
        kind = classify(text)
        open_ = self.open
        if kind is None:
            if i == self.cut_line + 1:
                self.cut_msg = text.strip()
            elif (open_ is not None and open_.kind == "warning" and i == self.open_line + 1
                  and not open_.message and not text.strip().startswith(TRACE_LINES)):
                open_.message = text.strip()
            return None
        if open_ is not None and i - self.open_line <= WINDOW and open_.kind != "panic":
            if kind in SECONDARY:
                open_.related.append(text)
                return None
            if open_.kind == "warning" and kind in UPGRADES and i - self.open_line <= 2:
                open_.related.append(open_.title)
                open_.kind, open_.title = kind, text
                return None
        splat = Splat(kind=kind, title=text, line_no=i + 1)
        if kind == "warning" and self.cut_msg and i - self.cut_line <= 3:
            splat.message = self.cut_msg
        self.open, self.open_line = splat, i
        return splat


class ConsoleState:
    """Pass 1: what each console line is, one line at a time (the boot watchdog feeds it
    while the kernel runs; parse_console feeds it a whole console): the KTAP events, the
    reports (in console order; the last may still gain related lines), the parameters the
    suite refused. An oracle self-check's 'expected <kind> report captured (n)' marks the
    last n reports of that kind since the last result line as expected."""

    def __init__(self) -> None:
        self.lines = 0
        self.events: list[Event] = []
        self.splats: list[Splat] = []
        self.refused: dict[tuple[str, str], BadParameter] = {}
        self.results = 0        # KTAP result lines so far, at any level
        self.started = False    # a KTAP header since kunit.py last started a kernel
        self.timeout = False    # kunit.py reported its own timeout
        self._prefix = ""       # what kunit.py put before each KTAP line, when not a timestamp
        self._spans = _Spans()
        self._claimable = 0     # splats[_claimable:] came since the last result line
        self._more = 0          # failure message lines that may still follow
        self._prev = ""

    def feed(self, raw: str) -> Event | None:
        """Read the next console line; its event, if it is one."""
        i, text = self.lines, strip_prefix(raw)
        self.lines += 1
        if self._prefix and text.startswith(self._prefix):
            text = text[len(self._prefix):]
        self.timeout = self.timeout or bool(KUNIT_TIMEOUT.match(text))
        refusal = REFUSAL.match(text)
        if refusal is not None:  # once per parameter and value (each isolated boot repeats it)
            name, value, want = refusal.groups()
            self.refused.setdefault((name, value), BadParameter(
                name=name, value=value, want=want, line_no=i + 1, text=text.strip()))
        boot = boot_line(text)
        if boot is not None:  # kunit.py starts another kernel (--run_isolated)
            self.started, self._spans.open = False, None
            self._claimable = len(self.splats)
            return self._add(Event("boot", i, text, number=boot[0], total=boot[1]))
        m = KTAP_AFTER_PREFIX.search(text) if not self.started else None
        if m and m.start() > 0 and text[:m.start()].strip():
            self._prefix, text = text[:m.start()], text[m.start():]
        prev, self._prev = self._prev, text
        event = ktap_event(text, i, self.started)
        if event is not None:
            return self._ktap(event)
        if self.started and self._more and text.strip() and self._failure_line(text, i, prev):
            return self.events[-1]
        splat = self._spans.line(text, i)
        if splat is not None:
            splat.test = "" if self.started else "boot"
            self.splats.append(splat)
        return self.events[-1] if self.events and self.events[-1].line == i else None

    def _add(self, event: Event) -> Event:
        self.events.append(event)
        return event

    def _ktap(self, event: Event) -> Event:
        self._spans.open = None
        self._more = FAILURE_MORE if event.kind == "diag" and "FAILED at" in event.text else 0
        if event.kind == "header" and not self.started:
            self.started, self._claimable = True, len(self.splats)
        elif event.kind == "result":
            self.results += 1
            self._claimable = len(self.splats)
        elif event.kind == "diag":
            self._claim(event.name)
        return self._add(event)

    def _failure_line(self, text: str, i: int, prev: str) -> bool:
        """A line of the failure message being printed (a 'more' event); True when it is
        only that: the oracle quoting a report title on a line of its own."""
        self._more -= 1
        quoted = "oracle" in prev and prev.rstrip().endswith(":") and classify(text)
        if not quoted and (classify(text) or CUT_HERE in text or text.startswith(("===", "---"))):
            self._more = 0
            return False
        self._add(Event("more", i, text, name=text.strip()))
        return bool(quoted)

    def _claim(self, diag: str) -> None:
        """An oracle self-check says it provoked n reports of a kind: not findings."""
        m = EXPECTED_REPORT.search(diag)
        if m is None:
            return
        kind, n = titles.table().oracle_kinds.get(m.group(1), ""), int(m.group(2))
        for splat in reversed(self.splats[self._claimable:]):
            if n and splat.kind == kind and not splat.expected:
                splat.expected, n = True, n - 1

    def progress(self) -> str:
        """'N results, last: ok suite.case[param]', the last test as the report names it."""
        done = [(n.result, n) for _, n in _Tree(self.events, self.lines).sinks
                if isinstance(n, _Node) and n.result is not None]
        verb = {"PASS": "ok", "FAIL": "not ok", "SKIP": "skipped"}
        last = f", last: {verb[done[-1][0].status]} {display(done[-1][1].path())}" if done else ""
        return f"{self.results} results{last}"


# --- pass 2: the tests, and what the lines before each result say about its test -------

@dataclass
class _Owned:
    """What the lines since the last result line say about the test of the next one."""
    splats: list[Splat] = field(default_factory=list)
    diags: list[str] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    prefix: str = ""
    case: str = ""      # the case the last seed line named
    metrics: list[dict[str, int | str]] = field(default_factory=list)
    reach: list[dict[str, int | str]] = field(default_factory=list)

    def take(self, e: Event) -> None:
        """A diagnostic line: a metric, a reach record, seed parameters, or a message to
        keep."""
        text = e.name
        if e.kind == "diag":
            if STATS.search(text) or text.startswith(("module:", "speed:", "Subtest:")) \
                    or heartbeat(text) is not None:
                return  # counts, progress while a gang runs: not findings (console.log keeps them)
            metric = parse_metric(text)
            if metric is not None:
                self.metrics.append(metric)
                return
            reach = parse_reach(text)
            if reach is not None:
                self.reach.append(reach)
                return
            if "seed=" in text:
                kv_start = KV.search(text)
                head = text[:kv_start.start()] if kv_start else text
                segments = [s.strip() for s in head.split(":") if s.strip()]
                if len(segments) >= 2:
                    self.prefix, self.case = segments[-1], segments[0]
                self.params.update(dict(KV.findall(text)))
        self.diags.append(text)

    def fields(self, test_id: str) -> dict[str, Any]:
        """The TestResult fields these lines give test_id (an expected report is no finding)."""
        for s in self.splats:
            s.test = test_id
        return {"splats": [s for s in self.splats if not s.expected], "params": self.params,
                "param_prefix": self.prefix or "cgroup_kunit", "diagnostics": self.diags[:8],
                "metrics": self.metrics, "reach": self.reach}


@dataclass(eq=False)
class _Node:
    """A test as the KTAP events open and close it; a section's root has no parent."""
    name: str | None
    parent: "_Node | None"
    indent: int
    plan: int | None = None
    results: int = 0                 # result lines of its subtests so far
    children: list["_Node"] = field(default_factory=list)
    result: Event | None = None
    notes: list[str] = field(default_factory=list)
    got: _Owned = field(default_factory=_Owned)
    boot: int = 0                    # a section's root: the kunit.py boot it came in

    def section(self) -> "_Node":
        """The root of the KTAP section the test is in."""
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def path(self) -> list[str]:
        out: list[str] = []
        node = self
        while node.parent is not None:
            out.append(node.name if node.name is not None else "?")
            node = node.parent
        return out[::-1]

    @property
    def fresh(self) -> bool:
        """Opened by a KTAP header and not named or used yet."""
        return self.results == 0 and self.parent is not None and self.name is None


@dataclass(eq=False)
class _End:
    """Where a KTAP section ended: early (crash: a test still open, or fewer top-level
    results than planned), else at a boot line or the console's end (shutdown)."""
    crash: bool
    root: _Node
    open: list[_Node]   # the tests still open, outermost first
    after: str          # the last test reported in the section, or "start"
    boot: int
    got: _Owned = field(default_factory=_Owned)


class _Tree:
    """Pass 2a: the tests, from the KTAP events with a stack of open tests by indentation,
    and the sinks: (line, owner) of each result line and of each section end that owns
    the lines since the last result (a complete section that a new KTAP header ends
    leaves them to the next owner)."""

    def __init__(self, events: list[Event], lines: int) -> None:
        self.sections: list[_Node] = []
        self.stack: list[_Node] = []
        self.sinks: list[tuple[int, _Node | _End]] = []
        self.ends: list[_End] = []
        self.last: _Node | None = None
        self.boot, self.boots = 0, 0
        for e in events:
            if e.kind == "header":
                self._header(e)
            elif e.kind == "boot":
                self._end(e.line, flush=True)
                self.stack, self.boot, self.boots = [], e.number, e.total
            elif e.kind in ("subtest", "plan", "result") and self.stack:
                {"subtest": self._subtest, "plan": self._plan, "result": self._result}[e.kind](e)
        self._end(lines, flush=True)

    def tests(self, nodes: list[_Node] | None = None) -> Iterator[_Node]:
        """Every test (of nodes), depth first."""
        for node in nodes if nodes is not None else [c for r in self.sections for c in r.children]:
            yield node
            yield from self.tests(node.children)

    def _push(self, indent: int, name: str | None) -> _Node:
        parent = self.stack[-1]
        node = _Node(name=name, parent=parent, indent=indent)
        parent.children.append(node)
        self.stack.append(node)
        return node

    def _pop_from(self, indent: int) -> None:
        while len(self.stack) > 1 and self.stack[-1].indent >= indent:
            self.stack.pop()

    def _header(self, e: Event) -> None:
        if not self.stack or e.indent <= self.stack[0].indent:
            self._end(e.line, flush=False)
            self.stack, self.last = [_Node(name=None, parent=None, indent=e.indent,
                                           boot=self.boot)], None
            self.sections.append(self.stack[0])
        elif not (self.stack[-1].indent == e.indent and self.stack[-1].fresh):
            self._pop_from(e.indent)
            self._push(e.indent, None)

    def _subtest(self, e: Event) -> None:
        top = self.stack[-1]
        if e.indent <= self.stack[0].indent:
            return
        if top.indent == e.indent and top.fresh:
            top.name = e.name
        else:
            self._pop_from(e.indent)
            self._push(e.indent, e.name)

    def _plan(self, e: Event) -> None:
        if self.stack[-1].indent < e.indent:
            self._push(e.indent, None)
        top = self.stack[-1]
        if top.indent == e.indent and top.plan is None:
            top.plan = e.number

    def _result(self, e: Event) -> None:
        w = max(e.indent, self.stack[0].indent)
        popped: list[_Node] = []
        while len(self.stack) > 1 and self.stack[-1].indent > w:
            popped.append(self.stack.pop())
        top = self.stack[-1]
        if not popped and top.indent < w:
            if len(self.stack) > 1 and top.results == 0 and top.name is None:
                top.indent = w  # results indented deeper than their unnamed header: adopt
            else:
                top = self._push(w, None)
        if popped:
            node = popped[-1]
            node.name = e.name if node.name is None else node.name
            if node.plan is not None and node.results < node.plan:
                node.notes.append(f"planned {node.plan} subtests, got {node.results}")
        else:
            node = _Node(name=e.name, parent=top, indent=w)
            top.children.append(node)
        node.result = e
        top.results += 1
        self.sinks.append((e.line, node))
        self.last = node

    def _end(self, line: int, flush: bool) -> None:
        """Close the open section at line; flush: at a boot line or the console's end."""
        if not self.stack:
            return
        root, still_open = self.stack[0], self.stack[1:]
        crash = bool(still_open) or (root.plan is not None and root.results < root.plan)
        if crash or flush:
            after = ".".join(self.last.path()) if self.last is not None else "start"
            self.ends.append(_End(crash, root, still_open, after, self.boot))
            self.sinks.append((line, self.ends[-1]))


def _attribute(state: ConsoleState, sinks: list[tuple[int, _Node | _End]]) -> None:
    """Pass 2b: each diagnostic and report goes to the first sink after its line."""
    lines = [line for line, _ in sinks]
    items: list[tuple[int, Event | Splat]] = [(e.line, e) for e in state.events
                                              if e.kind in ("diag", "more")]
    items += [(s.line_no - 1, s) for s in state.splats if s.test != "boot"]
    for line, item in sorted(items, key=lambda x: x[0]):
        k = bisect.bisect_right(lines, line)
        if k == len(sinks):
            continue
        if isinstance(item, Splat):
            sinks[k][1].got.splats.append(item)
        else:
            sinks[k][1].got.take(item)


def _level(depth: int) -> str:
    return ("suite", "case", "param")[depth] if depth < 3 else "subtest"


def _test(node: _Node) -> TestResult:
    """A test of the tree, with what its lines said."""
    path, e = node.path(), node.result
    t = TestResult(id=".".join(path), name=path[-1], path=path, level=_level(len(path) - 1),
                   kunit_status=e.status if e else "NONE", status=e.status if e else "CRASH",
                   line_no=e.line + 1 if e else None, skip_reason=e.reason if e else "",
                   notes=node.notes, parent=".".join(path[:-1]) or None,
                   children=[".".join(c.path()) for c in node.children],
                   boot=node.section().boot, **node.got.fields(".".join(path)))
    if e is None:
        t.notes.append("no result: no KTAP result line for this test")
    if any(n.startswith("planned ") for n in node.notes) and t.status != "FAIL":
        t.status = "FAIL"
    return t


def _crash(end: _End, interrupted: bool = False) -> tuple[TestResult, list[str]]:
    """The crash point of a section that ended early (the test running, named by its seed
    line when KTAP had not named it yet) and its notes; interrupted (Ctrl-C): no crash but
    the point the run was stopped at, a skipped test of level INTERRUPTED."""
    named = [n for n in end.open if n.name is not None]
    running = ".".join(named[-1].path()) if named else ""
    if len(named) == 1 and end.got.case and end.got.case != named[0].name:
        running = f"{running}.{end.got.case}"  # a plain case: named by its seed line
    stopped = "the run was interrupted" if interrupted else "the kernel stopped"
    crash_id = f"{running or 'kunit'}: running when {stopped} (after {end.after})"
    notes = []
    if interrupted:
        notes.append(f"interrupted (Ctrl-C or SIGTERM) while {running or 'KUnit'} ran")
    elif end.root.plan is not None and end.root.results < end.root.plan:
        notes.append(f"KTAP incomplete: planned {end.root.plan} suites, got {end.root.results}")
    if end.open and not interrupted:
        notes.append(f"KTAP incomplete: {running or 'a suite'} never reported a result")
    return TestResult(id=crash_id, name=crash_id, path=[crash_id],
                      level=INTERRUPTED if interrupted else "crash", kunit_status="NONE",
                      status="SKIP" if interrupted else "CRASH", line_no=None,
                      parent=running or None, boot=end.boot,
                      skip_reason="interrupted while it ran" if interrupted else "",
                      **end.got.fields(crash_id)), notes


def _not_reached(end: _End, running: str) -> list[NotRun]:
    """The cases of the running suite and the suites KUnit planned but never started."""
    out: list[NotRun] = []
    top = end.open[0] if end.open else None
    suite = top if top is not None and top.parent is end.root and top.name else None
    if suite is not None and suite.plan is not None:
        done = [c for c in suite.children if c.result is not None]
        left = suite.plan - suite.results - (1 if suite.results < suite.plan else 0)
        if left > 0:
            out.append(NotRun(what="case", count=left, suite=str(suite.name),
                              after=running or (".".join(done[-1].path()) if done else str(suite.name)),
                              planned=suite.plan))
    if end.root.plan is not None:
        left = end.root.plan - end.root.results - (1 if suite is not None else 0)
        if left > 0:
            out.append(NotRun(what="suite", count=left, suite="",
                              after=str(suite.name) if suite is not None else end.after,
                              planned=end.root.plan))
    return out


# printk, when another CPU's urgent output (a WARN, an oops) cut a console line short,
# prints this and then the whole message again
REPLAY_MARK = "** replaying previous printk message **"


def unreplayed(lines: Sequence[str]) -> list[str]:
    """lines with printk's replays undone: the marker, and the cut-short copy before it
    when the line after it is the whole message, become empty lines (so that every other
    line keeps its number). A cut-short KTAP line would otherwise be read as a test of its
    own ("# Subtest: ucou")."""
    out = list(lines)
    for i, line in enumerate(lines):
        if strip_prefix(line).strip() != REPLAY_MARK:
            continue
        out[i] = ""
        if 0 < i < len(lines) - 1:
            cut, whole = strip_prefix(lines[i - 1]), strip_prefix(lines[i + 1])
            if cut.strip() and whole.startswith(cut):
                out[i - 1] = ""
    return out


def parse_console(text: str, verdict: str = "completed") -> Report:
    """Build a Report from console text and the exec verdict: pass 1 (ConsoleState) over
    the lines, then the tests (_Tree) and what the lines before each result say (_attribute)."""
    state = ConsoleState()
    lines = unreplayed(text.splitlines())
    for raw in lines:
        state.feed(raw)
    tree = _Tree(state.events, state.lines)
    _attribute(state, tree.sinks)
    tests = [_test(node) for node in tree.tests()]
    notes: list[str] = []
    not_run: list[NotRun] = []
    for end in tree.ends:
        if end.crash:
            crash, said = _crash(end, verdict == INTERRUPTED)
            tests.append(crash)
            notes += said
            not_run += _not_reached(end, crash.parent or "")
        else:
            for s in end.got.splats:
                s.test = f"shutdown (after {end.after})"
    if tree.boots > tree.boot:
        not_run.append(NotRun(what="boot", count=tree.boots - tree.boot, suite="",
                              after=f"boot {tree.boot} of {tree.boots}", planned=tree.boots))
    if verdict == INTERRUPTED:  # the tests Ctrl-C cut short did not crash: they did not end
        for t in tests:
            if t.status == "CRASH" and t.level not in POINT_LEVELS:
                t.status, t.skip_reason = "SKIP", "interrupted before its result"
    return _verdicts(state, tests, notes, not_run, verdict,
                     next((strip_prefix(ln).strip() for ln in reversed(lines) if ln.strip()), ""))


def _verdicts(state: ConsoleState, tests: list[TestResult], notes: list[str],
              not_run: list[NotRun], verdict: str, tail: str) -> Report:
    """The report of the tests: statuses with their reports, counts, the run's status."""
    _apply_splat_verdicts(tests)
    tests = _without_skipped_reruns(tests)
    leaves = [t for t in tests if t.line_no is not None and not t.children]
    crashes = sum(t.level == "crash" for t in tests)
    by = Counter(t.status for t in leaves)
    counts = Counts(passed=by["PASS"], failed=by["FAIL"], skipped=by["SKIP"], crashed=crashes)
    findings = [s for s in state.splats if not s.expected]
    panic = any(s.kind == "panic" for s in findings)
    if verdict == "completed" and state.timeout:
        verdict = "timeout"
        notes.append("kunit.py reported its own timeout")
    # a boot the watchdog stopped on a failure state is a crash of the kernel under test
    status = _overall("crash" if verdict.startswith(STOPPED) else verdict, panic, crashes > 0,
                      leaves, tests, findings)
    started = any(e.kind == "header" for e in state.events)
    if not started:
        notes.append("no KTAP output found" + (f"; last console line: {tail[:200]}" if tail else ""))
    boot = [s for s in findings if s.test == "boot"]
    if boot:
        notes.append(f"{len(boot)} splat(s) during boot, before any test")
    return Report(status=status, verdict=verdict, tests=tests, splats=findings, counts=counts,
                  expected=[s for s in state.splats if s.expected], notes=notes,
                  ktap_started=started, ktap_complete=started and not crashes, not_run=not_run,
                  bad_parameters=list(state.refused.values()),
                  ktap=[e.text for e in state.events if e.kind in KTAP_KINDS])


def _without_skipped_reruns(tests: list[TestResult]) -> list[TestResult]:
    """tests without the skipped copy of a test that a later boot ran again. The driver
    runs cgroup_migrate_dynmods in a boot of its own (with cgroup_kunit.dynmods=1) after the
    main boot, where it only skipped itself: the later result is the one that counts. A
    copy that did more than skip (a report under it failed it) stays."""
    last: dict[str, int] = {}
    for t in tests:
        last[t.id] = max(last.get(t.id, 0), t.boot)
    return [t for t in tests if t.status != "SKIP" or t.boot >= last[t.id]]


def _apply_splat_verdicts(tests: list[TestResult]) -> None:
    index = {t.id: t for t in tests}
    for t in tests:
        if t.splats and t.status in ("PASS", "SKIP"):
            said = "ok" if t.kunit_status == "PASS" else "skip"
            t.notes.append(f"failed: splat even though KUnit said {said}")
            t.status = "FAIL"
    for t in tests:
        if t.status not in ("FAIL", "CRASH"):
            continue
        p = index.get(t.parent) if t.parent else None
        while p is not None:
            if p.status in ("PASS", "SKIP"):
                p.status = "FAIL"
                p.notes.append(f"failed: subtest {t.id} failed")
            p = index.get(p.parent) if p.parent else None


def _overall(verdict: str, panic: bool, incomplete: bool, leaves: list[TestResult],
             tests: list[TestResult], splats: list[Splat]) -> str:
    if panic:
        return "crash"
    if verdict != "completed":
        return verdict
    if incomplete:
        return "crash"
    if not leaves:
        return "fail" if splats else "no-tests"
    if splats or any(t.status in ("FAIL", "CRASH") for t in tests):
        return "fail"
    return "pass"


def attach_stops(report: Report, stops: list[dict[str, Any]]) -> None:
    """Record the watchdog's stops (exec.json) and name each on the crash it caused."""
    report.stops = [s for s in stops if isinstance(s, dict)]
    crashes = [t for t in report.tests if t.level == "crash"]
    for stop in report.stops:
        boot = stop.get("boot", 0)
        owners = [t for t in crashes if t.boot == boot]
        if not owners and len(report.stops) == 1:
            owners = crashes
        for t in owners[-1:]:
            t.notes.append(f"stopped here by the watchdog {stop_where(stop)}: "
                           f"{short_verdict(str(stop.get('reason', '?')))}")


def build_report(console_log: Path, verdict: str, *, profile: str = "", tree: str = "",
                 base: str = "", elapsed: float = 0.0) -> Report:
    """Read console.log (and the exec.json beside it) and build the report with its context."""
    text = console_log.read_text(errors="backslashreplace") if console_log.exists() else ""
    report = parse_console(text, verdict)
    report.profile, report.tree, report.base, report.elapsed = profile, tree, base, elapsed
    report.console_log = str(console_log)
    results = console_log.parent
    info = read_json(results / "exec.json")
    if isinstance(info, dict):
        stops = info.get("stops")
        attach_stops(report, stops if isinstance(stops, list) else [])
        report.filter_glob = str(info.get("filter") or "")
        report.isolate = str(info.get("isolate") or "")
        args = info.get("kernel_args")
        report.kernel_args = [str(a) for a in args] if isinstance(args, list) else []
    report.files = {"console": str(console_log)}
    for name, fname in (("ktap", "results.ktap"), ("json", "results.json"), ("junit", "results.xml")):
        if (results / fname).exists():
            report.files[name] = str(results / fname)
    return report
