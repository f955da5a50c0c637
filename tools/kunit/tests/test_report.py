"""Report: KTAP walk, splats, attribution, verdicts, summary, exit codes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cgkunit import console as cr
from cgkunit import export
from cgkunit import summary as sm
from cgkunit import report as rp
from conftest import DATA


def parse(name: str, verdict: str = "completed") -> rp.Report:
    return cr.parse_console((DATA / name).read_text(), verdict)


def status_of(r: rp.Report, test_id: str) -> str:
    t = r.test(test_id)
    assert t is not None, f"{test_id} not in {[t.id for t in r.tests]}"
    return t.status


# --- golden logs -------------------------------------------------------------

def test_all_pass() -> None:
    r = parse("01_all_pass.log")
    assert r.status == "pass"
    assert rp.exit_code(r.status) == 0
    assert vars(r.counts) == {"passed": 6, "failed": 0, "skipped": 0, "crashed": 0}
    assert r.splats == []
    assert r.ktap_complete
    ids = [t.id for t in r.tests]
    assert ids[:5] == ["cgroup_ucount", "cgroup_ucount.ucount_inc_dec",
                       "cgroup_ucount.ucount_inc_dec.8 threads",
                       "cgroup_ucount.ucount_inc_dec.4 threads",
                       "cgroup_ucount.ucount_inc_dec.16 threads"]
    t = r.test("cgroup_ucount.ucount_inc_dec.16 threads")
    assert t is not None and t.level == "param" and t.display == "cgroup_ucount.ucount_inc_dec[16 threads]"
    assert t.params == {"seed": "1234", "threads": "16", "duration_ms": "200"}
    assert sm.replay_hints(r) == []


def test_lockdep_in_param_instance_that_kunit_passed() -> None:
    r = parse("02_lockdep_param_ok.log")
    assert r.status == "fail"
    assert rp.exit_code(r.status) == 1
    [s] = r.splats
    assert s.kind == "lockdep"
    assert s.title == "WARNING: possible circular locking dependency detected"
    assert s.test == "cgroup_ucount.ucount_inc_dec.4 threads"
    assert s.line_no == 19
    bad = r.test("cgroup_ucount.ucount_inc_dec.4 threads")
    assert bad is not None and bad.kunit_status == "PASS" and bad.status == "FAIL"
    assert "failed: splat even though KUnit said ok" in bad.notes
    assert status_of(r, "cgroup_ucount.ucount_inc_dec") == "FAIL"
    assert status_of(r, "cgroup_ucount") == "FAIL"
    assert status_of(r, "cgroup_ucount.ucount_inc_dec.8 threads") == "PASS"
    assert status_of(r, "cgroup_ucount.ucount_inc_dec.16 threads") == "PASS"
    assert status_of(r, "cgroup_ucount.rlimit_add_sub") == "PASS"
    assert vars(r.counts) == {"passed": 5, "failed": 1, "skipped": 0, "crashed": 0}
    text = sm.format_summary(r)
    assert "WARNING: possible circular locking dependency detected" in text
    assert "FAIL  cgroup_ucount.ucount_inc_dec[4 threads]" in text


def test_kcsan_attributed_to_the_right_case() -> None:
    r = parse("03_kcsan.log")
    assert r.status == "fail"
    [s] = r.splats  # the oracle's quote on its FAILED line is not a second splat
    assert s.kind == "kcsan"
    assert s.title == "BUG: KCSAN: data-race in provoke_kcsan_step / provoke_kcsan_step"
    assert s.test == "cgroup_kunit_oracle.provoke_kcsan"
    assert status_of(r, "cgroup_kunit_oracle.provoke_kcsan") == "FAIL"
    assert status_of(r, "cgroup_kunit_oracle.provoke_lockdep") == "SKIP"
    assert status_of(r, "cgroup_kunit_oracle.gang_counts") == "PASS"
    t = r.test("cgroup_kunit_oracle.provoke_kcsan")
    assert t is not None
    assert any(d.startswith("oracle: kcsan report") for d in t.diagnostics)
    assert vars(r.counts) == {"passed": 3, "failed": 1, "skipped": 2, "crashed": 0}


def test_refcount_and_its_warning_are_one_splat_in_either_order() -> None:
    r = parse("04_refcount.log")
    kinds = [(s.kind, s.test) for s in r.splats]
    assert kinds == [("refcount", "cgroup_ucount.ucounts_put_twice"),
                     ("refcount", "cgroup_ucount.ucounts_get_saturate"),
                     ("warning", "cgroup_ucount.plain_warn")]
    first, second, third = r.splats
    assert first.title == "refcount_t: underflow; use-after-free."  # message before WARNING
    assert first.related[0].startswith("WARNING: lib/refcount.c:28 at")
    assert second.title == "refcount_t: saturated; leaking memory."  # message after WARNING
    assert second.related[0].startswith("WARNING: lib/refcount.c:22 at")
    assert third.title.startswith("WARNING: kernel/ucount.c:261 at dec_ucount")
    assert r.status == "fail"


def test_panic_mid_suite_is_a_crash_attributed_to_the_running_suite() -> None:
    r = parse("05_panic_mid_suite.log")
    assert r.status == "crash"
    assert rp.exit_code(r.status) == 1
    assert not r.ktap_complete
    assert [s.kind for s in r.splats] == ["bug", "panic"]
    bug = r.splats[0]
    assert bug.related == ["Oops: Oops: 0002 [#1] SMP NOPTI"]  # BUG + Oops: one splat
    want = ("cgroup_ucount.rlimit_add_sub: running when the kernel stopped "
            "(after cgroup_ucount.rlimit_add_sub.8 threads)")
    assert all(s.test == want for s in r.splats)
    crash = r.test(want)
    assert crash is not None and crash.status == "CRASH" and crash.level == "crash"
    assert r.counts.crashed == 1 and r.counts.passed == 2 and r.counts.skipped == 1
    assert any("planned 2 suites, got 1" in n for n in r.notes)
    assert sm.replay_hints(r) == [
        "make run KERNEL_ARGS=\"cgroup_kunit.seed=88 cgroup_kunit.threads=4\" "
        "FILTER='cgroup_ucount.rlimit_add_sub'"]


def test_crash_outside_a_param_case_names_the_suite() -> None:
    log = "\n".join([
        "KTAP version 1", "1..1", "    KTAP version 1", "    # Subtest: cgroup_ucount",
        "    1..3", "    ok 1 ucount_inc_dec",
        "Kernel panic - not syncing: Segfault with no mm"])
    r = cr.parse_console(log)
    assert r.status == "crash"
    [s] = r.splats
    assert s.test == "cgroup_ucount: running when the kernel stopped (after cgroup_ucount.ucount_inc_dec)"


def test_boot_splat_fails_the_run() -> None:
    r = parse("06_boot_splat.log")
    assert r.status == "fail"
    [s] = r.splats
    assert s.test == "boot" and s.kind == "warning"
    assert status_of(r, "cgroup_ucount.ucount_inc_dec") == "PASS"
    assert r.counts.passed == 1
    assert "boot: warning: WARNING: kernel/cgroup/cgroup.c:6412" in sm.format_summary(r)


def test_no_tests() -> None:
    r = parse("07_no_tests.log")
    assert r.status == "no-tests"
    assert rp.exit_code(r.status) == 2
    assert rp.exit_code(r.status, bisect=True) == 125
    assert r.ktap_started and r.tests == []


def test_no_ktap_at_all() -> None:
    r = cr.parse_console("Linux version 7.3.4\nreboot: System halted\n")
    assert r.status == "no-tests"
    assert "no KTAP output found; last console line: reboot: System halted" in r.notes


def test_skipped_tests_pass_the_run() -> None:
    r = parse("08_skipped.log")
    assert r.status == "pass"
    assert vars(r.counts) == {"passed": 3, "failed": 0, "skipped": 3, "crashed": 0}
    t = r.test("cgroup_kunit_oracle.provoke_kcsan")
    assert t is not None and t.status == "SKIP"
    assert t.skip_reason == "expected to fail; enable with cgroup_kunit.provoke=kcsan"


def test_timestamps_caller_ids_and_interleaved_lines() -> None:
    r = parse("09_timestamps_interleaved.log")
    assert r.status == "pass", sm.format_summary(r)
    assert r.splats == []
    assert [t.id for t in r.tests] == [
        "cgroup_kunit_oracle", "cgroup_kunit_oracle.gang_counts", "cgroup_ucount",
        "cgroup_ucount.rlimit_get_put", "cgroup_ucount.rlimit_get_put.8 threads",
        "cgroup_ucount.rlimit_get_put.4 threads", "cgroup_ucount.rlimit_get_put.16 threads",
        "cgroup_ucount.ucount_all_paths"]
    assert vars(r.counts) == {"passed": 5, "failed": 0, "skipped": 0, "crashed": 0}


def test_seeds_collected_and_replay_hints() -> None:
    r = parse("10_seed_replay.log")
    assert r.status == "fail"
    t = r.test("cgroup_ucount.rlimit_add_sub.16 threads")
    assert t is not None and t.status == "FAIL"
    assert t.params == {"seed": "991234", "threads": "16", "duration_ms": "500"}
    assert "worker 11 of 16: RLIMIT_NPROC count leaked" in t.diagnostics
    hints = sm.replay_hints(r)
    assert hints == [
        "make run KERNEL_ARGS=\"cgroup_kunit.seed=991234 cgroup_kunit.threads=16\" "
        "FILTER='cgroup_ucount.rlimit_add_sub'",
        "make run KERNEL_ARGS=\"cgroup_kunit.seed=991234 cgroup_kunit.threads=4\" "
        "FILTER='cgroup_ucount.ucounts_alloc_put'"]
    text = sm.format_summary(r)
    for h in hints:
        assert h in text


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.log")))
def test_every_golden_log_gives_a_one_screen_summary(name: str, tmp_path: Path) -> None:
    r = parse(name)
    r.profile = "um-lockdep"
    js, txt = export.write_summary(r, tmp_path)
    data = json.loads(js.read_text())
    assert set(data) >= {"profile", "tree", "base", "status", "counts", "tests", "splats", "elapsed"}
    assert set(data["counts"]) == {"passed", "failed", "skipped", "crashed"}
    for t in data["tests"]:
        assert set(t) >= {"id", "status", "kunit_status", "splats", "params"}
    for s in data["splats"]:
        assert set(s) >= {"kind", "title", "test", "line_no"}
    assert len(txt.read_text().splitlines()) <= 50


# --- verdicts from the exec result --------------------------------------------

@pytest.mark.parametrize("verdict", ["boot-timeout", "hang", "timeout"])
def test_run_verdict_wins_over_a_clean_log(verdict: str) -> None:
    r = parse("01_all_pass.log", verdict)
    assert r.status == verdict
    assert rp.exit_code(r.status) == 1


def test_panic_beats_hang() -> None:
    assert parse("05_panic_mid_suite.log", "hang").status == "crash"


def test_kunit_py_timeout_message_means_timeout() -> None:
    text = (DATA / "01_all_pass.log").read_text().replace(
        "ok 1 cgroup_ucount\n", "ok 1 cgroup_ucount\nCommand '['linux']' timed out after 900 seconds\n")
    assert cr.parse_console(text).status == "timeout"


def test_incomplete_ktap_without_panic_is_a_crash() -> None:
    lines = (DATA / "01_all_pass.log").read_text().splitlines()
    cut = lines.index("    ok 1 ucount_inc_dec")
    r = cr.parse_console("\n".join(lines[:cut + 1]))
    assert r.status == "crash"
    assert r.counts.crashed == 1


# --- splat classification ---------------------------------------------------

@pytest.mark.parametrize("line,kind", [
    ("WARNING: possible circular locking dependency detected", "lockdep"),
    ("WARNING: possible recursive locking detected", "lockdep"),
    ("WARNING: inconsistent lock state", "lockdep"),
    ("WARNING: bad unlock balance detected!", "lockdep"),
    ("WARNING: held lock freed!", "lockdep"),
    ("WARNING: lock held when returning to user space!", "lockdep"),
    ("WARNING: suspicious RCU usage", "lockdep"),
    ("WARNING: possible irq lock inversion dependency detected", "lockdep"),
    ("WARNING: HARDIRQ-safe -> HARDIRQ-unsafe lock order detected", "lockdep"),
    ("WARNING: kunit_try_catch/42 still has locks held!", "lockdep"),
    ("INFO: possible recursive locking detected", "lockdep"),
    ("DEBUG_LOCKS_WARN_ON(1)", "lockdep"),
    ("BUG: KCSAN: data-race in a / b", "kcsan"),
    ("BUG: KASAN: slab-use-after-free in put_ucounts+0x1/0x2", "kasan"),
    ("refcount_t: addition on 0; use-after-free.", "refcount"),
    ("BUG: sleeping function called from invalid context at kernel/locking/mutex.c:283", "bug"),
    ("kernel BUG at kernel/ucount.c:12!", "bug"),
    ("WARNING: CPU: 1 PID: 42 at kernel/ucount.c:261 dec_ucount+0x6f/0x80", "warning"),
    ("WARNING: kernel/ucount.c:261 at dec_ucount+0x6f/0x80, CPU#1: kunit_try_catch/114", "warning"),
    ("WARNING: at dec_ucount+0x6f/0x80, CPU#1: kunit_try_catch/114", "warning"),
    ("Oops: general protection fault, probably for non-canonical address 0xdead: 0000 [#1] SMP", "oops"),
    ("general protection fault: 0000 [#1] SMP", "oops"),
    ("Kernel panic - not syncing: Fatal exception", "panic"),
    ("INFO: task kworker/0:1:42 blocked for more than 120 seconds.", "hung"),
    ("rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", "rcu-stall"),
    ("rcu: INFO: rcu_sched self-detected stall on CPU", "rcu-stall"),
    ("watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [kworker/0:1:42]", "lockup"),
    ("UBSAN: array-index-out-of-bounds in kernel/ucount.c:99:3", "ubsan"),
])
def test_classify_titles(line: str, kind: str) -> None:
    assert cr.classify(line) == kind


@pytest.mark.parametrize("line", [
    "INFO: lockdep is turned off.",
    "    # provoke: oracle: lockdep report while the case ran: WARNING: possible circular locking",
    "oracle: kcsan report while the case ran: BUG: KCSAN: data-race in a / b",
    "    WARNING: possible circular locking dependency detected",
    "Warning: unrelated",
    "random: crng init done",
    "",
])
def test_classify_non_titles(line: str) -> None:
    assert cr.classify(line) is None


def test_strip_prefix() -> None:
    assert cr.strip_prefix("[    1.234567] BUG: x\n") == "BUG: x"
    assert cr.strip_prefix("[    1.234567][    T1]     ok 1 a") == "    ok 1 a"
    assert cr.strip_prefix("[12345.000001][   C3] rcu: INFO: x") == "rcu: INFO: x"
    assert cr.strip_prefix("    ok 1 a\r\n") == "    ok 1 a"
    assert cr.strip_prefix("[09:12:01] Starting KUnit Kernel") == "[09:12:01] Starting KUnit Kernel"


def test_oracle_quote_on_its_own_line_is_not_a_splat() -> None:
    log = "\n".join([
        "KTAP version 1", "1..1", "    KTAP version 1", "    # Subtest: s", "    1..1",
        "BUG: KCSAN: data-race in a / b",
        "==================================================================",
        "    # c: EXPECTATION FAILED at lib/kunit-cgroup/harness.c:617",
        "oracle: kcsan report while the case ran:",
        "BUG: KCSAN: data-race in a / b",
        "    not ok 1 c", "not ok 1 s"])
    r = cr.parse_console(log)
    assert [(s.kind, s.test) for s in r.splats] == [("kcsan", "s.c")]


def test_splat_between_last_param_and_case_result_goes_to_the_case() -> None:
    log = "\n".join([
        "KTAP version 1", "1..1", "    KTAP version 1", "    # Subtest: s", "    1..1",
        "        KTAP version 1", "        # Subtest: c", "        ok 1 p1", "        ok 2 p2",
        "WARNING: suspicious RCU usage", "    ok 1 c", "ok 1 s"])
    r = cr.parse_console(log)
    assert r.splats[0].test == "s.c"
    assert status_of(r, "s.c") == "FAIL" and status_of(r, "s.c.p2") == "PASS"


def test_splat_after_all_tests_is_shutdown() -> None:
    text = (DATA / "01_all_pass.log").read_text().replace(
        "reboot: System halted", "BUG: scheduling while atomic: swapper/0/1/0x00000002\nreboot: System halted")
    r = cr.parse_console(text)
    assert r.status == "fail"
    assert r.splats[0].test == "shutdown (after cgroup_ucount)"


def test_kunit_py_prefix_is_stripped_after_the_header() -> None:
    log = "\n".join(["kern  :info  : KTAP version 1", "kern  :info  : 1..1",
                     "kern  :info  :     KTAP version 1", "kern  :info  :     # Subtest: s",
                     "kern  :info  :     1..1", "kern  :info  :     ok 1 c",
                     "kern  :info  : ok 1 s"])
    r = cr.parse_console(log)
    assert r.status == "pass" and [t.id for t in r.tests] == ["s", "s.c"]


def test_tap14_with_tabs_and_dashes() -> None:
    log = "\n".join(["TAP version 14", "1..1", "\t# Subtest: example", "\t1..2",
                     "\tok 1 - example_simple_test",
                     "\tok 2 - example_skip_test # SKIP this test should be skipped",
                     "ok 1 - example"])
    r = cr.parse_console(log)
    assert r.status == "pass"
    assert status_of(r, "example.example_skip_test") == "SKIP"
    assert vars(r.counts) == {"passed": 1, "failed": 0, "skipped": 1, "crashed": 0}


def test_missing_subtests_against_the_plan_fail_the_suite() -> None:
    log = "\n".join(["KTAP version 1", "1..1", "    KTAP version 1", "    # Subtest: s",
                     "    1..3", "    ok 1 a", "ok 1 s"])
    r = cr.parse_console(log)
    assert status_of(r, "s") == "FAIL"
    assert r.status == "fail"


def test_exit_code_mapping() -> None:
    assert [rp.exit_code(s) for s in ("pass", "fail", "crash", "hang", "timeout",
                                      "boot-timeout", "no-tests", "error")] == [0, 1, 1, 1, 1, 1, 2, 2]
    assert rp.exit_code("fail", bisect=True) == 1
    assert rp.exit_code("error", bisect=True) == 125


def test_build_report_reads_the_results_dir(tmp_path: Path) -> None:
    console = tmp_path / "console.log"
    console.write_text((DATA / "03_kcsan.log").read_text())
    (tmp_path / "results.json").write_text("{}")
    r = cr.build_report(console, "completed", profile="x86_64-kcsan", tree="t", base="b", elapsed=3.5)
    assert r.profile == "x86_64-kcsan" and r.elapsed == 3.5
    assert r.files["json"] == str(tmp_path / "results.json")
    assert "junit" not in r.files
    js, txt = export.write_summary(r, tmp_path)
    data = json.loads(js.read_text())
    assert data["status"] == "fail" and data["profile"] == "x86_64-kcsan"
    assert data["splats"][0]["test"] == "cgroup_kunit_oracle.provoke_kcsan"
    assert f"summary: {tmp_path / 'summary.json'}" in txt.read_text()
    assert f"console: {console}" in txt.read_text()


def test_repeated_reports_from_other_cpus_are_grouped_in_the_summary() -> None:
    lines = ["KTAP version 1", "1..1", "    KTAP version 1", "    # Subtest: s", "    1..1"]
    for cpu in range(3):
        lines += ["------------[ cut here ]------------",
                  f"WARNING: kernel/cgroup/cgroup.c:905 at css_set_move_task+0x1b6/0x330, CPU#{cpu}: cgk-{cpu}/8{cpu}",
                  "Modules linked in:"]
    lines += ["    not ok 1 c", "not ok 1 s"]
    r = cr.parse_console("\n".join(lines) + "\n", "completed")
    assert len(r.splats) == 3
    text = sm.format_summary(r)
    assert text.count("css_set_move_task") == 1
    assert "x3, first at console.log:" in text


# --- the oracle's self-checks: reports they provoke and say they took are not findings ----

def oracle_console(expect: str | None, reports: int = 1) -> str:
    lines = ["KTAP version 1", "1..1", "    KTAP version 1", "    # Subtest: cgroup_kunit_oracle",
             "    1..1"]
    for _ in range(reports):
        lines += ["------------[ cut here ]------------",
                  "cgroup_kunit: a warning the oracle must see",
                  "WARNING: CPU: 1 PID: 57 at lib/kunit-cgroup/oracle_kunit.c:59 "
                  "oracle_sees_warning+0x1d/0x60",
                  "---[ end trace 0000000000000000 ]---"]
    if expect:
        lines.append(f"    # oracle_sees_warning: {expect}")
    lines += ["    ok 1 oracle_sees_warning", "ok 1 cgroup_kunit_oracle"]
    return "\n".join(lines) + "\n"


SAID = ("oracle: expected WARNING report captured (1): WARNING: CPU: 1 PID: 57 at "
        "lib/kunit-cgroup/oracle_kunit.c:59 oracle_sees_warning+0x1d/0x60")


def test_expected_report_is_not_a_finding() -> None:
    report = cr.parse_console(oracle_console(SAID))
    assert report.status == "pass" and report.splats == []
    assert [(s.kind, s.test) for s in report.expected] == \
        [("warning", "cgroup_kunit_oracle.oracle_sees_warning")]
    case = next(t for t in report.tests if t.name == "oracle_sees_warning")
    assert case.status == "PASS" and case.splats == []
    assert "oracle self-checks: 1 provoked report(s) seen" in sm.format_summary(report)
    assert export.report_json(report)["expected_splats"][0]["expected"] is True


def test_unannounced_report_still_fails_the_case() -> None:
    report = cr.parse_console(oracle_console(None))
    assert report.status == "fail" and len(report.splats) == 1 and report.expected == []


def test_expectation_covers_only_the_reports_it_counts() -> None:
    report = cr.parse_console(oracle_console(SAID, reports=2))
    assert report.status == "fail"
    assert len(report.splats) == 1 and len(report.expected) == 1


def test_expectation_of_another_kind_covers_nothing() -> None:
    report = cr.parse_console(oracle_console(SAID.replace("WARNING report", "KCSAN report")))
    assert report.status == "fail" and report.expected == []


def test_real_oracle_selfchecks_pass() -> None:
    """x86_64-kcsan and um-lockdep boots of cgroup_kunit_oracle: the WARNING, the RCU
    lockdep report and KCSAN's (10 reports of one race) are expected, not findings."""
    kcsan = cr.parse_console((DATA / "real_kcsan_oracle_selfchecks.log").read_text())
    assert kcsan.status == "pass" and kcsan.splats == []
    assert sorted({s.kind for s in kcsan.expected}) == ["kcsan", "warning"]
    assert len(kcsan.expected) == 11
    assert {s.test for s in kcsan.expected} == {"cgroup_kunit_oracle.oracle_sees_warning",
                                                 "cgroup_kunit_oracle.oracle_sees_kcsan"}
    um = cr.parse_console((DATA / "real_um_oracle_selfchecks.log").read_text())
    assert um.status == "pass" and um.splats == []
    assert sorted(s.kind for s in um.expected) == ["lockdep", "warning"]


def test_real_oracle_probe_broken_fails_the_selfchecks() -> None:
    """The oracle-probe-never-records check's boot: both self-checks fail, and the reports
    they provoked are findings (no expectation line was printed)."""
    report = cr.parse_console((DATA / "real_um_oracle_probe_broken.log").read_text())
    assert report.status == "fail" and report.expected == []
    failed = sorted(t.id for t in report.tests if t.level == "case" and t.status == "FAIL")
    assert failed == ["cgroup_kunit_oracle.oracle_sees_lockdep",
                      "cgroup_kunit_oracle.oracle_sees_warning"]
    assert sorted(s.kind for s in report.splats) == ["lockdep", "warning"]


# --- a long run's summary: what failed is on the screen whatever passed before it ----

@pytest.mark.parametrize("name", ["real_um_leaked_reference.log", "real_kcsan_racy_update.log",
                                  "real_um_lost_decrement.log"])
def test_every_failure_on_the_screen(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r = parse(name)
    bad = [t for t in r.tests if t.status in ("FAIL", "CRASH") and t.line_no is not None]
    assert bad
    monkeypatch.setattr(sm, "SCREEN", 8)  # far less room than the failures take
    text = sm.format_summary(r)
    for t in bad:
        assert f"  {t.status:<5} {t.display}" in text or f"  {t.status:<5} {t.id}" in text
    assert "more lines (details, passed and skipped tests)" in text or \
        all(t.status in ("FAIL", "CRASH") for t in r.tests if t.line_no is not None)


def test_a_failure_after_many_passes_is_shown() -> None:
    """As in CI (a whole suite on x86_64-kcsan, one case failing near the end): the
    failing case outranks the passed ones that came before it."""
    r = parse("real_um_reach.log")
    assert r.status == "pass"
    last = [t for t in r.tests if t.level == "case" and t.line_no is not None][-1]
    last.status = "FAIL"
    text = sm.format_summary(r)
    assert f"  FAIL  {last.display}" in text
    assert "more lines (details, passed and skipped tests): see summary.json" in text
    assert len(text.splitlines()) <= sm.SCREEN + 1
