"""Prove the oracle: runs that must fail in exactly the expected way."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Callable

from .common import DriverError, InfraError, say
from .params import check_filter, check_kernel_args
from .profile import PROFILES_DIR, isolate_mode
from .report import EXIT_INTERRUPTED, INTERRUPTED, STATUS_EXIT, Report, TestResult

CHECKS_FILE = Path("tools") / "kunit" / "checks.json"
RUN_STATUSES = ("pass", "fail", *sorted(set(STATUS_EXIT) - {"pass", "fail", INTERRUPTED}))


@dataclass(frozen=True)
class ExpectedSplat:
    kind: str
    test: str
    title: str


@dataclass(frozen=True)
class Check:
    """One oracle check from checks.json."""
    name: str
    profile: str
    kernel_args: list[str] = field(default_factory=list)
    extra_patches: list[str] = field(default_factory=list)
    filter: str = ""
    expect_fail: list[str] = field(default_factory=list)
    expect_splat: list[ExpectedSplat] = field(default_factory=list)
    expect_pass_others: bool = True
    expect_status: str = ""
    expect_console: list[str] = field(default_factory=list)
    # "suite"/"test": boot once per suite/test (kunit.py --run_isolated), "none": one boot;
    # "" (not set): $CGKUNIT_ISOLATE or check --isolate, else the profile's isolate
    isolate: str = ""

    @property
    def wanted_status(self) -> str:
        if self.expect_status:
            return self.expect_status
        return "fail" if self.expect_fail or self.expect_splat else "pass"


@dataclass
class Outcome:
    """How one check went."""
    check: Check
    ok: bool
    status: str
    problems: list[str] = field(default_factory=list)


def _strings(where: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DriverError(f"{where}: expected a list of strings")
    return list(value)


def _isolate(where: str, value: Any) -> str:
    """A check's isolate key: "suite", "test" or "none" ("" when absent)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DriverError(f"{where}: isolate must be a string")
    return isolate_mode(value, f"{where}: isolate") or "none"


def parse_checks(data: Any, where: str = str(CHECKS_FILE)) -> list[Check]:
    """Validate the checks.json document."""
    items = data.get("checks") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise DriverError(f"{where}: expected a list of checks")
    checks: list[Check] = []
    for n, item in enumerate(items):
        at = f"{where}[{n}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) \
                or not isinstance(item.get("profile"), str):
            raise DriverError(f"{at}: each check needs string 'name' and 'profile'")
        at = f"{where}: {item['name']}"
        unknown = set(item) - {"name", "profile", "kernel_args", "extra_patches", "filter",
                               "expect_fail", "expect_splat", "expect_pass_others",
                               "expect_status", "expect_console", "isolate", "comment"}
        if unknown:
            raise DriverError(f"{at}: unknown keys {', '.join(sorted(unknown))}")
        splats = []
        for s in item.get("expect_splat", []):
            if not isinstance(s, dict) or not all(isinstance(s.get(k), str) for k in ("kind", "test")):
                raise DriverError(f"{at}: expect_splat entries need string 'kind' and 'test'")
            splats.append(ExpectedSplat(kind=s["kind"], test=s["test"], title=str(s.get("title", ""))))
        checks.append(Check(
            name=item["name"], profile=item["profile"],
            kernel_args=_strings(f"{at}: kernel_args", item.get("kernel_args", [])),
            extra_patches=_strings(f"{at}: extra_patches", item.get("extra_patches", [])),
            filter=check_filter(str(item.get("filter", "")), f"{at}: filter"),
            expect_fail=_strings(f"{at}: expect_fail", item.get("expect_fail", [])),
            expect_splat=splats, expect_pass_others=bool(item.get("expect_pass_others", True)),
            expect_status=str(item.get("expect_status", "")),
            expect_console=_strings(f"{at}: expect_console", item.get("expect_console", [])),
            isolate=_isolate(at, item.get("isolate"))))
    names = [c.name for c in checks]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise DriverError(f"{where}: duplicate check names {', '.join(dupes)}")
    return checks


def check_isolate(check: Check, default: str | None) -> str | None:
    """The isolate mode of a check's run: its own key, else default (None: the profile's)."""
    if check.isolate:
        return "" if check.isolate == "none" else check.isolate
    return default


def load_checks(repo: Path) -> list[Check]:
    path = repo / CHECKS_FILE
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise DriverError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise DriverError(f"{path}: invalid JSON: {e}") from None
    checks = parse_checks(data, str(path))
    for c in checks:
        validate_check(repo, c, f"{path}: {c.name}")
    return checks


def validate_check(repo: Path, c: Check, at: str) -> None:
    """Every value of one check that the build and boot would find bad, found before them:
    its profile, extra patches, filter (a suite of the suite's), kernel_args (names, and
    values the suite takes unless expect_console names the refusal, as bad-parameters does)
    and expect_status (statuses a run can have); DriverError naming the first bad one."""
    if not (repo / PROFILES_DIR / f"{c.profile}.config").is_file() or "/" in c.profile:
        raise DriverError(f"{at}: unknown profile {c.profile!r}")
    for patch in c.extra_patches:
        if not (repo / patch).is_file():
            raise DriverError(f"{at}: extra patch {patch} does not exist")
    check_filter(c.filter, f"{at}: filter", repo)
    check_kernel_args(c.kernel_args, repo, f"{at}: kernel_args", refusals=c.expect_console)
    unknown = [s for s in c.expect_status.split("|") if s and s not in RUN_STATUSES]
    if unknown or (c.expect_status and not c.expect_status.strip("|")):
        raise DriverError(f"{at}: expect_status {c.expect_status!r}: want one or more of "
                          f"{', '.join(RUN_STATUSES)} joined by '|'")


def _lineage(t: TestResult) -> list[str]:
    """Ids of t and its ancestors."""
    return [".".join(t.path[:n]) for n in range(len(t.path), 0, -1)]


def evaluate(check: Check, report: Report) -> Outcome:
    """Pure: does the report show exactly the expected failures and splats?"""
    problems: list[str] = []
    # expect_status may list alternatives, e.g. "fail|crash" for a broken
    # kernel that sometimes trips an invariant and sometimes crashes first.
    if report.status not in check.wanted_status.split("|"):
        problems.append(f"run status {report.status}, expected {check.wanted_status}")
    failed = [t for t in report.tests if t.status in ("FAIL", "CRASH")]
    matched = {g: [t for t in failed if fnmatchcase(t.id, g)] for g in check.expect_fail}
    for glob, hits in matched.items():
        if not hits:
            problems.append(f"expected failure {glob} did not fail")
    expected_ids = {t.id for hits in matched.values() for t in hits}

    def explained(t: TestResult) -> bool:
        if any(a in expected_ids for a in _lineage(t)):
            return True  # t is, or is inside, an expected failure
        return any(t.id in _lineage(e) for e in failed if e.id in expected_ids)

    if check.expect_pass_others:
        for t in failed:
            if not explained(t):
                problems.append(f"unexpected {t.status.lower()}: {t.id}")
    used: set[int] = set()
    for exp in check.expect_splat:
        hit = next((i for i, s in enumerate(report.splats)
                    if s.kind == exp.kind and fnmatchcase(s.test, exp.test)
                    and exp.title in s.title), None)
        if hit is None:
            problems.append(f"expected {exp.kind} splat in {exp.test}"
                            + (f" ({exp.title!r})" if exp.title else "") + " not seen")
        else:
            used.add(hit)
    if check.expect_pass_others:
        by_id = {t.id: t for t in report.tests}
        for i, s in enumerate(report.splats):
            owner = by_id.get(s.test)
            if i not in used and not (owner is not None and explained(owner)):
                problems.append(f"unexpected {s.kind} splat in {s.test}: {s.title}")
    if check.expect_console:
        console = _console_text(report)
        problems += [f"console never printed {want!r}" for want in check.expect_console
                     if want not in console]
    # a refused parameter is bad input to a run, and to a check unless it expects the refusal
    problems += [f"the suite refused {p.describe()}" for p in report.bad_parameters
                 if not any(want in p.text for want in check.expect_console)]
    return Outcome(check=check, ok=not problems, status=report.status, problems=problems)


def _console_text(report: Report) -> str:
    """The run's console.log, or '' when the report has none."""
    try:
        return Path(report.console_log).read_text(errors="replace") if report.console_log else ""
    except OSError:
        return ""


def format_table(outcomes: list[Outcome]) -> str:
    """One line per check, then the problems."""
    width = max([len(o.check.name) for o in outcomes] + [5])
    pwidth = max([len(o.check.profile) for o in outcomes] + [7])
    lines = [f"{'check':<{width}}  {'profile':<{pwidth}}  {'run':<12}  result"]
    for o in outcomes:
        lines.append(f"{o.check.name:<{width}}  {o.check.profile:<{pwidth}}  {o.status:<12}  "
                     + ("ok" if o.ok else "NOT OK"))
        lines.extend(f"{'':<{width}}    - {p}" for p in o.problems)
    return "\n".join(lines) + "\n"


Runner = Callable[[Check], Report]


def report_line(report: Report) -> None:
    """The printer of a check's run: one line, not the run's summary (summary.txt has it)."""
    c = report.counts
    where = report.files.get("summary", "")
    say(f"  run {report.status}: {c.passed} passed, {c.failed} failed, {c.skipped} skipped, "
        f"{c.crashed} crashed; {len(report.splats)} report(s)" + (f"; {where}" if where else ""))


def run_checks(checks: list[Check], runner: Runner, only: str | None = None) -> tuple[int, str]:
    """Run checks one after another; (exit code, table)."""
    if only:
        checks = [c for c in checks if c.name == only]
        if not checks:
            raise DriverError(f"no check named {only!r}")
    outcomes: list[Outcome] = []
    errors = 0
    stopped = ""
    for i, c in enumerate(checks, 1):
        if stopped:
            outcomes.append(Outcome(check=c, ok=False, status="not run"))
            continue
        say(f"check {i} of {len(checks)}: {c.name} (profile {c.profile})")
        try:
            outcomes.append(evaluate(c, runner(c)))
        except DriverError as e:
            errors += 1
            outcomes.append(Outcome(check=c, ok=False, status="error", problems=[e.reason]))
            if isinstance(e, InfraError):  # the next check would meet it too
                stopped = "infrastructure error"
                say(f"stopping: {e.reason}; the checks after {c.name} would meet it too")
        except KeyboardInterrupt:
            outcomes.append(Outcome(check=c, ok=False, status=INTERRUPTED,
                                    problems=["interrupted while it ran"]))
            stopped = INTERRUPTED
        o = outcomes[-1]
        say(f"check {i} of {len(checks)}: {c.name}: " + ("ok" if o.ok else "NOT OK")
            + "".join(f"\n    - {p}" for p in o.problems))
    table = format_table(outcomes)
    if any(o.status == INTERRUPTED for o in outcomes):
        return EXIT_INTERRUPTED, table
    if errors:
        return 2, table
    return (0 if all(o.ok for o in outcomes) else 1), table
