"""Repeated boots of one built kernel: the engine stress and bisect share.

Pure steps (testable without a kernel): the class of one boot's Report (a pass; a failure
with its signatures and the command that replays each; an infrastructure error or bad
input, which are not runs), the per-signature counts over the runs, a progress line. The
loop takes the boot as a callable (run number, seed) -> Report: stress boots one build
back to back, bisect each commit it tests (commits.Workspace).
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from . import report as rp
from .common import DriverError, say
from .params import SEED_PARAM, param_name
from .run import read_exec_info
from .signature import Signature, signatures
from .stats import wilson
from .summary import replay_case, replay_line

INFRA_STATUSES = ("boot-timeout", "no-tests")  # the kernel never reached KUnit / ran nothing
INFRA_IN_A_ROW = 3  # this many infrastructure errors in a row stop the loop: the machine's
PASS, FAIL, INFRA, BAD_INPUT = "pass", "fail", "infra", "bad-input"
SHOWN_KEYS = 2  # signatures named in a progress line


# --- replay -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Replay:
    """How the failures of repeated boots are replayed: the profile's command, its kernel
    arguments (seed aside), its filter and the tree it ran on."""
    target: str
    kernel_args: tuple[str, ...] = ()
    filter_glob: str = ""
    env: tuple[str, ...] = ()  # KERNEL_SRC=..., KERNEL_REF=... when not the pinned base

    def command(self, seed: int, case: str = "", printed: Sequence[str] = ()) -> str:
        """The command that boots the same kernel on the same streams: the parameters the
        suite printed for the failing case (seed, threads), else the run's seed, then the
        other kernel arguments of the run; FILTER the case, else the run's filter."""
        words = list(printed)
        if not any(param_name(w) == SEED_PARAM for w in words):
            words.insert(0, f"{SEED_PARAM}={seed}")
        return replay_line(self.target, words, self.kernel_args, case or self.filter_glob,
                              self.env)


# --- one run ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Found:
    """One failure signature in one run."""
    key: str
    kind: str
    title: str
    test: str       # where it was seen (a test id, a crash point, "boot")
    case: str       # the suite.case that replays it ("" when no case: the run's filter)
    count: int      # occurrences in the run
    replay: str

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "kind": self.kind, "title": self.title, "test": self.test,
                "case": self.case, "count": self.count, "replay": self.replay}


@dataclass
class RunRecord:
    """One of the repeated boots."""
    run: int
    seed: int
    status: str                  # pass, fail, infra (not a run), bad-input (not a run)
    report_status: str = ""      # the report's: pass, fail, crash, hang, boot-timeout, ...
    verdict: str = ""
    signatures: list[Found] = field(default_factory=list)
    elapsed: float = 0.0
    results: str = ""            # its results directory
    kept: bool = True            # False: a passing run's results, removed (only the last stays)
    reason: str = ""             # infrastructure error or bad input: what happened
    boot_retries: int = 0        # boots of a kernel that hung before KUnit, retried
    cases: tuple[str, ...] = ()  # suite.case of every test the boot reported (bisect: did it run?)

    @property
    def counted(self) -> bool:
        return self.status in (PASS, FAIL)

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "seed": self.seed, "status": self.status,
                "report_status": self.report_status, "verdict": self.verdict,
                "signatures": [s.key for s in self.signatures], "elapsed": round(self.elapsed, 3),
                "results": self.results if self.kept else None, "reason": self.reason,
                "boot_retries": self.boot_retries}


def infra_reason(report: rp.Report) -> str:
    """Why a boot is an infrastructure error and not a run ("" when it is a run): the kernel
    hung before KUnit started (after the driver's retry), no tests ran, or it printed no
    KUnit output and no kernel report at all."""
    if report.status not in INFRA_STATUSES and (report.ktap_started or report.splats):
        return ""
    what = {"boot-timeout": "the kernel hung before KUnit started",
            "no-tests": "no tests ran"}.get(report.status, f"no KUnit output ({report.status})")
    if report.status == "no-tests" and report.ktap_started:
        what += ": KUnit found no case" + (f" matching {report.filter_glob!r}"
                                           if report.filter_glob else "")
    note = next((n for n in report.notes if n.startswith("no KTAP output")), "")
    return f"{what}; {note}"[:300] if note else what


def failing_case(report: rp.Report, sig: Signature,
                 index: dict[str, rp.TestResult]) -> tuple[str, list[str]]:
    """(suite.case, the parameters the suite printed for it) of a signature; ("", []) when
    it happened outside a case (during boot, in a suite's init)."""
    t = index.get(sig.test)
    found = replay_case(report, t, index) if t is not None else None
    return found if found is not None else ("", [])


def classify(report: rp.Report, run: int, seed: int, replay: Replay) -> RunRecord:
    """A boot's report as a pass, a failure (its signatures), an infrastructure error or
    bad input (a parameter the suite refused)."""
    rec = RunRecord(run=run, seed=seed, status=PASS, report_status=report.status,
                    verdict=report.verdict,
                    results=str(Path(report.console_log).parent) if report.console_log else "",
                    cases=tuple(sorted({".".join(t.id.split(".")[:2]) for t in report.tests
                                        if "." in t.id})))
    if report.bad_parameters:
        rec.status, rec.reason = BAD_INPUT, rp.refused_message([report]) or "refused"
        return rec
    reason = infra_reason(report)
    if reason:
        rec.status, rec.reason = INFRA, reason
        return rec
    sigs = signatures(report)
    if report.status == "pass" and not sigs:
        return rec
    if not sigs:  # a failure the signatures do not name: its status stands for it
        sigs = [Signature(key=f"{report.status}:unclassified", kind=report.status, test="",
                          line_no=0, title=f"{report.status} ({rp.short_verdict(report.verdict)})")]
    index = {t.id: t for t in report.tests}
    rec.status = FAIL
    for s in sigs:
        case, printed = failing_case(report, s, index)
        rec.signatures.append(Found(key=s.key, kind=s.kind, title=s.title, test=s.test, case=case,
                                    count=s.count, replay=replay.command(seed, case, printed)))
    return rec


# --- many runs ------------------------------------------------------------------------------

@dataclass
class SignatureStats:
    """One signature over the counted runs."""
    key: str
    kind: str
    title: str
    count: int        # runs it appeared in
    runs: int         # counted runs
    occurrences: int  # over all those runs
    first_run: int
    first_seed: int
    case: str
    test: str
    replay: str
    results: str      # the first run's results directory

    @property
    def rate(self) -> float:
        return self.count / self.runs if self.runs else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.count, self.runs)

    def to_json(self) -> dict[str, Any]:
        lo, hi = self.interval
        return {"key": self.key, "kind": self.kind, "title": self.title, "count": self.count,
                "runs": self.runs, "rate": round(self.rate, 6),
                "ci95": [round(lo, 6), round(hi, 6)], "occurrences": self.occurrences,
                "first_run": self.first_run, "first_seed": self.first_seed, "case": self.case,
                "test": self.test, "replay": self.replay, "results": self.results}


def counted(records: Sequence[RunRecord]) -> list[RunRecord]:
    return [r for r in records if r.counted]


def aggregate(records: Sequence[RunRecord]) -> list[SignatureStats]:
    """Per signature over the counted runs: most frequent first, then first seen."""
    runs = len(counted(records))
    out: dict[str, SignatureStats] = {}
    for r in records:
        if r.status != FAIL:
            continue
        for s in r.signatures:
            st = out.get(s.key)
            if st is None:
                out[s.key] = SignatureStats(
                    key=s.key, kind=s.kind, title=s.title, count=1, runs=runs,
                    occurrences=s.count, first_run=r.run, first_seed=r.seed, case=s.case,
                    test=s.test, replay=s.replay, results=r.results)
            else:
                st.count += 1
                st.occurrences += s.count
    return sorted(out.values(), key=lambda st: (-st.count, st.first_run))


def progress_line(label: str, runs: int, rec: RunRecord, records: Sequence[RunRecord]) -> str:
    """'stress um-lockdep: run 3/20 seed=...: PASS (2 failures so far: 1 signature)'."""
    failed = [r for r in records if r.status == FAIL]
    keys = {s.key for r in failed for s in r.signatures}
    so_far = f"{len(failed)} failure{'' if len(failed) == 1 else 's'} so far"
    if failed:
        so_far += f": {len(keys)} signature{'' if len(keys) == 1 else 's'}"
    infra = sum(r.status == INFRA for r in records)
    if infra:
        so_far += f"; {infra} infrastructure error{'' if infra == 1 else 's'}"
    head = f"{label}: run {rec.run}/{runs} seed={rec.seed}: "
    if rec.status == PASS:
        what = "PASS"
    elif rec.status == FAIL:
        shown = [s.key for s in rec.signatures[:SHOWN_KEYS]]
        more = len(rec.signatures) - len(shown)
        status = f" ({rec.report_status})" if rec.report_status != "fail" else ""
        what = (f"FAIL{status}: {', '.join(shown)}"
                + (f" (+{more} more)" if more else ""))
    elif rec.status == INFRA:
        what = f"INFRASTRUCTURE ERROR, not counted: {rec.reason}"
    else:
        what = f"BAD INPUT: {rec.reason}"
    return f"{head}{what} ({so_far})"


Boot = Callable[[int, int], rp.Report]  # (run number, seed) -> the boot's report


def _prune(rec: RunRecord, keep_root: Path | None) -> None:
    """Remove a passing run's results (only inside keep_root)."""
    if keep_root is None or not rec.results:
        return
    path = Path(rec.results)
    if path.is_relative_to(keep_root) and path != keep_root and path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
        rec.kept = False


@dataclass
class Outcome:
    """What a loop of boots did."""
    records: list[RunRecord]
    stopped: str = ""          # why it ended before --runs boots ("" when it did not)
    interrupted: bool = False


def stress_loop(boot: Boot, seeds: Iterator[int], runs: int, replay: Replay, *,
                until_fail: bool = False, label: str = "stress", keep_root: Path | None = None,
                progress: Callable[[str], None] = say,
                after: Callable[[list[RunRecord]], None] | None = None,
                stop_when: Callable[[RunRecord], str] | None = None) -> Outcome:
    """Boot runs times (fewer: --until-fail at the first failure, stop_when's reason for a
    run, a refused parameter at once, INFRA_IN_A_ROW infrastructure errors in a row,
    Ctrl-C); classify each boot. Passing runs' results under keep_root are removed but
    for the last; after(records) is called after every boot."""
    out = Outcome(records=[])
    last_pass: RunRecord | None = None
    in_a_row = 0
    for i in range(1, runs + 1):
        seed = next(seeds)
        start = time.monotonic()
        try:
            report = boot(i, seed)
        except DriverError as e:
            rec = RunRecord(run=i, seed=seed, status=INFRA, reason=e.reason)
        except KeyboardInterrupt:
            out.stopped, out.interrupted = f"interrupted during run {i}", True
            break
        else:
            rec = classify(report, i, seed, replay)
            rec.boot_retries = _boot_retries(rec.results)
        rec.elapsed = time.monotonic() - start
        out.records.append(rec)
        if rec.status == PASS:
            if last_pass is not None:
                _prune(last_pass, keep_root)
            last_pass = rec
        progress(progress_line(label, runs, rec, out.records))
        if after is not None:
            after(out.records)
        in_a_row = in_a_row + 1 if rec.status == INFRA else 0
        if rec.status == BAD_INPUT:
            out.stopped = f"run {i}: the suite refused a parameter"
        elif in_a_row >= INFRA_IN_A_ROW:
            out.stopped = (f"{in_a_row} infrastructure errors in a row (runs {i - in_a_row + 1}-{i}): "
                           f"a problem of the machine, not of the kernel under test")
        elif until_fail and rec.status == FAIL:
            out.stopped = f"--until-fail: run {i} failed"
        elif stop_when is not None:
            out.stopped = stop_when(rec)
        if out.stopped:
            break
    return out


def _boot_retries(results: str) -> int:
    """How often the boot was retried after a hang before KUnit (exec.json)."""
    if not results:
        return 0
    retries = read_exec_info(Path(results)).get("boot_retries")
    return len(retries) if isinstance(retries, list) else 0
