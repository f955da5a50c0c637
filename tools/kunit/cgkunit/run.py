"""Build with the tree's own kunit.py, boot with a watchdog, keep the console."""
from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from .common import DriverError, HEARTBEAT_S, read_json, run_logged, say, write_json
from .profile import Profile, out_dir

KUNIT_PY = Path("tools") / "testing" / "kunit" / "kunit.py"
HANG_S = 300.0
HEADER = re.compile(r"K?TAP version \d+")
RESULT = re.compile(r"^\s*((?:not )?ok \d+.*)$")
SUBTEST = re.compile(r"# Subtest: (.*)$")
STAMP_PREFIX = re.compile(r"^(?:\[\s*\d+\.\d+\])?(?:\[\s*[TC]\d+\])? ?")
RESULT_FILES = ("console.log", "exec.json", "results.json", "results.xml", "results.ktap",
                "parse.log", "summary.json", "summary.txt")


@dataclass
class ExecResult:
    """How a boot ended and where its console went."""
    verdict: str
    console_log: Path
    elapsed: float


def kunit_env(extra_path: Path | None = None) -> dict[str, str]:
    """Environment for kunit.py: unbuffered, no .pyc in the tree, optional PATH shim."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    if extra_path is not None:
        env["PATH"] = f"{extra_path}{os.pathsep}{env.get('PATH', '')}"
    return env


def kunitconfig_args(repo_root: Path, profile: Profile) -> list[str]:
    return [f"--kunitconfig={repo_root / '.kunitconfig'}", f"--kunitconfig={profile.fragment}"]


def build_command(tree: Path, profile: Profile, repo_root: Path, out: Path, jobs: int,
                  ccache: bool, kconfig_add: Sequence[str] = ()) -> list[str]:
    """The kunit.py build command line."""
    cmd = [sys.executable, str(tree / KUNIT_PY), "build", f"--build_dir={out}",
           *kunitconfig_args(repo_root, profile), f"--arch={profile.arch}", f"--jobs={jobs}"]
    cmd += [f"--kconfig_add={k}" for k in kconfig_add]
    if ccache:
        cmd += ["--make_options=CC=ccache gcc", "--make_options=HOSTCC=ccache gcc"]
    return cmd


def build_failure(log_text: str) -> str:
    """The most telling line of a failed build log."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"\berror\b:", ln, re.IGNORECASE)]
    missing = [ln for ln in lines if ln.startswith("Missing: ")]
    reason = errors[-1] if errors else (lines[-1] if lines else "no output")
    if missing and "Kconfig" in reason:
        reason += " " + missing[-1]
    return reason[:300]


def build(tree: Path, profile: Profile, repo_root: Path, build_root: Path,
          jobs: int | None = None, *, out: Path | None = None,
          kconfig_add: Sequence[str] = ()) -> float:
    """Configure and build one profile (in out, default <build>/out/<profile>); seconds taken."""
    for needed in (repo_root / ".kunitconfig", profile.fragment, tree / KUNIT_PY):
        if not needed.is_file():
            raise DriverError(f"{needed} is missing")
    out = out or out_dir(build_root, profile)
    out.mkdir(parents=True, exist_ok=True)
    ccache = shutil.which("ccache") is not None
    cmd = build_command(tree, profile, repo_root, out, jobs or os.cpu_count() or 1, ccache,
                        kconfig_add)
    log = out / "build.log"
    say(f"building {profile.name} ({profile.arch}{', ccache' if ccache else ''}); log {log}")
    env = kunit_env()
    if ccache:
        # Kbuild's O= builds use absolute paths: relative to the build root,
        # a fresh clone elsewhere (CI) hits the same cache entries.
        env.setdefault("CCACHE_BASEDIR", str(build_root.resolve()))
        env.setdefault("CCACHE_NOHASHDIR", "true")
    rc, secs = run_logged(cmd, log, f"building {profile.name}", cwd=tree, env=env)
    if rc != 0:
        text = log.read_text(errors="backslashreplace")
        raise DriverError(f"build of {profile.name} failed: {build_failure(text)}; see {log}")
    say(f"built {profile.name} in {secs:.0f}s")
    return secs


def kernel_image(build_root: Path, profile: Profile) -> Path:
    """The bootable image kunit.py builds for the profile's arch."""
    out = out_dir(build_root, profile)
    return out / "linux" if profile.arch == "um" else out / "arch" / "x86" / "boot" / "bzImage"


def exec_command(tree: Path, profile: Profile, repo_root: Path, build_root: Path,
                 kernel_args: Sequence[str], filter_glob: str) -> list[str]:
    """The kunit.py exec command line."""
    args = [*profile.kernel_args, *kernel_args]
    if profile.arch == "x86_64" and not any(a.startswith("panic=") for a in args):
        args.append("panic=-1")  # a panicking guest exits instead of idling until the watchdog
    cmd = [sys.executable, str(tree / KUNIT_PY), "exec",
           f"--build_dir={out_dir(build_root, profile)}", *kunitconfig_args(repo_root, profile),
           f"--arch={profile.arch}", "--raw_output=all", f"--timeout={profile.timeout}"]
    if profile.qemu_smp:
        cmd.append(f"--qemu_args=-smp {profile.qemu_smp}")
    cmd += [f"--kernel_args={a}" for a in args]
    if filter_glob:
        if filter_glob.startswith("-"):
            raise DriverError(f"bad filter {filter_glob!r}")
        cmd.append(filter_glob)
    return cmd


def clear_results(results: Path) -> None:
    """Remove the files of an earlier run."""
    results.mkdir(parents=True, exist_ok=True)
    for name in RESULT_FILES:
        (results / name).unlink(missing_ok=True)


def _kill(proc: subprocess.Popen[str]) -> None:
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


class Watchdog:
    """Deadlines for one boot: first KTAP header, silence after boot, whole run."""

    def __init__(self, boot_timeout: float, hang_timeout: float, timeout: float,
                 start: float) -> None:
        self.boot_timeout, self.hang_timeout, self.timeout = boot_timeout, hang_timeout, timeout
        self.start = self.last_output = start
        self.booted = False

    def saw(self, line: str, now: float) -> None:
        self.last_output = now
        if not self.booted and HEADER.search(line):
            self.booted = True

    def verdict(self, now: float) -> str | None:
        """A verdict when a deadline passed, else None."""
        if now - self.start > self.timeout:
            return "timeout"
        if not self.booted and now - self.start > self.boot_timeout:
            return "boot-timeout"
        if self.booted and now - self.last_output > self.hang_timeout:
            return "hang"
        return None


def watch(cmd: Sequence[str], console: Path, label: str, *, cwd: Path | None,
          env: Mapping[str, str] | None, boot_timeout: float, timeout: float,
          hang_timeout: float = HANG_S, echo: bool = False, poll: float = 1.0,
          heartbeat: float = HEARTBEAT_S) -> ExecResult:
    """Run cmd, tee stdout to console, enforce the watchdog; never hangs silently."""
    start = time.monotonic()
    dog = Watchdog(boot_timeout, hang_timeout, timeout, start)
    lines: queue.Queue[str | None] = queue.Queue()
    try:
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=dict(env) if env is not None else None,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="backslashreplace",
                                start_new_session=True)
    except FileNotFoundError:
        raise DriverError(f"command not found: {cmd[0]}") from None

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    verdict: str | None = None
    results, last_result, suite = 0, "", ""
    next_beat = start + heartbeat
    with open(console, "w") as log:
        def record(line: str) -> None:
            nonlocal results, last_result, suite
            log.write(line)
            log.flush()
            if echo:
                sys.stderr.write(line)
            text = STAMP_PREFIX.sub("", line.rstrip())
            m = SUBTEST.search(text)
            if m:
                suite = m.group(1)
            m = RESULT.match(text)
            if m:
                results += 1
                last_result = f"{suite}: {m.group(1)}" if suite else m.group(1)

        while True:
            try:
                item = lines.get(timeout=poll)
            except queue.Empty:
                item = ""
            now = time.monotonic()
            if item is None:
                break
            if item:
                record(item)
                dog.saw(item, now)
            verdict = dog.verdict(now)
            if verdict:
                say(f"{label}: {verdict} after {now - start:.0f}s; killing the kernel")
                _kill(proc)
                break
            if now >= next_beat:
                state = "running" if dog.booted else "booting"
                say(f"{label}: {state}, {now - start:.0f}s, {results} results"
                    + (f", last: {last_result}" if last_result else ""))
                next_beat = now + heartbeat
        drain_until = time.monotonic() + 10
        while verdict and time.monotonic() < drain_until:
            try:
                item = lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if item is None:
                break
            record(item)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    _kill(proc)
    thread.join(timeout=5)
    return ExecResult(verdict=verdict or "completed", console_log=console,
                      elapsed=time.monotonic() - start)


def exec_tests(tree: Path, profile: Profile, repo_root: Path, build_root: Path, results: Path,
               kernel_args: Sequence[str] = (), filter_glob: str = "", *,
               shim: Path | None = None, echo: bool = False,
               hang_timeout: float = HANG_S) -> ExecResult:
    """Boot the built kernel once and collect its console in results/console.log."""
    image = kernel_image(build_root, profile)
    if not image.is_file():
        raise DriverError(f"no kernel built for {profile.name} ({image} missing); build it first")
    clear_results(results)
    cmd = exec_command(tree, profile, repo_root, build_root, kernel_args, filter_glob)
    say(f"running {profile.name}" + (f" filter {filter_glob}" if filter_glob else "")
        + (f" args {' '.join(kernel_args)}" if kernel_args else ""))
    result = watch(cmd, results / "console.log", f"running {profile.name}", cwd=tree,
                   env=kunit_env(shim), boot_timeout=profile.boot_timeout,
                   timeout=profile.timeout, hang_timeout=hang_timeout, echo=echo)
    say(f"{profile.name}: kernel run {result.verdict} in {result.elapsed:.0f}s")
    write_json(results / "exec.json", {
        "verdict": result.verdict, "elapsed": round(result.elapsed, 3), "profile": profile.name,
        "command": cmd, "kernel_args": list(kernel_args), "filter": filter_glob})
    return result


def read_exec_info(results: Path) -> dict[str, object]:
    """exec.json of a results dir (empty when absent)."""
    info = read_json(results / "exec.json")
    return info if isinstance(info, dict) else {}


def kunit_parse(tree: Path, results: Path) -> None:
    """kunit.py parse into results.json/.xml/.ktap (its exit status is ignored)."""
    console = results / "console.log"
    base = [sys.executable, str(tree / KUNIT_PY), "parse"]
    jobs = ((base + [f"--json={results / 'results.json'}", f"--junit={results / 'results.xml'}",
                     str(console)], results / "parse.log"),
            (base + ["--raw_output=kunit", str(console)], results / "results.ktap"))
    for cmd, dest in jobs:
        try:
            with open(dest, "w") as out:
                subprocess.run(cmd, cwd=tree, env=kunit_env(), stdout=out,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            say(f"kunit.py parse failed ({e}); continuing with our own report")
