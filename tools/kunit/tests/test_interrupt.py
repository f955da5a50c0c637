"""Ctrl-C and SIGTERM (issue 31): the kernel under test is stopped, what the run wrote is
kept and its report says "interrupted" (exit status 130, not a CRASH), and an earlier run's
results are replaced only by a run that has results of its own.

The driver runs as a process of its own (the signal goes to it), on a fake kernel tree
whose kunit.py prints a few KTAP lines, starts a "kernel" that leaves its session (as UML
does) and then waits forever: no kernel is built or booted."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cgkunit import console as cr
from cgkunit import summary as sm
from cgkunit import report as rp
from conftest import DATA, KUNIT_DIR
from test_pipeline import fake_run_setup

FAKE_KUNIT = '''#!/usr/bin/env python3
import os, subprocess, sys, time
if sys.argv[1] != "exec":
    sys.exit("the driver does not call kunit.py " + sys.argv[1])
kernel = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(600)"])
with open(os.environ["FAKE_PIDS"], "w") as f:
    f.write(f"{os.getpid()} {kernel.pid}\\n")
delay = float(os.environ.get("FAKE_DELAY", "0"))
time.sleep(delay)
if not delay:
    for line in open(os.environ["FAKE_CONSOLE"]).read().splitlines()[:29]:
        print(line, flush=True)
time.sleep(600)
'''

# The driver, with its project root the fake repo of fake_run_setup.
DRIVER = '''import sys
sys.path.insert(0, {kunit!r})
from pathlib import Path
from cgkunit import cli
cli.find_repo_root = lambda: Path({repo!r})
sys.exit(cli.main(sys.argv[1:]))
'''


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str,
          delay: float = 0) -> tuple[subprocess.Popen[str], Path, Path, Path]:
    kernel, repo, build = fake_run_setup(tmp_path, FAKE_KUNIT)
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(kunit=str(KUNIT_DIR), repo=str(repo)))
    pids = tmp_path / "pids"
    env = {**os.environ, "FAKE_CONSOLE": str(DATA / "01_all_pass.log"), "FAKE_PIDS": str(pids),
           "FAKE_DELAY": str(delay)}
    # Ctrl-C as a terminal delivers it, even where pytest itself runs with SIGINT ignored
    # (a shell's background job): Python then installs no KeyboardInterrupt handler
    proc = subprocess.Popen([sys.executable, str(script), "--build-dir", str(build), *args,
                             "--kernel-src", str(kernel)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return proc, build, pids, repo


def wait_for(what: object, seconds: float = 60) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if callable(what) and what():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def console_has_ktap(build: Path) -> bool:
    return any("KTAP version" in p.read_text(errors="replace")
               for p in (build / "results").glob(".um-t.new-*/console*.log"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_run_is_kept_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                sig: signal.Signals) -> None:
    proc, build, pids, repo = start(tmp_path, monkeypatch, "run", "--profile", "um-t",
                                    "--no-build")
    results = build / "results" / "um-t"
    results.mkdir(parents=True)
    (results / "console.log").write_text("the run before\n")
    wait_for(lambda: console_has_ktap(build))
    assert (results / "console.log").read_text() == "the run before\n"  # not yet replaced
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert out.startswith("cgkunit: um-t: INTERRUPTED (run interrupted)"), out
    assert "Traceback" not in err and err.rstrip().endswith("[cgkunit] interrupted")
    # nothing of the boot is left running
    runner, kernel = (int(x) for x in pids.read_text().split())
    wait_for(lambda: not alive(runner) and not alive(kernel), 30)
    # what it wrote is kept, marked interrupted: not a crash
    assert "KTAP version" in (results / "console.log").read_text()
    assert json.loads((results / "exec.json").read_text())["verdict"] == "interrupted"
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["verdict"] == "interrupted"
    assert not [t for t in summary["tests"] if t["status"] == "CRASH"]
    assert [p.name for p in results.parent.iterdir()] == ["um-t"]
    # and report says the same, with the same exit status
    script = tmp_path / "driver.py"
    rep = subprocess.run([sys.executable, str(script), "--build-dir", str(build), "report",
                          "--profile", "um-t"], capture_output=True, text=True, timeout=60)
    assert rep.returncode == 130 and rep.stdout.startswith("cgkunit: um-t: INTERRUPTED")


def test_interrupted_before_the_kernel_said_anything_keeps_the_earlier_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proc, build, pids, repo = start(tmp_path, monkeypatch, "run", "--profile", "um-t",
                                    "--no-build", delay=600)
    results = build / "results" / "um-t"
    results.mkdir(parents=True)
    (results / "console.log").write_text("the run before\n")
    wait_for(pids.exists)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and out == "" and "Traceback" not in err
    runner, kernel = (int(x) for x in pids.read_text().split())
    wait_for(lambda: not alive(runner) and not alive(kernel), 30)
    assert (results / "console.log").read_text() == "the run before\n"
    assert [p.name for p in results.parent.iterdir()] == ["um-t"]


def test_an_interrupted_console_is_not_a_crash() -> None:
    lines = (DATA / "01_all_pass.log").read_text().splitlines()[:29]
    r = cr.parse_console("\n".join(lines) + "\n", rp.INTERRUPTED)
    assert r.status == "interrupted" and rp.exit_code(r.status) == rp.EXIT_INTERRUPTED == 130
    assert r.counts.crashed == 0 and not r.failed_tests()
    point = [t for t in r.tests if t.level == rp.INTERRUPTED]
    assert len(point) == 1 and point[0].status == "SKIP"
    assert point[0].id.startswith("cgroup_ucount.ucount_inc_dec: running when the run was "
                                  "interrupted")
    assert r.test("cgroup_ucount.ucount_inc_dec.4 threads").status == "PASS"  # type: ignore[union-attr]
    text = sm.format_summary(r)
    assert text.splitlines()[0].startswith("cgkunit: ?: INTERRUPTED (run interrupted)")
    assert "CRASH" not in text
