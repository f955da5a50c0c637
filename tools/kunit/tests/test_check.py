"""check: the pure evaluation of oracle checks, checks.json, the runner loop."""
from __future__ import annotations

import json

import pytest

from cgkunit import check as ck
from cgkunit import checklist as cl
from cgkunit import pipeline as pl
from cgkunit import profile as pf
from cgkunit import console as cr
from cgkunit import report as rp
from cgkunit.common import DriverError
from conftest import DATA, KUNIT_DIR

KCSAN = cl.Check(name="oracle-kcsan", profile="x86_64-kcsan", kernel_args=["cgroup_kunit.provoke=kcsan"],
                 filter="cgroup_kunit_oracle*", expect_fail=["cgroup_kunit_oracle.provoke_kcsan"],
                 expect_splat=[cl.ExpectedSplat("kcsan", "cgroup_kunit_oracle.provoke_kcsan",
                                                "BUG: KCSAN: data-race")])


def report(name: str) -> rp.Report:
    return cr.parse_console((DATA / name).read_text())


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
    return cr.parse_console("\n".join(lines))


def test_the_repo_checks_file_loads() -> None:
    checks = cl.load_checks(KUNIT_DIR.parent.parent)
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
    relaxed = cl.Check(**{**KCSAN.__dict__, "expect_pass_others": False})
    assert ck.evaluate(relaxed, r).ok


def test_splat_in_the_wrong_test_is_not_ok() -> None:
    r = ktap([("gang_counts", "ok"), ("provoke_kcsan", "not ok")], splat_in="gang_counts")
    out = ck.evaluate(KCSAN, r)
    assert not out.ok
    assert "unexpected fail: cgroup_kunit_oracle.gang_counts" in out.problems
    assert any("unexpected kcsan splat in cgroup_kunit_oracle.gang_counts" in p for p in out.problems)


def test_parameterized_failures_are_covered_by_their_case() -> None:
    c = cl.Check(name="p", profile="um-lockdep", expect_fail=["cgroup_ucount.ucount_inc_dec"],
                 expect_splat=[cl.ExpectedSplat("lockdep", "cgroup_ucount.ucount_inc_dec*",
                                                "possible circular locking dependency")])
    out = ck.evaluate(c, report("02_lockdep_param_ok.log"))
    assert out.ok, out.problems


def test_crash_is_not_an_expected_failure() -> None:
    c = cl.Check(name="p", profile="x", expect_fail=["cgroup_ucount.*"])
    out = ck.evaluate(c, report("05_panic_mid_suite.log"))
    assert not out.ok and "run status crash, expected fail" in out.problems
    crash = cl.Check(name="p", profile="x", expect_fail=["cgroup_ucount*"], expect_status="crash",
                     expect_splat=[cl.ExpectedSplat("panic", "cgroup_ucount*", "Fatal exception")])
    out = ck.evaluate(crash, report("05_panic_mid_suite.log"))
    assert [p for p in out.problems if "unexpected bug splat" not in p] == []


def test_parse_checks_validation() -> None:
    with pytest.raises(DriverError, match="unknown keys expect_fial"):
        cl.parse_checks([{"name": "a", "profile": "p", "expect_fial": []}])
    with pytest.raises(DriverError, match="needs string 'name' and 'profile'"):
        cl.parse_checks([{"profile": "p"}])
    with pytest.raises(DriverError, match="duplicate check names a"):
        cl.parse_checks([{"name": "a", "profile": "p"}, {"name": "a", "profile": "q"}])
    with pytest.raises(DriverError, match="kernel_args: expected a list of strings"):
        cl.parse_checks({"checks": [{"name": "a", "profile": "p", "kernel_args": "x=1"}]})


def test_run_checks_table_and_exit_codes() -> None:
    good = cl.Check(name="good", profile="x86_64-kcsan", expect_fail=KCSAN.expect_fail,
                    expect_splat=KCSAN.expect_splat)
    bad = cl.Check(name="bad", profile="um-lockdep", expect_fail=["cgroup_kunit_oracle.provoke_lockdep"])
    reports = {"good": report("03_kcsan.log"), "bad": report("03_kcsan.log")}
    code, table = ck.run_checks([good, bad], lambda c: reports[c.name])
    assert code == 1
    lines = table.splitlines()
    assert lines[0].split() == ["check", "profile", "run", "result"]
    assert lines[1].split() == ["good", "x86_64-kcsan", "fail", "ok"]
    assert lines[2].split()[:4] == ["bad", "um-lockdep", "fail", "NOT"]
    assert "did not fail" in table
    # the tail, all CI keeps: which checks failed and why
    tail = lines[lines.index("1 of 2 checks ok, NOT OK:") + 1:]
    assert tail[0] == "  bad (um-lockdep, run fail)" and "did not fail" in tail[1]
    assert ck.run_checks([good, bad], lambda c: reports[c.name], only="good")[0] == 0
    with pytest.raises(DriverError, match="no check named 'nope'"):
        ck.run_checks([good], lambda c: reports[c.name], only="nope")

    def broken(c: cl.Check) -> rp.Report:
        raise DriverError("build of x failed: boom")
    code, table = ck.run_checks([good], broken)
    assert code == 2 and "error" in table and "build of x failed: boom" in table


def test_expect_console_lines(tmp_path: Path) -> None:
    from cgkunit import check as ck
    log = tmp_path / "console.log"
    log.write_text("cgroup_kunit: threads=99: want 1..64, or 0 for each case's own list\n"
                   "KTAP version 1\n1..1\nok 1 s\n")
    r = cr.parse_console(log.read_text(), "completed")
    r.console_log = str(log)
    want = cl.parse_checks({"checks": [{"name": "p", "profile": "um-lockdep",
                                        "expect_console": ["threads=99: want 1..64"]}]})[0]
    assert ck.evaluate(want, r).ok
    missing = cl.parse_checks({"checks": [{"name": "p", "profile": "um-lockdep",
                                           "expect_console": ["duration_ms=5: want"]}]})[0]
    out = ck.evaluate(missing, r)
    assert not out.ok and "never printed" in out.problems[0]


def test_expect_status_alternatives() -> None:
    from cgkunit import check as ck
    log = "KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: s\n    1..1\n    not ok 1 c\nnot ok 1 s\n"
    r = cr.parse_console(log, "completed")
    either = cl.parse_checks({"checks": [{"name": "x", "profile": "um-lockdep",
                                          "expect_fail": ["s.c"], "expect_status": "fail|crash"}]})[0]
    assert ck.evaluate(either, r).ok
    only_crash = cl.parse_checks({"checks": [{"name": "x", "profile": "um-lockdep",
                                              "expect_fail": ["s.c"], "expect_status": "crash"}]})[0]
    assert not ck.evaluate(only_crash, r).ok


def test_the_repo_checks_refer_to_what_exists() -> None:
    """Every check names a known profile and breakage patches that exist, and
    every breakage patch is used by some check (none rots unchecked)."""
    repo = KUNIT_DIR.parent.parent
    profiles = set(pf.list_profiles(repo))
    used: set[str] = set()
    for c in cl.load_checks(repo):
        assert c.profile in profiles, c.name
        for patch in c.extra_patches:
            assert (repo / patch).is_file(), f"{c.name}: {patch}"
            used.add(patch)
    on_disk = {f"tools/kunit/breakage/{p.name}" for p in (KUNIT_DIR / "breakage").glob("*.patch")}
    assert on_disk - used == set()


def test_every_profile_has_a_make_target_and_a_readme_row() -> None:
    """Every profile has a row in the profiles table, which lives in the driver's manual
    (docs/driver.md, linked from README.md), and a make target."""
    repo = KUNIT_DIR.parent.parent
    manual = (repo / "docs" / "driver.md").read_text()
    bench_profile = json.loads((repo / "tools" / "kunit" / "bench.json").read_text())["profile"]
    makefile = (repo / "Makefile").read_text()
    for name in pf.list_profiles(repo):
        assert f"| `{name}` |" in manual, name
        if name == bench_profile or name.endswith("-bench"):
            # reached through `make bench` (bench.json's, or PROFILE=), not `run --profile`
            assert "\n\t$(CGKUNIT) bench\n" in makefile
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
    report = cr.parse_console((DATA / "01_all_pass.log").read_text())
    report.files["summary"] = "/r/summary.json"
    ck.report_line(report)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run pass: " in err[0] and err[0].endswith("; /r/summary.json")


# --- make check stops at the first infrastructure error (issue 31) -------------------------------

def failing_at(name: str, error: BaseException, ran: list[str]) -> ck.Runner:
    """A check runner that passes every check but name, which raises error."""
    def runner(c: cl.Check) -> rp.Report:
        ran.append(c.name)
        if c.name == name:
            raise error
        return cr.parse_console((DATA / "01_all_pass.log").read_text())
    return runner


def checks(n: int) -> list[cl.Check]:
    return [cl.Check(name=f"c{i}", profile="um-lockdep") for i in range(n)]


def test_run_checks_stops_at_an_infrastructure_error(capsys: pytest.CaptureFixture[str]) -> None:
    from cgkunit.common import InfraError
    ran: list[str] = []
    error = InfraError("cannot reach the Debian mirror http://m/debian: timed out")
    code, table = ck.run_checks(checks(5), failing_at("c1", error, ran))
    assert code == 2 and ran == ["c0", "c1"]
    rows = table.splitlines()[1:]
    assert rows[0].split()[-2:] == ["pass", "ok"] and rows[1].split()[1:3] == ["um-lockdep", "error"]
    assert [r.split()[2:4] for r in rows[3:6]] == [["not", "run"]] * 3
    assert rows[6:8] == ["1 of 5 checks ok, 3 not run, NOT OK:", "  c1 (um-lockdep, run error)"]
    assert rows[-1] == "NOT OK: c1"
    assert "stopping: cannot reach the Debian mirror" in capsys.readouterr().err


def test_a_check_error_of_its_own_does_not_stop_the_rest() -> None:
    ran: list[str] = []
    error = DriverError("patch broken.patch does not apply")
    assert ck.run_checks(checks(3), failing_at("c0", error, ran))[0] == 2
    assert ran == ["c0", "c1", "c2"]


def test_make_check_stops_at_a_fetch_that_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The base cannot be fetched: the first check says so and the others do not try."""
    from cgkunit import cli
    calls: list[str] = []

    def fetch_base(*a: object, **k: object) -> object:
        calls.append("fetch")
        raise DriverError("apt-get update failed: E: The repository is not signed")
    monkeypatch.setattr(pl, "fetch_base", fetch_base)
    monkeypatch.setattr(pl, "prepare_tree", lambda *a, **k: pytest.fail("prepared a tree"))
    assert cli.main(["--build-dir", str(tmp_path), "check"]) == 2
    assert calls == ["fetch"]
    out, err = capsys.readouterr()
    assert out.splitlines()[1].split()[2:] == ["error", "NOT", "OK"]
    rows = out.splitlines()
    assert all(row.split()[2:4] == ["not", "run"] for row in rows[3:-4] if row[:1] != " ")
    assert rows[-4].startswith("0 of ") and rows[-4].endswith(" not run, NOT OK:")
    assert rows[-3].startswith("  bad-parameters") and rows[-1] == "NOT OK: bad-parameters"
    assert "stopping: apt-get update failed: E: The repository is not signed" in err


def test_interrupted_checks(capsys: pytest.CaptureFixture[str]) -> None:
    ran: list[str] = []
    code, table = ck.run_checks(checks(3), failing_at("c1", KeyboardInterrupt(), ran))
    assert code == 130 and ran == ["c0", "c1"] and "interrupted" in table.splitlines()[2]


def test_a_race_check_boots_again_only_while_it_missed_its_evidence(
        capsys: pytest.CaptureFixture[str]) -> None:
    """boots: a boot that caught nothing (08_skipped: every case passed) is booted again; a
    boot where something unexpected failed is not: another boot must not hide it."""
    from dataclasses import replace
    racy = replace(KCSAN, boots=3)
    missed, caught = report("08_skipped.log"), report("03_kcsan.log")
    assert ck.evaluate(racy, missed).missed

    def runs(*reports: rp.Report) -> tuple[ck.Runner, list[int]]:
        seen: list[int] = []

        def runner(c: cl.Check) -> rp.Report:
            seen.append(1)
            return reports[len(seen) - 1]
        return runner, seen
    runner, seen = runs(missed, caught, caught)
    code, table = ck.run_checks([racy], runner)
    assert code == 0 and len(seen) == 2
    assert table.splitlines()[1].endswith("  ok (boot 2 of up to 3)")
    assert "boot 1 of up to 3 did not catch it (run status pass, expected fail); booting again" \
        in capsys.readouterr().err

    runner, seen = runs(missed, missed, missed, caught)
    code, table = ck.run_checks([racy], runner)
    assert code == 1 and len(seen) == 3 and "NOT OK (boot 3 of up to 3)" in table

    # something red that the check did not ask for: another test failing, or the expected
    # test failing without its report (a failure for another reason): no other boot
    for red in (ktap([("gang_counts", "not ok"), ("provoke_kcsan", "ok")]),
                ktap([("gang_counts", "ok"), ("provoke_kcsan", "not ok")])):
        out = ck.evaluate(racy, red)
        assert not out.ok and not out.missed
        runner, seen = runs(red, caught)
        assert ck.run_checks([racy], runner)[0] == 1 and len(seen) == 1
    runner, seen = runs(missed, missed)
    assert ck.run_checks([KCSAN], runner)[0] == 1 and len(seen) == 1  # boots defaults to 1


def test_boots_is_validated() -> None:
    for bad in (0, 6, "3", True, 2.5):
        with pytest.raises(DriverError, match="boots must be a whole number from 1 to 5"):
            cl.parse_checks([{"name": "a", "profile": "p", "boots": bad}])
    assert cl.parse_checks([{"name": "a", "profile": "p", "boots": 3}])[0].boots == 3


def test_checks_of_some_profiles_only(capsys: pytest.CaptureFixture[str]) -> None:
    """make test runs the checks of the profiles it builds; make check all of them."""
    from cgkunit import cli
    every = [cl.Check(name="a", profile="um-lockdep"), cl.Check(name="b", profile="x86_64-lockdep"),
             cl.Check(name="c", profile="x86_64-kcsan")]
    known = ["um-lockdep", "x86_64-kcsan", "x86_64-lockdep"]
    assert ck.select_profiles(every, [], known) == every
    assert [c.name for c in ck.select_profiles(every, ["um-lockdep", "x86_64-kcsan"], known)] == ["a", "c"]
    with pytest.raises(DriverError, match="--profiles: no profile named 'x86-kcsan'"):
        ck.select_profiles(every, ["x86-kcsan"], known)
    assert cli.main(["check", "--profiles", "um-lockdep,x86_64-kcsan,x86_64-kasan", "--list"]) == 0
    listed = [line.split("\t")[1] for line in capsys.readouterr().out.splitlines()]
    assert listed and "x86_64-lockdep" not in listed and set(listed) <= set(known) | {"x86_64-kasan"}
    assert cli.main(["check", "--profiles", "nonsense", "--list"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no profile named 'nonsense'" in err[0]


def test_make_test_runs_the_checks_of_the_profiles_it_builds() -> None:
    """make test checks exactly the profiles it boots."""
    import re
    text = (KUNIT_DIR.parent.parent / "Makefile").read_text()
    recipe = text.split("\ntest: ", 1)[1].split("\n\n", 1)[0]
    booted = set(re.findall(r"run --profile (\S+)", recipe))
    listed = re.search(r"check --profiles (\S+)", recipe)
    assert listed and set(listed.group(1).split(",")) == booted
