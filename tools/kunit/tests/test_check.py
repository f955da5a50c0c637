"""check: the pure evaluation of oracle checks, checks.json, the runner loop."""
from __future__ import annotations

import json

import pytest

from cgkunit import check as ck
from cgkunit import pipeline as pl
from cgkunit import profile as pf
from cgkunit import report as rp
from cgkunit.common import DriverError
from conftest import DATA, KUNIT_DIR

KCSAN = ck.Check(name="oracle-kcsan", profile="x86_64-kcsan", kernel_args=["cgroup_kunit.provoke=kcsan"],
                 filter="cgroup_kunit_oracle*", expect_fail=["cgroup_kunit_oracle.provoke_kcsan"],
                 expect_splat=[ck.ExpectedSplat("kcsan", "cgroup_kunit_oracle.provoke_kcsan",
                                                "BUG: KCSAN: data-race")])


def report(name: str) -> rp.Report:
    return rp.parse_console((DATA / name).read_text())


def ktap(cases: list[tuple[str, str]], splat_in: str = "") -> rp.Report:
    """A one-suite report; cases are (name, 'ok'|'not ok'); a KCSAN splat before splat_in."""
    lines = ["KTAP version 1", "1..1", "    KTAP version 1", "    # Subtest: cgroup_kunit_oracle",
             f"    1..{len(cases)}"]
    for n, (name, res) in enumerate(cases, 1):
        if name == splat_in:
            lines += ["==================================================================",
                      "BUG: KCSAN: data-race in a / b",
                      "=================================================================="]
        lines.append(f"    {res} {n} {name}")
    bad = any(r == "not ok" for _, r in cases)
    lines.append(f"{'not ok' if bad else 'ok'} 1 cgroup_kunit_oracle")
    return rp.parse_console("\n".join(lines))


def test_the_repo_checks_file_loads() -> None:
    checks = ck.load_checks(KUNIT_DIR.parent.parent)
    by_name = {c.name: c for c in checks}
    assert {"oracle-lockdep", "oracle-kcsan"} <= set(by_name)
    assert by_name["oracle-kcsan"] == KCSAN
    lockdep = by_name["oracle-lockdep"]
    assert lockdep.profile == "um-lockdep" and lockdep.expect_splat[0].kind == "lockdep"
    assert lockdep.wanted_status == "fail"


def test_expected_failure_present_is_ok() -> None:
    out = ck.evaluate(KCSAN, report("03_kcsan.log"))
    assert out.ok, out.problems
    synthetic = ktap([("gang_counts", "ok"), ("provoke_kcsan", "not ok")], splat_in="provoke_kcsan")
    assert ck.evaluate(KCSAN, synthetic).ok


def test_expected_failure_missing_is_not_ok() -> None:
    out = ck.evaluate(KCSAN, report("08_skipped.log"))
    assert not out.ok
    assert "run status pass, expected fail" in out.problems
    assert "expected failure cgroup_kunit_oracle.provoke_kcsan did not fail" in out.problems
    assert any(p.startswith("expected kcsan splat in cgroup_kunit_oracle.provoke_kcsan") for p in out.problems)


def test_failure_without_the_splat_is_not_ok() -> None:
    out = ck.evaluate(KCSAN, ktap([("provoke_kcsan", "not ok")]))
    assert not out.ok
    assert out.problems == ["expected kcsan splat in cgroup_kunit_oracle.provoke_kcsan "
                            "('BUG: KCSAN: data-race') not seen"]


def test_unexpected_extra_failure_is_not_ok() -> None:
    r = ktap([("gang_counts", "not ok"), ("provoke_kcsan", "not ok")], splat_in="provoke_kcsan")
    out = ck.evaluate(KCSAN, r)
    assert not out.ok
    assert out.problems == ["unexpected fail: cgroup_kunit_oracle.gang_counts"]
    relaxed = ck.Check(**{**KCSAN.__dict__, "expect_pass_others": False})
    assert ck.evaluate(relaxed, r).ok


def test_splat_in_the_wrong_test_is_not_ok() -> None:
    r = ktap([("gang_counts", "ok"), ("provoke_kcsan", "not ok")], splat_in="gang_counts")
    out = ck.evaluate(KCSAN, r)
    assert not out.ok
    assert "unexpected fail: cgroup_kunit_oracle.gang_counts" in out.problems
    assert any("unexpected kcsan splat in cgroup_kunit_oracle.gang_counts" in p for p in out.problems)


def test_parameterized_failures_are_covered_by_their_case() -> None:
    c = ck.Check(name="p", profile="um-lockdep", expect_fail=["cgroup_ucount.ucount_inc_dec"],
                 expect_splat=[ck.ExpectedSplat("lockdep", "cgroup_ucount.ucount_inc_dec*",
                                                "possible circular locking dependency")])
    out = ck.evaluate(c, report("02_lockdep_param_ok.log"))
    assert out.ok, out.problems


def test_crash_is_not_an_expected_failure() -> None:
    c = ck.Check(name="p", profile="x", expect_fail=["cgroup_ucount.*"])
    out = ck.evaluate(c, report("05_panic_mid_suite.log"))
    assert not out.ok and "run status crash, expected fail" in out.problems
    crash = ck.Check(name="p", profile="x", expect_fail=["cgroup_ucount*"], expect_status="crash",
                     expect_splat=[ck.ExpectedSplat("panic", "cgroup_ucount*", "Fatal exception")])
    out = ck.evaluate(crash, report("05_panic_mid_suite.log"))
    assert [p for p in out.problems if "unexpected bug splat" not in p] == []


def test_parse_checks_validation() -> None:
    with pytest.raises(DriverError, match="unknown keys expect_fial"):
        ck.parse_checks([{"name": "a", "profile": "p", "expect_fial": []}])
    with pytest.raises(DriverError, match="needs string 'name' and 'profile'"):
        ck.parse_checks([{"profile": "p"}])
    with pytest.raises(DriverError, match="duplicate check names a"):
        ck.parse_checks([{"name": "a", "profile": "p"}, {"name": "a", "profile": "q"}])
    with pytest.raises(DriverError, match="kernel_args: expected a list of strings"):
        ck.parse_checks({"checks": [{"name": "a", "profile": "p", "kernel_args": "x=1"}]})


def test_run_checks_table_and_exit_codes() -> None:
    good = ck.Check(name="good", profile="x86_64-kcsan", expect_fail=KCSAN.expect_fail,
                    expect_splat=KCSAN.expect_splat)
    bad = ck.Check(name="bad", profile="um-lockdep", expect_fail=["cgroup_kunit_oracle.provoke_lockdep"])
    reports = {"good": report("03_kcsan.log"), "bad": report("03_kcsan.log")}
    code, table = ck.run_checks([good, bad], lambda c: reports[c.name])
    assert code == 1
    lines = table.splitlines()
    assert lines[0].split() == ["check", "profile", "run", "result"]
    assert lines[1].split() == ["good", "x86_64-kcsan", "fail", "ok"]
    assert lines[2].split()[:4] == ["bad", "um-lockdep", "fail", "NOT"]
    assert "did not fail" in table
    assert ck.run_checks([good, bad], lambda c: reports[c.name], only="good")[0] == 0
    with pytest.raises(DriverError, match="no check named 'nope'"):
        ck.run_checks([good], lambda c: reports[c.name], only="nope")

    def broken(c: ck.Check) -> rp.Report:
        raise DriverError("build of x failed: boom")
    code, table = ck.run_checks([good], broken)
    assert code == 2 and "error" in table and "build of x failed: boom" in table


def test_expect_console_lines(tmp_path: Path) -> None:
    from cgkunit import check as ck
    from cgkunit import report as rp
    log = tmp_path / "console.log"
    log.write_text("cgroup_kunit: threads=99: want 1..64, or 0 for each case's own list\n"
                   "KTAP version 1\n1..1\nok 1 s\n")
    r = rp.parse_console(log.read_text(), "completed")
    r.console_log = str(log)
    want = ck.parse_checks({"checks": [{"name": "p", "profile": "um-lockdep",
                                        "expect_console": ["threads=99: want 1..64"]}]})[0]
    assert ck.evaluate(want, r).ok
    missing = ck.parse_checks({"checks": [{"name": "p", "profile": "um-lockdep",
                                           "expect_console": ["duration_ms=5: want"]}]})[0]
    out = ck.evaluate(missing, r)
    assert not out.ok and "never printed" in out.problems[0]


def test_expect_status_alternatives() -> None:
    from cgkunit import check as ck
    from cgkunit import report as rp
    log = "KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: s\n    1..1\n    not ok 1 c\nnot ok 1 s\n"
    r = rp.parse_console(log, "completed")
    either = ck.parse_checks({"checks": [{"name": "x", "profile": "um-lockdep",
                                          "expect_fail": ["s.c"], "expect_status": "fail|crash"}]})[0]
    assert ck.evaluate(either, r).ok
    only_crash = ck.parse_checks({"checks": [{"name": "x", "profile": "um-lockdep",
                                              "expect_fail": ["s.c"], "expect_status": "crash"}]})[0]
    assert not ck.evaluate(only_crash, r).ok


def test_the_repo_checks_refer_to_what_exists() -> None:
    """Every check names a known profile and breakage patches that exist, and
    every breakage patch is used by some check (none rots unchecked)."""
    repo = KUNIT_DIR.parent.parent
    profiles = set(pf.list_profiles(repo))
    used: set[str] = set()
    for c in ck.load_checks(repo):
        assert c.profile in profiles, c.name
        for patch in c.extra_patches:
            assert (repo / patch).is_file(), f"{c.name}: {patch}"
            used.add(patch)
    on_disk = {f"tools/kunit/breakage/{p.name}" for p in (KUNIT_DIR / "breakage").glob("*.patch")}
    assert on_disk - used == set()


def test_every_profile_has_a_make_target_and_a_readme_row() -> None:
    repo = KUNIT_DIR.parent.parent
    readme = (repo / "README.md").read_text()
    bench_profile = json.loads((repo / "tools" / "kunit" / "bench.json").read_text())["profile"]
    makefile = (repo / "Makefile").read_text()
    for name in pf.list_profiles(repo):
        assert f"| `{name}` |" in readme, name
        if name == bench_profile:
            # reached through `make bench` (bench.json), not `run --profile`
            assert "\n\t$(CGKUNIT) bench " in makefile
            continue
        if name == "um-coverage":
            # reached through `make coverage`, not `run --profile`
            assert "\n\t$(CGKUNIT) coverage" in makefile
            continue
        assert pf.make_target(name).startswith("make "), name


def test_check_run_prints_one_line_not_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """make check injects report_line as the run's printer: one line per run, the table at
    the end (each run's full summary is in its summary.txt)."""
    from cgkunit import check as ck
    from cgkunit import report as rp
    report = rp.parse_console((DATA / "01_all_pass.log").read_text())
    report.files["summary"] = "/r/summary.json"
    ck.report_line(report)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run pass: " in err[0] and err[0].endswith("; /r/summary.json")
