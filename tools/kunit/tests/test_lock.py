"""One command at a time in a build root (issue 31): a second command names the one that
holds it and stops with exit status 2, or waits when asked to; a command the holder runs
itself (git bisect run's bisect-step) works under the holder's lock."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cgkunit import cli, lock
from cgkunit.common import Context, DriverError
from conftest import KUNIT_DIR

ENTRY = KUNIT_DIR / "cgkunit.py"
HOLDER = '''import sys, time
sys.path.insert(0, {kunit!r})
from pathlib import Path
from cgkunit.lock import BuildLock
held = BuildLock(Path({build!r})).acquire(["cgkunit", "run", "--profile", "um-lockdep"])
print("held", flush=True)
time.sleep(float(sys.argv[1]))
'''


def hold(build: Path, seconds: float) -> subprocess.Popen[str]:
    """Another process holding build's lock for seconds (it says 'held' once it does)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER.format(kunit=str(KUNIT_DIR),
                                                                 build=str(build)), str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def entry(build: Path, *args: str, env: dict[str, str] | None = None,
          ) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in (lock.HOLDER_ENV, lock.WAIT_ENV)}
    return subprocess.run([sys.executable, str(ENTRY), "--build-dir", str(build), *args],
                          capture_output=True, text=True, timeout=120, env={**full, **(env or {})})


def test_a_second_command_names_the_holder_and_stops(tmp_path: Path) -> None:
    build = tmp_path / "build"
    holder = hold(build, 60)
    try:
        proc = entry(build, "report", "--profile", "um-lockdep")
        assert proc.returncode == 2
        lines = proc.stderr.splitlines()
        assert len(lines) == 1, proc.stderr
        assert lines[0].startswith(f"cgkunit: error: the build root {build} is in use by pid "
                                   f"{holder.pid} (cgkunit run --profile um-lockdep, since ")
        assert lines[0].endswith("; wait for it to end, or set CGKUNIT_WAIT_LOCK=1 "
                                 "(--wait-lock) to wait for it")
        assert not (build / "results").exists()
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("how", ["option", "environment"])
def test_waiting_for_the_lock_says_so(tmp_path: Path, how: str) -> None:
    build = tmp_path / "build"
    holder = hold(build, 2)
    try:
        args = ["--wait-lock"] if how == "option" else []
        env = {lock.WAIT_ENV: "yes"} if how == "environment" else {}
        start = time.monotonic()
        proc = subprocess.run([sys.executable, str(ENTRY), *args, "--build-dir", str(build),
                               "report", "--profile", "um-lockdep"], capture_output=True,
                              text=True, timeout=120,
                              env={**{k: v for k, v in os.environ.items()
                                      if k != lock.HOLDER_ENV}, **env})
        assert time.monotonic() - start >= 1.0
        # it waited, then ran: report finds no run
        assert proc.returncode == 2 and "no console log at" in proc.stderr.splitlines()[-1]
        assert f"[cgkunit] waiting for the build root {build}: in use by pid {holder.pid}" \
            in proc.stderr
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_is_released_when_the_holder_dies(tmp_path: Path) -> None:
    build = tmp_path / "build"
    holder = hold(build, 60)
    holder.kill()
    holder.wait()
    proc = entry(build, "report", "--profile", "um-lockdep")
    assert "no console log at" in proc.stderr


def test_a_command_of_the_holder_runs_under_its_lock(tmp_path: Path) -> None:
    """git bisect run calls cgkunit.py bisect-step while bisect holds the lock: the step
    finds the holder's pid and build root in CGKUNIT_LOCK_HOLDER and does not wait for its
    own parent."""
    build = tmp_path / "build"
    held = lock.BuildLock(build.resolve()).acquire(["cgkunit", "bisect"])
    try:
        assert os.environ[lock.HOLDER_ENV] == f"{os.getpid()} {build.resolve()}"
        proc = entry(build, "bisect-step", "--profile", "um-lockdep",
                     env={lock.HOLDER_ENV: os.environ[lock.HOLDER_ENV]})
        # it ran (and found no bisection), it did not stop at the lock
        assert "no bisection in progress" in proc.stderr and "in use by" not in proc.stderr
        # a stranger with another pid in the variable does not get in
        proc = entry(build, "report", "--profile", "um-lockdep",
                     env={lock.HOLDER_ENV: f"1 {build.resolve()}"})
        assert proc.returncode == 2 and "is in use by pid" in proc.stderr
    finally:
        held.release()
    assert lock.HOLDER_ENV not in os.environ


def test_commands_that_write_take_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[bool] = []

    def fake(args: object, ctx: Context) -> int:
        with pytest.raises(DriverError, match="is in use by pid"):
            lock.BuildLock(ctx.build).acquire(["other"], env={})
        seen.append(True)
        return 0
    monkeypatch.setattr(cli, "run_command", fake)
    monkeypatch.setattr(cli, "preflight", lambda *a: None)
    monkeypatch.delenv(lock.HOLDER_ENV, raising=False)
    for argv in (["prepare"], ["fetch"], ["report", "--profile", "um-lockdep"],
                 ["run", "--profile", "um-lockdep"], ["check"], ["mbox"]):
        assert cli.main(["--build-dir", str(tmp_path / "b"), *argv]) == 0
    assert len(seen) == 6
    assert lock.HOLDER_ENV not in os.environ
    # what only reads runs beside a holder
    held = lock.BuildLock(tmp_path / "b").acquire(["cgkunit", "bench"], env={})
    try:
        for argv in (["check", "--list"], ["profiles"]):
            monkeypatch.setattr(cli, "run_command", lambda *a: 0)
            assert cli.main(["--build-dir", str(tmp_path / "b"), *argv]) == 0
    finally:
        held.release()
    assert set(cli.PREPARES) | {"fetch", "report"} <= set(cli.LOCKED)
