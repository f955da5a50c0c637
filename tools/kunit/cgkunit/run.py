"""Build with the tree's own kunit.py, boot with a watchdog, keep the console."""
from __future__ import annotations

import glob
import math
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from . import procs
from .common import DriverError, HEARTBEAT_S, read_json, run_logged, say, write_json
from .console import ConsoleState, classify, heartbeat, numbered_boot, strip_prefix
from .params import (DEFAULT_DURATION_MS, DURATION, DYNMODS, DYNMODS_ON, DYNMODS_REACH_SUITE,
                     DYNMODS_SUITE,
                     SUITE_MODULE, check_filter, duration_ms, dynmods_cases, sets,
                     with_selfcheck)
from .profile import (CRASH_GRACE_S, POST_REPORT_SILENCE_S, STORM_REPEATS, STORM_WINDOW_S,
                      Profile, out_dir)
from .progress import BuildProgress
from .report import INTERRUPTED, STOPPED, Report, Splat
from .titles import title_key

KUNIT_PY = Path("tools") / "testing" / "kunit" / "kunit.py"
HANG_S = 300.0
# Silence allowed past a gang's time bound (cgroup_kunit.duration_ms) when that bound is long:
# the harness waits CGK_STOP_SLACK_MS (30 s) past it, its start barrier up to 10 s, and the
# rest is for a case's checks and teardown.
HANG_MARGIN_S = 120.0


PANIC_GRACE_S = 1.0   # after "Kernel panic - not syncing": the rest of its trace, then stop
KERNEL_KILL_WAIT_S = 30.0  # isolated boots: kunit.py must go on this soon after a kernel kill
TITLE_MAX = 100


@dataclass(frozen=True)
class StopRules:
    """When the watchdog ends a boot on the console's failure state (0 turns a rule off).

    - panic: "Kernel panic - not syncing", after PANIC_GRACE_S for the rest of its trace;
    - crash: an Oops, general protection fault, "kernel BUG at" or a fatal BUG (NULL
      pointer, unable to handle a fault), when KUnit prints no KTAP result line within
      crash_grace seconds of it. A result within the grace means the kernel survived
      (KUnit went on to the next case): the report then counts as one after which the
      console must not fall silent (below). Before KTAP starts (an Oops during boot)
      the grace is one of console silence, and KTAP starting means it survived;
    - storm: the same report (kind and title, CPU and task aside; any lockdep, hung-task,
      stall or lockup report for those kinds) storm_repeats times with no KTAP result line
      between them, once the first of them is storm_window seconds old with still no
      result (a soft lockup reported every 26 s never leaves 30 s of silence). The window is what keeps a case that legitimately repeats
      a report while it runs (KCSAN reports a race every few ms, a lockdep assertion
      WARNs on every call) from being stopped: its result line resets the count;
    - silence: post_report_silence seconds without any console output after a lockdep,
      hung-task, RCU stall or lockup report (or an Oops the kernel survived).
    A single WARNING, KCSAN, KASAN, refcount_t or UBSAN report never stops a boot.
    """
    crash_grace: float = CRASH_GRACE_S
    storm_repeats: int = STORM_REPEATS
    storm_window: float = STORM_WINDOW_S
    post_report_silence: float = POST_REPORT_SILENCE_S

    @classmethod
    def of(cls, profile: Profile) -> "StopRules":
        return cls(crash_grace=profile.crash_grace, storm_repeats=profile.storm_repeats,
                   storm_window=profile.storm_window,
                   post_report_silence=profile.post_report_silence)

    def describe(self) -> str:
        def secs(v: float) -> str:
            return f"{v:g}s" if v else "off"
        storm = (f"{self.storm_repeats}x/{secs(self.storm_window)}"
                 if self.storm_repeats and self.storm_window else "off")
        return (f"panic, crash grace {secs(self.crash_grace)}, storm {storm}, "
                f"silence after a report {secs(self.post_report_silence)}")


@dataclass
class Stop:
    """The failure state the watchdog stopped a kernel on."""
    rule: str       # "panic", "crash", "storm" or "silence"
    reason: str     # human text; the verdict is "stopped: <reason>"
    at: float       # seconds since the run started
    report: str     # title of the report that armed the rule
    line: int       # its console.log line
    boot: int = 0   # kunit.py boot number (Starting KUnit Kernel (n/N)); 0 when not said
    boots: int = 0

    @property
    def verdict(self) -> str:
        return STOPPED + self.reason

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "reason": self.reason, "at": round(self.at, 1),
                "report": self.report, "line": self.line, "boot": self.boot,
                "boots": self.boots}


@dataclass
class ExecResult:
    """How a boot ended and where its console went."""
    verdict: str
    console_log: Path
    elapsed: float
    stops: list[Stop] = field(default_factory=list)


def kunit_env(extra_path: Path | None = None) -> dict[str, str]:
    """Environment for kunit.py: unbuffered, no .pyc in the tree, optional PATH shim."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    if extra_path is not None:
        env["PATH"] = f"{extra_path}{os.pathsep}{env.get('PATH', '')}"
    return env


def kunitconfig_args(repo_root: Path, profile: Profile) -> list[str]:
    return [f"--kunitconfig={repo_root / '.kunitconfig'}", f"--kunitconfig={profile.fragment}"]


def hang_timeout_for(gang_ms: int, hang_timeout: float = HANG_S) -> float:
    """Console silence after which a booted kernel counts as hung, for gangs bound to gang_ms:
    hang_timeout, or the bound plus HANG_MARGIN_S when that is longer. The harness prints a
    heartbeat while a gang runs; a suite from before it is silent for the whole bound."""
    return max(hang_timeout, gang_ms / 1000 + HANG_MARGIN_S)


def run_timeout_for(profile: Profile, gang_ms: int, hang_timeout: float = HANG_S) -> int:
    """Whole-run (per kunit.py boot) timeout for gangs bound to gang_ms: the profile's timeout
    is sized for the default bound, so a longer bound scales it (an upper bound: booting and
    the checks do not take longer), and it always leaves the hang rule room to come first."""
    scaled = profile.timeout * max(1.0, gang_ms / DEFAULT_DURATION_MS)
    return math.ceil(max(scaled, profile.boot_timeout + hang_timeout_for(gang_ms, hang_timeout)))


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
    progress = BuildProgress(out)
    rc, secs = run_logged(cmd, log, f"building {profile.name}", cwd=tree, env=env,
                          status=progress.status)
    if rc != 0:
        text = log.read_text(errors="backslashreplace")
        raise DriverError(f"build of {profile.name} failed: {build_failure(text)}; see {log}")
    record = progress.finish(secs)
    say(f"built {profile.name} in {secs:.0f}s"
        + (f" ({record.objects} objects written)" if record is not None else ""))
    return secs


def kernel_image(build_root: Path, profile: Profile, out: Path | None = None) -> Path:
    """The bootable image kunit.py builds for the profile's arch (in out, default its out dir)."""
    out = out or out_dir(build_root, profile)
    return out / "linux" if profile.arch == "um" else out / "arch" / "x86" / "boot" / "bzImage"


def exec_command(tree: Path, profile: Profile, repo_root: Path, build_root: Path,
                 kernel_args: Sequence[str], filter_glob: str, out: Path | None = None,
                 isolate: str = "", timeout: int | None = None) -> list[str]:
    """The kunit.py exec command line (kernel built in out, default the profile's out dir);
    isolate "suite" or "test": kunit.py boots once per suite or test (--run_isolated);
    timeout: kunit.py's, per boot (None: run_timeout_for the gangs' bound). The oracle's
    self-checks on real reports run (cgroup_kunit.selfcheck=1) unless the arguments say."""
    args = with_selfcheck([*profile.kernel_args, *kernel_args])
    if timeout is None:
        timeout = run_timeout_for(profile, duration_ms(args))
    if profile.arch == "x86_64" and not any(a.startswith("panic=") for a in args):
        args.append("panic=-1")  # a panicking guest exits instead of idling until the watchdog
    cmd = [sys.executable, str(tree / KUNIT_PY), "exec",
           f"--build_dir={out or out_dir(build_root, profile)}", *kunitconfig_args(repo_root, profile),
           f"--arch={profile.arch}", "--raw_output=all", f"--timeout={timeout}"]
    if profile.qemu_smp:
        cmd.append(f"--qemu_args=-smp {profile.qemu_smp}")
    cmd += [f"--kernel_args={a}" for a in args]
    if isolate:
        cmd.append(f"--run_isolated={isolate}")
    if check_filter(filter_glob):
        cmd.append(filter_glob)
    return cmd


@dataclass(frozen=True)
class Boot:
    """One kunit.py exec of a run: a boot, or one per suite or test when isolated."""
    kernel_args: tuple[str, ...]   # the run's, the profile's aside
    filter_glob: str
    name: str = ""                 # in a run of several, its console is console.<name>.log

    def describe(self) -> str:
        """What it runs: 'every suite; cgroup_migrate_dynmods skips itself', ..."""
        dynmods = DYNMODS_ON in self.kernel_args
        return ((self.filter_glob or "every suite") + (f", {DYNMODS_ON}" if dynmods else "")
                + ("" if dynmods else f"; {DYNMODS_SUITE} skips itself"))


def dynmods_filter(filter_glob: str, cases: Sequence[str] | None) -> str | None:
    """The filter that runs what filter_glob selects of cgroup_migrate_dynmods, alone: the
    suite, with the case part of a 'suite.case' glob (KUnit splits the glob at its first '.'
    and matches the suite and case names with each part); None when filter_glob selects none
    of it. cases: the suite's case names (None: not known, so any case part may match). A
    suite glob that also selects cgroup_migrate_dynmods_reach runs it in that boot too:
    DYNMODS_SUITE + "*", which selects just the two."""
    suite_glob, dot, case_glob = (filter_glob or "*").partition(".")
    if not fnmatchcase(DYNMODS_SUITE, suite_glob):
        return None
    if not dot:
        return DYNMODS_SUITE + ("*" if fnmatchcase(DYNMODS_REACH_SUITE, suite_glob) else "")
    if cases is not None and not any(fnmatchcase(c, case_glob) for c in cases):
        return None
    return f"{DYNMODS_SUITE}.{case_glob}"


def boot_plan(kernel_args: Sequence[str], filter_glob: str, isolate: str = "",
              cases: Sequence[str] | None = None) -> list[Boot]:
    """The kunit.py execs of a run (cases: cgroup_migrate_dynmods' case names, if known).

    cgroup_migrate_dynmods switches favordynmods on for the rest of its boot (the kernel
    cannot switch it off), so its cases run only with cgroup_kunit.dynmods=1, which the
    driver gives only where nothing runs after them. When the filter selects some of them,
    the main boot runs as asked (they skip there) and a second one runs them alone, with
    cgroup_kunit.dynmods=1. A single boot gets it when it runs them alone anyway: with
    isolate (kunit.py boots once per suite or test), or a filter whose suite part is that
    suite's name. Kernel arguments that set cgroup_kunit.dynmods themselves get one boot, as
    asked."""
    args = tuple(kernel_args)
    alone = dynmods_filter(filter_glob, cases)
    if alone is None or sets(args, DYNMODS):
        return [Boot(args, filter_glob)]
    if isolate or filter_glob.partition(".")[0] == DYNMODS_SUITE:
        return [Boot((*args, DYNMODS_ON), filter_glob)]
    return [Boot(args, filter_glob, "main"), Boot((*args, DYNMODS_ON), alone, "dynmods")]


def join_boots(execs: Sequence[ExecResult], planned: int, dest: Path) -> ExecResult:
    """The kunit.py execs of a run of planned boots (one boot each) as one: their consoles
    joined into dest in order, kunit.py's 'Starting KUnit Kernel' line of each numbered
    across the run (boot i of planned: the report tells the boots apart by these lines, as
    in an isolated run), the first verdict that is not 'completed', the time of all, and
    each watchdog stop with its boot."""
    with open(dest, "w", newline="") as out:
        for i, ex in enumerate(execs, 1):
            with open(ex.console_log, errors="backslashreplace", newline="") as console:
                out.writelines(numbered_boot(line, i, planned) for line in console)
    return ExecResult(
        verdict=next((ex.verdict for ex in execs if ex.verdict != "completed"), "completed"),
        console_log=dest, elapsed=sum(ex.elapsed for ex in execs),
        stops=[replace(s, boot=i, boots=planned) for i, ex in enumerate(execs, 1)
               for s in ex.stops])


def _kill(proc: subprocess.Popen[str], known: set[int]) -> None:
    """End a boot: the kernel and whatever else kunit.py started (a UML kernel left
    kunit.py's process group with setsid(): procs.kill_below finds it), then kunit.py's
    process group, politely first."""
    procs.kill_below(proc.pid, known)
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    procs.kill_below(proc.pid, known)


# How the watchdog treats a report, by the kind report_titles.h gives it. A single report
# of any other kind (WARNING, KCSAN, KASAN, refcount_t, UBSAN, a non-fatal BUG) never stops
# a boot: the oracle fails the case and KUnit goes on.
PANIC_KINDS = ("panic",)
STALL_KINDS = {"lockdep": "lockdep", "hung": "hung-task", "rcu-stall": "RCU stall",
               "lockup": "lockup"}
CRASH_TITLE = re.compile(r"^(?:kernel BUG at |BUG: (?:unable to handle|kernel NULL pointer dereference))")


def is_crash(splat: Splat) -> bool:
    """An Oops-class report (a task died in the kernel; the kernel may or may not go on)."""
    if splat.kind == "oops":
        return True
    return splat.kind == "bug" and (bool(CRASH_TITLE.match(splat.title))
                                    or any(classify(r) == "oops" for r in splat.related))


def _short(title: str) -> str:
    title = title_key(title)
    return title if len(title) <= TITLE_MAX else title[:TITLE_MAX - 3] + "..."


def _label(kind: str) -> str:
    return STALL_KINDS.get(kind, "Oops" if kind in ("oops", "bug") else kind)


class Watchdog:
    """Deadlines for one boot (first KTAP header, silence, whole run) and the console's
    failure states (StopRules), read with the report's own parser as lines stream in.

    Silence is the time since the last line that shows the kernel going on: the harness's
    heartbeat while a gang runs counts only when its step count moved since the one before
    (workers that all stopped stepping, deadlocked say, are silent however often it says so)."""

    def __init__(self, boot_timeout: float, hang_timeout: float, timeout: float,
                 start: float, rules: StopRules | None = None) -> None:
        self.boot_timeout, self.hang_timeout, self.timeout = boot_timeout, hang_timeout, timeout
        self.rules = rules or StopRules()
        self.start = self.boot_start = self.last_output = start
        self.boot, self.boots = 0, 0
        self.beat: tuple[str, int] | None = None  # the last heartbeat: case, steps
        self.console = ConsoleState()
        self.stop: Stop | None = None
        self.halted_at: float | None = None
        self._reset()

    @property
    def booted(self) -> bool:
        """KUnit started in this boot: a KTAP header since kunit.py started the kernel."""
        return self.console.started

    def _reset(self) -> None:
        """Forget the failure states (a new kunit.py boot)."""
        self.results = self.console.results
        self._seen = len(self.console.splats)
        self._last: tuple[Splat, str, bool] | None = None
        self.panic: tuple[float, Splat] | None = None
        self.crash: tuple[float, int, Splat, bool] | None = None  # at, results, report, booted
        self.stall: tuple[float, Splat] | None = None
        self.storm: dict[tuple[str, str], list[Any]] = {}

    def saw(self, line: str, now: float) -> None:
        beat = heartbeat(strip_prefix(line))
        if beat is None or beat != self.beat:
            self.last_output = now
        self.beat = beat or self.beat
        event = self.console.feed(line)
        if event is not None and event.kind == "boot":
            self.boot, self.boots = event.number, event.total
            if event.number > 1:
                self.boot_start = now  # each isolated boot gets the boot and run deadlines
            self.halted_at = None
            self.beat = None
            self._reset()
        if self.console.results != self.results:
            self.results = self.console.results
            self.storm = {}
        if self._last is not None:
            self._recheck(now)
        splats = self.console.splats
        for s in splats[self._seen:]:
            self._arm(s, now)
        self._seen = len(splats)

    def _arm(self, s: Splat, now: float) -> None:
        self._last = (s, s.kind, is_crash(s))
        if s.kind in PANIC_KINDS:
            self.panic = self.panic or (now, s)
        elif is_crash(s):
            self.crash = self.crash or (now, self.results, s, self.booted)
        elif s.kind in STALL_KINDS:
            self.stall = self.stall or (now, s)
        # lockup and stall reports name their seconds and tasks: any of a kind is a repeat
        key = (s.kind, "" if s.kind in STALL_KINDS else title_key(s.title))
        entry = self.storm.setdefault(key, [0, now, s])
        entry[0] += 1

    def _recheck(self, now: float) -> None:
        """The last report may still change: a WARNING becomes lockdep's or refcount_t's
        report when their title follows, a BUG gains its Oops line."""
        assert self._last is not None
        s, kind, crash = self._last
        if s.kind == kind and is_crash(s) == crash:
            return
        self._last = (s, s.kind, is_crash(s))
        if s.kind in STALL_KINDS:
            self.stall = self.stall or (now, s)
        elif is_crash(s) and not crash:
            self.crash = self.crash or (now, self.results, s, self.booted)

    def halt(self, now: float) -> None:
        """This boot's kernel was killed; no failure state counts until kunit.py's next boot."""
        self.halted_at = now

    def verdict(self, now: float) -> str | None:
        """A verdict when a deadline passed or a failure state calls for a stop, else None."""
        if now - self.boot_start > self.timeout:
            return "timeout"
        if not self.booted and now - self.boot_start > self.boot_timeout:
            return "boot-timeout"
        if self.halted_at is None:
            stop = self._failure_state(now)
            if stop is not None:
                self.stop = stop
                return stop.verdict
        if self.booted and now - self.last_output > self.hang_timeout:
            return "hang"
        return None

    def _stop(self, rule: str, reason: str, s: Splat, now: float) -> Stop:
        return Stop(rule=rule, reason=reason, at=now - self.start, report=s.title,
                    line=s.line_no, boot=self.boot, boots=self.boots)

    def _failure_state(self, now: float) -> Stop | None:
        rules = self.rules
        if self.stall is not None and self.stall[1].expected:
            self.stall = None  # an oracle self-check provoked it and said so: nothing stalls
        if self.panic is not None and now - self.panic[0] >= PANIC_GRACE_S:
            s = self.panic[1]
            return self._stop("panic", f"panic ({_short(s.title)})", s, now)
        if self.crash is not None:
            at, results, s, booted = self.crash
            if self.results > results or (self.booted and not booted):
                # KUnit went on after the Oops (or, for one during boot, started): the
                # kernel survived it, but it must not go quiet now
                self.crash = None
                self.stall = self.stall or (at, s)
            elif rules.crash_grace and now - at >= rules.crash_grace and \
                    (booted or now - self.last_output >= rules.crash_grace):
                return self._stop("crash", f"crash ({_short(s.title)}; no KUnit result "
                                           f"within {rules.crash_grace:g} s)", s, now)
        if rules.storm_repeats and rules.storm_window:
            for count, first, s in self.storm.values():
                if count >= rules.storm_repeats and now - first >= rules.storm_window:
                    return self._stop("storm", f"report storm ({_short(s.title)} x{count}, "
                                               f"no KUnit result for {now - first:.0f} s)", s, now)
        if self.stall is not None and rules.post_report_silence \
                and now - self.last_output >= rules.post_report_silence:
            s = self.stall[1]
            return self._stop("silence", f"silent {rules.post_report_silence:g} s after "
                                         f"{_label(s.kind)} report ({_short(s.title)})", s, now)
        return None


def _kill_kernel(proc: subprocess.Popen[str], known: set[int]) -> bool:
    """Kill what kunit.py runs (the kernel: every process below it, wherever its session),
    not kunit.py; False when there was nothing to kill."""
    return bool(procs.kill_below(proc.pid, known))


def watch(cmd: Sequence[str], console: Path, label: str, *, cwd: Path | None,
          env: Mapping[str, str] | None, boot_timeout: float, timeout: float,
          hang_timeout: float = HANG_S, echo: bool = False, poll: float = 1.0,
          heartbeat: float = HEARTBEAT_S, rules: StopRules | None = None,
          isolated: bool = False, clock: Callable[[], float] = time.monotonic) -> ExecResult:
    """Run cmd, tee stdout to console, enforce the watchdog; never hangs silently.

    A failure state (StopRules) ends the run like a deadline does, except with isolated
    (kunit.py --run_isolated): then only the running kernel is killed and kunit.py goes
    on with its next boot."""
    start = clock()
    procs.become_subreaper()
    known = procs.children_of_self()
    dog = Watchdog(boot_timeout, hang_timeout, timeout, start, rules)
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
    stops: list[Stop] = []
    next_beat = start + heartbeat
    try:
        with open(console, "w") as log:
            def record(line: str) -> None:
                log.write(line)
                log.flush()
                if echo:
                    sys.stderr.write(line)

            while True:
                try:
                    item = lines.get(timeout=poll)
                except queue.Empty:
                    item = ""
                now = clock()
                if item is None:
                    break
                if item:
                    record(item)
                    dog.saw(item, now)
                verdict = dog.verdict(now)
                if verdict and dog.stop is not None and verdict == dog.stop.verdict:
                    stops.append(dog.stop)
                    dog.stop = None
                    if isolated:
                        # only this boot's kernel (if it has not exited by itself already):
                        # kunit.py goes on with its next boot
                        killed = _kill_kernel(proc, known)
                        say(f"{label}: {verdict} after {now - start:.0f}s; "
                            + ("killed this boot's kernel" if killed else "its kernel has exited")
                            + ", kunit.py goes on with its next boot")
                        dog.halt(now)
                        verdict = None
                        continue
                if dog.halted_at is not None and now - dog.halted_at > KERNEL_KILL_WAIT_S:
                    verdict = stops[-1].verdict if stops else "hang"
                    say(f"{label}: kunit.py did not go on after the kernel was killed")
                if verdict:
                    say(f"{label}: {verdict} after {now - start:.0f}s; killing the kernel")
                    _kill(proc, known)
                    break
                if now >= next_beat:
                    state = "running" if dog.booted else "booting"
                    say(f"{label}: {state}, {now - start:.0f}s, {dog.console.progress()}")
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
    finally:
        # always, Ctrl-C included: no kernel of this boot outlives it
        _kill(proc, known)
    thread.join(timeout=5)
    final = verdict or (stops[0].verdict if stops else "completed")
    return ExecResult(verdict=final, console_log=console, elapsed=clock() - start, stops=stops)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a boot whose console had something: what it wrote is in its
    results directory (exec.json's verdict "interrupted"), and the report, once made."""

    def __init__(self, result: ExecResult, report: Report | None = None) -> None:
        super().__init__(INTERRUPTED)
        self.result = result
        self.report = report


def _wrote_console(stage: Path) -> bool:
    """Whether a boot in stage got anything on its console."""
    return any(p.stat().st_size for p in stage.glob("console*.log") if p.is_file())


def exec_tests(tree: Path, profile: Profile, repo_root: Path, build_root: Path, results: Path,
               kernel_args: Sequence[str] = (), filter_glob: str = "", *,
               shim: Path | None = None, echo: bool = False,
               hang_timeout: float = HANG_S, out: Path | None = None,
               isolate: str | None = None) -> ExecResult:
    """Boot the built kernel (in out, default the profile's) as boot_plan says: once, or once
    per suite or test with isolate (None: the profile's), and cgroup_migrate_dynmods in a boot
    of its own. The console is results/console.log; in a run of several boots that is all of
    them in order, and each boot's own is kept in console.<name>.log.

    The run writes into a new directory that replaces results only once it is done
    (new_results), so an earlier run's results stay until this one has its own. Ctrl-C or
    SIGTERM (KeyboardInterrupt) during a boot that printed something ends the run with
    verdict "interrupted", its console and exec.json kept in results, and raises
    Interrupted; before that, results are left as they were."""
    image = kernel_image(build_root, profile, out)
    if not image.is_file():
        raise DriverError(f"no kernel built for {profile.name} ({image} missing); build it first")
    mode = profile.isolate if isolate is None else isolate
    plan = boot_plan(kernel_args, filter_glob, mode, dynmods_cases(repo_root))
    gang = duration_ms([*profile.kernel_args, *kernel_args])
    hang = hang_timeout_for(gang, hang_timeout)
    timeout = run_timeout_for(profile, gang, hang_timeout)
    rules = StopRules.of(profile)
    args = plan[0].kernel_args if len(plan) == 1 else kernel_args
    say(f"running {profile.name}" + (f" filter {filter_glob}" if filter_glob else "")
        + (f" args {' '.join(args)}" if args else "")
        + (f", one boot per {mode}" if mode else "")
        + (f", in {len(plan)} boots: {DYNMODS_SUITE} switches favordynmods on for the rest "
           f"of its boot, so it runs in a boot of its own" if len(plan) > 1 else ""))
    say(f"watchdog stops on: {rules.describe()}")
    if (hang, timeout) != (hang_timeout, profile.timeout):
        say(f"{SUITE_MODULE}.{DURATION}={gang}: a hang after {hang:g}s of silence, "
            f"run timeout {timeout}s (not {hang_timeout:g}s and {profile.timeout}s)")

    def boot_once(cmd: list[str], console: Path, label: str,
                  retried: list[dict[str, object]]) -> ExecResult:
        """One kunit.py exec, and once more after an early hang (each kept in retried)."""
        while True:
            result = watch(cmd, console, label, cwd=tree, env=kunit_env(shim),
                           boot_timeout=profile.boot_timeout, timeout=timeout, hang_timeout=hang,
                           echo=echo, rules=rules, isolated=bool(mode))
            if not boot_retry_due(result, len(retried)):
                return result
            # The kernel never reached KUnit: a machine's failure, not a test result.
            kept = console.with_suffix(f".boot-timeout-{len(retried) + 1}.log")
            console.replace(kept)
            retried.append({"verdict": result.verdict, "elapsed": round(result.elapsed, 3),
                            "console": kept.name})
            say(f"{profile.name}: the kernel hung before KUnit started ({result.verdict} after "
                f"{result.elapsed:.0f}s, console kept in {kept.name}); booting it once more")

    execs: list[ExecResult] = []
    boots: list[dict[str, object]] = []
    retries: list[dict[str, object]] = []
    interrupted = False
    with new_results(results) as stage:
        for i, boot in enumerate(plan, 1):
            which = f"boot {i} of {len(plan)}" if len(plan) > 1 else ""
            if execs and execs[0].verdict == "boot-timeout":
                say(f"{profile.name}: {which} ({boot.describe()}) not started: the kernel never "
                    "reached KUnit in boot 1")
                break
            if which:
                say(f"{which}: {boot.describe()}")
            cmd = exec_command(tree, profile, repo_root, build_root, boot.kernel_args,
                               boot.filter_glob, out, mode, timeout)
            console = stage / (f"console.{boot.name}.log" if boot.name else "console.log")
            retried: list[dict[str, object]] = []
            label = f"running {profile.name}" + (f" ({which})" if which else "")
            started = time.monotonic()
            try:
                result = boot_once(cmd, console, label, retried)
            except KeyboardInterrupt:
                if not _wrote_console(stage):
                    raise  # nothing of this run to keep: results stay as they were
                interrupted = True
                result = ExecResult(verdict=INTERRUPTED, console_log=console,
                                    elapsed=time.monotonic() - started)
                say(f"{profile.name}: {which + ': ' if which else ''}interrupted after "
                    f"{result.elapsed:.0f}s; the kernel is stopped, its console kept")
            else:
                say(f"{profile.name}: {which + ': ' if which else ''}kernel run {result.verdict} "
                    f"in {result.elapsed:.0f}s")
            execs.append(result)
            retries += retried
            boots.append({"name": boot.name, "kernel_args": list(boot.kernel_args),
                          "filter": boot.filter_glob, "command": cmd, "console": console.name,
                          "verdict": result.verdict, "elapsed": round(result.elapsed, 3),
                          "boot_retries": retried})
            if interrupted:
                break
        result = execs[0] if len(plan) == 1 else join_boots(execs, len(plan), stage / "console.log")
        if interrupted:
            result.verdict = INTERRUPTED
        write_json(stage / "exec.json", {
            "verdict": result.verdict, "elapsed": round(result.elapsed, 3), "profile": profile.name,
            "command": boots[0]["command"], "kernel_args": list(kernel_args), "filter": filter_glob,
            "isolate": mode, "rules": asdict(rules), "stops": [s.to_json() for s in result.stops],
            "boot_retries": retries, "boots": boots, "duration_ms": gang, "hang_timeout": hang,
            "timeout": timeout})
    result.console_log = results / "console.log"
    if interrupted:
        raise Interrupted(result)
    return result


@contextmanager
def new_results(results: Path) -> Iterator[Path]:
    """A new, empty directory beside results for a run to write into; once the block ends
    without an exception it replaces results (the earlier run's files go only then), and
    after one it is removed and results are as they were."""
    parent, name = results.parent, results.name
    parent.mkdir(parents=True, exist_ok=True)
    for stale in [*parent.glob(f".{glob.escape(name)}.new-*"),
                  *parent.glob(f".{glob.escape(name)}.old-*")]:
        shutil.rmtree(stale, ignore_errors=True)  # left by a run that was killed hard
    stage = parent / f".{name}.new-{os.getpid()}"
    stage.mkdir()
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    old = parent / f".{name}.old-{os.getpid()}"
    if results.is_dir() and not results.is_symlink():
        os.replace(results, old)
    elif results.exists() or results.is_symlink():
        results.unlink()
    os.replace(stage, results)
    shutil.rmtree(old, ignore_errors=True)


BOOT_RETRIES = 1


def boot_retry_due(result: ExecResult, retries: int) -> bool:
    """Whether to boot again: the kernel hung before printing KUnit's first line (a boot
    that never starts is an infrastructure failure, e.g. an early hang under QEMU/TCG),
    at most BOOT_RETRIES times."""
    return result.verdict == "boot-timeout" and not result.stops and retries < BOOT_RETRIES


def read_exec_info(results: Path) -> dict[str, object]:
    """exec.json of a results dir (empty when absent)."""
    info = read_json(results / "exec.json")
    return info if isinstance(info, dict) else {}
