"""bisect: the step classifier over recorded consoles, the confidence arithmetic, seeds,
bad input (exit status 2, one line), the saved state, and git bisect run driven over a
tiny synthetic git tree with a fake build-and-boot (no kernel is built or booted)."""
from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from cgkunit import bisection as bs
from cgkunit import cli
from cgkunit import console as cr
from cgkunit import boots as bt
from cgkunit.common import Context, DriverError
from cgkunit.params import MAX_SEED
from conftest import DATA, KUNIT_DIR
from test_tree import git, make_kernel, write_files

LEAK = "fail:cgroup_ucount.rlimit_get_put:(init, uid N): reference count not back"
LOCKDEP = "lockdep:circular:provoke_a|provoke_b"
REPLAY = bt.Replay(target="make run")


def record(tmp: Path, log: str, run: int = 1, seed: int = 100) -> bt.RunRecord:
    """The class stress gives one boot of a recorded console."""
    results = tmp / f"run-{run}-{log}"
    results.mkdir(parents=True, exist_ok=True)
    (results / "console.log").write_text((DATA / log).read_text(errors="backslashreplace"))
    report = cr.build_report(results / "console.log", "completed", profile="um-lockdep")
    return bt.classify(report, run, seed, REPLAY)


def records(tmp: Path, *logs: str) -> list[bt.RunRecord]:
    return [record(tmp, log, i, 100 + i) for i, log in enumerate(logs, 1)]


# --- the step classifier --------------------------------------------------------------------

def test_a_run_with_the_signature_is_bad(tmp_path: Path) -> None:
    recs = records(tmp_path, "real_um_all_pass.log", "real_um_leaked_reference.log")
    v = bs.judge("c" * 40, "subject", "step 1", recs, LEAK)
    assert (v.verdict, v.code, v.runs, v.matches, v.clean, v.seeds) == ("bad", 1, 2, 1, 1, [102])
    assert "fail:cgroup_ucount.ucount_all_paths:(init, uid N): reference count not back" in v.other
    assert v.rate == 0.5


def test_a_signature_glob_matches(tmp_path: Path) -> None:
    recs = records(tmp_path, "real_um_leaked_reference.log")
    assert bs.judge("c", "", "BAD", recs, "fail:cgroup_ucount.rlimit_get_put*").verdict == "bad"
    assert bs.judge("c", "", "BAD", recs, "fail:cgroup_rstat*").verdict == "skip"


def test_clean_runs_are_good(tmp_path: Path) -> None:
    v = bs.judge("c", "", "step 2", records(tmp_path, *["real_um_all_pass.log"] * 3), LEAK)
    assert (v.verdict, v.code, v.runs, v.clean, v.other) == ("good", 0, 3, 3, [])


def test_only_other_signatures_skip(tmp_path: Path) -> None:
    v = bs.judge("c", "", "step 1", records(tmp_path, "real_um_provoke_lockdep.log"), LEAK)
    assert (v.verdict, v.code) == ("skip", 125)
    assert v.reason == f"only other signatures: {LOCKDEP}"


def test_other_signatures_beside_clean_runs_are_good_with_the_clean_runs_only(tmp_path: Path) -> None:
    recs = records(tmp_path, "real_um_provoke_lockdep.log", "real_um_all_pass.log")
    v = bs.judge("c", "", "step 1", recs, LEAK)
    assert (v.verdict, v.clean, v.runs, v.other) == ("good", 1, 2, [LOCKDEP])


def test_a_commit_where_the_case_does_not_run_is_skipped(tmp_path: Path) -> None:
    recs = records(tmp_path, "real_um_all_pass.log", "real_um_all_pass.log")
    assert "cgroup_ucount.rlimit_get_put" in recs[0].cases
    v = bs.judge("c", "", "step 1", recs, LEAK, cases=["cgroup_ucount.rlimit_get_put"])
    assert (v.verdict, v.clean) == ("good", 2)
    v = bs.judge("c", "", "step 1", recs, LEAK, cases=["cgroup_v1.v1_mount_churn", "cgroup_x.y"])
    assert (v.verdict, v.clean, v.runs) == ("skip", 0, 2)
    assert v.reason == ("cgroup_v1.v1_mount_churn, cgroup_x.y did not run (a commit before the "
                        "helper patches they need?)")
    bad = records(tmp_path, "real_um_leaked_reference.log")
    assert bs.judge("c", "", "BAD", bad, LEAK).cases == ["cgroup_ucount.rlimit_get_put"]


def test_no_run_counted_or_a_build_error_skips(tmp_path: Path) -> None:
    v = bs.judge("c", "", "step 1", records(tmp_path, "07_no_tests.log"), LEAK)
    assert v.verdict == "skip" and v.reason.startswith("no run counted: no tests ran")
    v = bs.judge("c", "", "step 1", [], LEAK, "build of um-lockdep failed: error: x")
    assert (v.verdict, v.reason, v.runs) == ("skip", "build of um-lockdep failed: error: x", 0)


def test_auto_takes_the_most_frequent_signature_at_bad(tmp_path: Path) -> None:
    recs = records(tmp_path, "real_um_provoke_lockdep.log", "real_um_leaked_reference.log",
                   "real_um_leaked_reference.log")
    assert bs.auto_signature(recs) == LEAK
    assert bs.auto_signature(records(tmp_path, "real_um_all_pass.log")) == ""
    v = bs.judge("c", "", "BAD", recs, bs.auto_signature(recs))
    assert (v.matches, v.runs, v.seeds, v.signature) == (2, 3, [102, 103], LEAK)


def test_verdicts_survive_json() -> None:
    v = bs.Verdict(commit="a" * 40, subject="s", role="step 3", verdict="good", runs=4, clean=4,
                   seeds=[1], other=["x:y"], elapsed=12.34, signature=LEAK)
    back = bs.Verdict.from_json(json.loads(json.dumps(v.to_json())))
    assert back == bs.Verdict(**{**v.__dict__, "elapsed": 12.3})


# --- confidence -----------------------------------------------------------------------------------

def good(clean: int) -> bs.Verdict:
    return bs.Verdict(commit="g", subject="", role="step", verdict="good", runs=clean, clean=clean)


def test_confidence_the_syzbot_way() -> None:
    assert bs.confidence(1.0, [good(1), good(3)]) == 1.0
    assert bs.good_factor(0.5, 1) == 0.5
    assert bs.good_factor(0.3, 0) == 0.0
    skip = bs.Verdict(commit="s", subject="", role="step", verdict="skip")
    bad = bs.Verdict(commit="b", subject="", role="step", verdict="bad", runs=1, matches=1)
    assert math.isclose(bs.confidence(0.3, [good(10), bad, skip, good(5)]),
                        (1 - 0.7 ** 10) * (1 - 0.7 ** 5))
    assert bs.confidence(0.3, []) == 1.0
    # p = 0.1 and 10 clean runs at each of three good steps: 0.65^3, withheld
    assert bs.confidence(0.1, [good(10)] * 3) < bs.MIN_CONFIDENCE


def state_with(log: str, p: float | None, verdicts: list[bs.Verdict]) -> dict[str, Any]:
    state = bs.new_state({"profile": "um-lockdep"}, Path("/c"), None, 3, 8)
    state.update(log=log, p=p, verdicts={v.commit: v.to_json() for v in verdicts})
    return state


FOUND_LOG = """git bisect start 'b' 'g'
# good: [1111111111111111111111111111111111111111] one
# first bad commit: [2222222222222222222222222222222222222222] two
"""


def test_a_result_below_the_bar_is_withheld() -> None:
    two = bs.Verdict(commit="2" * 40, subject="two", role="step 2", verdict="bad", runs=1, matches=1)
    res = bs.result_of(state_with(FOUND_LOG, 0.2, [good(10), two]), "")
    assert res["found"] and res["commit"] == "2" * 40 and res["subject"] == "two"
    many = [bs.Verdict(commit=f"{i}", subject="", role=f"step {i}", verdict="good", runs=10,
                       clean=10) for i in range(3)]
    res = bs.result_of(state_with(FOUND_LOG, 0.1, [*many, two]), "")
    assert not res["found"] and res["commit"] == "" and res["candidate"] == "2" * 40
    assert res["reason"] == "confidence 0.28 is below 0.66: the result (222222222222) is withheld"
    assert res["final"]


def test_results_of_skips_stops_and_endpoints() -> None:
    log = ("# only skipped commits left to test\n"
           "# possible first bad commit: [3333333333333333333333333333333333333333] c3\n"
           "# possible first bad commit: [4444444444444444444444444444444444444444] c4\n")
    res = bs.result_of(state_with(log, 1.0, []), "")
    assert res["reason"] == ("only skipped commits were left: the first bad commit is one of "
                             "333333333333, 444444444444") and res["final"] and not res["found"]
    res = bs.result_of(state_with("# bad: [5] x\n", 1.0, []), "")
    assert not res["final"] and "the same command again continues it" in res["reason"]
    res = bs.result_of(state_with("", None, []), "BAD does not reproduce: no run of 3 had the signature")
    assert res["final"] and res["confidence"] == 0.0


def test_step_seeds_replay_bad_first() -> None:
    seeds = bs.step_seeds([7, 9], None, random.Random(1))
    first = [next(seeds) for _ in range(4)]
    assert first[:2] == [7, 9] and all(1 <= s <= MAX_SEED for s in first[2:])
    fixed = bs.step_seeds([5], 5)
    assert [next(fixed) for _ in range(3)] == [5, 5, 5]


# --- bad input ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["0", "x", "", "1001", "-3"])
def test_runs_must_be_a_number_in_range(text: str) -> None:
    with pytest.raises(DriverError, match=r"RUNS \(--runs\) must be a number in 1\.\.1000"):
        bs.parse_runs(text)
    assert bs.parse_runs(" 12 ") == 12


@pytest.mark.parametrize("spec", ["foo", "lockdep:", "lockdep", "nonsense:x", "pass:x", ":x"])
def test_unknown_signature_formats(spec: str) -> None:
    with pytest.raises(DriverError, match="unknown format"):
        bs.check_signature(spec)


@pytest.mark.parametrize("spec", ["auto", LEAK, LOCKDEP, "kcsan:data-race:*", "crash:boot",
                                  "boot-timeout:unclassified"])
def test_known_signature_formats(spec: str) -> None:
    assert bs.check_signature(spec) == spec


def test_series_names_and_prefixes() -> None:
    names = ["0001-a.patch", "0002-b.patch", "0012-c.patch"]
    assert bs.series_pick(names, "base", "GOOD") == 0
    assert bs.series_pick(names, "0012", "BAD") == 3
    assert bs.series_pick(names, "0002-b.patch", "BAD") == 2
    with pytest.raises(DriverError, match="GOOD=0099: no patch of kernel/series starts with it"):
        bs.series_pick(names, "0099", "GOOD")
    with pytest.raises(DriverError, match="BAD=000: 2 patches of kernel/series start with it"):
        bs.series_pick(names, "000", "BAD")


@pytest.fixture
def project(tmp_path: Path) -> dict[str, Path]:
    """A project (profile, series, suite) and a KERNEL_SRC with nine commits: version 1..9."""
    kernel = make_kernel(tmp_path / "linux")
    for n in range(1, 10):
        write_files(kernel, {"version": f"{n}\n"})
        git(kernel, "add", "version")
        git(kernel, "commit", "-q", "-m", f"change {n}")
    repo, build = tmp_path / "repo", tmp_path / "build"
    write_files(repo, {"kernel/BASE": "package=x\n", "kernel/series": "0001-a.patch\n0002-b.patch\n",
                       "kernel/patches/0001-a.patch": "", "kernel/patches/0002-b.patch": "",
                       "lib/kunit-cgroup/Kconfig": "config CGROUP_KUNIT_TEST\n",
                       "lib/kunit-cgroup/harness.c": "module_param_cb(seed, &ops, &seed, 0444);\n",
                       "tools/kunit/profiles/um-lockdep.config": "#@ arch: um\n",
                       ".kunitconfig": "CONFIG_KUNIT=y\n"})
    build.mkdir()
    return {"kernel": kernel, "repo": repo, "build": build}


def run_cli(args: list[str]) -> int:
    """cli.main's exit status, argparse's errors (SystemExit) included."""
    try:
        return cli.main(args)
    except SystemExit as e:
        return int(e.code or 0)


def commit_of(kernel: Path, n: int) -> str:
    return git(kernel, "rev-parse", f"HEAD~{9 - n}")


@pytest.mark.parametrize("good,bad,dirty,message", [
    ("HEAD", "HEAD~3", False, "GOOD=HEAD is not an ancestor of BAD=HEAD~3"),
    ("HEAD~2", "HEAD~2", False, "GOOD=HEAD~2 and BAD=HEAD~2 are the same commit"),
    ("nosuch", "HEAD", False, "GOOD=nosuch: unknown revision in KERNEL_SRC "),
    ("HEAD~3", "v9", False, "BAD=v9: unknown revision in KERNEL_SRC "),
    ("HEAD~3", "HEAD", True, "1 uncommitted change(s) to tracked files; bisect tests commits "
                             "only: commit or stash them first"),
])
def test_bad_revisions_are_one_line_and_exit_2(project: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str], good: str,
                                               bad: str, dirty: bool, message: str) -> None:
    if dirty:
        write_files(project["kernel"], {"version": "dirty\n"})
    monkeypatch.chdir(project["repo"])
    monkeypatch.setattr(bs, "test_commit", no_boot)
    code = run_cli(["--build-dir", str(project["build"]), "bisect", "--kernel-src",
                    str(project["kernel"]), "--good", good, "--bad", bad])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert err.startswith("cgkunit: error: ")
    assert not (project["build"] / "bisect").exists()


@pytest.mark.parametrize("args,message", [
    (["--runs", "0"], "RUNS (--runs) must be a number in 1..1000, got '0'"),
    (["--runs", "ten"], "RUNS (--runs) must be a number in 1..1000, got 'ten'"),
    (["--profile", "nope"], "unknown profile 'nope'"),
    (["--signature", "wat"], "SIGNATURE='wat': unknown format"),
    (["--good", ""], "GOOD (--good) is required"),
    (["--kernel-args", "cgroup_kunit.nope=1"], "unknown parameter cgroup_kunit.nope"),
])
def test_bad_options_are_one_line_and_exit_2(project: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str], args: list[str],
                                             message: str) -> None:
    monkeypatch.chdir(project["repo"])
    monkeypatch.setattr(bs, "test_commit", no_boot)
    code = run_cli(["--build-dir", str(project["build"]), "bisect", "--kernel-src",
                    str(project["kernel"]), "--good", "HEAD~3", "--bad", "HEAD", *args])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err


def test_series_mode_checks_names_before_anything(project: dict[str, Path],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    opts = bs.BisectOptions(good="0002", bad="0001")
    with pytest.raises(DriverError, match="GOOD=0002 is not an ancestor of BAD=0001: GOOD must come "
                                          "before BAD in kernel/series"):
        bs.check_input(Context(project["repo"], project["build"]), opts)
    target, fixed = bs.check_input(Context(project["repo"], project["build"]),
                                   bs.BisectOptions(good="base", bad="0002",
                                                    kernel_args=("cgroup_kunit.seed=5",)))
    assert target == bs.Target(src=None, good="0", bad="2") and fixed == 5


def test_series_mode_bisects_the_prepared_trees_commits(project: dict[str, Path],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from cgkunit import pipeline
    from cgkunit.tree import PreparedTree
    tree = PreparedTree(path=project["kernel"], base_commit="b" * 40, head_commit="h" * 40,
                        patches=[("0001-a.patch", "1" * 40), ("0002-b.patch", "2" * 40)])
    monkeypatch.setattr(pipeline, "prepare", lambda *a: (tree, "base"))
    got = bs.series_commits(Context(project["repo"], project["build"]),
                            bs.Target(src=None, good="0", bad="2"))
    assert got == (project["kernel"], "b" * 40, "2" * 40)


# --- git bisect run over a synthetic tree, with a fake build and boot -------------------------------------

def no_boot(*args: Any, **kw: Any) -> Any:
    raise AssertionError("nothing may be built or booted here")


def run_of(n: int, seed: int, bad: bool) -> bt.RunRecord:
    if not bad:
        return bt.RunRecord(run=n, seed=seed, status=bt.PASS, report_status="pass",
                            cases=("cgroup_ucount.rlimit_get_put",))
    found = bt.Found(key=LEAK, kind="fail", title="t", test="cgroup_ucount.rlimit_get_put",
                     case="cgroup_ucount.rlimit_get_put", count=1, replay="make run")
    return bt.RunRecord(run=n, seed=seed, status=bt.FAIL, report_status="fail", signatures=[found])


def fake_test_commit(bis: bs.Bisection, commit: str, label: str, seeds: Iterator[int],
                     match: bs.Match, stop_at_match: bool) -> tuple[list[bt.RunRecord], str]:
    """Versions 5 and up fail (from version 7 only every other run), 3 does not build."""
    version = int(git(bis.clone, "show", f"{commit}:version"))
    if version == 3:
        return [], "build of um-lockdep failed: error: fake"
    out: list[bt.RunRecord] = []
    for i in range(1, bis.runs + 1):
        rec = run_of(i, next(seeds), version >= 5 and (version < 7 or i % 2 == 0))
        out.append(rec)
        if stop_at_match and match(LEAK) and rec.status == bt.FAIL:
            break
    with open(bis.ctx.build / "tested", "a") as f:
        f.write(f"{version}\n")
    return out, ""


FAKE_STEP = f'''import sys
sys.path.insert(0, {str(KUNIT_DIR)!r})
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from pathlib import Path
from cgkunit import bisection as bisect
from cgkunit.common import Context
import test_bisect
bisect.test_commit = test_bisect.fake_test_commit
args = sys.argv[1:]
sys.exit(bisect.step(Context(Path({{repo!r}}), Path(args[1])), args[-1]))
'''


@pytest.fixture
def driven(project: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Path]:
    """run_bisect's BAD/GOOD boots and the step's (a subprocess of git bisect run) faked."""
    step = tmp_path / "fake_step.py"
    step.write_text(FAKE_STEP.format(repo=str(project["repo"])))
    monkeypatch.setattr(bs, "ENTRY", step)
    monkeypatch.setattr(bs, "test_commit", fake_test_commit)
    return project


def bisect_opts(p: dict[str, Path], **kw: Any) -> bs.BisectOptions:
    return bs.BisectOptions(**{"good": commit_of(p["kernel"], 1), "bad": commit_of(p["kernel"], 9),
                               "kernel_src": str(p["kernel"]), "runs": 4, **kw})


def boots_of(p: dict[str, Path]) -> list[int]:
    path = p["build"] / "tested"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def test_git_bisect_run_names_the_first_bad_commit(driven: dict[str, Path],
                                                   capfd: pytest.CaptureFixture[str]) -> None:
    p = driven
    assert bs.run_bisect(Context(p["repo"], p["build"]), bisect_opts(p)) == 0
    out, err = capfd.readouterr()
    five = commit_of(p["kernel"], 5)
    assert f"first bad commit: {five} change 5\n" in out
    assert "reproduction at BAD: 2/4 runs, p = 50.0%" in out and "\nconfidence: 0.8" in out
    assert "[cgkunit] bisect step 1 of ~3: " in err
    dest = p["build"] / "results" / "bisect" / "um-lockdep"
    data = json.loads((dest / "bisect.json").read_text())
    assert data["result"]["commit"] == five and data["signature"] == LEAK and data["p"] == 0.5
    roles = [v["role"] for v in data["verdicts"]]
    assert roles[:2] == ["BAD", "GOOD"] and all(r.startswith("step ") for r in roles[2:])
    by_version = {int(git(p["kernel"], "show", f"{v['commit']}:version")): v for v in data["verdicts"]}
    assert by_version[9]["matches"] == 2 and by_version[9]["seeds"] and by_version[1]["verdict"] == "good"
    assert all(v["verdict"] == ("bad" if n >= 5 else "skip" if n == 3 else "good")
               for n, v in by_version.items())
    # p = 1/2: each good verdict after 4 clean runs is worth 1 - 0.5^4
    goods = sum(v["verdict"] == "good" for v in data["verdicts"])
    assert math.isclose(data["result"]["confidence"], (1 - 0.5 ** 4) ** goods, rel_tol=1e-5)
    assert "# first bad commit: [" + five in data["bisect_log"]
    assert (dest / "bisect.txt").read_text() == out
    # the user's tree is only read: no bisect state, no new refs, work tree untouched
    assert git(p["kernel"], "status", "--porcelain") == ""
    assert not (p["kernel"] / ".git" / "BISECT_LOG").exists()
    # the same command again: the saved result, nothing built or booted
    before = boots_of(p)
    assert bs.run_bisect(Context(p["repo"], p["build"]), bisect_opts(p)) == 0
    assert boots_of(p) == before and f"first bad commit: {five}" in capfd.readouterr().out


def test_a_seed_that_reproduced_at_bad_comes_first(driven: dict[str, Path]) -> None:
    p = driven
    bs.run_bisect(Context(p["repo"], p["build"]), bisect_opts(p, runs=2))  # p = 1/2, n = 2: withheld
    state = json.loads((p["build"] / "results" / "bisect" / "um-lockdep" / bs.STATE).read_text())
    bad_seeds = state["seeds"]
    assert len(bad_seeds) == 1
    for commit, v in state["verdicts"].items():
        if v["role"].startswith("step") and v["verdict"] == "bad":
            assert v["seeds"][0] == bad_seeds[0]


def test_bad_that_does_not_reproduce_and_good_that_is_not_clean(driven: dict[str, Path],
                                                               capfd: pytest.CaptureFixture[str]) -> None:
    p = driven
    opts = bisect_opts(p, bad=commit_of(p["kernel"], 4))
    assert bs.run_bisect(Context(p["repo"], p["build"]), opts) == 1
    assert "not found: BAD does not reproduce: no run of 4 had the signature" in capfd.readouterr().out
    assert boots_of(p) == [4]
    opts = bisect_opts(p, good=commit_of(p["kernel"], 6))
    assert bs.run_bisect(Context(p["repo"], p["build"]), opts) == 1
    assert "not found: GOOD is not clean: the signature came in run 1" in capfd.readouterr().out
    opts = bisect_opts(p, good=commit_of(p["kernel"], 3))
    assert bs.run_bisect(Context(p["repo"], p["build"]), opts) == 1
    assert "not found: GOOD could not be tested: build of um-lockdep failed" in capfd.readouterr().out


def test_an_interrupted_bisection_continues_from_its_log(driven: dict[str, Path],
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capfd: pytest.CaptureFixture[str]) -> None:
    p = driven
    step = bs.ENTRY.read_text()
    # the first step stops the bisection (as a step that cannot test does) after testing
    bs.ENTRY.write_text(step.replace("sys.exit(bisect.step(", "code = (bisect.step(")
                        + "sys.exit(128 if len(open(Path(args[1]) / 'tested').read().split()) == 3 "
                          "else code)\n")
    assert bs.run_bisect(Context(p["repo"], p["build"]), bisect_opts(p)) == 1
    assert "the same command again continues it" in capfd.readouterr().out
    first = boots_of(p)
    assert len(first) == 3
    dest = p["build"] / "results" / "bisect" / "um-lockdep"
    state = json.loads((dest / bs.STATE).read_text())
    assert state["result"] is None and len(state["verdicts"]) == 3 and "git bisect start" in state["log"]
    bs.ENTRY.write_text(step)
    assert bs.run_bisect(Context(p["repo"], p["build"]), bisect_opts(p)) == 0
    out, err = capfd.readouterr()
    assert "continuing the bisection" in err and "was tested before" in err
    again = boots_of(p)[3:]
    assert first[2] not in again and 1 not in again and 9 not in again  # nothing tested twice
    assert f"first bad commit: {commit_of(p['kernel'], 5)}" in out
    # a different command starts over
    assert bs.run_bisect(Context(p["repo"], p["build"]), bisect_opts(p, filter_glob="cgroup_ucount*")) == 0
    assert boots_of(p)[len(first) + len(again):][:2] == [9, 1]


def test_the_step_never_answers_bad_for_its_own_trouble(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert bs.step(Context(tmp_path, tmp_path), "um-lockdep") == bs.ABORT
    assert "no bisection in progress" in capsys.readouterr().err

    def boom(*a: Any) -> Any:
        raise ValueError("oops")
    monkeypatch.setattr(bs, "_step", boom)
    assert bs.step(Context(tmp_path, tmp_path), "um-lockdep") == bs.ABORT
    assert "internal error ValueError: oops" in capsys.readouterr().err


def test_cli_dispatches_bisect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bs.BisectOptions] = []

    def fake(ctx: Context, opts: bs.BisectOptions) -> int:
        seen.append(opts)
        return 0
    monkeypatch.setattr(bs, "run_bisect", fake)
    monkeypatch.setattr(cli, "preflight", lambda *a: None)
    monkeypatch.setenv("GOOD", "0001")
    monkeypatch.setenv("SIGNATURE", LOCKDEP)
    monkeypatch.setenv("FILTER", "cgroup_ucount*")
    assert cli.main(["--build-dir", str(tmp_path), "bisect", "--bad", "0012", "--runs", "5"]) == 0
    assert seen == [bs.BisectOptions(good="0001", bad="0012", signature=LOCKDEP, runs=5,
                                     filter_glob="cgroup_ucount*")]


def test_makefile_has_bisect_outside_make_test() -> None:
    text = (KUNIT_DIR.parent.parent / "Makefile").read_text()
    assert "\nbisect: deps\n" in text and "\nbisect-selftest: deps\n" in text
    assert '@echo "make bisect ' in text and '@echo "make bisect-selftest ' in text
    test_recipe = text.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "bisect" not in test_recipe
    assert bs.ENTRY == KUNIT_DIR / "cgkunit.py" or bs.ENTRY.name == "cgkunit.py"


def test_selftest_check_exists_and_is_deterministic_on_um_lockdep() -> None:
    from cgkunit.checklist import load_checks
    check = next(c for c in load_checks(KUNIT_DIR.parent.parent) if c.name == bs.SELFTEST_CHECK)
    assert check.profile == "um-lockdep" and len(check.extra_patches) == 1 and check.filter
    assert sys.version_info >= (3, 9)
