"""Prove the oracle: run the checks of checks.json (checklist.py) one after another and
judge each report: exactly the expected failures and reports, nothing else."""
from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Callable, Sequence

from .checklist import Check
from .common import DriverError, InfraError, say
from .report import EXIT_INTERRUPTED, INTERRUPTED, Report, TestResult


@dataclass
class Outcome:
    """How one check went."""
    check: Check
    ok: bool
    status: str
    problems: list[str] = field(default_factory=list)
    quiet: bool = False  # the boot passed every test with no report: nothing went red
    boot: int = 1        # the boot that gave this outcome (a check may have several)

    @property
    def missed(self) -> bool:
        """Not ok only because the boot caught nothing (a race not hit), so another boot may."""
        return bool(self.problems) and self.quiet


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
    refused = [f"the suite refused {p.describe()}" for p in report.bad_parameters
               if not any(want in p.text for want in check.expect_console)]
    # nothing went red in the boot: a race it did not hit, which another boot may
    quiet = report.status == "pass" and not failed and not report.splats and not refused
    return Outcome(check=check, ok=not (problems or refused), status=report.status,
                   problems=problems + refused, quiet=quiet)


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
                     + ("ok" if o.ok else "NOT OK") + _boot_label(o))
        lines.extend(f"{'':<{width}}    - {p}" for p in o.problems)
    # CI keeps only the tail of its output: the last lines say which checks failed, and why
    bad = [o for o in outcomes if not o.ok and o.status != "not run"]
    not_run = sum(o.status == "not run" for o in outcomes)
    ok = len(outcomes) - len(bad) - not_run
    lines.append(f"{ok} of {len(outcomes)} checks ok" + (f", {not_run} not run" if not_run else "")
                 + (", NOT OK:" if bad else ""))
    for o in bad:
        lines.append(f"  {o.check.name} ({o.check.profile}, run {o.status})")
        lines.extend(f"    - {p}" for p in o.problems)
    if bad:
        lines.append("NOT OK: " + ", ".join(o.check.name for o in bad))
    return "\n".join(lines) + "\n"


def _boot_label(o: Outcome) -> str:
    """Which boot gave a check of several boots its outcome; "" where no boot ended it."""
    if o.check.boots == 1 or o.status in ("not run", "error", INTERRUPTED):
        return ""
    return f" (boot {o.boot} of up to {o.check.boots})"


Runner = Callable[[Check], Report]


def report_line(report: Report) -> None:
    """The printer of a check's run: one line, not the run's summary (summary.txt has it)."""
    c = report.counts
    where = report.files.get("summary", "")
    say(f"  run {report.status}: {c.passed} passed, {c.failed} failed, {c.skipped} skipped, "
        f"{c.crashed} crashed; {len(report.splats)} report(s)" + (f"; {where}" if where else ""))


def _boots(c: Check, runner: Runner, label: str) -> Outcome:
    """Run a check, booting again (up to c.boots) while it only missed its evidence."""
    boot = 1
    outcome = evaluate(c, runner(c))
    while outcome.missed and boot < c.boots:
        say(f"{label}: boot {boot} of up to {c.boots} did not catch it "
            f"({outcome.problems[0]}); booting again")
        boot += 1
        outcome = evaluate(c, runner(c))
    outcome.boot = boot
    return outcome


def select_profiles(checks: list[Check], profiles: Sequence[str], known: Sequence[str]) -> list[Check]:
    """The checks that boot one of @profiles (all of them when it is empty)."""
    if not profiles:
        return checks
    for name in profiles:
        if name not in known:
            raise DriverError(f"--profiles: no profile named {name!r} (have: {', '.join(known)})")
    return [c for c in checks if c.profile in profiles]


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
            outcomes.append(_boots(c, runner, f"check {i} of {len(checks)}: {c.name}"))
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
        say(f"check {i} of {len(checks)}: {c.name}: " + ("ok" if o.ok else "NOT OK") + _boot_label(o)
            + "".join(f"\n    - {p}" for p in o.problems))
    table = format_table(outcomes)
    if any(o.status == INTERRUPTED for o in outcomes):
        return EXIT_INTERRUPTED, table
    if errors:
        return 2, table
    return (0 if all(o.ok for o in outcomes) else 1), table
