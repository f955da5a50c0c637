"""Long cases (issue 12): the harness prints '# <case>: running 20 s of 600 s, N steps' while
a gang runs, the report ignores those lines, and the watchdog neither calls a healthy long
case a hang nor lets a heartbeat hide workers that stopped stepping; a long
cgroup_kunit.duration_ms raises the hang and run timeouts (suites without the heartbeat).

12_long_case_heartbeat.log is a recorded-style console of two cases run with
duration_ms=600000: one passes, one fails its check after the gang.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from cgkunit import params, run
from cgkunit import console as cr
from cgkunit import export
from cgkunit import summary as sm
from cgkunit.profile import Profile
from conftest import DATA
from test_watchdog import T0, between, log_lines, replay

LONG = "12_long_case_heartbeat.log"
BEAT = re.compile(r"# \w+: running \d+ s of \d+ s, \d+ steps$")
SEED = re.compile(r"^(.*# (\w+): )cgroup_kunit: seed=.*duration_ms=\d+$")


def without_beats(lines: list[str]) -> list[str]:
    return [ln for ln in lines if not BEAT.search(ln)]


def with_beats(lines: list[str], beats: int = 3) -> list[str]:
    """lines with heartbeats after each gang's seed line, as the harness prints them (the
    seed line's printk prefix and indentation, its case)."""
    out: list[str] = []
    for ln in lines:
        out.append(ln)
        m = SEED.match(ln)
        if m:
            out += [f"{m.group(1)}running {20 * k} s of 600 s, {1000 * k + 7} steps"
                    for k in range(1, beats + 1)]
    return out


def no_line_numbers(data: Any) -> Any:
    """data (to_json of a report) without its console line numbers, which insertions shift."""
    if isinstance(data, dict):
        return {k: no_line_numbers(v) for k, v in data.items() if k != "line_no"}
    if isinstance(data, list):
        return [no_line_numbers(v) for v in data]
    return data


def parsed(lines: list[str], verdict: str = "completed") -> Any:
    report = cr.parse_console("\n".join(lines) + "\n", verdict)
    return no_line_numbers(export.report_json(report))


# --- the report -------------------------------------------------------------------------

def test_heartbeat_lines_are_recognised() -> None:
    assert cr.heartbeat("    # reader_fresh: running 40 s of 600 s, 123456 steps") == \
        ("reader_fresh", 123456)
    assert cr.heartbeat("[   22.1][  T58]     # a_b: running 20 s of 1 s, 0 steps") == ("a_b", 0)
    assert cr.heartbeat("reader_fresh: running 40 s of 600 s, 123456 steps") == \
        ("reader_fresh", 123456)  # the text of the diagnostic, as the walker sees it
    for other in ("    # ucount_inc_dec: 730938 steps, 4032 charges admitted, 722874 refused",
                  "    # gang_counts: cgroup_kunit: seed=1 threads=8 duration_ms=600000",
                  "    # rstat: running 40 s of 600 s"):
        assert cr.heartbeat(other) is None


def test_a_recorded_long_run_parses_as_without_its_heartbeats() -> None:
    lines = log_lines(LONG)
    assert sum(1 for ln in lines if BEAT.search(ln)) == 58
    r = cr.parse_console("\n".join(lines) + "\n")
    assert r.status == "fail" and (r.counts.passed, r.counts.failed) == (1, 1)
    assert parsed(lines) == parsed(without_beats(lines))
    t = r.test("cgroup_ucount.rlimit_add_sub.8 threads")
    assert t is not None and t.status == "FAIL"
    assert t.params == {"seed": "8812345501", "threads": "8", "duration_ms": "600000"}
    assert not any("running" in d for x in r.tests for d in x.diagnostics)
    failed = "rlimit_add_sub: EXPECTATION FAILED at lib/kunit-cgroup/ucount_kunit.c:555"
    assert t.diagnostics[:2] == ["rlimit_add_sub: cgroup_kunit: seed=8812345501 threads=8 "
                                 "duration_ms=600000",
                                 "rlimit_add_sub: 24784443 steps, 136930 charges admitted, "
                                 "16386032 refused, 0 from hardirq"]
    assert failed in t.diagnostics and failed in sm.format_summary(r)


WITH_GANGS = sorted(p.name for p in DATA.glob("*.log") if p.name != LONG
                    and any(SEED.match(ln) for ln in p.read_text().splitlines()))


@pytest.mark.parametrize("name", WITH_GANGS)
def test_heartbeats_change_no_golden_log(name: str) -> None:
    lines = log_lines(name)
    beating = with_beats(lines)
    assert len(beating) > len(lines)
    for verdict in ("completed", "hang"):
        assert parsed(beating, verdict) == parsed(lines, verdict)


def test_a_run_stopped_in_a_long_case_is_named_by_its_seed_line() -> None:
    lines = log_lines(LONG)
    cut = next(i for i, ln in enumerate(lines) if "running 300 s of 600 s" in ln)
    r = cr.parse_console("\n".join(lines[:cut + 1]) + "\n", "hang")
    assert r.status == "hang"
    [crash] = [t for t in r.tests if t.level == "crash"]
    assert crash.id.startswith("cgroup_ucount.ucount_inc_dec: running when the kernel stopped")
    assert crash.params["duration_ms"] == "600000"
    assert not any("running 300 s" in d for d in crash.diagnostics)


# --- the watchdog ---------------------------------------------------------------------

def test_the_gang_bound_of_a_command_line() -> None:
    ms = params.duration_ms
    assert ms([]) == ms(["cgroup_kunit.seed=5"]) == params.DEFAULT_DURATION_MS == 1000
    assert ms(["cgroup_kunit.duration_ms=600000"]) == 600000
    assert ms(["cgroup-kunit.duration-ms=0x3e8", "x=1"]) == 1000
    assert ms(["cgroup_kunit.duration_ms=0100"]) == 64  # kstrtouint: octal ...
    assert ms(["cgroup_kunit.duration_ms=5000", "cgroup_kunit.duration_ms=20000"]) == 20000
    # ... refused (and left at the value before) as duration_set() refuses them
    for refused in ("700000", "9", "010", "-5", "5s", "", "1_000", "99999999999"):
        assert ms(["cgroup_kunit.duration_ms=5000", f"cgroup_kunit.duration_ms={refused}"]) == 5000
    assert ms(["cgroup_kunit.duration_ms"]) == 1000


def test_hang_and_run_timeouts_follow_the_gang_bound() -> None:
    assert run.hang_timeout_for(1000) == run.hang_timeout_for(180_000) == run.HANG_S
    assert run.hang_timeout_for(600_000) == 600 + run.HANG_MARGIN_S
    assert run.hang_timeout_for(600_000, 900.0) == 900.0  # a longer hang timeout stays
    p = Profile(name="um-p", arch="um", fragment=Path("/p"), timeout=900, boot_timeout=60)
    assert run.run_timeout_for(p, 1000) == run.run_timeout_for(p, 10) == 900
    assert run.run_timeout_for(p, 2500) == 2250
    assert run.run_timeout_for(p, 600_000) == 900 * 600
    short = Profile(name="um-q", arch="um", fragment=Path("/p"), timeout=100, boot_timeout=60)
    assert run.run_timeout_for(short, 1000) == 60 + run.HANG_S  # the hang rule comes first


def test_exec_command_gives_kunit_py_the_longer_timeout() -> None:
    p = Profile(name="um-p", arch="um", fragment=Path("/p"), timeout=900,
                kernel_args=["seccomp=on"])
    cmd = run.exec_command(Path("/t"), p, Path("/r"), Path("/b"),
                           ["cgroup_kunit.duration_ms=600000"], "")
    assert "--timeout=540000" in cmd
    assert "--timeout=900" in run.exec_command(Path("/t"), p, Path("/r"), Path("/b"), [], "")
    assert "--timeout=77" in run.exec_command(Path("/t"), p, Path("/r"), Path("/b"), [], "",
                                              timeout=77)


def test_exec_tests_watches_with_the_gang_bound(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    image = tmp_path / "linux"
    image.write_text("")
    monkeypatch.setattr(run, "kernel_image", lambda *a, **k: image)
    seen: dict[str, Any] = {}

    def fake_watch(cmd: list[str], console: Path, label: str, **kw: Any) -> run.ExecResult:
        seen.update(kw, cmd=cmd)
        console.write_text("")
        return run.ExecResult(verdict="completed", console_log=console, elapsed=1.0)
    monkeypatch.setattr(run, "watch", fake_watch)
    p = Profile(name="um-p", arch="um", fragment=Path("/p"), timeout=900)
    results = tmp_path / "results"
    run.exec_tests(tmp_path, p, tmp_path, tmp_path, results, ["cgroup_kunit.duration_ms=600000"])
    assert seen["hang_timeout"] == 720.0 and seen["timeout"] == 540000
    assert "--timeout=540000" in seen["cmd"]
    info = run.read_exec_info(results)
    assert (info["duration_ms"], info["hang_timeout"], info["timeout"]) == (600000, 720.0, 540000)
    run.exec_tests(tmp_path, p, tmp_path, tmp_path, results)
    assert (seen["hang_timeout"], seen["timeout"]) == (run.HANG_S, 900)


def test_a_silent_long_gang_is_not_a_hang_before_its_bound_and_margin() -> None:
    # a suite without the heartbeat: nothing between the seed line and the result
    lines = without_beats(log_lines(LONG))
    seed = next(i for i, ln in enumerate(lines) if "ucount_inc_dec: cgroup_kunit: seed=" in ln)
    head, seed_at = lines[:seed + 1], 2.11
    r = replay(head, silence=1000)  # HANG_S alone calls it a hang ...
    assert r.verdict == "hang" and r.at - seed_at <= run.HANG_S + 1
    hang = run.hang_timeout_for(params.duration_ms(["cgroup_kunit.duration_ms=600000"]))
    r = replay(head, hang=hang, silence=301)  # ... not with the bound's
    assert r.verdict is None and r.at >= seed_at + 301
    r = replay(head, hang=hang, silence=1000)
    assert r.verdict == "hang"
    assert between(r.at - seed_at, 600 + run.HANG_MARGIN_S, 600 + run.HANG_MARGIN_S + 1)
    assert replay(lines, hang=hang, polled=True).verdict is None
    r = replay(lines, polled=True)
    assert r.verdict == "hang" and r.lines_fed == seed + 1


def test_heartbeats_keep_a_long_gang_alive() -> None:
    lines = log_lines(LONG)
    r = replay(lines, silence=200, polled=True)  # HANG_S: the heartbeat keeps it going
    assert r.verdict is None and r.at > 1400
    # after a lockdep report, 30 s of silence stop a boot: 20 s heartbeats do not look silent
    lockdep = "[    1.500000][    T1] WARNING: possible circular locking dependency detected"
    r = replay(lines[:3] + [lockdep] + lines[3:], polled=True)
    assert r.verdict is None and r.dog.stall is not None
    r = replay(without_beats(lines[:3] + [lockdep] + lines[3:]), polled=True)
    assert r.verdict is not None and r.verdict.startswith("stopped: silent 30 s after lockdep")


def beats_from(line: str, steps: list[int]) -> list[str]:
    """The heartbeats after line (one of LONG's, 'running 100 s'), 20 s apart, with steps."""
    stamp = float(line[1:line.index("]")])
    return [line.replace(f"[{stamp:12.6f}]", f"[{stamp + 20 * k:12.6f}]")
                .replace("running 100 s", f"running {100 + 20 * k} s")
                .replace(line[line.rindex(", ") + 2:], f"{n} steps")
            for k, n in enumerate(steps, 1)]


def test_a_heartbeat_without_steps_is_silence() -> None:
    lines = log_lines(LONG)
    cut = next(i for i, ln in enumerate(lines) if "running 100 s of 600 s" in ln)
    head, last = lines[:cut + 1], lines[cut]
    stamp, steps = float(last[1:last.index("]")]), cr.heartbeat(last)[1]  # type: ignore[index]
    stuck = beats_from(last, [steps] * 19)  # up to 480 s: the workers stopped at 100 s
    r = replay(head + stuck, polled=True)
    assert r.verdict == "hang" and between(r.at, stamp + run.HANG_S, stamp + run.HANG_S + 1)
    # steps that move are output
    assert replay(head + beats_from(last, [steps + k for k in range(1, 20)]),
                  polled=True).verdict is None
    # nor does a heartbeat hide a deadlock after a lockdep report: the 30 s silence rule
    # stops the boot (its 20 s apart beats would otherwise never leave 30 s of silence)
    lockdep = f"[{stamp + 1:12.6f}][   T58] WARNING: possible circular locking dependency detected"
    r = replay(head + [lockdep] + stuck, polled=True)
    assert r.verdict is not None and r.verdict.startswith("stopped: silent 30 s after lockdep")
    assert between(r.at, stamp + 1 + 30, stamp + 1 + 31)


def test_a_new_boot_forgets_the_last_heartbeat() -> None:
    dog = run.Watchdog(boot_timeout=60, hang_timeout=300, timeout=10_000, start=T0)
    beat = "    # c: running 20 s of 600 s, 5 steps\n"
    dog.saw("KTAP version 1\n", T0)
    dog.saw(beat, T0 + 20)
    dog.saw(beat, T0 + 40)
    assert dog.last_output == T0 + 20
    dog.saw("[12:00:00] Starting KUnit Kernel (2/2)...\n", T0 + 50)
    dog.saw("KTAP version 1\n", T0 + 51)
    dog.saw(beat, T0 + 70)
    assert dog.last_output == T0 + 70
