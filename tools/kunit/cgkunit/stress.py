"""Stress: boot one built kernel many times and count how often, and how, it fails.

The boots, their classes and the per-signature counts are the engine's (boots.py); here
the options, the table with a 95% Wilson score interval per signature, the JSON, and
run_stress, which wires the engine to the pipeline: build once, then boot back to back
into build/results/stress/<profile>/.
"""
from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from . import pipeline
from . import profile as profiles
from . import report as rp
from .boots import (BAD_INPUT, FAIL, INFRA, PASS, Outcome, Replay, RunRecord, aggregate, counted,
                    stress_loop)
from .common import Context, DriverError, pct, say, write_json
from .machine import host_cpu_model
from .params import MAX_SEED, SEED_PARAM, draw_seeds, seed_in_args, without_seed
from .stats import wilson
from .summary import replay_env

RUNS = (1, 10000)
RESULTS = Path("results") / "stress"

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


def run_stress(ctx: Context, opts: StressOptions, rng: random.Random | None = None) -> int:
    """Check the input, build once (unless no_build), boot opts.runs times back to back,
    print the table and write the JSON; the exit status."""
    fixed = check_options(opts.runs, opts.seed, opts.kernel_args)
    user_args = without_seed(opts.kernel_args)
    kernel = pipeline.ready_kernel(ctx, pipeline.RunOptions(
        profile=opts.profile, no_build=opts.no_build, kernel_src=opts.kernel_src,
        kernel_ref=opts.kernel_ref, jobs=opts.jobs, echo=opts.echo))
    prof = kernel.profile
    dest = stress_dir(ctx.build, prof.name)
    clear_stress_dir(dest)
    replay = Replay(target=profiles.make_target(prof.name), kernel_args=tuple(user_args),
                    filter_glob=opts.filter_glob,
                    env=replay_env(opts.kernel_src, opts.kernel_ref))
    s = Stress(profile=prof.name, runs=opts.runs, seed=fixed, until_fail=opts.until_fail,
               kernel_args=user_args, filter_glob=opts.filter_glob,
               machine=machine_of(prof, kernel.accel), outcome=Outcome(records=[]),
               tree=f"{kernel.tree.path} @ {kernel.tree.head_commit[:12]}", base=kernel.base)

    def boot(i: int, seed: int) -> rp.Report:
        return pipeline.boot_and_report(ctx, prof, kernel.tree, kernel.base,
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
