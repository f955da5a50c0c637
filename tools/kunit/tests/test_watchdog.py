"""The boot watchdog's failure states, driven by recorded consoles on a fake clock.

Each console is fed a line at a time to run.Watchdog as watch() does: a line with a
printk stamp arrives at that second (after the run started), a line without one a
little after the line before it; then the clock goes on in silence, as it does when a
kernel deadlocks. No process is started: each test takes milliseconds.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

import pytest

from cgkunit import console as cr
from cgkunit import run
from conftest import DATA

STAMP = re.compile(r"^\[\s*(\d+\.\d+)\]")
T0 = 1000.0  # the fake clock when the run starts
DEFAULT = run.StopRules()


@dataclass
class Replay:
    verdict: str | None
    at: float            # seconds since the run started when the verdict came (or the end)
    dog: run.Watchdog
    lines_fed: int

    @property
    def stop(self) -> run.Stop | None:
        return self.dog.stop


def replay(lines: list[str], rules: run.StopRules = DEFAULT, *, pace: float = 0.01,
           result_time: float = 0.0, silence: float = 0.0, tick: float = 0.5,
           hang: float = run.HANG_S, timeout: float = 3600.0, polled: bool = False) -> Replay:
    """Feed lines, then `silence` seconds of nothing; stop at the first verdict.

    pace: seconds between lines without a printk stamp; result_time: extra seconds
    before each KTAP result line (the time a case or parameter instance runs); polled:
    ask for a verdict every tick while waiting for a line too, as watch() does (else
    only when a line comes, then during the silence)."""
    dog = run.Watchdog(boot_timeout=600.0, hang_timeout=hang, timeout=timeout, start=T0,
                       rules=rules)
    now = T0
    for n, line in enumerate(lines, 1):
        m = STAMP.match(line)
        at = max(now, T0 + float(m.group(1))) if m else now + pace
        if result_time and cr.RESULT.match(cr.strip_prefix(line)):
            at += result_time
        while polled and now + tick < at:
            now += tick
            verdict = dog.verdict(now)
            if verdict:
                return Replay(verdict, now - T0, dog, n - 1)
        now = at
        dog.saw(line + "\n", now)
        verdict = dog.verdict(now)
        if verdict:
            return Replay(verdict, now - T0, dog, n)
    end = now + silence
    while now < end:
        now += tick
        verdict = dog.verdict(now)
        if verdict:
            return Replay(verdict, now - T0, dog, len(lines))
    return Replay(None, now - T0, dog, len(lines))


def between(x: float, lo: float, hi: float) -> bool:
    """lo <= x <= hi, give or take the fake clock's rounding."""
    return lo - 1e-6 <= x <= hi + 1e-6


def log_lines(name: str) -> list[str]:
    return (DATA / name).read_text().splitlines()


def first_report_at(lines: list[str], kind: str) -> float:
    """Stamp of the first title line of that kind."""
    for line in lines:
        if cr.classify(cr.strip_prefix(line)) == kind:
            m = STAMP.match(line)
            assert m, line
            return float(m.group(1))
    raise AssertionError(f"no {kind} report")


# --- the rules, one console each ----------------------------------------------------

def test_a_warning_storm_stops_within_the_window() -> None:
    lines = log_lines("storm_warning_loop.log")  # the same WARNING every 0.5 s, forever
    r = replay(lines)
    first = first_report_at(lines, "warning")
    assert r.verdict is not None and r.verdict.startswith(
        "stopped: report storm (WARNING: kernel/cgroup/cgroup.c:2741 at css_set_move_task")
    assert r.stop is not None and r.stop.rule == "storm"
    # the window is counted from the first of the repeats; the kernel never went silent
    assert between(r.at - first, DEFAULT.storm_window, DEFAULT.storm_window + 1)
    assert r.at - first < 90
    assert " x61, no KUnit result for 30 s)" in r.verdict  # CPU and task aside, one report
    assert r.stop.report.startswith("WARNING: kernel/cgroup/cgroup.c:2741") and r.stop.line == 16


def test_a_storm_needs_the_repeats() -> None:
    lines = log_lines("storm_warning_loop.log")
    r = replay(lines, replace(DEFAULT, storm_repeats=1000), silence=100)
    assert r.verdict is None  # only the hang rule is left, after HANG_S of silence
    r = replay(lines, replace(DEFAULT, storm_repeats=0), silence=100)
    assert r.verdict is None


def test_silence_after_a_lockdep_report_stops() -> None:
    lines = log_lines("deadlock_after_lockdep.log")  # inconsistent lock state, then nothing
    r = replay(lines, silence=120)
    report_at = first_report_at(lines, "lockdep")
    assert r.verdict == ("stopped: silent 30 s after lockdep report "
                         "(WARNING: inconsistent lock state)")
    assert r.stop is not None and r.stop.rule == "silence"
    assert between(r.at - report_at, 30, 31)


def test_silence_after_lockdep_on_a_real_console() -> None:
    """A real UML boot of provoke=lockdep, cut where the kernel would have deadlocked."""
    lines = log_lines("real_um_provoke_lockdep.log")
    cut = next(i for i, ln in enumerate(lines) if "provoke_lockdep: EXPECTATION FAILED" in ln)
    r = replay(lines[:cut], pace=0.02, silence=400)
    assert r.verdict == ("stopped: silent 30 s after lockdep report "
                         "(WARNING: possible circular locking dependency detected)")
    assert r.lines_fed == cut
    fed_until = 0.02 * cut
    assert between(r.at - fed_until, 30, 31)  # not the 300 s hang window


def test_a_panic_stops_after_its_trace() -> None:
    lines = log_lines("05_panic_mid_suite.log")
    r = replay(lines, silence=60)
    panic_at = first_report_at(lines, "panic")
    assert r.verdict == "stopped: panic (Kernel panic - not syncing: Fatal exception)"
    assert r.stop is not None and r.stop.rule == "panic"
    assert between(r.at - panic_at, run.PANIC_GRACE_S, run.PANIC_GRACE_S + 0.5)


def test_an_oops_without_kunit_going_on_stops_after_the_grace() -> None:
    lines = [ln for ln in log_lines("05_panic_mid_suite.log") if "Kernel panic" not in ln]
    r = replay(lines, silence=60)
    oops_at = first_report_at(lines, "bug")
    assert r.verdict == ("stopped: crash (BUG: kernel NULL pointer dereference, address: "
                         "0000000000000008; no KUnit result within 5 s)")
    assert between(r.at - oops_at, DEFAULT.crash_grace, DEFAULT.crash_grace + 0.5)


def test_an_oops_the_kernel_survives_does_not_stop_it() -> None:
    """KUnit reports the faulted case and goes on: the kernel survived the Oops."""
    lines = [ln for ln in log_lines("05_panic_mid_suite.log") if "Kernel panic" not in ln]
    lines += ["[    3.500000]     # rlimit_add_sub: try faulted: last line seen lib/kunit-cgroup/harness.c:300",
              "[    3.500001]         not ok 2 4 threads",
              "[    5.000000]         ok 3 16 threads",
              "[    5.000001]     not ok 2 rlimit_add_sub",
              "[    9.000000]     ok 3 ucounts_alloc_put",
              "[    9.000001] not ok 2 cgroup_ucount"]
    assert replay(lines, silence=20).verdict is None
    # but it stays a report after which the console must not fall silent
    r = replay(lines, silence=60)
    assert r.verdict is not None and r.verdict.startswith("stopped: silent 30 s after Oops report (BUG: ")
    assert between(r.at, 39, 40)


def test_rules_set_to_zero_are_off() -> None:
    off = run.StopRules(crash_grace=0, storm_repeats=0, storm_window=0, post_report_silence=0)
    for name in ("storm_warning_loop.log", "deadlock_after_lockdep.log"):
        assert replay(log_lines(name), off, silence=100).verdict is None
    lines = [ln for ln in log_lines("05_panic_mid_suite.log") if "Kernel panic" not in ln]
    assert replay(lines, off, silence=100).verdict is None
    # the hang rule is still there
    assert replay(log_lines("deadlock_after_lockdep.log"), off, silence=400).verdict == "hang"


def test_deadlines_come_before_failure_states() -> None:
    r = replay(log_lines("storm_warning_loop.log"), timeout=20.0)
    assert r.verdict == "timeout" and r.stop is None


# --- no stop on green runs, nor on failing runs that go on -----------------------------

@pytest.mark.parametrize("name,pace,result_time", [
    ("01_all_pass.log", 0.01, 3.0),
    ("08_skipped.log", 0.01, 3.0),
    ("09_timestamps_interleaved.log", 0.01, 3.0),
    ("real_kcsan_all_pass.log", 0.2, 5.0),
    ("real_um_all_pass.log", 0.3, 0.0),        # 711 lines in 215 s, as on the real run
    ("bench_synthetic_base.log", 0.05, 10.0),
])
def test_a_clean_run_is_never_stopped(name: str, pace: float, result_time: float) -> None:
    r = replay(log_lines(name), pace=pace, result_time=result_time, silence=200)
    assert r.verdict is None, r.verdict
    assert cr.parse_console((DATA / name).read_text()).status == "pass"


def test_a_clean_run_with_long_quiet_cases_is_never_stopped() -> None:
    # a quiet case of 250 s (under the 300 s hang window) is not a failure state
    assert replay(log_lines("real_um_all_pass.log"), pace=0.3, result_time=250.0 / 100,
                  silence=250).verdict is None
    lines = log_lines("01_all_pass.log")
    assert replay(lines, result_time=250.0).verdict is None


@pytest.mark.parametrize("name", [
    "02_lockdep_param_ok.log", "03_kcsan.log", "04_refcount.log", "06_boot_splat.log",
    "real_um_provoke_lockdep.log", "real_um_provoke_warn.log", "real_kcsan_provoke_kcsan.log",
    "real_kcsan_racy_update.log", "real_um_leaked_reference.log", "real_um_lost_decrement.log",
])
def test_a_failing_run_that_goes_on_is_not_stopped(name: str) -> None:
    """One report fails its case; KUnit goes on and the make check entries need the rest."""
    lines = log_lines(name)
    assert cr.parse_console("\n".join(lines)).status == "fail"
    # cases of 2 s between their results, console lines 20 ms apart
    r = replay(lines, pace=0.02, result_time=2.0, silence=10)
    assert r.verdict is None, r.verdict


def test_kcsan_repeats_a_race_within_a_case_so_a_count_alone_is_no_storm() -> None:
    """Why a storm needs its window: KCSAN reported the same race ten times in one case
    of the real racy-update run, and the case then ended normally."""
    lines = log_lines("real_kcsan_racy_update.log")
    counts: dict[str, int] = {}
    worst = 0
    for line in lines:
        text = cr.strip_prefix(line)
        if cr.RESULT.match(text):
            counts = {}
        elif cr.classify(text) == "kcsan":
            counts[text] = counts.get(text, 0) + 1
            worst = max(worst, counts[text])
    assert worst >= 3 * DEFAULT.storm_repeats
    assert replay(lines, pace=0.02, result_time=2.0).verdict is None
    r = replay(lines, replace(DEFAULT, storm_window=0.1), pace=0.02, result_time=2.0)
    assert r.verdict is not None and r.verdict.startswith("stopped: report storm (BUG: KCSAN: ")


def test_the_same_warning_repeated_in_a_case_that_ends_is_no_storm() -> None:
    """A lockdep assertion WARNs on every call: many identical WARNINGs, then the result."""
    warn = "WARNING: kernel/cgroup/cgroup.c:2741 at css_set_move_task+0x1e4/0x230, CPU#1: m/1/9"
    lines = ["KTAP version 1", "1..1", "    KTAP version 1", "    # Subtest: cgroup_migrate",
             "    1..2", "        KTAP version 1", "        # Subtest: migrate_fork_churn"]
    for p in range(3):
        lines += ["------------[ cut here ]------------", warn, "Call Trace:", " kthread+0x1/0x2",
                  "---[ end trace 0000000000000000 ]---"] * 40
        lines.append(f"        not ok {p + 1} {4 << p} threads")
    lines += ["    not ok 1 migrate_fork_churn", "    ok 2 migrate_idle", "not ok 1 cgroup_migrate"]
    assert replay(lines, pace=0.05, silence=10).verdict is None


# --- kunit.py --run_isolated: one boot per suite ----------------------------------------

def test_each_isolated_boot_starts_with_no_failure_state() -> None:
    lockdep = log_lines("deadlock_after_lockdep.log")
    boot2 = ["[12:00:40] Starting KUnit Kernel (2/2)...", "Running tests with:",
             "KTAP version 1", "1..1", "    KTAP version 1", "    # Subtest: cgroup_ucount",
             "    1..1", "    ok 1 ucount_inc_dec", "ok 1 cgroup_ucount"]
    dog = run.Watchdog(boot_timeout=60, hang_timeout=300, timeout=100, start=T0)
    for line in lockdep:
        m = STAMP.match(line)
        dog.saw(line, T0 + float(m.group(1)) if m else T0)
    assert dog.stall is not None and dog.boot == 1 and dog.boots == 1
    dog.halt(T0 + 44)
    assert dog.verdict(T0 + 60) is None  # halted: kunit.py is between boots
    for n, line in enumerate(boot2):
        dog.saw(line, T0 + 61 + n)
    assert (dog.boot, dog.boots) == (2, 2) and dog.stall is None and dog.halted_at is None
    assert dog.verdict(T0 + 61 + 60) is None
    # the run deadline is per isolated boot: counted from the boot line
    assert dog.verdict(T0 + 61 + 99) is None and dog.verdict(T0 + 61 + 101) == "timeout"


def test_an_oops_during_boot_stops_only_if_the_boot_goes_quiet() -> None:
    oops = ["[    1.000000] Linux version 7.3.4",
            "[    2.000000] BUG: unable to handle page fault for address: ffff8880deadbeef",
            "[    2.000001] Oops: Oops: 0000 [#1] SMP NOPTI",
            "[    2.000002] RIP: 0010:some_driver_probe+0x1/0x2"]
    r = replay(oops, silence=30)
    assert r.verdict is not None and r.verdict.startswith("stopped: crash (BUG: unable to handle page fault")
    assert between(r.at, 7, 7.5)
    # the boot goes on printing for longer than the grace, then KUnit runs: no stop
    booting = [f"[   {3 + n}.000000] random boot line {n}" for n in range(8)]
    tests = (DATA / "01_all_pass.log").read_text().splitlines()
    tests = [ln for ln in tests if "KTAP" in ln or ln.startswith((" ", "ok", "not ok", "1.."))]
    assert replay(oops + booting + tests, pace=0.5, silence=20).verdict is None


def test_a_lockup_reported_again_and_again_is_a_storm() -> None:
    """A soft lockup is reported every ~26 s, its seconds in the title: never 30 s of
    silence, never the same title twice; the storm rule counts the kind."""
    lines = log_lines("deadlock_after_lockdep.log")[:12]  # boot, KTAP, the case running
    for n in range(6):
        t = 20.0 + 26 * n
        lines += [f"[{t:12.6f}] watchdog: BUG: soft lockup - CPU#{n % 4} stuck for {22 + 26 * n}s! "
                  f"[cgk_getput/{n % 4}:18{n}]",
                  f"[{t:12.6f}] CPU: {n % 4} UID: 0 PID: 18{n} Comm: cgk_getput/{n % 4}",
                  f"[{t:12.6f}] RIP: 0010:queued_spin_lock_slowpath+0x1c4/0x2b0"]
    r = replay(lines)
    assert r.verdict is not None and r.verdict.startswith(
        "stopped: report storm (watchdog: BUG: soft lockup - CPU#0 stuck for 22s!")
    assert " x3, no KUnit result for 52 s)" in r.verdict and between(r.at, 72, 72.5)


def test_silence_after_an_expected_lockdep_report_does_not_stop() -> None:
    """oracle_sees_lockdep provokes lockdep's RCU report and says it took it: a later
    quiet stretch is not 'silent after a lockdep report' (only the hang rule is left)."""
    lines = log_lines("real_um_oracle_selfchecks.log")
    assert any("oracle: expected lockdep report captured" in ln for ln in lines)
    r = replay(lines, silence=100)
    assert r.verdict is None
    unexpected = [ln for ln in lines if "oracle: expected lockdep" not in ln]
    r = replay(unexpected, silence=100)
    assert r.verdict is not None and r.verdict.startswith("stopped: silent 30 s after lockdep")
