"""run: kunit.py command lines, build failure reasons, the watchdog (with fake kernels)."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from cgkunit import run
from cgkunit.common import DriverError
from cgkunit.profile import Profile


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
                       "--kernel_args=panic=-1", "cgroup_ucount.*"]


def test_exec_command_um_and_explicit_panic() -> None:
    cmd = run.exec_command(Path("/t"), prof("um", kernel_args=["seccomp=on"]), Path("/r"),
                           Path("/b"), [], "")
    assert cmd[-1] == "--kernel_args=seccomp=on" and not any("panic" in a for a in cmd)
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


def test_clear_results(tmp_path: Path) -> None:
    (tmp_path / "console.log").write_text("old")
    (tmp_path / "keep.txt").write_text("mine")
    run.clear_results(tmp_path)
    assert not (tmp_path / "console.log").exists() and (tmp_path / "keep.txt").exists()


# --- watchdog --------------------------------------------------------------------

def fake(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "kernel.py"
    script.write_text("import sys, time, subprocess\n" + body)
    return [sys.executable, "-u", str(script)]


def watch(tmp_path: Path, body: str, **kw: float) -> run.ExecResult:
    opts: dict[str, float] = {"boot_timeout": 5.0, "timeout": 20.0, "hang_timeout": 5.0,
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


def test_watch_overall_timeout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = ("print('KTAP version 1', flush=True)\nn = 0\nwhile True:\n    n += 1\n"
            "    print(f'    ok {n} case_{n}', flush=True)\n    time.sleep(0.05)\n")
    r = watch(tmp_path, body, timeout=1.0)
    assert r.verdict == "timeout" and r.elapsed < 12
    assert "last: ok" in capsys.readouterr().err


def test_watch_missing_command(tmp_path: Path) -> None:
    with pytest.raises(DriverError, match="command not found"):
        run.watch(["/nonexistent/kunit"], tmp_path / "c.log", "x", cwd=None, env=None,
                  boot_timeout=1, timeout=1)


def test_kunit_env(tmp_path: Path) -> None:
    env = run.kunit_env(tmp_path)
    assert env["PYTHONUNBUFFERED"] == "1" and env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PATH"].startswith(f"{tmp_path}{os.pathsep}")
