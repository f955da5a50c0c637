"""Reports of boots the watchdog stopped: the running case, what was never reached, the
rule and second in the summary, isolated (one boot per suite) consoles, checks."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cgkunit import check as ck
from cgkunit import checklist as cl
from cgkunit import console as cr
from cgkunit import export
from cgkunit import summary as sm
from cgkunit import report as rp
from cgkunit.common import DriverError
from conftest import DATA

STORM = ("stopped: report storm (WARNING: kernel/cgroup/cgroup.c:2741 at "
         "css_set_move_task+0x1e4/0x230 x61, no KUnit result for 30 s)")
STORM_STOP = {"rule": "storm", "reason": STORM[len(rp.STOPPED):], "at": 43.2,
              "report": "WARNING: kernel/cgroup/cgroup.c:2741 at css_set_move_task+0x1e4/0x230",
              "line": 16, "boot": 1, "boots": 1}


def parse(name: str, verdict: str = "completed") -> rp.Report:
    return cr.parse_console((DATA / name).read_text(), verdict)


def test_a_stopped_boot_is_a_crash_of_the_kernel_under_test() -> None:
    r = parse("storm_warning_loop.log", STORM)
    assert r.status == "crash" and rp.exit_code(r.status) == 1
    assert rp.exit_code(r.status, bisect=True) == 1  # bad, not skip
    assert r.verdict == STORM
    # even a clean console: the watchdog's verdict wins, as hang and timeout do
    assert parse("01_all_pass.log", "stopped: panic (Kernel panic - not syncing: x)").status == "crash"


def test_the_running_case_carries_the_reports_and_the_rest_is_not_run() -> None:
    r = parse("storm_warning_loop.log", STORM)
    cr.attach_stops(r, [STORM_STOP])
    crash = next(t for t in r.tests if t.level == "crash")
    assert crash.id == ("cgroup_css_set.cset_migrate_churn: running when the kernel stopped "
                        "(after cgroup_css_set.cset_migrate_churn.8 threads)")
    assert crash.status == "CRASH" and len(crash.splats) == 120
    assert crash.params == {"seed": "4242", "threads": "4", "duration_ms": "1000"}
    assert "stopped here by the watchdog at 43s: report storm" in crash.notes
    assert r.test("cgroup_css_set.cset_migrate_churn.8 threads").status == "PASS"  # type: ignore[union-attr]
    assert [n.to_json() for n in r.not_run] == [{
        "what": "case", "count": 5, "suite": "cgroup_css_set",
        "after": "cgroup_css_set.cset_migrate_churn", "planned": 6,
        "text": "cgroup_css_set: 5 more cases never reached "
                "(after cgroup_css_set.cset_migrate_churn; KUnit planned 6)"}]
    assert sm.not_run_hints(r) == [
        "CGKUNIT_ISOLATE=test make run FILTER='cgroup_css_set.*'   (one boot per case)"]


def test_the_summary_says_which_rule_ended_the_boot_and_when() -> None:
    r = parse("storm_warning_loop.log", STORM)
    cr.attach_stops(r, [STORM_STOP])
    r.profile, r.elapsed = "x86_64-lockdep", 45.0
    text = sm.format_summary(r)
    lines = text.splitlines()
    assert lines[0] == "cgkunit: x86_64-lockdep: CRASH (run stopped: report storm) in 45s"
    assert lines[1] == ("  watchdog: stopped the kernel at 43s: report storm (WARNING: "
                        "kernel/cgroup/cgroup.c:2741 at css_set_move_task+0x1e4/0x230 x61, "
                        "no KUnit result for 30 s)")
    assert "  CRASH cgroup_css_set.cset_migrate_churn: running when the kernel stopped" in text
    assert "(x120, first at console.log:16)" in text
    assert ("  NOT RUN cgroup_css_set: 5 more cases never reached "
            "(after cgroup_css_set.cset_migrate_churn; KUnit planned 6)") in lines
    assert "  run what was never reached:" in lines
    assert len(lines) <= 50


def test_suites_never_reached_and_a_plain_case_named_by_its_seed_line() -> None:
    log = "\n".join([
        "KTAP version 1", "1..3", "    KTAP version 1", "    # Subtest: cgroup_kunit_oracle",
        "    1..4", "    ok 1 gang_counts",
        "    # provoke_lockdep: cgroup_kunit: seed=9 threads=2 duration_ms=100",
        "======================================================",
        "WARNING: possible circular locking dependency detected",
        "7.3.4 #4 Tainted: G                 N"])
    r = cr.parse_console(log, "stopped: silent 30 s after lockdep report (WARNING: possible "
                              "circular locking dependency detected)")
    [s] = r.splats
    assert s.test == ("cgroup_kunit_oracle.provoke_lockdep: running when the kernel stopped "
                      "(after cgroup_kunit_oracle.gang_counts)")
    assert [n.describe() for n in r.not_run] == [
        "cgroup_kunit_oracle: 2 more cases never reached "
        "(after cgroup_kunit_oracle.provoke_lockdep; KUnit planned 4)",
        "2 more suites never reached (after cgroup_kunit_oracle; KUnit planned 3)"]
    r.replay_target = "python3 tools/kunit/cgkunit.py run --profile um-lockdep"
    assert sm.not_run_hints(r) == [
        "CGKUNIT_ISOLATE=test FILTER='cgroup_kunit_oracle.*' "
        "python3 tools/kunit/cgkunit.py run --profile um-lockdep   (one boot per case)",
        "CGKUNIT_ISOLATE=suite python3 tools/kunit/cgkunit.py run --profile um-lockdep"
        "   (one boot per suite)"]
    assert sm.replay_hints(r) == [
        "KERNEL_ARGS=\"cgroup_kunit.seed=9 cgroup_kunit.threads=2\" "
        "FILTER='cgroup_kunit_oracle.provoke_lockdep' "
        "python3 tools/kunit/cgkunit.py run --profile um-lockdep"]


def test_a_complete_run_has_nothing_not_run() -> None:
    for name in ("01_all_pass.log", "02_lockdep_param_ok.log", "real_um_all_pass.log"):
        r = parse(name)
        assert r.not_run == [] and sm.not_run_hints(r) == []
        assert "NOT RUN" not in sm.format_summary(r)


# --- kunit.py --run_isolated=suite: several boots in one console ----------------------

ISOLATED = """[12:00:00] Starting KUnit Kernel (1/3)...
Running tests with:
$ linux seccomp=on kunit.filter_glob=cgroup_ucount kunit.enable=1
Linux version 7.3.4
KTAP version 1
1..1
    KTAP version 1
    # Subtest: cgroup_ucount
    1..3
    # ucount_inc_dec: cgroup_kunit: seed=5 threads=8 duration_ms=1000
    ok 1 ucount_inc_dec
    # rlimit_add_sub: cgroup_kunit: seed=5 threads=8 duration_ms=1000
------------[ cut here ]------------
kernel BUG at kernel/ucount.c:250!
Oops: invalid opcode: 0000 [#1] SMP NOPTI
CPU: 1 UID: 0 PID: 77 Comm: cgk_worker/1 Tainted: G                 N  7.3.4 #1
Call Trace:
 dec_rlimit_ucounts+0x2a/0x70
[12:00:20] Starting KUnit Kernel (2/3)...
Running tests with:
Linux version 7.3.4
KTAP version 1
1..1
    KTAP version 1
    # Subtest: cgroup_migrate
    1..1
    ok 1 migrate_idle
ok 1 cgroup_migrate
WARNING: kernel/exit.c:1 at do_exit+0x1/0x2, CPU#0: init/1
reboot: System halted
[12:00:40] Starting KUnit Kernel (3/3)...
Running tests with:
WARNING: kernel/cgroup/cgroup.c:6412 at cgroup_init+0x3c1/0x4a0, CPU#0: swapper/0
Linux version 7.3.4
KTAP version 1
1..1
    KTAP version 1
    # Subtest: cgroup_rstat
    1..1
    ok 1 rstat_base_exact
ok 1 cgroup_rstat
reboot: System halted
[12:01:00] Elapsed time: 60.000s
"""
CRASH_STOP = {"rule": "crash", "reason": "crash (kernel BUG at kernel/ucount.c:250!; no KUnit "
              "result within 5 s)", "at": 19.0, "report": "kernel BUG at kernel/ucount.c:250!",
              "line": 14, "boot": 1, "boots": 3}


def test_an_isolated_console_keeps_each_boot_s_reports_in_that_boot() -> None:
    r = cr.parse_console(ISOLATED, "stopped: " + str(CRASH_STOP["reason"]))
    cr.attach_stops(r, [CRASH_STOP])
    where = {s.title.split(" at ")[0].split("!")[0]: s.test for s in r.splats}
    assert where == {
        "kernel BUG": "cgroup_ucount.rlimit_add_sub: running when the kernel stopped "
                      "(after cgroup_ucount.ucount_inc_dec)",
        "WARNING: kernel/exit.c:1": "shutdown (after cgroup_migrate)",
        "WARNING: kernel/cgroup/cgroup.c:6412": "boot"}
    crash = next(t for t in r.tests if t.level == "crash")
    assert crash.boot == 1 and crash.splats[0].related == ["Oops: invalid opcode: 0000 [#1] SMP NOPTI"]
    assert "stopped here by the watchdog at 19s (boot 1 of 3): crash" in crash.notes
    assert [(t.id, t.status) for t in r.tests if t.level != "crash"] == [
        ("cgroup_ucount", "CRASH"), ("cgroup_ucount.ucount_inc_dec", "PASS"),
        ("cgroup_migrate", "PASS"), ("cgroup_migrate.migrate_idle", "PASS"),
        ("cgroup_rstat", "PASS"), ("cgroup_rstat.rstat_base_exact", "PASS")]
    assert [n.describe() for n in r.not_run] == [
        "cgroup_ucount: 1 more case never reached (after cgroup_ucount.rlimit_add_sub; "
        "KUnit planned 3)"]
    assert r.status == "crash" and r.counts.crashed == 1 and r.counts.passed == 3
    text = sm.format_summary(r)
    assert "  watchdog: stopped the kernel at 19s (boot 1 of 3): crash (kernel BUG at" in text


def test_isolated_boots_never_started_are_counted() -> None:
    cut = ISOLATED.index("[12:00:20]")
    r = cr.parse_console(ISOLATED[:cut], "timeout")
    assert [n.describe() for n in r.not_run][-1] == \
        "2 more kunit.py boots never started (after boot 1 of 3)"
    assert sm.not_run_hints(r)[-1] == "CGKUNIT_ISOLATE=suite make run   (one boot per suite)"


# --- build_report reads exec.json -------------------------------------------------------

def test_build_report_takes_the_stops_from_exec_json(tmp_path: Path) -> None:
    (tmp_path / "console.log").write_text((DATA / "storm_warning_loop.log").read_text())
    (tmp_path / "exec.json").write_text(json.dumps({
        "verdict": STORM, "elapsed": 45.0, "filter": "cgroup_css_set.cset_migrate_churn",
        "isolate": "", "stops": [STORM_STOP]}))
    r = cr.build_report(tmp_path / "console.log", STORM, profile="x86_64-lockdep", elapsed=45.0)
    assert r.stops == [STORM_STOP] and r.filter_glob == "cgroup_css_set.cset_migrate_churn"
    js, _ = export.write_summary(r, tmp_path)
    data = json.loads(js.read_text())
    assert data["stops"] == [STORM_STOP] and data["verdict"] == STORM
    assert data["not_run"][0]["count"] == 5
    assert data["not_run_hints"] == [
        "CGKUNIT_ISOLATE=test make run FILTER='cgroup_css_set.cset_migrate_churn'   "
        "(one boot per case)"]
    assert "watchdog: stopped the kernel at 43s" in (tmp_path / "summary.txt").read_text()


# --- checks ---------------------------------------------------------------------------

def test_a_stopped_boot_in_the_expected_case_satisfies_a_crash_tolerant_check() -> None:
    r = parse("storm_warning_loop.log", STORM)
    tolerant = cl.Check(name="t", profile="x86_64-lockdep",
                        expect_fail=["cgroup_css_set.cset_migrate_churn*"],
                        expect_status="fail|crash")
    assert ck.evaluate(tolerant, r).ok
    strict = cl.Check(name="s", profile="x86_64-lockdep",
                      expect_fail=["cgroup_css_set.cset_migrate_churn*"])
    assert ck.evaluate(strict, r).problems == ["run status crash, expected fail"]


def test_the_isolate_key_of_a_check() -> None:
    [a, b, c] = cl.parse_checks([{"name": "a", "profile": "p", "isolate": "suite"},
                                 {"name": "b", "profile": "p", "isolate": "none"},
                                 {"name": "c", "profile": "p"}])
    assert (a.isolate, b.isolate, c.isolate) == ("suite", "none", "")
    assert cl.check_isolate(a, None) == "suite" and cl.check_isolate(a, "") == "suite"
    assert cl.check_isolate(b, "suite") == ""
    assert cl.check_isolate(c, "test") == "test" and cl.check_isolate(c, None) is None
    with pytest.raises(DriverError, match="isolate must be one of suite, test or none, got 'cases'"):
        cl.parse_checks([{"name": "a", "profile": "p", "isolate": "cases"}])
    with pytest.raises(DriverError, match="a: isolate must be a string"):
        cl.parse_checks([{"name": "a", "profile": "p", "isolate": True}])
