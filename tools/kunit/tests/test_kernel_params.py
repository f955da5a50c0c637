"""Parameters that cannot silently fall back (issue 12): a cgroup_kunit.* word the suite does
not declare is bad input before any work, and a value the suite refused at boot (it keeps
its default) makes the run bad input too, except to a check that expects the refusal."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from cgkunit import bench as bb
from cgkunit import check as ck
from cgkunit import checklist as cl
from cgkunit import cli, deps, fetch, pipeline, run
from cgkunit import profile as pf
from cgkunit import coverage as cov
from cgkunit import console as cr
from cgkunit import export
from cgkunit import summary as sm
from cgkunit import report as rp
from cgkunit.common import Context, DriverError
from cgkunit.params import HARNESS, SUITE_DIR, check_kernel_args, suite_parameters
from conftest import DATA, KUNIT_DIR
from test_bad_input import fails
from test_bench import bench_env, bench_run  # noqa: F401  (fixture)
from test_tree import env, write_files  # noqa: F401  (env: bench_env's fixture)

REPO = KUNIT_DIR.parent.parent
PROFILE = "um-lockdep"
BAD_LOG = "11_bad_parameters.log"
BOOTING = [["run", "--profile", PROFILE], ["coverage"]]

HARNESS_C = """\
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt
/* module_param_cb(in_a_comment, ...) is not a parameter */
 * module_param(nor_this, uint, 0444);
static u64 seed_param;
module_param_cb(seed, &seed_ops, &seed_param, 0444);
MODULE_PARM_DESC(seed, "PRNG seed");
module_param(threads, uint, 0444);
\tmodule_param_named( duration_ms , duration_param, uint, 0444);
module_param_string(provoke, provoke_param, sizeof(provoke_param), 0444);
"""
BENCH_C = "module_param_cb(bench_reps, &bench_reps_ops, &bench_reps, 0444);\n"


def fake_suite(root: Path, harness: str = HARNESS_C, others: dict[str, str] | None = None) -> Path:
    """A repo whose lib/kunit-cgroup holds harness.c (and others: name -> text)."""
    write_files(root / SUITE_DIR, {"harness.c": harness, **(others or {})})
    return root


@pytest.fixture
def no_long_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fetching, preparing, building, installing or booting fails the test (as in
    test_bad_input, but not for every test here: some run the commands on fakes)."""
    def reached(*args: Any, **kw: Any) -> Any:
        raise AssertionError("long work started before the bad input was found")
    for mod, name in ((pipeline, "prepare"), (pipeline, "fetch_base"), (cli, "fetch_base"),
                      (pipeline, "build"), (run, "build"), (pipeline, "prepare_tree"),
                      (pipeline, "run_profile"), (cov, "run_coverage"), (deps, "ensure_deps"),
                      (fetch, "fetch_base")):
        monkeypatch.setattr(mod, name, reached)


def parse(name: str = BAD_LOG) -> rp.Report:
    r = cr.parse_console((DATA / name).read_text(), "completed")
    r.console_log = str(DATA / name)
    return r


# --- the names, from the C sources ------------------------------------------------------------

def test_names_from_a_harness_fixture(tmp_path: Path) -> None:
    repo = fake_suite(tmp_path, others={"bench_kunit.c": BENCH_C,
                                        "harness.h": "module_param(not_a_c_file, uint, 0);\n"})
    assert suite_parameters(repo) == ["bench_reps", "duration_ms", "provoke", "seed", "threads"]


def test_names_from_the_real_harness() -> None:
    names = suite_parameters(REPO)
    assert {"seed", "threads", "duration_ms", "provoke"} <= set(names)
    assert names == sorted(set(names))
    # the benchmarks' parameters live in the same module: bench passes them
    assert {a.split("=")[0].split(".")[1] for a in bb.kernel_args(1, 3, 1000)} <= set(names)


def test_harness_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(DriverError) as exc:
        suite_parameters(tmp_path)
    assert str(exc.value) == f"cannot read {tmp_path / HARNESS}: No such file or directory"
    check_kernel_args(["kasan_multi_shot", "foo.bar=1"], tmp_path)  # no suite word: not read


def test_harness_without_parameters(tmp_path: Path) -> None:
    fake_suite(tmp_path, "int x;\n")
    with pytest.raises(DriverError, match=r"harness.c: no module_param_cb\(\.\.\.\) or "):
        check_kernel_args(["cgroup_kunit.seed=1"], tmp_path)


# --- KERNEL_ARGS before any work --------------------------------------------------------------

def known() -> str:
    return ", ".join(suite_parameters(REPO))


@pytest.mark.usefixtures("no_long_work")
@pytest.mark.parametrize("command", BOOTING, ids=lambda c: c[0])
@pytest.mark.parametrize("how", ["option", "environment"])
def test_unknown_parameter_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str],
                                           command: list[str], how: str) -> None:
    args = "cgroup_kunit.seed=1 cgroup_kunit.sed=5"
    argv = ["--build-dir", str(tmp_path / "build"), *command]
    if how == "option":
        argv += ["--kernel-args", args]
    else:
        monkeypatch.setenv("KERNEL_ARGS", args)
    assert fails(argv, capsys) == \
        f"KERNEL_ARGS: unknown parameter cgroup_kunit.sed (the suite has: {known()})"
    assert not (tmp_path / "build").exists()


@pytest.mark.usefixtures("no_long_work")
@pytest.mark.parametrize("command", BOOTING, ids=lambda c: c[0])
def test_parameter_without_a_value(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   command: list[str]) -> None:
    argv = ["--build-dir", str(tmp_path), *command, "--kernel-args", "cgroup_kunit.threads"]
    assert fails(argv, capsys) == \
        "KERNEL_ARGS: cgroup_kunit.threads needs a value: cgroup_kunit.threads=<value>"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("words,message", [
    (["cgroup-kunit.sed=5"], "unknown parameter cgroup-kunit.sed"),
    (["cgroup_kunit.=5"], "unknown parameter cgroup_kunit. "),
    (["cgroup_kunit.sed"], "unknown parameter cgroup_kunit.sed"),  # the name first
    (["cgroup_kunit.seed=1", "cgroup_kunit.provoke"], "cgroup_kunit.provoke needs a value"),
])
def test_bad_words(words: list[str], message: str) -> None:
    with pytest.raises(DriverError) as exc:
        check_kernel_args(words, REPO)
    assert str(exc.value).startswith("KERNEL_ARGS: ") and message in str(exc.value)


def test_good_words() -> None:
    check_kernel_args(["cgroup_kunit.seed=123", "cgroup_kunit.threads=8",
                       "cgroup_kunit.duration-ms=200",     # the kernel takes '-' for '_'
                       "cgroup-kunit.provoke=lockdep,warn",
                       "cgroup_kunit.provoke=",            # empty is provoke's default
                       "cgroup_kunit.threads=0x40", "cgroup_kunit.seed=+18446744073709551615",
                       "cgroup_kunit.dynmods=y", "cgroup_kunit.bench_reps=050",
                       "kasan_multi_shot", "kunit.filter_glob=x", "cgroup_kunitx.y"], REPO)


@pytest.mark.parametrize("word,want", [
    ("cgroup_kunit.seed=1;", "an unsigned 64-bit number (0 picks one at random)"),
    ("cgroup_kunit.seed=18446744073709551616", "an unsigned 64-bit number"),
    ("cgroup_kunit.seed=banana", "an unsigned 64-bit number"),
    ("cgroup_kunit.threads=banana", "1..64, or 0 for each case's own list"),
    ("cgroup_kunit.threads=65", "1..64, or 0 for each case's own list"),
    ("cgroup_kunit.threads=-1", "1..64"),
    ("cgroup_kunit.duration_ms=9", "10..600000"),
    ("cgroup_kunit.duration-ms=600001", "10..600000"),
    ("cgroup_kunit.provoke=everything", "a comma-separated list of lockdep, kcsan, warn"),
    ("cgroup_kunit.provoke=lockdep,,warn", "a comma-separated list"),
    ("cgroup_kunit.provoke=" + "warn," * 8, "a comma-separated list"),
    ("cgroup_kunit.dynmods=maybe", "1 or 0 (y or n)"),
    ("cgroup_kunit.dynmods=", "1 or 0 (y or n)"),
    ("cgroup_kunit.bench_reps=0", "1.."),
    ("cgroup_kunit.bench_migrations=9", "10.."),
])
def test_values_the_suite_would_refuse(word: str, want: str) -> None:
    """A value is checked with the suite's own rules (its set() functions) before anything
    is built: the kernel would refuse it at boot and run with the default."""
    with pytest.raises(DriverError) as exc:
        check_kernel_args([word], REPO)
    assert str(exc.value).startswith(f"KERNEL_ARGS: {word}: the suite wants {want}")


def test_value_rules_are_the_c_sources_rules() -> None:
    """params.param_rules says what lib/kunit-cgroup's set() functions accept: every
    parameter has a rule, each range is the one in the C source."""
    from cgkunit.params import MAX_THREADS, PROVOKE_MAX, PROVOKE_WORDS, param_rules
    rules = param_rules(REPO)
    assert sorted(rules) == suite_parameters(REPO)
    harness = (REPO / SUITE_DIR / "harness.c").read_text()
    assert re.search(rf"#define CGK_MAX_THREADS\s+{MAX_THREADS}\b",
                     (REPO / SUITE_DIR / "harness.h").read_text())
    assert "kstrtou64(val, 0, &seed)" in harness and "n > CGK_MAX_THREADS" in harness
    assert "ms < 10 || ms > 600000" in harness
    assert f"provoke_param[{PROVOKE_MAX + 1}]" in harness
    assert re.search(r"cgk_provoke_names\[\] = \{ " + ", ".join(f'"{w}"' for w in PROVOKE_WORDS),
                     harness)
    assert "param_set_bool(val, kp)" in (REPO / SUITE_DIR / "migrate_kunit.c").read_text()
    assert re.search(r"selfcheck_set\(.*?\)\s*\{\s*if \(param_set_bool\(val, kp\)\)", harness, re.S)
    bench_c = (REPO / SUITE_DIR / "bench_kunit.c").read_text()
    for name in ("bench_reps", "bench_migrations"):
        low, high = re.search(rf"{name}_set\(.*?\)\s*\{{\s*return bench_uint_set\(val, kp, "
                              r"(\d+), (\d+)\)", bench_c, re.S).groups()  # type: ignore[union-attr]
        assert rules[name].want == f"{low}..{high}"
        assert rules[name].accepts(high) and not rules[name].accepts(str(int(high) + 1))
        assert rules[name].accepts(low) and not rules[name].accepts(str(int(low) - 1))
    for name, good, bad in (("seed", "0", "-1"), ("threads", "64", "65"), ("duration_ms", "10", "9"),
                            ("provoke", "kcsan,", ",kcsan"), ("dynmods", "n", "x"),
                            ("selfcheck", "y", "maybe")):
        assert rules[name].accepts(good) and not rules[name].accepts(bad), name


def test_a_check_may_pass_a_value_it_expects_refused() -> None:
    """bad-parameters passes bad values on purpose: allowed where expect_console names
    the refusal, as the suite prints it."""
    words = ["cgroup_kunit.threads=99"]
    check_kernel_args(words, REPO, refusals=["threads=99: want 1..64"])
    with pytest.raises(DriverError, match="the suite wants 1..64"):
        check_kernel_args(words, REPO, refusals=["threads=98: want 1..64"])


def test_valid_parameters_reach_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[pipeline.RunOptions] = []

    def fake_run(ctx: Context, opts: pipeline.RunOptions, printer: object = None) -> rp.Report:
        seen.append(opts)
        return parse("01_all_pass.log")
    monkeypatch.setattr(pipeline, "run_profile", fake_run)
    args = "cgroup_kunit.seed=2380924963417318399 cgroup_kunit.threads=8 seccomp=on"
    assert cli.main(["--build-dir", str(tmp_path), "run", "--profile", PROFILE,
                     "--kernel-args", args]) == 0
    assert seen[-1].kernel_args == args.split()
    assert capsys.readouterr().err == ""


def test_checks_json_names_are_checked_too(tmp_path: Path) -> None:
    found = cl.load_checks(REPO)  # the real one (bad-parameters passes bad values, good names)
    assert found[0].name == "bad-parameters" and len(found[0].kernel_args) == 4
    repo = fake_suite(tmp_path)
    write_files(repo, {str(cl.CHECKS_FILE): json.dumps({"checks": [
        {"name": "typo", "profile": PROFILE, "kernel_args": ["cgroup_kunit.thread=4"]}]}),
        f"{pf.PROFILES_DIR}/{PROFILE}.config": "#@ arch: um\n"})
    with pytest.raises(DriverError) as exc:
        cl.load_checks(repo)
    assert str(exc.value) == (f"{repo / cl.CHECKS_FILE}: typo: kernel_args: unknown parameter "
                              "cgroup_kunit.thread (the suite has: duration_ms, provoke, seed, "
                              "threads)")


# --- values the suite refused at boot ----------------------------------------------------------

REFUSED = [("threads", "99", "1..64, or 0 for each case's own list"),
           ("duration_ms", "5", "10..600000"),
           ("seed", "banana", "an unsigned 64-bit number (0 picks one at random)"),
           ("provoke", "everything", "a comma-separated list of lockdep, kcsan, warn")]
MESSAGE = ("KERNEL_ARGS: the suite refused "
           "cgroup_kunit.threads=99: want 1..64, or 0 for each case's own list; "
           "cgroup_kunit.duration_ms=5: want 10..600000; "
           "cgroup_kunit.seed=banana: want an unsigned 64-bit number (0 picks one at random); "
           "cgroup_kunit.provoke=everything: want a comma-separated list of lockdep, kcsan, warn; "
           "it ran with the defaults instead")


def test_refusals_in_a_console() -> None:
    r = parse()
    assert r.status == "pass" and rp.exit_code(r.status) == 0  # the kernel did pass
    assert [(p.name, p.value, p.want) for p in r.bad_parameters] == REFUSED
    assert [p.line_no for p in r.bad_parameters] == [14, 16, 18, 20]
    assert r.bad_parameters[0].text == \
        "cgroup_kunit: threads=99: want 1..64, or 0 for each case's own list"
    assert rp.exit_code(r.status, bad_parameters=r.bad_parameters) == 2
    assert rp.exit_code(r.status, bisect=True, bad_parameters=r.bad_parameters) == 125
    assert rp.exit_code("fail", bad_parameters=r.bad_parameters) == 2  # not what was asked
    assert rp.refused_message([r]) == MESSAGE
    with pytest.raises(DriverError) as exc:
        rp.raise_refused([r])
    assert str(exc.value) == MESSAGE
    assert r.splats == [] and vars(r.counts)["passed"] == 6


def test_refusals_in_the_summary(tmp_path: Path) -> None:
    r = parse()
    r.profile = PROFILE
    export.write_summary(r, tmp_path)
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["status"] == "pass"
    assert [(p["name"], p["value"], p["want"]) for p in data["bad_parameters"]] == REFUSED
    assert data["bad_parameters"][1] == {
        "name": "duration_ms", "value": "5", "want": "10..600000", "line_no": 16,
        "text": "cgroup_kunit: duration_ms=5: want 10..600000"}
    txt = (tmp_path / "summary.txt").read_text().splitlines()
    assert txt[0] == f"cgkunit: {PROFILE}: PASS; BAD INPUT: the suite refused 4 parameters"
    assert ("  refused: cgroup_kunit.duration_ms=5: want 10..600000  "
            "(console.log:16; the default was used)") in txt


def test_a_console_without_refusals_is_unchanged(tmp_path: Path) -> None:
    r = parse("01_all_pass.log")
    assert r.bad_parameters == [] and rp.refused_message([r]) is None
    rp.raise_refused([r])
    assert rp.exit_code(r.status, bad_parameters=r.bad_parameters) == 0
    r.profile = PROFILE
    export.write_summary(r, tmp_path)
    assert json.loads((tmp_path / "summary.json").read_text())["bad_parameters"] == []
    assert (tmp_path / "summary.txt").read_text().splitlines()[0] == f"cgkunit: {PROFILE}: PASS"
    # other lines with '=' and 'want' are not refusals
    other = cr.parse_console("[    1.0] cgroup_kunit: seed=1 threads=8: wanted more\n"
                             "    # gang: cgroup_kunit: threads=99: want 1..64 (a diagnostic)\n"
                             "Booting kernel: `99' invalid for parameter `cgroup_kunit.threads'\n"
                             "KTAP version 1\n1..1\nok 1 s\n")
    assert other.bad_parameters == [] and other.status == "pass"


def test_refusal_forms() -> None:
    text = ("[18:01:00] Starting KUnit Kernel (1/2)...\n"
            "[    0.012345] cgroup_kunit: threads=99: want 1..64, or 0 for each case's own list\n"
            "KTAP version 1\n1..1\nok 1 a\n"
            "[18:01:09] Starting KUnit Kernel (2/2)...\n"
            "[    0.012345] cgroup_kunit: threads=99: want 1..64, or 0 for each case's own list\n"
            "cgroup_kunit: cgroup_kunit.bench_reps=99: want 1..50\n"   # kp->name, built in
            "cgroup_kunit: threads=: want 1..64, or 0 for each case's own list\n"
            "KTAP version 1\n1..1\nok 1 b\n")
    r = cr.parse_console(text)
    assert [(p.name, p.value, p.line_no) for p in r.bad_parameters] == \
        [("threads", "99", 2), ("bench_reps", "99", 8), ("threads", "", 9)]  # each once
    assert r.bad_parameters[1].describe() == "cgroup_kunit.bench_reps=99: want 1..50"


def test_run_with_a_refused_value_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A value the suite would refuse is bad input before the build; one the driver let
    through and the suite still refused at boot is bad input after the summary."""
    def fake_run(ctx: Context, opts: pipeline.RunOptions, printer: object = None) -> rp.Report:
        r = parse()
        print(sm.format_summary(r), end="")
        return r
    monkeypatch.setattr(pipeline, "run_profile", fake_run)
    argv = ["--build-dir", str(tmp_path), "run", "--profile", PROFILE,
            "--kernel-args", "cgroup_kunit.threads=99"]
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "cgkunit: error: KERNEL_ARGS: cgroup_kunit.threads=99: the suite wants 1..64, or 0 for "
        "each case's own list"]
    monkeypatch.setattr(cli, "check_kernel_args", lambda *a, **k: None)  # an older driver
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out.startswith("cgkunit: ?: PASS; BAD INPUT")  # the summary is out
    assert err.splitlines() == [f"cgkunit: error: {MESSAGE}"] and "Traceback" not in err


def test_report_command_of_a_run_with_refusals(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results" / PROFILE
    results.mkdir(parents=True)
    shutil.copy(DATA / BAD_LOG, results / "console.log")
    assert cli.main(["--build-dir", str(tmp_path), "report", "--profile", PROFILE]) == 2
    out, err = capsys.readouterr()
    assert out.startswith(f"cgkunit: {PROFILE}: PASS; BAD INPUT")
    assert err.splitlines() == [f"cgkunit: error: {MESSAGE}"]


def test_coverage_with_a_refused_value_exits_2(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cov.deps, "ensure_deps", lambda *a: None)
    monkeypatch.setattr(cov, "lcov_tools", lambda: ("lcov", "genhtml", "gcov"))
    monkeypatch.setattr(cov, "run_profile", lambda ctx, opts: parse())
    monkeypatch.setattr(cov, "capture", lambda out, dest: dest / "coverage.info")
    written: list[str] = []
    monkeypatch.setattr(cov, "report", lambda info, dest, status: written.append(status))
    with pytest.raises(DriverError) as exc:
        cov.run_coverage(Context(REPO, tmp_path), pipeline.RunOptions(profile=cov.PROFILE))
    assert str(exc.value) == MESSAGE and written == ["pass"]  # coverage reported first
    monkeypatch.setattr(cov, "run_profile", lambda ctx, opts: parse("01_all_pass.log"))
    assert cov.run_coverage(Context(REPO, tmp_path), pipeline.RunOptions(profile=cov.PROFILE)) == 0


def test_bench_with_a_refused_value(bench_env: dict[str, Path],  # noqa: F811
                                    capsys: pytest.CaptureFixture[str]) -> None:
    log = bench_env["fake"] / "bench_synthetic_series.log"
    lines = log.read_text().splitlines(keepends=True)
    lines.insert(3, "cgroup_kunit: cgroup_kunit.bench_reps=99: want 1..50\n")
    log.write_text("".join(lines))
    with pytest.raises(DriverError) as exc:
        bench_run(bench_env)
    assert str(exc.value) == ("bench kernel args (--seed, --reps, --duration-ms): the suite "
                              "refused cgroup_kunit.bench_reps=99: want 1..50; it ran with the "
                              "default instead")
    out = capsys.readouterr().out
    assert "-- series boot:" in out and "BAD INPUT" in out
    assert (bench_env["build"] / "results" / "bench" / "bench.json").is_file()  # written first


# --- checks judge the refusal themselves ----------------------------------------------------

def test_the_bad_parameters_check_still_passes() -> None:
    [bad] = [c for c in cl.load_checks(REPO) if c.name == "bad-parameters"]
    r = parse()
    out = ck.evaluate(bad, r)
    assert out.ok, out.problems
    assert ck.run_checks([bad], lambda c: r) == (0, ck.format_table([out]))


def test_a_check_that_does_not_expect_a_refusal_fails() -> None:
    plain = cl.parse_checks({"checks": [{"name": "p", "profile": PROFILE,
                                         "kernel_args": ["cgroup_kunit.threads=99"]}]})[0]
    out = ck.evaluate(plain, parse())
    assert not out.ok and out.problems[0] == \
        "the suite refused cgroup_kunit.threads=99: want 1..64, or 0 for each case's own list"
    assert len(out.problems) == 4
    partly = cl.parse_checks({"checks": [{"name": "p", "profile": PROFILE,
                                          "expect_console": ["threads=99: want 1..64",
                                                             "seed=banana: want"]}]})[0]
    assert [p.split("=")[0] for p in ck.evaluate(partly, parse()).problems] == [
        "the suite refused cgroup_kunit.duration_ms", "the suite refused cgroup_kunit.provoke"]


def test_check_runner_reports_ok_with_the_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    def fake_run(ctx: Context, opts: pipeline.RunOptions, printer: object = None) -> rp.Report:
        return parse()
    monkeypatch.setattr(pipeline, "run_profile", fake_run)
    code = cli.main(["--build-dir", str(tmp_path), "check", "--only", "bad-parameters"])
    out, err = capsys.readouterr()
    assert code == 0, out
    assert out.splitlines()[1].split() == ["bad-parameters", PROFILE, "pass", "ok"]
    assert "cgkunit: error" not in err


def test_the_drivers_boots_run_the_oracles_self_checks_unless_told() -> None:
    from cgkunit.params import SELFCHECK_ON, with_selfcheck
    assert SELFCHECK_ON == "cgroup_kunit.selfcheck=1"
    assert with_selfcheck(["a=1"]) == ["a=1", SELFCHECK_ON]
    assert with_selfcheck(["cgroup_kunit.selfcheck=0", "b"]) == ["cgroup_kunit.selfcheck=0", "b"]
    assert with_selfcheck(["cgroup-kunit.selfcheck=n"]) == ["cgroup-kunit.selfcheck=n"]
    assert "selfcheck" in suite_parameters(REPO)
