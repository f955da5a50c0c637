"""Console log -> report, in two passes: what each line is (ConsoleState, which the boot
watchdog also feeds live), then the tests and what the lines before each result line say
about its test (_Tree, _attribute); verdicts, summary, exit status."""
from __future__ import annotations

import bisect
import re
import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from .common import DriverError, read_json, write_json
from .params import SUITE_MODULE, param_name
from .titles import ReportTitle, load as load_titles

# --- exit status -------------------------------------------------------------

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_ERROR = 2
BISECT_SKIP = 125
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM: 128 + SIGINT, as a shell says it
INTERRUPTED = "interrupted"  # verdict and status of a run stopped by Ctrl-C or SIGTERM
STATUS_EXIT = {"pass": EXIT_PASS, "fail": EXIT_FAIL, "crash": EXIT_FAIL, "hang": EXIT_FAIL,
               "timeout": EXIT_FAIL, "boot-timeout": EXIT_FAIL, "no-tests": EXIT_ERROR,
               INTERRUPTED: EXIT_INTERRUPTED}
STOPPED = "stopped: "  # verdict prefix of a boot the watchdog ended on a failure state
# levels of a test that is a point in a run, not a KTAP test: where the kernel crashed or
# stopped, or where Ctrl-C interrupted the run
POINT_LEVELS = ("crash", INTERRUPTED)
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
     refused at boot (the tests then ran with the default), another command
     holding the build root
  130  interrupted (Ctrl-C or SIGTERM): the kernel was stopped, what the run
     wrote so far is kept and its report says "interrupted"
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
        return display(self.path)

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
    what: str       # "case", "suite" or "boot" (of kunit.py --run_isolated, or a run's second)
    count: int
    suite: str      # the suite the cases belong to ("" for suites and boots)
    after: str      # the last test reported before them, or "start"
    planned: int    # what KUnit planned at that level (0 when unknown)

    def describe(self) -> str:
        plural = "" if self.count == 1 else "s"
        if self.what == "boot":
            return (f"{self.count} more kunit.py boot{plural} never started "
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
    ktap: list[str] = field(default_factory=list)  # the console's KTAP lines, prefixes off
    kernel_args: list[str] = field(default_factory=list)  # the run's own (exec.json)
    replay_env: list[str] = field(default_factory=list)   # KERNEL_SRC=.., KERNEL_REF=..

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
                "bad_parameters": [p.to_json() for p in self.bad_parameters],
                "replay_env": self.replay_env}


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
# The report titles: lib/kunit-cgroup/report_titles.h, which the suite's oracle matches
# too (harness.c), read at import; the first entry whose pattern matches a line wins.
REPORT_TITLES: list[ReportTitle] = load_titles()
# the oracle's name of each kind (what harness.c prints) -> the kind TITLES gives
ORACLE_KINDS = {t.name: t.kind for t in REPORT_TITLES}
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

# (kind, pattern as a regex that matches the whole line) of each report title, in order
TITLES: list[tuple[str, re.Pattern[str]]] = [(t.kind, t.regex) for t in REPORT_TITLES]
# all of them in one regex, a named group each (t<index>): one match a line, first entry wins
ANY_TITLE = re.compile("|".join(f"(?P<t{i}>{regex.pattern})" for i, (_, regex) in enumerate(TITLES)))
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
    m = ANY_TITLE.match(text)
    return TITLES[int(m.lastgroup[1:])][0] if m is not None and m.lastgroup else None


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
        kind, n = ORACLE_KINDS.get(m.group(1), ""), int(m.group(2))
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


def display(path: Sequence[str]) -> str:
    """suite.case[param] form of a test's path."""
    return ".".join(path[:2]) + "".join(f"[{p}]" for p in path[2:])


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

    def take(self, e: Event) -> None:
        """A diagnostic line: a metric, seed parameters, or a message to keep."""
        text = e.name
        if e.kind == "diag":
            if STATS.search(text) or text.startswith(("module:", "speed:", "Subtest:")) \
                    or heartbeat(text) is not None:
                return  # counts, progress while a gang runs: not findings (console.log keeps them)
            metric = parse_metric(text)
            if metric is not None:
                self.metrics.append(metric)
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
                "metrics": self.metrics}


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


def parse_console(text: str, verdict: str = "completed") -> Report:
    """Build a Report from console text and the exec verdict: pass 1 (ConsoleState) over
    the lines, then the tests (_Tree) and what the lines before each result say (_attribute)."""
    state = ConsoleState()
    lines = text.splitlines()
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
    """One `make run` line per failed case: the tree the run was on (KERNEL_SRC, KERNEL_REF),
    the seed and threads the suite printed for it, the run's other kernel arguments."""
    index = {t.id: t for t in report.tests}
    hints: list[str] = []
    seen: set[str] = set()
    for t in report.tests:
        found = replay_case(report, t, index)
        if found is None or found[0] in seen:
            continue
        target, args = found
        seen.add(target)
        hints.append(replay_line(report.replay_target, args, report.kernel_args, target,
                                 report.replay_env))
    return hints


def replay_line(target: str, printed: Sequence[str], run_args: Sequence[str],
                filter_glob: str, env: Sequence[str] = ()) -> str:
    """The command that replays a failure: env (replay_env) before target, the parameters
    the suite printed for it, then the run's kernel arguments that set anything else, each
    shell-quoted, and the filter."""
    names = {param_name(w) for w in printed}
    words = [*printed, *(w for w in run_args if param_name(w) not in names)]
    cmd = replay_command(target, " ".join(shlex.quote(w) for w in words), filter_glob)
    return " ".join([*env, cmd])


def replay_env(kernel_src: str | None, kernel_ref: str = "HEAD") -> tuple[str, ...]:
    """KERNEL_SRC/KERNEL_REF assignments a replay needs (none for the pinned base)."""
    if not kernel_src:
        return ()
    out = [f"KERNEL_SRC={shlex.quote(kernel_src)}"]
    if kernel_ref and kernel_ref != "HEAD":
        out.append(f"KERNEL_REF={shlex.quote(kernel_ref)}")
    return tuple(out)


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
    lines = [f"  {t.status:<5} {t.display if t.level not in POINT_LEVELS else t.id}{kids}{reason}"]
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
        if t.line_no is None and t.level not in POINT_LEVELS:
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
    """Write results.ktap, .xml and .json (export), summary.json (the report and its
    failure signatures) and summary.txt."""
    from .export import write_results  # both build on this module
    from .signature import signatures
    results.mkdir(parents=True, exist_ok=True)
    write_results(report, results)
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
        args = info.get("kernel_args")
        report.kernel_args = [str(a) for a in args] if isinstance(args, list) else []
    report.files = {"console": str(console_log)}
    for name, fname in (("ktap", "results.ktap"), ("json", "results.json"), ("junit", "results.xml")):
        if (results / fname).exists():
            report.files[name] = str(results / fname)
    return report
