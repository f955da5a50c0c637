"""run: kunit.py command lines, build failure reasons, the watchdog (with fake kernels)."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from cgkunit import procs
from cgkunit import console as cr
from cgkunit import report as rp
from cgkunit import run
from cgkunit.common import DriverError
from cgkunit.profile import Profile
from conftest import DATA


def prof(arch: str = "um", **kw: object) -> Profile:
    return Profile(name=f"{arch}-p", arch=arch, fragment=Path("/repo/tools/kunit/profiles/p.config"),
                   **kw)  # type: ignore[arg-type]


def test_build_command() -> None:
    cmd = run.build_command(Path("/t"), prof(), Path("/repo"), Path("/b/out/um-p"), 2, True,
                            ["CONFIG_MODULES=y"])
    assert cmd[1:] == ["/t/tools/testing/kunit/kunit.py", "build", "--build_dir=/b/out/um-p",
                       "--kunitconfig=/repo/.kunitconfig",
                       "--kunitconfig=/repo/tools/kunit/profiles/p.config", "--arch=um",
                       "--jobs=2", "--kconfig_add=CONFIG_MODULES=y",
                       "--make_options=CC=ccache gcc", "--make_options=HOSTCC=ccache gcc"]
    assert not any("ccache" in a for a in run.build_command(Path("/t"), prof(), Path("/r"),
                                                            Path("/o"), 1, False))


def test_exec_command_x86() -> None:
    p = prof("x86_64", kernel_args=["a=1"], qemu_smp=4, timeout=1800)
    cmd = run.exec_command(Path("/t"), p, Path("/repo"), Path("/b"), ["cgroup_kunit.seed=5"],
                           "cgroup_ucount.*")
    assert cmd[2:] == ["exec", "--build_dir=/b/out/x86_64-p", "--kunitconfig=/repo/.kunitconfig",
                       "--kunitconfig=/repo/tools/kunit/profiles/p.config", "--arch=x86_64",
                       "--raw_output=all", "--timeout=1800", "--qemu_args=-smp 4",
                       "--kernel_args=a=1", "--kernel_args=cgroup_kunit.seed=5",
                       "--kernel_args=cgroup_kunit.selfcheck=1", "--kernel_args=panic=-1",
                       "cgroup_ucount.*"]


@pytest.mark.parametrize("args", [["cgroup_kunit.selfcheck=0"], ["cgroup-kunit.selfcheck=n"],
                                  ["cgroup_kunit.selfcheck=1"]])
def test_exec_command_leaves_selfcheck_to_the_arguments_that_set_it(args: list[str]) -> None:
    """The driver's boots run the oracle's self-checks on real reports, unless told not to
    (a default boot: no report provoked, the kernel left untainted)."""
    cmd = run.exec_command(Path("/t"), prof("um"), Path("/r"), Path("/b"), args, "")
    assert [a for a in cmd if "selfcheck" in a] == [f"--kernel_args={args[0]}"]


def test_exec_command_um_and_explicit_panic() -> None:
    cmd = run.exec_command(Path("/t"), prof("um", kernel_args=["seccomp=on"]), Path("/r"),
                           Path("/b"), [], "")
    assert cmd[-2:] == ["--kernel_args=seccomp=on", "--kernel_args=cgroup_kunit.selfcheck=1"]
    assert not any("panic" in a for a in cmd)
    cmd = run.exec_command(Path("/t"), prof("x86_64"), Path("/r"), Path("/b"), ["panic=5"], "")
    assert [a for a in cmd if "panic" in a] == ["--kernel_args=panic=5"]
    with pytest.raises(DriverError):
        run.exec_command(Path("/t"), prof(), Path("/r"), Path("/b"), [], "--evil")


def test_build_failure_reason() -> None:
    gcc = ("Building with:\n$ make all\nERROR:root:../kernel/ucount.c: In function 'f':\n"
           "../kernel/ucount.c:12:5: error: 'x' undeclared (first use in this function)\n"
           "make[3]: *** [../scripts/Makefile.build:229: kernel/ucount.o] Error 1\n")
    assert run.build_failure(gcc) == "../kernel/ucount.c:12:5: error: 'x' undeclared (first use in this function)"
    cfg = ("ERROR:root:Not all Kconfig options selected in kunitconfig were in the generated .config.\n"
           "This is probably due to unsatisfied dependencies.\nMissing: CONFIG_KCSAN=y\n")
    assert run.build_failure(cfg).endswith("Missing: CONFIG_KCSAN=y")
    assert run.build_failure("") == "no output"


def test_exec_needs_a_built_kernel(tmp_path: Path) -> None:
    with pytest.raises(DriverError, match="no kernel built for um-p"):
        run.exec_tests(tmp_path, prof(), tmp_path, tmp_path, tmp_path / "results")


def test_new_results_replace_the_old_only_once_done(tmp_path: Path) -> None:
    results = tmp_path / "results" / "um-p"
    results.mkdir(parents=True)
    (results / "console.log").write_text("old")
    with run.new_results(results) as stage:
        assert stage.parent == results.parent and stage != results
        assert (results / "console.log").read_text() == "old"  # still there while it runs
        (stage / "console.log").write_text("new")
    assert (results / "console.log").read_text() == "new"
    assert sorted(p.name for p in results.parent.iterdir()) == ["um-p"]


def test_new_results_keep_the_old_after_an_error(tmp_path: Path) -> None:
    results = tmp_path / "um-p"
    results.mkdir()
    (results / "console.log").write_text("old")
    for exc in (DriverError("no kernel"), KeyboardInterrupt()):
        with pytest.raises(type(exc)):
            with run.new_results(results) as stage:
                (stage / "console.log").write_text("half")
                raise exc
        assert (results / "console.log").read_text() == "old"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["um-p"]
    # what a run killed hard left beside it goes with the next run
    (tmp_path / ".um-p.new-1").mkdir()
    with run.new_results(tmp_path / "um-p"):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["um-p"]


# --- watchdog --------------------------------------------------------------------

def fake(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "kernel.py"
    script.write_text("import sys, time, subprocess\n" + body)
    return [sys.executable, "-u", str(script)]


def watch(tmp_path: Path, body: str, **kw: object) -> run.ExecResult:
    opts: dict[str, object] = {"boot_timeout": 5.0, "timeout": 20.0, "hang_timeout": 5.0,
                               "poll": 0.05, "heartbeat": 0.2}
    opts.update(kw)
    return run.watch(fake(tmp_path, body), tmp_path / "console.log", "running t", cwd=tmp_path,
                     env=None, **opts)  # type: ignore[arg-type]


def test_watch_completed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = watch(tmp_path, "print('Linux version 7.3.4')\nprint('[    1.0] KTAP version 1')\n"
                        "print('1..1')\ntime.sleep(0.5)\nprint('ok 1 cgroup_ucount')\n")
    assert r.verdict == "completed"
    assert r.console_log.read_text().splitlines() == [
        "Linux version 7.3.4", "[    1.0] KTAP version 1", "1..1", "ok 1 cgroup_ucount"]
    assert "running t: running," in capsys.readouterr().err


def test_watch_boot_timeout(tmp_path: Path) -> None:
    r = watch(tmp_path, "print('Linux version 7.3.4', flush=True)\ntime.sleep(60)\n", boot_timeout=0.5)
    assert r.verdict == "boot-timeout" and r.elapsed < 10
    assert "Linux version" in r.console_log.read_text()


def test_watch_hang_kills_the_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    body = (f"child = subprocess.Popen(['sleep', '60'])\nopen({str(pidfile)!r}, 'w').write(str(child.pid))\n"
            "print('KTAP version 1', flush=True)\ntime.sleep(60)\n")
    r = watch(tmp_path, body, hang_timeout=0.5)
    assert r.verdict == "hang" and r.elapsed < 15
    pid = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            break
        time.sleep(0.1)
    else:
        pytest.fail("grandchild still running")


# A UML kernel: kunit.py's child, which leaves kunit.py's session with setsid() and has
# a helper process of its own (UML's userspace stub), both sleeping until killed.
UML_LIKE = ("import os, subprocess, sys, time\n"
            "os.setsid()\n"
            "helper = subprocess.Popen(['sleep', '300'])\n"
            "open(sys.argv[1], 'w').write(f'{os.getpid()} {helper.pid}')\n"
            "print('KTAP version 1', flush=True)\n"
            "time.sleep(300)\n")


def _gone(pids: list[int]) -> bool:
    for _ in range(100):
        if not any(procs.alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def _uml_like(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "uml.py").write_text(UML_LIKE)
    return tmp_path / "uml.py", tmp_path / "uml.pids"


def test_watch_kills_a_kernel_that_left_the_session(tmp_path: Path) -> None:
    """The watchdog stops a hung UML-like kernel: nothing of it is left, helper included."""
    uml, pidfile = _uml_like(tmp_path)
    body = (f"k = subprocess.Popen([sys.executable, '-u', {str(uml)!r}, {str(pidfile)!r}], "
            "stdout=subprocess.PIPE, text=True)\n"
            "for line in k.stdout:\n    print(line, end='', flush=True)\n")
    r = watch(tmp_path, body, hang_timeout=0.5)
    assert r.verdict == "hang"
    pids = [int(p) for p in pidfile.read_text().split()]
    assert _gone(pids), f"left running: {[p for p in pids if procs.alive(p)]}"


def test_watch_kills_a_kernel_its_runner_left_behind(tmp_path: Path) -> None:
    """kunit.py exits (its own timeout) while the kernel it started lives on, reparented:
    the driver, a child subreaper, still finds and ends it."""
    uml, pidfile = _uml_like(tmp_path)
    body = (f"k = subprocess.Popen([sys.executable, '-u', {str(uml)!r}, {str(pidfile)!r}], "
            "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            f"while not os.path.exists({str(pidfile)!r}): time.sleep(0.02)\n"
            "print('KTAP version 1', flush=True)\nprint('1..0', flush=True)\n")
    r = watch(tmp_path, "import os\n" + body)
    assert r.verdict == "completed"
    pids = [int(p) for p in pidfile.read_text().split()]
    assert _gone(pids), f"left running: {[p for p in pids if procs.alive(p)]}"


def test_watch_ctrl_c_kills_the_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while a kernel runs: KeyboardInterrupt goes on up, the kernel does not."""
    uml, pidfile = _uml_like(tmp_path)
    body = (f"k = subprocess.Popen([sys.executable, '-u', {str(uml)!r}, {str(pidfile)!r}], "
            "stdout=subprocess.PIPE, text=True)\n"
            "for line in k.stdout:\n    print(line, end='', flush=True)\n")
    calls = []

    def clock() -> float:
        calls.append(1)
        if pidfile.exists() and len(calls) > 3:
            raise KeyboardInterrupt
        return time.monotonic()

    with pytest.raises(KeyboardInterrupt):
        watch(tmp_path, body, clock=clock)
    pids = [int(p) for p in pidfile.read_text().split()]
    assert _gone(pids), f"left running: {[p for p in pids if procs.alive(p)]}"


def test_watch_overall_timeout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = ("print('KTAP version 1', flush=True)\nn = 0\nwhile True:\n    n += 1\n"
            "    print(f'    ok {n} case_{n}', flush=True)\n    time.sleep(0.05)\n")
    r = watch(tmp_path, body, timeout=1.0)
    assert r.verdict == "timeout" and r.elapsed < 12
    assert "last: ok" in capsys.readouterr().err


VERB = {"PASS": "ok", "FAIL": "not ok", "SKIP": "skipped"}


def progress_of(report: rp.Report) -> str:
    """What the live progress must say once the whole console is in: the report's count of
    result lines and its last reported test, with KUnit's word for it."""
    done = sorted((t for t in report.tests if t.line_no is not None), key=lambda t: t.line_no or 0)
    last = f", last: {VERB[done[-1].kunit_status]} {done[-1].display}" if done else ""
    return f"{len(done)} results{last}"


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.log")))
def test_live_reader_agrees_with_the_report(name: str) -> None:
    """The watchdog's reader, fed a recorded console line by line, sees the report's results,
    last test and reports."""
    text = (DATA / name).read_text()
    state = cr.ConsoleState()
    for line in text.splitlines():
        state.feed(line)
    report = cr.parse_console(text)
    assert state.progress() == progress_of(report)
    assert [(s.kind, s.title, s.line_no) for s in state.splats if not s.expected] == \
        [(s.kind, s.title, s.line_no) for s in report.splats]


def test_watch_progress_agrees_with_the_report(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    log = DATA / "02_lockdep_param_ok.log"
    r = watch(tmp_path, f"print(open({str(log)!r}).read(), end='', flush=True)\n", heartbeat=0.0)
    assert r.verdict == "completed"
    beats = [ln for ln in capsys.readouterr().err.splitlines() if "running t: running" in ln]
    report = cr.parse_console(r.console_log.read_text())
    assert beats[-1].endswith(f"s, {progress_of(report)}")
    assert progress_of(report) == "9 results, last: ok cgroup_ucount"


def test_watch_missing_command(tmp_path: Path) -> None:
    with pytest.raises(DriverError, match="command not found"):
        run.watch(["/nonexistent/kunit"], tmp_path / "c.log", "x", cwd=None, env=None,
                  boot_timeout=1, timeout=1)


def test_kunit_env(tmp_path: Path) -> None:
    env = run.kunit_env(tmp_path)
    assert env["PYTHONUNBUFFERED"] == "1" and env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PATH"].startswith(f"{tmp_path}{os.pathsep}")


# --- failure states end a boot early (fake kernels; the rules are in test_watchdog.py) --------

FAST = run.StopRules(crash_grace=0.2, storm_repeats=3, storm_window=0.3, post_report_silence=0.3)


def test_exec_command_isolated() -> None:
    cmd = run.exec_command(Path("/t"), prof(), Path("/r"), Path("/b"), [], "cgroup_*", isolate="suite")
    assert cmd[-2:] == ["--run_isolated=suite", "cgroup_*"]
    assert not any("run_isolated" in a for a in run.exec_command(Path("/t"), prof(), Path("/r"),
                                                                   Path("/b"), [], ""))


def test_stop_rules_of_a_profile() -> None:
    p = prof(crash_grace=15.0, storm_repeats=4, storm_window=20.0, post_report_silence=0.0)
    rules = run.StopRules.of(p)
    assert rules == run.StopRules(crash_grace=15.0, storm_repeats=4, storm_window=20.0,
                                  post_report_silence=0.0)
    assert rules.describe() == "panic, crash grace 15s, storm 4x/20s, silence after a report off"
    assert run.StopRules.of(prof()) == run.StopRules()


def test_watch_stops_a_report_storm(tmp_path: Path) -> None:
    body = ("print('KTAP version 1\\n1..1\\n    KTAP version 1\\n    # Subtest: s\\n    1..2', flush=True)\n"
            "n = 0\nwhile True:\n    n += 1\n"
            "    print(f'WARNING: kernel/x.c:1 at f+0x1/0x2, CPU#{n % 4}: t/{n}', flush=True)\n"
            "    print('Call Trace:\\n ---[ end trace 0000000000000000 ]---', flush=True)\n"
            "    time.sleep(0.02)\n")
    r = watch(tmp_path, body, rules=FAST)
    assert r.verdict.startswith("stopped: report storm (WARNING: kernel/x.c:1 at f+0x1/0x2 x")
    assert [s.rule for s in r.stops] == ["storm"] and r.elapsed < 10


def test_watch_stops_silence_after_lockdep(tmp_path: Path) -> None:
    body = ("print('KTAP version 1\\n1..1\\n    KTAP version 1\\n    # Subtest: s\\n    1..2', flush=True)\n"
            "print('WARNING: possible circular locking dependency detected', flush=True)\n"
            "time.sleep(60)\n")
    r = watch(tmp_path, body, rules=FAST)
    assert r.verdict == ("stopped: silent 0.3 s after lockdep report "
                         "(WARNING: possible circular locking dependency detected)")
    assert r.elapsed < 10 and r.stops[0].line == 6


def test_watch_stops_after_a_panic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run, "PANIC_GRACE_S", 0.1)
    body = ("print('KTAP version 1\\n1..1', flush=True)\n"
            "print('Kernel panic - not syncing: Fatal exception', flush=True)\ntime.sleep(60)\n")
    r = watch(tmp_path, body, rules=FAST)
    assert r.verdict == "stopped: panic (Kernel panic - not syncing: Fatal exception)"
    assert r.elapsed < 10


def test_watch_does_not_stop_a_clean_run(tmp_path: Path) -> None:
    body = ("print('KTAP version 1\\n1..1\\n    KTAP version 1\\n    # Subtest: s\\n    1..2', flush=True)\n"
            "time.sleep(0.4)\nprint('    ok 1 a', flush=True)\ntime.sleep(0.4)\n"
            "print('    ok 2 b\\nok 1 s', flush=True)\n")
    r = watch(tmp_path, body, rules=FAST)
    assert r.verdict == "completed" and r.stops == []


KERNEL_PANICS = ("import time\nprint('KTAP version 1\\n1..1\\n    KTAP version 1\\n"
                 "    # Subtest: s1\\n    1..2\\n    ok 1 a', flush=True)\n"
                 "print('Kernel panic - not syncing: boom', flush=True)\ntime.sleep(60)\n")
KERNEL_PASSES = ("print('KTAP version 1\\n1..1\\n    KTAP version 1\\n    # Subtest: s2\\n"
                 "    1..1\\n    ok 1 b\\nok 1 s2', flush=True)\n")


def test_watch_isolated_kills_only_the_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kunit.py --run_isolated: a stopped kernel costs only its own boot."""
    monkeypatch.setattr(run, "PANIC_GRACE_S", 0.1)
    body = (f"kernels = [{KERNEL_PANICS!r}, {KERNEL_PASSES!r}]\n"
            "for i, k in enumerate(kernels, 1):\n"
            "    print(f'[12:00:0{i}] Starting KUnit Kernel ({i}/2)...', flush=True)\n"
            "    child = subprocess.Popen([sys.executable, '-u', '-c', k], stdout=subprocess.PIPE, text=True)\n"
            "    for line in child.stdout:\n        print(line, end='', flush=True)\n"
            "    child.wait()\n")
    r = watch(tmp_path, body, rules=FAST, timeout=30.0, isolated=True)
    assert r.verdict == "stopped: panic (Kernel panic - not syncing: boom)"
    assert [(s.rule, s.boot, s.boots) for s in r.stops] == [("panic", 1, 2)]
    assert r.elapsed < 15
    text = r.console_log.read_text()
    assert "Starting KUnit Kernel (2/2)" in text and "ok 1 s2" in text
    report = cr.parse_console(text, r.verdict)
    cr.attach_stops(report, [s.to_json() for s in r.stops])
    assert report.status == "crash"
    assert [(t.id, t.status) for t in report.tests if t.level != "crash"] == [
        ("s1", "CRASH"), ("s1.a", "PASS"), ("s2", "PASS"), ("s2.b", "PASS")]
    [crash] = [t for t in report.tests if t.level == "crash"]
    assert crash.splats[0].kind == "panic" and crash.boot == 1


def test_exec_tests_records_the_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run, "PANIC_GRACE_S", 0.1)
    # isolated, but this fake kunit.py is its own kernel: nothing else to kill, so the
    # watchdog waits for a next boot that never comes, then ends the run
    monkeypatch.setattr(run, "KERNEL_KILL_WAIT_S", 0.1)
    tree, build = tmp_path / "tree", tmp_path / "build"
    script = tree / run.KUNIT_PY
    script.parent.mkdir(parents=True)
    script.write_text("import time\nprint('KTAP version 1\\n1..1', flush=True)\n"
                      "print('Kernel panic - not syncing: boom', flush=True)\ntime.sleep(60)\n")
    (build / "out" / "um-p").mkdir(parents=True)
    (build / "out" / "um-p" / "linux").write_text("elf")
    results = tmp_path / "results"
    r = run.exec_tests(tree, prof(storm_window=7.0, isolate="suite"), tmp_path, build, results,
                       filter_glob="s1")
    assert r.verdict == "stopped: panic (Kernel panic - not syncing: boom)"
    info = run.read_exec_info(results)
    assert info["verdict"] == r.verdict and info["isolate"] == "suite"
    assert info["rules"] == {"crash_grace": 5.0, "storm_repeats": 3, "storm_window": 7.0,
                             "post_report_silence": 30.0}
    assert info["stops"] == [{"rule": "panic", "reason": "panic (Kernel panic - not syncing: boom)",
                              "at": pytest.approx(info["stops"][0]["at"]),  # type: ignore[index]
                              "report": "Kernel panic - not syncing: boom", "line": 3,
                              "boot": 0, "boots": 0}]
    assert "--run_isolated=suite" in info["command"]  # type: ignore[operator]


def _fake_boots(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                verdicts: list[str]) -> list[int]:
    """exec_tests with a built image and watch() replaced by boots ending in verdicts."""
    image = tmp_path / "linux"
    image.write_text("")
    monkeypatch.setattr(run, "kernel_image", lambda *a, **k: image)
    calls: list[int] = []

    def fake_watch(cmd: object, console: Path, label: str, **kw: object) -> run.ExecResult:
        calls.append(1)
        verdict = verdicts[len(calls) - 1]
        console.write_text(f"Linux version 7.3.4\nboot {len(calls)}\n")
        return run.ExecResult(verdict=verdict, console_log=console, elapsed=1.0)
    monkeypatch.setattr(run, "watch", fake_watch)
    return calls


def test_exec_tests_boots_again_after_an_early_hang(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    calls = _fake_boots(monkeypatch, tmp_path, ["boot-timeout", "completed"])
    results = tmp_path / "results"
    r = run.exec_tests(tmp_path, prof(), tmp_path, tmp_path, results, filter_glob="s1")
    assert r.verdict == "completed" and len(calls) == 2
    assert "boot 2" in (results / "console.log").read_text()
    assert "boot 1" in (results / "console.boot-timeout-1.log").read_text()
    info = run.read_exec_info(results)
    assert info["boot_retries"] == [{"verdict": "boot-timeout", "elapsed": 1.0,
                                     "console": "console.boot-timeout-1.log"}]
    # a later run starts clean
    _fake_boots(monkeypatch, tmp_path, ["completed"])
    run.exec_tests(tmp_path, prof(), tmp_path, tmp_path, results, filter_glob="s1")
    assert not (results / "console.boot-timeout-1.log").exists()
    assert run.read_exec_info(results)["boot_retries"] == []


def test_exec_tests_reports_a_second_early_hang(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    calls = _fake_boots(monkeypatch, tmp_path, ["boot-timeout", "boot-timeout", "completed"])
    r = run.exec_tests(tmp_path, prof(), tmp_path, tmp_path, tmp_path / "results", filter_glob="s1")
    assert r.verdict == "boot-timeout" and len(calls) == 2


@pytest.mark.parametrize("verdict", ["hang", "timeout", "crash", "completed"])
def test_exec_tests_never_reboots_after_kunit_started(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path, verdict: str) -> None:
    calls = _fake_boots(monkeypatch, tmp_path, [verdict, "completed"])
    r = run.exec_tests(tmp_path, prof(), tmp_path, tmp_path, tmp_path / "results", filter_glob="s1")
    assert r.verdict == verdict and len(calls) == 1


def test_an_interrupted_long_command_leaves_nothing_running(tmp_path: Path) -> None:
    """Ctrl-C or SIGTERM during a build (common.run_logged): the command and what it started
    (make, the compilers) go, not only the command."""
    import signal
    import threading
    from cgkunit.common import run_logged
    pids = tmp_path / "pids"
    script = (f"import subprocess, sys, time\n"
              f"c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
              f"open({str(pids)!r}, 'w').write(f'{{c.pid}}')\n"
              f"time.sleep(600)\n")
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    # as at a terminal, even where pytest runs with SIGINT ignored (a shell's background job)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_logged([sys.executable, "-c", script], tmp_path / "log", "building")
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, before)
    child = int(pids.read_text())
    for _ in range(50):
        try:
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            break
        if state in ("Z", "X"):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the build's child {child} still runs")
