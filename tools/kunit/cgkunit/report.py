"""Console log -> report: KTAP walk, splats, attribution, summary, exit status."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from .common import DriverError, read_json, write_json
from .params import SUITE_MODULE

# --- exit status -------------------------------------------------------------

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_ERROR = 2
BISECT_SKIP = 125
STATUS_EXIT = {"pass": EXIT_PASS, "fail": EXIT_FAIL, "crash": EXIT_FAIL, "hang": EXIT_FAIL,
               "timeout": EXIT_FAIL, "boot-timeout": EXIT_FAIL, "no-tests": EXIT_ERROR}
STOPPED = "stopped: "  # verdict prefix of a boot the watchdog ended on a failure state
EXIT_HELP = """exit status:
  0  pass: every test passed or skipped, no splat anywhere
  1  the kernel under test failed: a test failed, a splat (lockdep, KCSAN,
     KASAN, refcount, WARNING, BUG, oops, panic, ...) was reported, the kernel
     crashed, hung, timed out, did not boot (boot-timeout), or the watchdog
     stopped it on a failure state (panic, crash, report storm, silence
     after a lockdep/hung-task/stall report)
  2  bad input or infrastructure error: bad KERNEL_SRC, checksum mismatch,
     a patch does not apply, the build failed, no tests ran, bad arguments,
     a cgroup_kunit.* parameter the suite does not declare, or a value it
     refused at boot (the tests then ran with the default)
  (bisect maps 2 to 125, "skip this commit")"""


def exit_code(status: str, bisect: bool = False, bad_parameters: Sequence[object] = ()) -> int:
    """The single status -> exit code mapping (status 'error' = DriverError); bad input
    whatever the status when the suite refused a parameter (Report.bad_parameters)."""
    code = EXIT_ERROR if bad_parameters else STATUS_EXIT.get(status, EXIT_ERROR)
    return BISECT_SKIP if bisect and code == EXIT_ERROR else code


# --- data --------------------------------------------------------------------

@dataclass
class Splat:
    """One kernel report (lockdep, KCSAN, WARNING, ...)."""
    kind: str
    title: str
    line_no: int
    test: str = ""
    message: str = ""
    related: list[str] = field(default_factory=list)
    expected: bool = False  # provoked by an oracle self-check, which said so: not a finding

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "title": self.title, "test": self.test,
                "line_no": self.line_no, "message": self.message, "related": self.related,
                "expected": self.expected}


@dataclass(frozen=True)
class BadParameter:
    """A module parameter the suite refused at boot (its set() printed 'name=value: want ..'
    and returned -EINVAL): the kernel kept the default, so the run is not what was asked."""
    name: str       # without the module prefix
    value: str
    want: str       # what the suite accepts, as it said it
    line_no: int
    text: str       # the console line without its printk prefix

    def describe(self) -> str:
        return f"{SUITE_MODULE}.{self.name}={self.value}: want {self.want}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "want": self.want,
                "line_no": self.line_no, "text": self.text}


@dataclass
class TestResult:
    """One KTAP test (suite, case or parameter instance)."""
    id: str
    name: str
    path: list[str]
    level: str
    kunit_status: str
    status: str
    line_no: int | None
    skip_reason: str = ""
    splats: list[Splat] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    param_prefix: str = "cgroup_kunit"
    diagnostics: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    parent: str | None = None
    children: list[str] = field(default_factory=list)
    metrics: list[dict[str, int | str]] = field(default_factory=list)
    boot: int = 0  # kunit.py boot (Starting KUnit Kernel (n/N)) the test ran in; 0: not said

    @property
    def display(self) -> str:
        """suite.case[param] form."""
        return ".".join(self.path[:2]) + "".join(f"[{p}]" for p in self.path[2:])

    @property
    def is_leaf(self) -> bool:
        return not self.children and self.line_no is not None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "level": self.level, "status": self.status,
                "kunit_status": self.kunit_status, "skip_reason": self.skip_reason,
                "line_no": self.line_no, "params": self.params, "notes": self.notes,
                "diagnostics": self.diagnostics, "metrics": self.metrics,
                "splats": [{"kind": s.kind, "title": s.title, "line_no": s.line_no}
                           for s in self.splats]}


@dataclass
class NotRun:
    """Tests KUnit planned that the kernel never reached (names are unknown:
    KTAP names a case in its result line and a suite when it starts)."""
    what: str       # "case", "suite" or "boot" (a kunit.py --run_isolated boot)
    count: int
    suite: str      # the suite the cases belong to ("" for suites and boots)
    after: str      # the last test reported before them, or "start"
    planned: int    # what KUnit planned at that level (0 when unknown)

    def describe(self) -> str:
        plural = "" if self.count == 1 else "s"
        if self.what == "boot":
            return (f"{self.count} more isolated kunit.py boot{plural} never started "
                    f"(after {self.after})")
        where = f"{self.suite}: " if self.suite else ""
        plan = f"; KUnit planned {self.planned}" if self.planned else ""
        return f"{where}{self.count} more {self.what}{plural} never reached (after {self.after}{plan})"

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "count": self.count, "suite": self.suite,
                "after": self.after, "planned": self.planned, "text": self.describe()}


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    crashed: int = 0


@dataclass
class Report:
    """Everything the summary needs."""
    status: str
    verdict: str
    tests: list[TestResult]
    splats: list[Splat]
    counts: Counts
    notes: list[str] = field(default_factory=list)
    profile: str = ""
    tree: str = ""
    base: str = ""
    expected: list[Splat] = field(default_factory=list)  # reports the oracle provoked itself
    elapsed: float = 0.0
    console_log: str = ""
    files: dict[str, str] = field(default_factory=dict)
    ktap_started: bool = False
    ktap_complete: bool = False
    replay_target: str = "make run"
    stops: list[dict[str, Any]] = field(default_factory=list)
    not_run: list[NotRun] = field(default_factory=list)
    filter_glob: str = ""
    isolate: str = ""
    bad_parameters: list[BadParameter] = field(default_factory=list)

    def test(self, test_id: str) -> TestResult | None:
        return next((t for t in self.tests if t.id == test_id), None)

    def failed_tests(self) -> list[TestResult]:
        return [t for t in self.tests if t.status in ("FAIL", "CRASH")]

    def metrics(self) -> list[dict[str, int | str]]:
        """Every benchmark metric record of the run, in test order."""
        return [m for t in self.tests for m in t.metrics]

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "tree": self.tree, "base": self.base,
                "status": self.status, "verdict": self.verdict,
                "counts": vars(self.counts).copy(), "elapsed": round(self.elapsed, 3),
                "tests": [t.to_json() for t in self.tests],
                "splats": [s.to_json() for s in self.splats], "notes": self.notes,
                "expected_splats": [s.to_json() for s in self.expected],
                "console_log": self.console_log, "files": self.files,
                "replay": replay_hints(self), "stops": self.stops,
                "not_run": [n.to_json() for n in self.not_run],
                "not_run_hints": not_run_hints(self), "isolate": self.isolate,
                "bad_parameters": [p.to_json() for p in self.bad_parameters]}


def refused_message(reports: Iterable[Report], what: str = "KERNEL_ARGS") -> str | None:
    """'<what>: the suite refused cgroup_kunit.threads=99: want 1..64, ...; it ran with the
    default instead' for the parameters refused in any of reports (each once); None if none."""
    seen: dict[tuple[str, str], BadParameter] = {}
    for r in reports:
        for p in r.bad_parameters:
            seen.setdefault((p.name, p.value), p)
    if not seen:
        return None
    default = "the default" if len(seen) == 1 else "the defaults"
    return (f"{what}: the suite refused {'; '.join(p.describe() for p in seen.values())}; "
            f"it ran with {default} instead")


def raise_refused(reports: Iterable[Report], what: str = "KERNEL_ARGS") -> None:
    """DriverError (exit status 2, one line) when the suite refused a parameter in any of
    reports: call it after the summary is out, so the run's results are still written."""
    message = refused_message(reports, what)
    if message is not None:
        raise DriverError(message)


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
# harness.c's kinds (cgk_reports[]) -> the kinds TITLES gives
ORACLE_KINDS = {"WARNING": "warning", "lockdep": "lockdep", "KCSAN": "kcsan", "KASAN": "kasan",
                "refcount_t": "refcount", "BUG": "bug", "Oops": "oops"}
# harness.c's heartbeat while a gang runs: '# <case>: running 40 s of 600 s, 123456 steps'
HEARTBEAT = re.compile(r"(?:^|#\s)\s*([A-Za-z_]\w*): running \d+ s of \d+ s, (\d+) steps\s*$")
INTEGER = re.compile(r"-?\d+")
KUNIT_TIMEOUT = re.compile(r"^Command .* timed out after \d+")
KUNIT_BOOT = re.compile(r"^(?:\[[\d:]+\] )?Starting KUnit Kernel \((\d+)/(\d+)\)")
# A parameter's set() refusing a value (harness.c's pr_fmt is "cgroup_kunit: "; a
# callback that prints kp->name gives "cgroup_kunit.<name>" when the suite is built in)
REFUSAL = re.compile(rf"^{SUITE_MODULE}: (?:{SUITE_MODULE}\.)?([A-Za-z_]\w*)=(.*?): want (.+?)\s*$")
CUT_HERE = "------------[ cut here ]------------"
WINDOW = 8

LOCKDEP = re.compile(
    r"^(?:WARNING|INFO): (?:possible |inconsistent lock state|bad unlock balance|held lock freed"
    r"|lock held when returning|suspicious RCU usage|.*-safe -> .*-unsafe lock order"
    r"|Nested lock was not taken|bad contention detected|chain_key collision"
    r"|\S+/\d+ still has locks held|trying to register non-static key)"
    r"|^DEBUG_LOCKS_WARN_ON\(")
TITLES: list[tuple[str, re.Pattern[str]]] = [
    ("kcsan", re.compile(r"^BUG: KCSAN: ")),
    ("kasan", re.compile(r"^BUG: KASAN: ")),
    ("refcount", re.compile(r"^refcount_t: ")),
    ("lockdep", LOCKDEP),
    ("panic", re.compile(r"^Kernel panic - not syncing")),
    ("lockup", re.compile(r"^(?:watchdog: BUG: soft lockup|(?:NMI watchdog: )?Watchdog detected hard LOCKUP)")),
    ("bug", re.compile(r"^(?:BUG: |kernel BUG at )")),
    ("warning", re.compile(r"^WARNING: (?:CPU: \d+ PID: \d+ at |at |\S+:\d+ at )")),
    ("oops", re.compile(r"^(?:Oops: |Oops\b|general protection fault|Internal error: Oops)")),
    ("hung", re.compile(r"^INFO: task .* blocked for more than")),
    ("rcu-stall", re.compile(r"^(?:rcu: )?INFO: \S+ (?:self-)?detected stall")),
    ("ubsan", re.compile(r"^UBSAN: ")),
]
SECONDARY = ("warning", "oops")
UPGRADES = ("refcount", "lockdep")
TRACE_LINES = ("Modules linked in", "CPU:", "Hardware name", "Call Trace", "RIP:", "Stack:",
               "---[", "Tainted", "pc :", "Workqueue:")


# How the boot watchdog (run.Watchdog) treats a report, by the kind TITLES gives it.
# A single report of any other kind (WARNING, KCSAN, KASAN, refcount_t, UBSAN, a
# non-fatal BUG) never stops a boot: the oracle fails the case and KUnit goes on.
PANIC_KINDS = ("panic",)
STALL_KINDS = {"lockdep": "lockdep", "hung": "hung-task", "rcu-stall": "RCU stall",
               "lockup": "lockup"}
CRASH_TITLE = re.compile(r"^(?:kernel BUG at |BUG: (?:unable to handle|kernel NULL pointer dereference))")


def is_crash(splat: "Splat") -> bool:
    """An Oops-class report (a task died in the kernel; the kernel may or may not go on)."""
    if splat.kind == "oops":
        return True
    return splat.kind == "bug" and (bool(CRASH_TITLE.match(splat.title))
                                    or any(classify(r) == "oops" for r in splat.related))


def classify(text: str) -> str | None:
    """Splat kind when text (prefix stripped) is a report title line."""
    if not text or text[0].isspace():
        return None
    for kind, pattern in TITLES:
        if pattern.match(text):
            return kind
    return None


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


def heartbeat(text: str) -> tuple[str, int] | None:
    """(case, steps so far) of the harness's heartbeat diagnostic, printed while a gang runs
    (whole KTAP line or its text after '# '); None for any other line."""
    m = HEARTBEAT.search(text)
    return (m.group(1), int(m.group(2))) if m else None


def boot_line(text: str) -> tuple[int, int] | None:
    """(n, total) of kunit.py's 'Starting KUnit Kernel (n/total)...' line."""
    m = KUNIT_BOOT.match(text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _indent(ws: str) -> int:
    return len(ws.expandtabs(4))


# --- the walk ---------------------------------------------------------------

@dataclass
class _Rec:
    name: str | None
    parent: "_Rec | None"
    start_line: int
    children: list["_Rec"] = field(default_factory=list)
    kunit_status: str = "NONE"
    skip_reason: str = ""
    line_no: int | None = None
    splats: list[Splat] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    prefix: str = "cgroup_kunit"
    diags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    metrics: list[dict[str, int | str]] = field(default_factory=list)

    def path(self) -> list[str]:
        out: list[str] = []
        r: _Rec | None = self
        while r is not None:
            out.append(r.name if r.name is not None else "?")
            r = r.parent
        return out[::-1]


@dataclass
class _Frame:
    indent: int
    rec: _Rec | None
    plan: int | None = None
    results: int = 0

    @property
    def fresh(self) -> bool:
        """Pushed by a KTAP header and not named or used yet."""
        return self.results == 0 and self.rec is not None and self.rec.name is None


@dataclass
class _CrashPoint:
    """Where a KTAP section ended early: the running test, the reports since the last result."""
    id: str
    running: str
    splats: list[Splat]
    params: dict[str, str]
    prefix: str
    diags: list[str]
    metrics: list[dict[str, int | str]]
    notes: list[str]
    boot: int


class _Walker:
    """Single pass over the console lines."""

    def __init__(self) -> None:
        self.started = False
        self.ever_started = False
        self.n_results = 0
        self.section_last: _Rec | None = None
        self.crash_points: list[_CrashPoint] = []
        self.not_run: list[NotRun] = []
        self.boot, self.boots = 0, 0
        self.pending_case = ""
        self.frames: list[_Frame] = []
        self.roots: list[_Rec] = []
        self.sections: list[_Frame] = []
        self.splats: list[Splat] = []
        self.pending: list[Splat] = []
        self.pending_params: dict[str, str] = {}
        self.pending_prefix = ""
        self.pending_diags: list[str] = []
        self.pending_metrics: list[dict[str, int | str]] = []
        self.last: _Rec | None = None
        self.open: Splat | None = None
        self.open_line = -1
        self.closed = True
        self.cut_line = -10
        self.cut_msg = ""
        self.notes: list[str] = []
        self.kunit_timeout = False
        self.ktap_prefix = ""
        self.prev = ""
        self.in_failure = False
        self.continuation = 0
        self.refused: dict[tuple[str, str], BadParameter] = {}

    # frames
    def _push(self, indent: int, name: str | None, line: int) -> _Frame:
        parent = self.frames[-1].rec if self.frames else None
        rec = _Rec(name=name, parent=parent, start_line=line)
        (parent.children if parent else self.roots).append(rec)
        frame = _Frame(indent=indent, rec=rec)
        self.frames.append(frame)
        return frame

    def _pop_from(self, indent: int) -> None:
        while len(self.frames) > 1 and self.frames[-1].indent >= indent:
            self.frames.pop()

    def _start(self, indent: int, line: int) -> None:
        if self.started:
            self._end_section(flush=False)
        self.started = self.ever_started = True
        self.section_last = None
        root = _Frame(indent=indent, rec=None)
        self.frames = [root]
        self.sections.append(root)

    def _clear_pending(self) -> None:
        self.pending, self.pending_params, self.pending_prefix, self.pending_diags = [], {}, "", []
        self.pending_metrics, self.pending_case = [], ""

    def _end_section(self, flush: bool) -> None:
        """Close the current KTAP section; a crash point (and what was never reached)
        when it ended early. flush: the reports after the last result of a complete
        section were the kernel's shutdown (else they wait for the next result)."""
        if not self.started or not self.frames:
            return
        root = self.frames[0]
        open_frames = [f for f in self.frames[1:] if f.rec is not None]
        short = root.plan is not None and root.results < root.plan
        after = ".".join(self.section_last.path()) if self.section_last else "start"
        if not open_frames and not short:
            if flush:
                for s in self.pending:
                    s.test = f"shutdown (after {after})"
                self._clear_pending()
            return
        named = [f.rec for f in open_frames if f.rec is not None and f.rec.name is not None]
        running = ".".join(named[-1].path()) if named else ""
        if len(named) == 1 and self.pending_case and self.pending_case != named[0].name:
            running = f"{running}.{self.pending_case}"  # a plain case: named by its seed line
        crash_id = f"{running or 'kunit'}: running when the kernel stopped (after {after})"
        for s in self.pending:
            s.test = crash_id
        notes = []
        if short:
            notes.append(f"KTAP incomplete: planned {root.plan} suites, got {root.results}")
        if open_frames:
            notes.append(f"KTAP incomplete: {running or 'a suite'} never reported a result")
        self.crash_points.append(_CrashPoint(
            id=crash_id, running=running, splats=list(self.pending), params=self.pending_params,
            prefix=self.pending_prefix or "cgroup_kunit", diags=self.pending_diags[:8],
            metrics=self.pending_metrics, notes=notes, boot=self.boot))
        self._clear_pending()
        suite = open_frames[0] if open_frames and open_frames[0].rec is not None \
            and open_frames[0].rec.parent is None and open_frames[0].rec.name else None
        if suite is not None and suite.rec is not None and suite.plan is not None:
            done = [c for c in suite.rec.children if c.line_no is not None]
            left = suite.plan - suite.results - (1 if suite.results < suite.plan else 0)
            if left > 0:
                self.not_run.append(NotRun(
                    what="case", count=left, suite=str(suite.rec.name),
                    after=running or (".".join(done[-1].path()) if done else str(suite.rec.name)),
                    planned=suite.plan))
        if root.plan is not None:
            left = root.plan - root.results - (1 if suite is not None else 0)
            if left > 0:
                last = suite.rec.name if suite is not None and suite.rec is not None else after
                self.not_run.append(NotRun(what="suite", count=left, suite="", after=str(last),
                                           planned=root.plan))

    def finish(self) -> None:
        """End of the console: close the last section, count kunit.py boots never started."""
        self._end_section(flush=True)
        if self.boots > self.boot:
            self.not_run.append(NotRun(what="boot", count=self.boots - self.boot, suite="",
                                       after=f"boot {self.boot} of {self.boots}",
                                       planned=self.boots))

    def ktap(self, text: str, i: int) -> bool:
        """Handle a KTAP line; False when text is not KTAP."""
        m = KTAP_HEADER.match(text)
        if m:
            w = _indent(m.group(1))
            if not self.started or w <= self.frames[0].indent:
                self._start(w, i)
            elif not (self.frames[-1].indent == w and self.frames[-1].fresh):
                self._pop_from(w)
                self._push(w, None, i)
            return True
        if not self.started:
            return False
        m = SUBTEST.match(text)
        if m:
            w, name = _indent(m.group(1)), m.group(2)
            top = self.frames[-1]
            if w <= self.frames[0].indent:
                return True
            if top.indent == w and top.fresh and top.rec is not None:
                top.rec.name = name
            else:
                self._pop_from(w)
                self._push(w, name, i)
            return True
        m = PLAN.match(text)
        if m:
            w, n = _indent(m.group(1)), int(m.group(2))
            if self.frames[-1].indent < w:
                self._push(w, None, i)
            if self.frames[-1].indent == w and self.frames[-1].plan is None:
                self.frames[-1].plan = n
            return True
        m = RESULT.match(text)
        if m:
            self._result(_indent(m.group(1)), m.group(2), m.group(4), i)
            return True
        m = DIAG.match(text)
        if m:
            self._diag((m.group(2) or "").strip())
            return True
        return False

    def _result(self, w: int, ok: str, rest: str, i: int) -> None:
        w = max(w, self.frames[0].indent)
        popped: list[_Frame] = []
        while len(self.frames) > 1 and self.frames[-1].indent > w:
            popped.append(self.frames.pop())
        if not popped and self.frames[-1].indent < w:
            top = self.frames[-1]
            if len(self.frames) > 1 and top.results == 0 and top.rec is not None \
                    and top.rec.name is None:
                top.indent = w  # results indented deeper than their unnamed header: adopt
            else:
                self._push(w, None, i)
        parent = self.frames[-1]
        d = DIRECTIVE.match(rest)
        name, directive, reason = (d.group(1), d.group(2).upper(), d.group(3)) if d else (rest, "", "")
        name = name.strip()
        if popped:
            closing = popped[-1]
            rec = closing.rec
            assert rec is not None
            if rec.name is None:
                rec.name = name
            if closing.plan is not None and closing.results < closing.plan:
                rec.notes.append(f"planned {closing.plan} subtests, got {closing.results}")
        else:
            rec = _Rec(name=name, parent=parent.rec, start_line=i)
            (parent.rec.children if parent.rec else self.roots).append(rec)
        rec.line_no = i + 1
        rec.kunit_status = "SKIP" if directive == "SKIP" else ("PASS" if ok == "ok" else "FAIL")
        rec.skip_reason = reason.strip() if directive == "SKIP" else ""
        parent.results += 1
        for s in self.pending:
            s.test = ".".join(rec.path())
            if not s.expected:
                rec.splats.append(s)
        rec.params.update(self.pending_params)
        if self.pending_prefix:
            rec.prefix = self.pending_prefix
        rec.diags.extend(self.pending_diags[:8])
        rec.metrics.extend(self.pending_metrics)
        self._clear_pending()
        self.last = self.section_last = rec
        self.n_results += 1

    def _diag(self, text: str) -> None:
        if STATS.search(text) or text.startswith(("module:", "speed:", "Subtest:")):
            return
        if heartbeat(text) is not None:
            return  # progress while a gang runs, not a finding (console.log keeps it)
        expected = EXPECTED_REPORT.search(text)
        if expected is not None:
            self._expect(ORACLE_KINDS.get(expected.group(1), ""), int(expected.group(2)))
        metric = parse_metric(text)
        if metric is not None:
            self.pending_metrics.append(metric)
            return
        if "seed=" in text:
            kv_start = KV.search(text)
            head = text[:kv_start.start()] if kv_start else text
            segments = [s.strip() for s in head.split(":") if s.strip()]
            if len(segments) >= 2:
                self.pending_prefix = segments[-1]
                self.pending_case = segments[0]
            self.pending_params.update(dict(KV.findall(text)))
        self.pending_diags.append(text)

    def _expect(self, kind: str, n: int) -> None:
        """A self-check says it provoked n reports of kind in this case: the last n such
        pending reports are not findings."""
        for splat in reversed(self.pending):
            if n and splat.kind == kind and not splat.expected:
                splat.expected, n = True, n - 1

    # splats
    def _close(self) -> None:
        self.closed = True

    def splat_line(self, text: str, i: int) -> None:
        """Track report windows and titles on a non-KTAP line."""
        if CUT_HERE in text:
            self._close()
            self.cut_line, self.cut_msg = i, ""
            return
        if text.startswith("---[ end "):
            self._close()
            return
        if re.fullmatch(r"={20,}", text.strip()) and self.open is not None and i > self.open_line:
            self._close()
            return
        kind = classify(text)
        if kind is None:
            if i == self.cut_line + 1:
                self.cut_msg = text.strip()
            elif (self.open is not None and not self.closed and self.open.kind == "warning"
                  and i == self.open_line + 1 and not self.open.message
                  and not text.strip().startswith(TRACE_LINES)):
                self.open.message = text.strip()
            return
        in_window = self.open is not None and not self.closed and i - self.open_line <= WINDOW
        if in_window and self.open is not None and self.open.kind != "panic":
            if kind in SECONDARY:
                self.open.related.append(text)
                return
            if self.open.kind == "warning" and kind in UPGRADES and i - self.open_line <= 2:
                self.open.related.append(self.open.title)
                self.open.kind, self.open.title = kind, text
                return
        splat = Splat(kind=kind, title=text, line_no=i + 1)
        if kind == "warning" and self.cut_msg and i - self.cut_line <= 3:
            splat.message = self.cut_msg
        self.splats.append(splat)
        if self.started:
            self.pending.append(splat)
        else:
            splat.test = "boot"
        self.open, self.open_line, self.closed = splat, i, False

    def feed(self, raw: str, i: int) -> None:
        text = strip_prefix(raw)
        if self.ktap_prefix and text.startswith(self.ktap_prefix):
            text = text[len(self.ktap_prefix):]
        if KUNIT_TIMEOUT.match(text):
            self.kunit_timeout = True
        refusal = REFUSAL.match(text)
        if refusal is not None:  # once per parameter and value (each isolated boot repeats it)
            name, value, want = refusal.groups()
            self.refused.setdefault((name, value), BadParameter(
                name=name, value=value, want=want, line_no=i + 1, text=text.strip()))
        boot = boot_line(text)
        if boot is not None:
            # kunit.py starts another kernel (--run_isolated): the last one's section ends here
            self._end_section(flush=True)
            self.started = False
            self.boot, self.boots = boot
            self._close()
            return
        if not self.started:
            m = re.search(r"K?TAP version \d+\s*$", text)
            if m and m.start() > 0 and text[:m.start()].strip():
                # a non-timestamp prefix on the header line: strip it from the lines after
                self.ktap_prefix = text[:m.start()]
                text = text[m.start():]
        prev, self.prev = self.prev, text
        if self.ktap(text, i):
            self._close()
            self.in_failure = "FAILED at" in text and bool(DIAG.match(text))
            self.continuation = 0
            return
        if self.started and self.in_failure and self.continuation < 6 and text.strip():
            # continuation of a KUnit failure message (printed without the '# case:' prefix)
            self.continuation += 1
            if "oracle" in prev and prev.rstrip().endswith(":") and classify(text):
                self.pending_diags.append(text.strip())
                return  # the oracle quoting a title on its own line: not a new splat
            if classify(text) or CUT_HERE in text or text.startswith(("===", "---")):
                self.in_failure = False
            else:
                self.pending_diags.append(text.strip())
        self.splat_line(text, i)


class ConsoleState:
    """The report's own walk over a console, fed one line at a time while the kernel runs
    (the boot watchdog's view: the same titles, attribution and KTAP results as the report)."""

    def __init__(self) -> None:
        self._walker = _Walker()
        self.lines = 0

    def feed(self, line: str) -> None:
        self._walker.feed(line, self.lines)
        self.lines += 1

    @property
    def splats(self) -> list[Splat]:
        """Every report so far, in console order (the last one may still gain related lines)."""
        return self._walker.splats

    @property
    def results(self) -> int:
        """KTAP result lines so far, at any level."""
        return self._walker.n_results


def _level(depth: int) -> str:
    return ("suite", "case", "param")[depth] if depth < 3 else "subtest"


def _flatten(roots: list[_Rec]) -> list[_Rec]:
    out: list[_Rec] = []

    def walk(r: _Rec) -> None:
        out.append(r)
        for c in r.children:
            walk(c)
    for r in roots:
        walk(r)
    return out


def parse_console(text: str, verdict: str = "completed") -> Report:
    """Build a Report from console text and the exec verdict."""
    w = _Walker()
    lines = text.splitlines()
    for i, raw in enumerate(lines):
        w.feed(raw, i)
    w.finish()
    notes = list(w.notes)
    incomplete = bool(w.crash_points)
    complete = w.ever_started and not incomplete
    recs = _flatten(w.roots)
    tests: list[TestResult] = []
    by_rec: dict[int, TestResult] = {}
    for r in recs:
        path = r.path()
        depth = len(path) - 1
        t = TestResult(id=".".join(path), name=path[-1], path=path, level=_level(depth),
                       kunit_status=r.kunit_status,
                       status=r.kunit_status if r.line_no is not None else "CRASH",
                       line_no=r.line_no, skip_reason=r.skip_reason, splats=r.splats,
                       params=r.params, param_prefix=r.prefix, diagnostics=r.diags,
                       notes=r.notes, parent=".".join(path[:-1]) or None, metrics=r.metrics)
        if r.line_no is None:
            t.notes.append("no result: no KTAP result line for this test")
        if any(n.startswith("planned ") for n in r.notes) and t.status != "FAIL":
            t.status = "FAIL"
        by_rec[id(r)] = t
        tests.append(t)
    for r in recs:
        by_rec[id(r)].children = [by_rec[id(c)].id for c in r.children]
    for cp in w.crash_points:
        tests.append(TestResult(id=cp.id, name=cp.id, path=[cp.id], level="crash",
                                kunit_status="NONE", status="CRASH", line_no=None,
                                splats=cp.splats, params=cp.params, param_prefix=cp.prefix,
                                diagnostics=cp.diags, parent=cp.running or None,
                                metrics=cp.metrics, boot=cp.boot))
        notes += cp.notes
    _apply_splat_verdicts(tests)
    leaves = [t for t in tests if t.line_no is not None and not t.children]
    counts = Counts(passed=sum(t.status == "PASS" for t in leaves),
                    failed=sum(t.status == "FAIL" for t in leaves),
                    skipped=sum(t.status == "SKIP" for t in leaves),
                    crashed=len(w.crash_points))
    findings = [s for s in w.splats if not s.expected]
    panic = any(s.kind == "panic" for s in findings)
    if verdict == "completed" and w.kunit_timeout:
        verdict = "timeout"
        notes.append("kunit.py reported its own timeout")
    # a boot the watchdog stopped on a failure state is a crash of the kernel under test
    status = _overall("crash" if verdict.startswith(STOPPED) else verdict, panic, incomplete,
                      leaves, tests, findings)
    if not w.ever_started:
        tail = next((strip_prefix(ln).strip() for ln in reversed(lines) if ln.strip()), "")
        notes.append("no KTAP output found" + (f"; last console line: {tail[:200]}" if tail else ""))
    boot = [s for s in findings if s.test == "boot"]
    if boot:
        notes.append(f"{len(boot)} splat(s) during boot, before any test")
    return Report(status=status, verdict=verdict, tests=tests, splats=findings, counts=counts,
                  expected=[s for s in w.splats if s.expected],
                  notes=notes, ktap_started=w.ever_started, ktap_complete=complete,
                  not_run=w.not_run, bad_parameters=list(w.refused.values()))


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


# --- summary -------------------------------------------------------------------

REPLAY_PARAMS = ("seed", "threads")


def replay_case(report: Report, t: TestResult,
                index: dict[str, TestResult] | None = None) -> tuple[str, list[str]] | None:
    """(suite.case, ["cgroup_kunit.seed=..", "cgroup_kunit.threads=.."]) that replay the
    failed case, parameter or crash point t (the parameters the suite printed for it; none
    when it printed none); None for any other test."""
    if t.level in ("case", "param") and t.status == "FAIL":
        target = ".".join(t.path[:2])
    elif t.level == "crash" and t.parent:
        target = ".".join(t.parent.split(".")[:2])
    else:
        return None
    params, prefix = _params_for(t, index if index is not None else {u.id: u for u in report.tests})
    return target, [f"{prefix}.{k}={params[k]}" for k in REPLAY_PARAMS if k in params]


def replay_hints(report: Report) -> list[str]:
    """One `make run` line per failed case, with the seed when the suite printed one."""
    index = {t.id: t for t in report.tests}
    hints: list[str] = []
    seen: set[str] = set()
    for t in report.tests:
        found = replay_case(report, t, index)
        if found is None or found[0] in seen:
            continue
        target, args = found
        seen.add(target)
        hints.append(replay_command(report.replay_target, " ".join(args), target))
    return hints


ISOLATE_ENV = "CGKUNIT_ISOLATE"


def not_run_hints(report: Report) -> list[str]:
    """Commands that run what a stopped boot never reached, each part in a boot of its own."""
    hints: list[str] = []
    for suite in dict.fromkeys(n.suite for n in report.not_run if n.what == "case" and n.suite):
        glob = report.filter_glob if report.filter_glob.startswith(f"{suite}.") else f"{suite}.*"
        hints.append(f"{ISOLATE_ENV}=test {replay_command(report.replay_target, '', glob)}"
                     "   (one boot per case)")
    if any(n.what in ("suite", "boot") for n in report.not_run):
        cmd = (replay_command(report.replay_target, "", report.filter_glob) if report.filter_glob
               else report.replay_target)
        hints.append(f"{ISOLATE_ENV}=suite {cmd}   (one boot per suite)")
    return hints


def _stop_where(stop: dict[str, Any]) -> str:
    boot, boots = stop.get("boot"), stop.get("boots")
    isolated = isinstance(boots, int) and boots > 1
    return f"at {float(str(stop.get('at', 0))):.0f}s" + (f" (boot {boot} of {boots})" if isolated else "")


def stop_line(stop: dict[str, Any]) -> str:
    """'stopped the kernel at 41s: <reason>' for one watchdog stop of exec.json."""
    return f"stopped the kernel {_stop_where(stop)}: {stop.get('reason', '?')}"


def short_verdict(verdict: str) -> str:
    """A verdict without its details: 'stopped: report storm', 'hang', ..."""
    return verdict.split(" (", 1)[0]


def replay_command(target: str, kernel_args: str, filter_glob: str) -> str:
    """`make X KERNEL_ARGS=.. FILTER=..`, or the variables before a plain command (each
    only when set: no FILTER runs the whole suite)."""
    assigns = " ".join(([f"KERNEL_ARGS=\"{kernel_args}\""] if kernel_args else [])
                       + ([f"FILTER='{filter_glob}'"] if filter_glob else []))
    if not assigns:
        return target
    return f"{target} {assigns}" if target.startswith("make ") else f"{assigns} {target}"


def _params_for(t: TestResult, index: dict[str, TestResult]) -> tuple[dict[str, str], str]:
    """Seed parameters for a replay of t (own, then a subtest's, then an earlier sibling's)."""
    if "seed" in t.params:
        return t.params, t.param_prefix
    kids = [index[c] for c in t.children if c in index]
    for k in sorted(kids, key=lambda k: k.status != "FAIL"):
        if "seed" in k.params:
            return k.params, k.param_prefix
    parent = index.get(t.parent) if t.parent else None
    if t.level == "param" and parent is not None:
        siblings = [index[c] for c in parent.children if c in index]
        for s in reversed(siblings[:siblings.index(t)] if t in siblings else []):
            if "seed" in s.params:
                return s.params, s.param_prefix
        if "seed" in parent.params:
            return parent.params, parent.param_prefix
    return {}, t.param_prefix


def _splat_line(s: Splat, count: int = 1) -> str:
    extra = f"  [{s.message}]" if s.message else ""
    times = f"x{count}, first at " if count > 1 else ""
    return f"{s.kind}: {s.title}{extra}  ({times}console.log:{s.line_no})"


WHERE_SUFFIX = re.compile(r",? CPU#\d+: \S+$|CPU: \d+ PID: \d+ ")


def title_key(title: str) -> str:
    """A title without the CPU and task it happened on, which vary per report."""
    return WHERE_SUFFIX.sub("", title)


_title_key = title_key


def _grouped(splats: list[Splat]) -> list[tuple[Splat, int]]:
    """Identical reports (same kind and title) once, with how often they came."""
    first: dict[tuple[str, str], Splat] = {}
    counts: Counter[tuple[str, str]] = Counter()
    for s in splats:
        key = (s.kind, title_key(s.title))
        first.setdefault(key, s)
        counts[key] += 1
    return [(first[k], counts[k]) for k in first]


SCREEN = 48


def _test_lines(t: TestResult) -> list[str]:
    reason = f"  ({t.skip_reason})" if t.status == "SKIP" and t.skip_reason else ""
    kids = f"  [{len(t.children)} params]" if t.level == "case" and t.children else ""
    lines = [f"  {t.status:<5} {t.display if t.level != 'crash' else t.id}{kids}{reason}"]
    lines += [f"          {_splat_line(s, n)}" for s, n in _grouped(t.splats)]
    for n in t.notes:
        if n.startswith(("failed: splat", "planned", "no result", "stopped")):
            lines.append(f"          note: {n}")
    if t.status == "FAIL" and not t.children:
        lines += [f"          # {d}" for d in _first_failure(t.diagnostics)]
    return lines


def _first_failure(diags: list[str]) -> list[str]:
    """The first 'FAILED at' line and the message that ends its block."""
    starts = [i for i, d in enumerate(diags) if "FAILED at" in d]
    if not starts:
        return [d for d in diags if "seed=" not in d][:2]
    k = starts[0]
    end = starts[1] if len(starts) > 1 else len(diags)
    block = diags[k + 1:end]
    out = [diags[k]] + ([block[-1]] if block else [])
    if len(starts) > 1:
        out.append(f"(and {len(starts) - 1} more failure(s) in console.log)")
    return out


def format_summary(report: Report) -> str:
    """One screen: cases always, parameters only when they failed or had a report."""
    out: list[str] = []
    head = f"cgkunit: {report.profile or '?'}: {report.status.upper()}"
    if report.verdict != "completed":
        head += f" (run {short_verdict(report.verdict)})"
    head += f" in {report.elapsed:.0f}s" if report.elapsed else ""
    if report.bad_parameters:
        n = len(report.bad_parameters)
        head += f"; BAD INPUT: the suite refused {n} parameter{'' if n == 1 else 's'}"
    out.append(head)
    if report.tree or report.base:
        out.append(f"  tree {report.tree}  base {report.base}")
    out += [f"  watchdog: {stop_line(stop)}" for stop in report.stops]
    body: list[str] = []
    for t in report.tests:
        if t.line_no is None and t.level != "crash":
            continue
        if t.level == "suite" and t.children and not t.splats:
            continue
        if t.level == "param" and t.status not in ("FAIL", "CRASH") and not t.splats:
            continue
        body += _test_lines(t)
    for s, n in _grouped([s for s in report.splats
                          if s.test == "boot" or s.test.startswith("shutdown")]):
        body.append(f"  {s.test}: {_splat_line(s, n)}")
    body += [f"  NOT RUN {n.describe()}" for n in report.not_run]
    hints = replay_hints(report)
    tail: list[str] = []
    c = report.counts
    kinds = Counter(s.kind for s in report.splats)
    tail.append(f"  {c.passed} passed, {c.failed} failed, {c.skipped} skipped, {c.crashed} crashed; "
                f"{len(report.splats)} splat(s)"
                + (" (" + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + ")" if kinds else "")
                + (f"; oracle self-checks: {len(report.expected)} provoked report(s) seen"
                   if report.expected else ""))
    tail += [f"  refused: {p.describe()}  (console.log:{p.line_no}; the default was used)"
             for p in report.bad_parameters]
    tail += [f"  note: {n}" for n in report.notes]
    tail += [f"  {name}: {path}" for name, path in report.files.items()]
    if hints:
        tail.append("  replay:")
        tail += [f"    {h}" for h in hints[:4]]
        if len(hints) > 4:
            tail.append(f"    ({len(hints) - 4} more in summary.json)")
    later = not_run_hints(report)
    if later:
        tail.append("  run what was never reached:")
        tail += [f"    {h}" for h in later[:3]]
    room = max(SCREEN - len(out) - len(tail) - 1, 8)
    if len(body) > room:
        body = body[:room] + [f"  ... {len(body) - room} more lines: see summary.json"]
    return "\n".join(out + body + tail) + "\n"


def write_summary(report: Report, results: Path) -> tuple[Path, Path]:
    """Write summary.json (the report and its failure signatures) and summary.txt."""
    from .signature import signatures  # signature builds on this module
    results.mkdir(parents=True, exist_ok=True)
    js, txt = results / "summary.json", results / "summary.txt"
    report.files["summary"] = str(js)
    data = report.to_json()
    data["signatures"] = [s.to_json() for s in signatures(report)]
    write_json(js, data)
    txt.write_text(format_summary(report))
    return js, txt


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
            t.notes.append(f"stopped here by the watchdog {_stop_where(stop)}: "
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
    report.files = {"console": str(console_log)}
    for name, fname in (("ktap", "results.ktap"), ("json", "results.json"), ("junit", "results.xml")):
        if (results / fname).exists():
            report.files[name] = str(results / fname)
    return report
