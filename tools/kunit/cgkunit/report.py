"""A run's report, as the console reader (console.py) makes it from a console log: the
tests with their statuses, the kernel's reports, the tests never reached, the parameters
the suite refused and the run's status; and the exit status each status maps to."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from .common import DriverError
from .params import SUITE_MODULE

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
    reach: list[dict[str, int | str]] = field(default_factory=list)  # 'reach:' lines, parsed
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
                **({"reach": self.reach} if self.reach else {}),
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

    def reach(self) -> list[dict[str, int | str]]:
        """Every reach record of the run (cgroup_reach's lockdep usage lines), in test order."""
        return [r for t in self.tests for r in t.reach]


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


def display(path: Sequence[str]) -> str:
    """suite.case[param] form of a test's path."""
    return ".".join(path[:2]) + "".join(f"[{p}]" for p in path[2:])


def short_verdict(verdict: str) -> str:
    """A verdict without its details: 'stopped: report storm', 'hang', ..."""
    return verdict.split(" (", 1)[0]


def stop_where(stop: dict[str, Any]) -> str:
    """'at 41s', 'at 41s (boot 2 of 3)': when (and in which boot) a watchdog stop of
    exec.json ended a kernel."""
    boot, boots = stop.get("boot"), stop.get("boots")
    isolated = isinstance(boots, int) and boots > 1
    return f"at {float(str(stop.get('at', 0))):.0f}s" + (f" (boot {boot} of {boots})" if isolated else "")
