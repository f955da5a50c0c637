"""Stress: boot one built kernel many times and count how often, and how, it fails.

Pure steps (testable without a kernel): the seeds of the boots, the class of one boot's
Report (a pass; a failure with its signatures; an infrastructure error, which is not a
run), the per-signature counts with a 95% Wilson score interval, the table and the JSON.
The loop takes the boot as a callable (run number, seed) -> Report; run_stress wires it
to the pipeline: build once, then boot back to back into build/results/stress/<profile>/.
"""
from __future__ import annotations

import os
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from . import pipeline
from . import profile as profiles
from . import report as rp
from .common import DriverError, pct, say, write_json
from .machine import host_cpu_model
from .params import MAX_SEED, SEED_PARAM, draw_seeds, param_name, seed_in_args, without_seed
from .report import replay_env
from .run import read_exec_info
from .signature import Signature, signatures
from .stats import wilson

RUNS = (1, 10000)
RESULTS = Path("results") / "stress"
INFRA_STATUSES = ("boot-timeout", "no-tests")  # the kernel never reached KUnit / ran nothing
INFRA_IN_A_ROW = 3  # this many infrastructure errors in a row stop the stress: the machine's
PASS, FAIL, INFRA, BAD_INPUT = "pass", "fail", "infra", "bad-input"
SHOWN_KEYS = 2  # signatures named in a progress line

STRESS_DESCRIPTION = """Build a profile once (unless --no-build) and boot it --runs times back to
back, each boot with a new random cgroup_kunit.seed (with --seed, or a seed in
--kernel-args: that one every time). Per failure signature: the runs it came in, the
rate with a 95% Wilson interval, the first seed and the command that replays it. A boot
that never reaches KUnit or runs no test is an infrastructure error, not a run. Table
on stdout; stress.json and stress.txt in build/results/stress/<profile>/, beside the
results of every failed run and of the last passing one (run-<i>/)."""
STRESS_EXIT_HELP = """exit status:
  0  no run failed (infrastructure errors aside, when at least one run counted)
  1  at least one run failed: a failure signature
  2  bad input (--runs, --seed, --profile, --filter, --kernel-args, a value the suite
     refused), a build error, or no run counted: every boot was an infrastructure
     error (the kernel hung before KUnit started, or no tests ran)"""


# --- the options ---------------------------------------------------------------------------

def check_options(runs: int, seed: int | None, kernel_args: Sequence[str]) -> int | None:
    """--runs, --seed and a seed in --kernel-args checked; the seed of every boot (None:
    a new one each); DriverError naming the first bad one."""
    low, high = RUNS
    if not low <= runs <= high:
        raise DriverError(f"--runs (or RUNS) must be in {low}..{high}, got {runs}")
    if seed is not None and not 1 <= seed <= MAX_SEED:
        raise DriverError(f"--seed (or SEED) must be in 1..{MAX_SEED}, got {seed}")
    in_args = seed_in_args(kernel_args, "--kernel-args (or KERNEL_ARGS)")
    if seed is not None and in_args is not None and seed != in_args:
        raise DriverError(f"--seed {seed} and {SEED_PARAM}={in_args} in --kernel-args (or "
                          f"KERNEL_ARGS) disagree: give the seed once")
    return seed if seed is not None else in_args


# --- replay -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Replay:
    """How a stress run's failures are replayed: its profile's command, its kernel
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
        return rp.replay_line(self.target, words, self.kernel_args, case or self.filter_glob,
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
    """One boot of a stress run."""
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
    found = rp.replay_case(report, t, index) if t is not None else None
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
    """One signature over the counted runs of a stress run."""
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
    """What a stress loop did."""
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


# --- output -----------------------------------------------------------------------------------

@dataclass
class Stress:
    """A stress run: what was asked, where, and what each boot did."""
    profile: str
    runs: int
    seed: int | None
    until_fail: bool
    kernel_args: list[str]
    filter_glob: str
    machine: dict[str, Any]
    outcome: Outcome
    tree: str = ""
    base: str = ""

    @property
    def records(self) -> list[RunRecord]:
        return self.outcome.records

    def any_failure(self) -> tuple[int, int]:
        """(failed runs, counted runs)."""
        return sum(r.status == FAIL for r in self.records), len(counted(self.records))


def vcpus_of(prof: profiles.Profile) -> int | None:
    """CPUs of the guest: QEMU's -smp, UML's ncpus= (1 when not given)."""
    if prof.arch == "x86_64":
        return prof.qemu_smp or 1
    ncpus = [w.split("=", 1)[1] for w in prof.kernel_args if w.startswith("ncpus=")]
    return int(ncpus[-1]) if ncpus and ncpus[-1].isdigit() else 1


def machine_of(prof: profiles.Profile, accel: str) -> dict[str, Any]:
    return {"cpu_model": host_cpu_model(), "host_cores": os.cpu_count() or 1,
            "profile": prof.name, "arch": prof.arch, "vcpus": vcpus_of(prof), "accel": accel}


def _runs_line(s: Stress) -> str:
    recs = s.records
    n = {st: sum(r.status == st for r in recs) for st in (PASS, FAIL, INFRA, BAD_INPUT)}
    parts = [f"{n[PASS]} passed", f"{n[FAIL]} failed",
             f"{n[INFRA]} infrastructure error{'' if n[INFRA] == 1 else 's'} (not counted)"]
    if n[BAD_INPUT]:
        parts.append(f"{n[BAD_INPUT]} bad input")
    return f"cgkunit stress: {s.profile}, {len(recs)} of {s.runs} boots: {', '.join(parts)}"


def format_table(s: Stress, json_path: Path | None = None) -> str:
    """The whole text report: header, one block per signature, infrastructure errors."""
    m = s.machine
    seed = f"seed {s.seed} every run" if s.seed is not None else "a new seed each run"
    out = [_runs_line(s),
           f"  filter {s.filter_glob or '(whole suite)'}; kernel args "
           f"{' '.join(s.kernel_args) or '(none)'}; {seed}",
           f"  machine: {m.get('cpu_model', '?')}; {m.get('host_cores', '?')} host cores; "
           f"{m.get('vcpus', '?')} vCPUs ({m.get('arch', '?')}"
           + (f", {m['accel']}" if m.get("accel") else "") + ")"]
    if s.tree or s.base:
        out.append(f"  tree {s.tree}  base {s.base}")
    failed, runs = s.any_failure()
    stats = aggregate(s.records)
    rows = [["runs", "rate", "95% interval", "signature"]]
    blocks: list[tuple[list[str], list[str]]] = []

    def row(k: int, key: str) -> list[str]:
        lo, hi = wilson(k, runs)
        return [f"{k}/{runs}", pct(k / runs) if runs else "-", f"{pct(lo)}-{pct(hi)}", key]

    blocks.append((row(failed, "any failure"), []))
    for st in stats:
        where = st.case or st.test or "outside any case"
        kept = f" ({st.results})" if st.results else ""
        blocks.append((row(st.count, st.key),
                       [f"first in run {st.first_run}, seed {st.first_seed}, {where}{kept}",
                        f"replay: {st.replay}"]))
    rows += [b[0] for b in blocks]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]

    def fmt(r: list[str]) -> str:
        return "  " + "  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3]
    out += ["", fmt(rows[0])]
    indent = " " * (2 + widths[0] + 2)
    for first, details in blocks:
        out.append(fmt(first))
        out += [indent + d for d in details]
    if not stats:
        out.append("  no failure signature" + ("" if runs else ": no run counted"))
    infra = [r for r in s.records if r.status in (INFRA, BAD_INPUT)]
    if infra:
        out += ["", "infrastructure errors and bad input (not counted as runs):"]
        out += [f"  run {r.run} seed={r.seed}: {r.reason}"
                + (f" ({r.results})" if r.results and r.kept else "") for r in infra]
    retried = [r for r in s.records if r.boot_retries]
    if retried:
        out.append("booted again after a hang before KUnit: "
                   + ", ".join(f"run {r.run}" for r in retried))
    notes: list[str] = []
    if s.outcome.stopped:
        notes.append(f"stopped: {s.outcome.stopped}")
    if s.until_fail and failed:
        notes.append("--until-fail: the runs end at the first failure, so the rates are "
                     "not an estimate of how often it fails")
    if runs:
        notes.append(f"interval: Wilson score, 95%, over the {runs} counted runs")
    if notes:
        out += [""] + [f"note: {n}" for n in notes]
    if json_path is not None:
        out.append(f"json: {json_path}")
    return "\n".join(out) + "\n"


def to_json(s: Stress) -> dict[str, Any]:
    """stress.json: what was asked, the machine, one record per boot, the per-signature
    summary and the rate of any failure."""
    failed, runs = s.any_failure()
    lo, hi = wilson(failed, runs)
    return {"profile": s.profile, "runs_requested": s.runs, "seed": s.seed,
            "until_fail": s.until_fail, "kernel_args": s.kernel_args, "filter": s.filter_glob,
            "machine": s.machine, "tree": s.tree, "base": s.base,
            "counts": {"boots": len(s.records), "runs": runs, "passed": runs - failed,
                       "failed": failed,
                       "infra": sum(r.status == INFRA for r in s.records),
                       "bad_input": sum(r.status == BAD_INPUT for r in s.records)},
            "any_failure": {"count": failed, "runs": runs,
                            "rate": round(failed / runs, 6) if runs else None,
                            "ci95": [round(lo, 6), round(hi, 6)]},
            "signatures": [st.to_json() for st in aggregate(s.records)],
            "records": [r.to_json() for r in s.records],
            "stopped": s.outcome.stopped or None}


def exit_status(records: Sequence[RunRecord]) -> int:
    """1 when a run failed; 2 when no run counted; else 0 (refused parameters: see run_stress)."""
    if any(r.status == FAIL for r in records):
        return rp.EXIT_FAIL
    return rp.EXIT_PASS if counted(records) else rp.EXIT_ERROR


# --- I/O ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StressOptions:
    """What one `stress` asks for."""
    profile: str
    runs: int = 10
    seed: int | None = None
    until_fail: bool = False
    kernel_args: tuple[str, ...] = ()
    filter_glob: str = ""
    no_build: bool = False
    jobs: int | None = None
    echo: bool = False
    kernel_src: str | None = None
    kernel_ref: str = "HEAD"


def stress_dir(build_root: Path, profile: str) -> Path:
    return build_root / RESULTS / profile


def clear_stress_dir(dest: Path) -> None:
    """Remove an earlier stress run's results of this profile (run-<i>/, stress.json/.txt)."""
    for old in dest.glob("run-*"):
        if old.is_dir():
            shutil.rmtree(old)
    for name in ("stress.json", "stress.txt"):
        (dest / name).unlink(missing_ok=True)


def finish(s: Stress, dest: Path) -> int:
    """Print the table, write stress.json/.txt; the exit status (DriverError, exit status 2,
    after the output when the suite refused a parameter)."""
    json_path = dest / "stress.json"
    text = format_table(s, json_path)
    print(text, end="", flush=True)
    write_json(json_path, to_json(s))
    (dest / "stress.txt").write_text(text)
    refused = [r for r in s.records if r.status == BAD_INPUT]
    if refused:
        raise DriverError(refused[0].reason)
    if s.outcome.interrupted:
        raise KeyboardInterrupt
    return exit_status(s.records)


def run_stress(repo: Path, build_root: Path, opts: StressOptions,
               rng: random.Random | None = None) -> int:
    """Check the input, build once (unless no_build), boot opts.runs times back to back,
    print the table and write the JSON; the exit status."""
    fixed = check_options(opts.runs, opts.seed, opts.kernel_args)
    user_args = without_seed(opts.kernel_args)
    kernel = pipeline.ready_kernel(repo, build_root, pipeline.RunOptions(
        profile=opts.profile, no_build=opts.no_build, kernel_src=opts.kernel_src,
        kernel_ref=opts.kernel_ref, jobs=opts.jobs, echo=opts.echo))
    prof = kernel.profile
    dest = stress_dir(build_root, prof.name)
    clear_stress_dir(dest)
    replay = Replay(target=profiles.make_target(prof.name), kernel_args=tuple(user_args),
                    filter_glob=opts.filter_glob,
                    env=replay_env(opts.kernel_src, opts.kernel_ref))
    s = Stress(profile=prof.name, runs=opts.runs, seed=fixed, until_fail=opts.until_fail,
               kernel_args=user_args, filter_glob=opts.filter_glob,
               machine=machine_of(prof, kernel.accel), outcome=Outcome(records=[]),
               tree=f"{kernel.tree.path} @ {kernel.tree.head_commit[:12]}", base=kernel.base)

    def boot(i: int, seed: int) -> rp.Report:
        return pipeline.boot_and_report(repo, build_root, prof, kernel.tree, kernel.base,
                                        dest / f"run-{i}", [f"{SEED_PARAM}={seed}", *user_args],
                                        opts.filter_glob, shim=kernel.shim, echo=opts.echo)

    def checkpoint(records: list[RunRecord]) -> None:
        s.outcome.records = records
        write_json(dest / "stress.json", to_json(s))

    say(f"stress {prof.name}: {opts.runs} boots"
        + (f", seed {fixed} every time" if fixed is not None else ", a new seed each")
        + (", until the first failure" if opts.until_fail else ""))
    s.outcome = stress_loop(boot, draw_seeds(fixed, rng), opts.runs, replay,
                            until_fail=opts.until_fail, label=f"stress {prof.name}",
                            keep_root=dest, after=checkpoint)
    return finish(s, dest)
