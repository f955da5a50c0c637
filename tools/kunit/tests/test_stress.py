"""stress: the Wilson interval, seeds, the class of one boot, the counts per signature over
recorded consoles, stopping rules, the replay commands, the table and JSON, bad input, the
Makefile target, and the whole command with a fake kunit.py (no kernel is built or booted)."""
from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest

from cgkunit import boots as bt
from cgkunit import cli, params, pipeline
from cgkunit import console as cr
from cgkunit import report as rp
from cgkunit import stress as st
from cgkunit import summary as sm
from cgkunit.common import Context, DriverError
from cgkunit import profile as pf
from cgkunit.profile import list_profiles
from cgkunit.stats import wilson
from conftest import DATA, KUNIT_DIR
from test_tree import git, make_kernel, write_files

REPO = KUNIT_DIR.parent.parent
ENTRY = KUNIT_DIR / "cgkunit.py"
PRINTED_SEED = re.compile(r"cgroup_kunit: seed=\d+")
PASS_LOG = "real_um_all_pass.log"
LOCKDEP_LOG = "real_um_provoke_lockdep.log"
MACHINE = {"cpu_model": "AMD EPYC 7B13", "host_cores": 2, "profile": "um-lockdep", "arch": "um",
           "vcpus": 4, "accel": ""}
REPLAY = bt.Replay(target="make run", kernel_args=("cgroup_kunit.duration_ms=500",),
                   filter_glob="cgroup_*")


def boot_from(tmp: Path, logs: Sequence[str | BaseException], verdicts: dict[str, str] | None = None,
              seen: list[tuple[int, int]] | None = None) -> Callable[[int, int], rp.Report]:
    """A boot that 'runs' the recorded consoles in turn, as a kernel given the seed would:
    the suite prints the seed it was given (an Exception in logs is raised instead)."""
    def boot(i: int, seed: int) -> rp.Report:
        if seen is not None:
            seen.append((i, seed))
        name = logs[(i - 1) % len(logs)]
        if isinstance(name, BaseException):
            raise name
        results = tmp / f"run-{i}"
        results.mkdir(parents=True, exist_ok=True)
        text = (DATA / name).read_text(errors="backslashreplace")
        (results / "console.log").write_text(PRINTED_SEED.sub(f"cgroup_kunit: seed={seed}", text))
        return cr.build_report(results / "console.log", (verdicts or {}).get(name, "completed"),
                               profile="um-lockdep")
    return boot


def loop(tmp: Path, logs: Sequence[str | BaseException], runs: int | None = None,
         lines: list[str] | None = None, **kw: Any) -> bt.Outcome:
    """A stress loop over logs (progress lines into lines)."""
    said: list[str] = [] if lines is None else lines
    return bt.stress_loop(boot_from(tmp, logs, kw.pop("verdicts", None)),
                          params.draw_seeds(kw.pop("seed", None), random.Random(7)),
                          runs or len(logs), REPLAY, progress=said.append, **kw)


def stress_of(out: bt.Outcome, runs: int, **kw: Any) -> st.Stress:
    fields: dict[str, Any] = dict(profile="um-lockdep", runs=runs, seed=None, until_fail=False,
                                  kernel_args=["cgroup_kunit.duration_ms=500"],
                                  filter_glob="cgroup_*", machine=MACHINE, outcome=out)
    fields.update(kw)
    return st.Stress(**fields)


# --- the interval ------------------------------------------------------------------------

@pytest.mark.parametrize("k,n,lo,hi", [
    (0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (5, 10, 0.2366, 0.7634),
    (1, 20, 0.0089, 0.2361), (3, 18, 0.0584, 0.3922), (1, 1, 0.2065, 1.0),
    (0, 100, 0.0, 0.0370), (0, 0, 0.0, 1.0),
])
def test_wilson_known_values(k: int, n: int, lo: float, hi: float) -> None:
    got = wilson(k, n)
    assert got == pytest.approx((lo, hi), abs=5e-5)
    if n:
        assert got[0] <= k / n <= got[1]


def test_wilson_bad_counts() -> None:
    with pytest.raises(ValueError):
        wilson(3, 2)
    with pytest.raises(ValueError):
        wilson(-1, 2)


# --- seeds and kernel arguments ------------------------------------------------------------

def test_seeds_fixed_and_drawn() -> None:
    fixed = params.draw_seeds(42)
    assert [next(fixed) for _ in range(5)] == [42] * 5
    one, two = params.draw_seeds(None, random.Random(9)), params.draw_seeds(None, random.Random(9))
    first = [next(one) for _ in range(50)]
    assert first == [next(two) for _ in range(50)]  # the same driver RNG: the same seeds
    assert all(1 <= s <= params.MAX_SEED for s in first) and len(set(first)) == 50
    other = params.draw_seeds(None, random.Random(10))
    assert [next(other) for _ in range(50)] != first


def test_seed_in_kernel_args() -> None:
    assert params.seed_in_args(["a=1", "cgroup_kunit.threads=8"]) is None
    assert params.seed_in_args(["cgroup_kunit.seed=5", "cgroup_kunit.seed=0x10"]) == 16
    assert params.seed_in_args(["cgroup_kunit.seed=0"]) is None  # 0: the suite picks one
    with pytest.raises(DriverError, match=r"^KERNEL_ARGS: cgroup_kunit.seed=banana: want a number"):
        params.seed_in_args(["cgroup_kunit.seed=banana"])
    with pytest.raises(DriverError, match="want a number"):
        params.seed_in_args([f"cgroup_kunit.seed={2**64}"])
    assert params.without_seed(["cgroup_kunit.seed=5", "x=1", "cgroup_kunit.threads=2"]) == \
        ["x=1", "cgroup_kunit.threads=2"]


def test_check_options() -> None:
    assert st.check_options(1, None, []) is None
    assert st.check_options(10000, 7, ["cgroup_kunit.seed=7"]) == 7
    assert st.check_options(3, None, ["cgroup_kunit.seed=9"]) == 9  # a seed in KERNEL_ARGS
    for runs in (0, -1, 10001):
        with pytest.raises(DriverError, match=rf"^--runs \(or RUNS\) must be in 1..10000, got {runs}$"):
            st.check_options(runs, None, [])
    for seed in (0, 2**64):
        with pytest.raises(DriverError, match=rf"^--seed \(or SEED\) must be in 1..{2**64 - 1}, got {seed}$"):
            st.check_options(1, seed, [])
    with pytest.raises(DriverError, match="--seed 7 and cgroup_kunit.seed=8 in --kernel-args"):
        st.check_options(1, 7, ["cgroup_kunit.seed=8"])


# --- one boot ---------------------------------------------------------------------------------

def test_classify_pass_failure_infra_and_bad_input(tmp_path: Path) -> None:
    boot = boot_from(tmp_path, [PASS_LOG, LOCKDEP_LOG, "07_no_tests.log", "11_bad_parameters.log",
                                "real_um_provoke_warn.log"], verdicts={"real_um_provoke_warn.log":
                                                                       "boot-timeout"})
    recs = [bt.classify(boot(i, 100 + i), i, 100 + i, REPLAY) for i in range(1, 6)]
    assert [r.status for r in recs] == ["pass", "fail", "infra", "bad-input", "infra"]
    assert recs[0].signatures == [] and recs[0].results == str(tmp_path / "run-1")
    assert [s.key for s in recs[1].signatures] == ["lockdep:circular:provoke_a|provoke_b"]
    assert recs[1].signatures[0].case == "cgroup_kunit_oracle.provoke_lockdep"
    assert recs[2].reason == "no tests ran: KUnit found no case"
    assert recs[3].reason.startswith("KERNEL_ARGS: the suite refused cgroup_kunit.")
    assert recs[4].report_status == "boot-timeout"
    assert recs[4].reason == "the kernel hung before KUnit started"
    assert not any(r.counted for r in recs[2:])


def test_one_boot_can_have_several_signatures(tmp_path: Path) -> None:
    rec = bt.classify(boot_from(tmp_path, ["real_kasan_cset_free_without_rcu.log"])(1, 5), 1, 5,
                      REPLAY)
    assert rec.status == "fail" and rec.report_status == "crash"
    assert [(s.key, s.count) for s in rec.signatures] == [
        ("kasan:slab-use-after-free:cs_step", 5), ("oops:gpf:cs_step", 2),
        ("crash:cgroup_css_set.cset_migrate_churn", 1)]
    assert {s.case for s in rec.signatures} == {"cgroup_css_set.cset_migrate_churn"}


def test_a_failure_without_a_signature_is_still_a_failure() -> None:
    report = cr.parse_console((DATA / PASS_LOG).read_text(), "completed")
    report.status = "fail"  # e.g. KUnit planned more cases than it reported
    rec = bt.classify(report, 1, 3, REPLAY)
    assert rec.status == "fail" and [s.key for s in rec.signatures] == ["fail:unclassified"]


# --- replay -----------------------------------------------------------------------------------

def test_replay_commands(tmp_path: Path) -> None:
    rec = bt.classify(boot_from(tmp_path, ["02_lockdep_param_ok.log"])(1, 77), 1, 77, REPLAY)
    assert rec.signatures[0].replay == (
        "make run KERNEL_ARGS=\"cgroup_kunit.seed=77 cgroup_kunit.threads=4 "
        "cgroup_kunit.duration_ms=500\" FILTER='cgroup_ucount.ucount_inc_dec'")
    kcsan = bt.Replay(target=pf.make_target("x86_64-kcsan"),
                      kernel_args=("cgroup_kunit.threads=16", "cgroup_kunit.provoke=kcsan"),
                      env=sm.replay_env("/src/my linux", "v7.3"))
    assert kcsan.command(5, "cgroup_rstat.rstat_base_exact", ["cgroup_kunit.seed=5",
                                                              "cgroup_kunit.threads=8"]) == (
        "KERNEL_SRC='/src/my linux' KERNEL_REF=v7.3 make kcsan KERNEL_ARGS=\"cgroup_kunit.seed=5 "
        "cgroup_kunit.threads=8 cgroup_kunit.provoke=kcsan\" FILTER='cgroup_rstat.rstat_base_exact'")
    # no case (a report during boot): the run's filter, or none
    assert REPLAY.command(9) == ("make run KERNEL_ARGS=\"cgroup_kunit.seed=9 "
                                 "cgroup_kunit.duration_ms=500\" FILTER='cgroup_*'")
    plain = bt.Replay(target=pf.make_target("um-coverage"))
    assert plain.command(9) == ("KERNEL_ARGS=\"cgroup_kunit.seed=9\" "
                                "python3 tools/kunit/cgkunit.py run --profile um-coverage")
    assert sm.replay_env(None) == () and sm.replay_env("/k") == ("KERNEL_SRC=/k",)


def test_boot_splat_replays_with_the_runs_filter(tmp_path: Path) -> None:
    rec = bt.classify(boot_from(tmp_path, ["06_boot_splat.log"])(1, 31), 1, 31, REPLAY)
    sig = rec.signatures[0]
    assert (sig.key, sig.test, sig.case) == ("warning:cgroup_init", "boot", "")
    assert sig.replay == ("make run KERNEL_ARGS=\"cgroup_kunit.seed=31 cgroup_kunit.duration_ms=500\" "
                          "FILTER='cgroup_*'")


def test_make_targets_agree_with_the_makefile() -> None:
    """profile.MAKE_TARGETS is what the Makefile does: each target runs its profile, and no
    other target is a plain run of one profile."""
    recipes: dict[str, list[str]] = {}
    target = ""
    for line in (REPO / "Makefile").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+):", line)
        if m:
            target = m.group(1)
            recipes.setdefault(target, [])
        elif line.startswith("\t") and target and " run --profile " in line:
            recipes[target].append(line.split(" run --profile ", 1)[1].split()[0])
    runs_one = {f"make {t}": runs[0] for t, runs in recipes.items() if len(runs) == 1}
    assert {v: k for k, v in pf.MAKE_TARGETS.items()} == runs_one
    assert set(pf.MAKE_TARGETS) <= set(list_profiles(REPO))
    assert pf.make_target("um-coverage") == "python3 tools/kunit/cgkunit.py run --profile um-coverage"


# --- many boots ----------------------------------------------------------------------------------

LOGS = [PASS_LOG, LOCKDEP_LOG, "07_no_tests.log", PASS_LOG, "02_lockdep_param_ok.log",
        LOCKDEP_LOG, "real_kcsan_racy_update.log", PASS_LOG]


def test_aggregate_over_recorded_consoles(tmp_path: Path) -> None:
    lines: list[str] = []
    out = loop(tmp_path, LOGS, lines=lines)
    recs = out.records
    assert [r.status for r in recs] == ["pass", "fail", "infra", "pass", "fail", "fail", "fail",
                                        "pass"]
    assert out.stopped == "" and len(bt.counted(recs)) == 7
    stats = {s.key: s for s in bt.aggregate(recs)}
    provoke = stats["lockdep:circular:provoke_a|provoke_b"]
    assert (provoke.count, provoke.runs, provoke.first_run, provoke.first_seed) == \
        (2, 7, 2, recs[1].seed)
    assert provoke.rate == pytest.approx(2 / 7)
    assert provoke.interval == pytest.approx(wilson(2, 7))
    # the case prints no parameters of its own: the seed of the boot
    assert provoke.replay == (f"make run KERNEL_ARGS=\"cgroup_kunit.seed={recs[1].seed} "
                              "cgroup_kunit.duration_ms=500\" "
                              "FILTER='cgroup_kunit_oracle.provoke_lockdep'")
    racy = stats["kcsan:data-race:inc_ucount|inc_ucount"]
    assert (racy.count, racy.occurrences, racy.first_run) == (1, 33, 7)
    assert list(stats)[0] == provoke.key  # most frequent first
    assert set(stats) == {provoke.key, "lockdep:circular:&ns->lock|ucounts_lock", racy.key,
                          "warning:dec_ucount", "kcsan:data-race:dec_ucount|inc_ucount"}
    assert lines[2].startswith(f"stress: run 3/8 seed={recs[2].seed}: INFRASTRUCTURE ERROR, "
                               "not counted: no tests ran")
    assert lines[5] == (f"stress: run 6/8 seed={recs[5].seed}: FAIL: "
                        "lockdep:circular:provoke_a|provoke_b (3 failures so far: 2 signatures; "
                        "1 infrastructure error)")
    assert lines[6].startswith(f"stress: run 7/8 seed={recs[6].seed}: FAIL: warning:dec_ucount, "
                               "kcsan:data-race:dec_ucount|inc_ucount (+1 more) (")
    assert lines[0].endswith(": PASS (0 failures so far)")
    assert st.exit_status(recs) == 1


def test_a_boot_that_raises_is_an_infrastructure_error(tmp_path: Path) -> None:
    out = loop(tmp_path, [PASS_LOG, DriverError("kunit.py exec: cannot start qemu"), PASS_LOG])
    assert [r.status for r in out.records] == ["pass", "infra", "pass"]
    assert out.records[1].reason == "kunit.py exec: cannot start qemu"
    assert st.exit_status(out.records) == 0


def test_until_fail_stops_at_the_first_failure(tmp_path: Path) -> None:
    out = loop(tmp_path, LOGS, runs=20, until_fail=True)
    assert [r.status for r in out.records] == ["pass", "fail"]
    assert out.stopped == "--until-fail: run 2 failed"
    table = st.format_table(stress_of(out, 20, until_fail=True))
    assert "note: stopped: --until-fail: run 2 failed" in table
    assert "the rates are not an estimate" in table
    none = loop(tmp_path / "b", [PASS_LOG, "07_no_tests.log"], runs=4, until_fail=True)
    assert len(none.records) == 4 and none.stopped == ""


def test_infrastructure_errors_in_a_row_stop_it(tmp_path: Path) -> None:
    out = loop(tmp_path, [PASS_LOG] + ["07_no_tests.log"] * 3, runs=10)
    assert len(out.records) == 4 and out.stopped.startswith("3 infrastructure errors in a row (runs 2-4)")
    only = loop(tmp_path / "b", ["07_no_tests.log"], runs=10)
    assert len(only.records) == 3 and st.exit_status(only.records) == 2


def test_a_refused_parameter_stops_at_once(tmp_path: Path) -> None:
    out = loop(tmp_path, ["11_bad_parameters.log", PASS_LOG], runs=5)
    assert [r.status for r in out.records] == ["bad-input"]
    assert out.stopped == "run 1: the suite refused a parameter"
    with pytest.raises(DriverError, match="^KERNEL_ARGS: the suite refused cgroup_kunit"):
        st.finish(stress_of(out, 5), tmp_path / "dest")
    assert (tmp_path / "dest" / "stress.json").is_file()  # written before the error


def test_passing_runs_are_removed_but_the_last(tmp_path: Path) -> None:
    logs = [PASS_LOG, LOCKDEP_LOG, PASS_LOG, "07_no_tests.log", PASS_LOG]
    out = loop(tmp_path, logs, keep_root=tmp_path)
    assert [(r.run, r.kept) for r in out.records] == [(1, False), (2, True), (3, False), (4, True),
                                                      (5, True)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run-2", "run-4", "run-5"]
    assert st.to_json(stress_of(out, 5))["records"][0]["results"] is None
    elsewhere = loop(tmp_path / "x", logs, keep_root=tmp_path / "other")  # never outside it
    assert all(r.kept for r in elsewhere.records) and (tmp_path / "x" / "run-1").is_dir()


def test_interrupt_keeps_what_ran(tmp_path: Path) -> None:
    out = loop(tmp_path, [PASS_LOG, KeyboardInterrupt()], runs=5)
    assert len(out.records) == 1 and out.interrupted
    assert out.stopped == "interrupted during run 2"
    with pytest.raises(KeyboardInterrupt):
        st.finish(stress_of(out, 5), tmp_path / "dest")
    assert json.loads((tmp_path / "dest" / "stress.json").read_text())["counts"]["runs"] == 1


# --- output --------------------------------------------------------------------------------------

def test_table(tmp_path: Path) -> None:
    out = loop(tmp_path, LOGS)
    seed = out.records[1].seed
    text = st.format_table(stress_of(out, 8), Path("/b/results/stress/um-lockdep/stress.json"))
    lines = text.splitlines()
    assert lines[:3] == [
        "cgkunit stress: um-lockdep, 8 of 8 boots: 3 passed, 4 failed, "
        "1 infrastructure error (not counted)",
        "  filter cgroup_*; kernel args cgroup_kunit.duration_ms=500; a new seed each run",
        "  machine: AMD EPYC 7B13; 2 host cores; 4 vCPUs (um)"]
    assert lines[4].split() == ["runs", "rate", "95%", "interval", "signature"]
    assert lines[5].split() == ["4/7", "57.1%", "25.0%-84.2%", "any", "failure"]
    assert lines[6].split() == ["2/7", "28.6%", "8.2%-64.1%", "lockdep:circular:provoke_a|provoke_b"]
    assert lines[7].strip() == (f"first in run 2, seed {seed}, cgroup_kunit_oracle.provoke_lockdep "
                                f"({tmp_path / 'run-2'})")
    assert lines[8].strip().startswith(f"replay: make run KERNEL_ARGS=\"cgroup_kunit.seed={seed} ")
    assert "infrastructure errors and bad input (not counted as runs):" in lines
    assert f"  run 3 seed={out.records[2].seed}: no tests ran: KUnit found no case " \
           f"({tmp_path / 'run-3'})" in lines
    assert lines[-2:] == ["note: interval: Wilson score, 95%, over the 7 counted runs",
                          "json: /b/results/stress/um-lockdep/stress.json"]


def test_table_when_nothing_failed(tmp_path: Path) -> None:
    out = loop(tmp_path, [PASS_LOG] * 3, seed=42)
    text = st.format_table(stress_of(out, 3, seed=42))
    assert "kernel args cgroup_kunit.duration_ms=500; seed 42 every run" in text
    assert re.search(r"^  0/3 +0\.0% +0\.0%-56\.1% +any failure$", text, re.M)
    assert "  no failure signature\n" in text
    assert all(r.seed == 42 for r in out.records) and st.exit_status(out.records) == 0


def test_json_shape(tmp_path: Path) -> None:
    out = loop(tmp_path, LOGS)
    data = json.loads(json.dumps(st.to_json(stress_of(out, 8))))
    assert set(data) == {"profile", "runs_requested", "seed", "until_fail", "kernel_args", "filter",
                         "machine", "tree", "base", "counts", "any_failure", "signatures",
                         "records", "stopped"}
    assert data["machine"] == MACHINE
    assert data["counts"] == {"boots": 8, "runs": 7, "passed": 3, "failed": 4, "infra": 1,
                              "bad_input": 0}
    assert data["any_failure"]["count"] == 4 and data["any_failure"]["runs"] == 7
    assert data["any_failure"]["ci95"] == [round(x, 6) for x in wilson(4, 7)]
    assert len(data["records"]) == 8
    rec = data["records"][1]
    assert set(rec) == {"run", "seed", "status", "report_status", "verdict", "signatures",
                        "elapsed", "results", "reason", "boot_retries"}
    assert rec["status"] == "fail" and rec["signatures"] == ["lockdep:circular:provoke_a|provoke_b"]
    assert data["records"][2]["status"] == "infra" and data["records"][2]["signatures"] == []
    sig = data["signatures"][0]
    assert set(sig) == {"key", "kind", "title", "count", "runs", "rate", "ci95", "occurrences",
                        "first_run", "first_seed", "case", "test", "replay", "results"}
    assert (sig["count"], sig["runs"], sig["first_run"]) == (2, 7, 2)
    assert data["stopped"] is None


# --- the command line ----------------------------------------------------------------------------

def run_entry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ENTRY), *args], capture_output=True, text=True,
                          cwd="/", timeout=60)


@pytest.mark.parametrize("args,message", [
    (["--runs", "0"], "--runs (or RUNS) must be in 1..10000, got 0"),
    (["--runs", "-2"], "--runs (or RUNS) must be in 1..10000, got -2"),
    (["--runs", "many"], "argument --runs: invalid int value: 'many'"),
    (["--seed", "0"], f"--seed (or SEED) must be in 1..{2**64 - 1}, got 0"),
    (["--profile", "no-such"], "unknown profile 'no-such' (known: "),
    (["--filter=-x"], "bad --filter (or FILTER) '-x': a KUnit filter glob cannot start with '-'"),
    (["--kernel-args", "cgroup_kunit.sed=5"], "KERNEL_ARGS: unknown parameter cgroup_kunit.sed "),
    (["--kernel-args", "cgroup_kunit.seed=banana"],
     "--kernel-args (or KERNEL_ARGS): cgroup_kunit.seed=banana: want a number"),
    (["--kernel-args", "cgroup_kunit.seed=5", "--seed", "6"],
     "--seed 6 and cgroup_kunit.seed=5 in --kernel-args (or KERNEL_ARGS) disagree"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    profile = [] if "--profile" in args else ["--profile", "um-lockdep"]
    proc = run_entry("--build-dir", str(tmp_path), "stress", *profile, *args)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"cgkunit: error: {message}"), proc.stderr
    assert proc.stdout == "" and not any(tmp_path.iterdir())


def test_help() -> None:
    proc = run_entry("stress", "--help")
    assert proc.returncode == 0
    assert "--until-fail" in proc.stdout and "1  at least one run failed" in proc.stdout


def test_makefile_stress_target() -> None:
    text = (REPO / "Makefile").read_text()
    # PROFILE, RUNS, SEED and UNTIL_FAIL reach it through the environment (test_makefile)
    assert re.search(r"^stress: deps\n\t\$\(CGKUNIT\) stress$", text, re.M)
    args = cli.make_parser().parse_args(["stress"])
    assert (args.profile, args.runs, args.seed, args.until_fail) == ("um-lockdep", 10, None, False)
    assert re.search(r"^\.PHONY:.* stress\b", text, re.M)
    assert re.search(r'^\t@echo "make stress ', text, re.M)
    assert re.search(r"^CGKUNIT_VARS := .*\bKERNEL_ARGS\b.*\bFILTER\b", text, re.M)
    test_recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", text, re.M)
    assert test_recipe is not None and "stress" not in test_recipe.group(0)


# --- the whole command, with a fake kunit.py ------------------------------------------------------

FAKE_KUNIT = '''#!/usr/bin/env python3
import os, re, sys
args = sys.argv[1:]
if args[0] == "exec":
    fake = os.environ["FAKE_DIR"]
    n = len([f for f in os.listdir(fake) if f.endswith(".args")])
    with open(os.path.join(fake, "%d.args" % (n + 1)), "w") as f:
        f.write("\\n".join(args))
    logs = os.environ["FAKE_CONSOLES"].split(",")
    seed = [a.split("=")[-1] for a in args if a.startswith("--kernel_args=cgroup_kunit.seed=")][0]
    with open(logs[n % len(logs)], errors="replace") as f:
        print(re.sub(r"cgroup_kunit: seed=\\d+", "cgroup_kunit: seed=" + seed, f.read()), end="")
'''


@pytest.fixture
def stress_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    kernel = make_kernel(tmp_path / "linux")
    write_files(kernel, {"tools/testing/kunit/kunit.py": FAKE_KUNIT})
    git(kernel, "commit", "-q", "-am", "fake kunit.py")
    repo, build, fake = tmp_path / "repo", tmp_path / "build", tmp_path / "fake"
    write_files(repo, {"kernel/BASE": "package=x\n", "kernel/series": "",
                       "lib/kunit-cgroup/Kconfig": "config CGROUP_KUNIT_TEST\n",
                       "tools/kunit/profiles/um-lockdep.config":
                           "#@ arch: um\n#@ kernel_args: seccomp=on ncpus=4\n",
                       ".kunitconfig": "CONFIG_KUNIT=y\n"})
    write_files(build, {"out/um-lockdep/linux": "elf"})
    fake.mkdir()
    monkeypatch.setenv("FAKE_DIR", str(fake))
    return {"kernel": kernel, "repo": repo, "build": build, "fake": fake}


def test_stress_end_to_end(stress_env: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    env = stress_env
    logs = [PASS_LOG, LOCKDEP_LOG, PASS_LOG, "07_no_tests.log", PASS_LOG]
    monkeypatch.setenv("FAKE_CONSOLES", ",".join(str(DATA / n) for n in logs))
    dest = env["build"] / "results" / "stress" / "um-lockdep"
    write_files(dest, {"run-9/console.log": "an earlier stress run", "stress.json": "{}"})
    opts = st.StressOptions(profile="um-lockdep", runs=5, no_build=True, kernel_src=str(env["kernel"]),
                            kernel_args=("cgroup_kunit.duration_ms=500",), filter_glob="cgroup_kunit*")
    assert st.run_stress(Context(env["repo"], env["build"]), opts, rng=random.Random(3)) == 1
    out, err = capsys.readouterr()
    expect = params.draw_seeds(None, random.Random(3))
    seeds = [next(expect) for _ in range(5)]
    for i, seed in enumerate(seeds, 1):
        args = (env["fake"] / f"{i}.args").read_text().splitlines()
        assert [a for a in args if a.startswith("--kernel_args=")] == [
            "--kernel_args=seccomp=on", "--kernel_args=ncpus=4",
            f"--kernel_args=cgroup_kunit.seed={seed}", "--kernel_args=cgroup_kunit.duration_ms=500",
            "--kernel_args=cgroup_kunit.selfcheck=1"]
        assert f"--build_dir={env['build'] / 'out' / 'um-lockdep'}" in args and args[-1] == "cgroup_kunit*"
    assert f"[cgkunit] stress um-lockdep: run 2/5 seed={seeds[1]}: FAIL: " \
           "lockdep:circular:provoke_a|provoke_b (1 failure so far: 1 signature)" in err
    assert sorted(p.name for p in dest.iterdir()) == ["run-2", "run-4", "run-5", "stress.json",
                                                      "stress.txt"]
    assert (dest / "run-2" / "summary.json").is_file() and (dest / "run-2" / "exec.json").is_file()
    assert (dest / "stress.txt").read_text() == out
    assert out.startswith("cgkunit stress: um-lockdep, 5 of 5 boots: 3 passed, 1 failed, "
                          "1 infrastructure error (not counted)\n")
    assert f"replay: KERNEL_SRC={env['kernel']} make run KERNEL_ARGS=\"cgroup_kunit.seed={seeds[1]} " \
           "cgroup_kunit.duration_ms=500\" FILTER='cgroup_kunit_oracle.provoke_lockdep'" in out
    assert f"run 4 seed={seeds[3]}: no tests ran: KUnit found no case matching 'cgroup_kunit*'" in out
    data = json.loads((dest / "stress.json").read_text())
    assert [r["seed"] for r in data["records"]] == seeds
    assert [r["status"] for r in data["records"]] == ["pass", "fail", "pass", "infra", "pass"]
    assert data["machine"]["vcpus"] == 4 and data["machine"]["arch"] == "um"
    assert data["tree"].startswith(str(env["build"] / "trees"))
    assert data["signatures"][0]["first_seed"] == seeds[1]
    assert data["signatures"][0]["results"] == str(dest / "run-2")


def test_stress_with_a_fixed_seed_until_it_fails(stress_env: dict[str, Path],
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    env = stress_env
    monkeypatch.setenv("FAKE_CONSOLES", ",".join(str(DATA / n) for n in (PASS_LOG, PASS_LOG, LOCKDEP_LOG)))
    # a filter that leaves cgroup_migrate_dynmods out: one boot a run
    opts = st.StressOptions(profile="um-lockdep", runs=10, until_fail=True, no_build=True,
                            kernel_src=str(env["kernel"]), kernel_args=("cgroup_kunit.seed=77",),
                            filter_glob="cgroup_kunit_oracle*")
    assert st.run_stress(Context(env["repo"], env["build"]), opts) == 1
    out = capsys.readouterr().out
    data = json.loads((env["build"] / "results" / "stress" / "um-lockdep" / "stress.json").read_text())
    assert [r["seed"] for r in data["records"]] == [77, 77, 77] and data["seed"] == 77
    assert data["kernel_args"] == [] and data["stopped"] == "--until-fail: run 3 failed"
    for i in (1, 2, 3):
        args = (env["fake"] / f"{i}.args").read_text().splitlines()
        assert [a for a in args if a.startswith("--kernel_args=cgroup_kunit")] == [
            "--kernel_args=cgroup_kunit.seed=77", "--kernel_args=cgroup_kunit.selfcheck=1"]
    assert "seed 77 every run" in out
    assert f"replay: KERNEL_SRC={env['kernel']} make run KERNEL_ARGS=\"cgroup_kunit.seed=77\" " \
           "FILTER='cgroup_kunit_oracle.provoke_lockdep'" in out


def test_stress_without_a_built_kernel(stress_env: dict[str, Path]) -> None:
    (stress_env["build"] / "out" / "um-lockdep" / "linux").unlink()
    opts = st.StressOptions(profile="um-lockdep", runs=2, no_build=True,
                            kernel_src=str(stress_env["kernel"]))
    with pytest.raises(DriverError, match="no kernel built for um-lockdep"):
        st.run_stress(Context(stress_env["repo"], stress_env["build"]), opts)
    assert not (stress_env["fake"] / "1.args").exists()


def test_cli_dispatches_stress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cgkunit import cli
    seen: list[st.StressOptions] = []

    def fake(ctx: Context, opts: st.StressOptions, rng: Any = None) -> int:
        seen.append(opts)
        return 0
    monkeypatch.setattr(st, "run_stress", fake)
    monkeypatch.setenv("FILTER", "cgroup_rstat*")
    monkeypatch.setenv("KERNEL_ARGS", "cgroup_kunit.threads=8")
    assert cli.main(["--build-dir", str(tmp_path), "stress", "--profile", "um-lockdep",
                     "--runs", "3", "--seed", "11", "--until-fail", "--no-build"]) == 0
    assert seen == [st.StressOptions(profile="um-lockdep", runs=3, seed=11, until_fail=True,
                                     kernel_args=("cgroup_kunit.threads=8",),
                                     filter_glob="cgroup_rstat*", no_build=True)]
