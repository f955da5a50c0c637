"""make module-run: the suite as a real loadable module in a booted x86_64 guest.

The kernel is a profile's (sanitizers and all) with modules, KUnit's debugfs and kmemleak
on and the suite built =m (its own build dir, <build>/out/<profile>-module-run). The guest
boots an initramfs written here (newc cpio, no root needed for its device node): Debian's
static busybox, cgroup_kunit.ko and an init script that, CYCLES times, loads the module
with MODULE_ARGS (KUnit runs its suites on load and prints KTAP to the console), reads
each suite's verdict from /sys/kernel/debug/kunit/<suite>/results and unloads it; then
scans kmemleak, prints what it found and reboots (QEMU runs with -no-reboot, so it exits). Every line the script prints starts
with MARK, so the driver can cut the console into one KTAP document per cycle and read
each with the report code of built-in runs. Only MODULE_ARGS="dynmods=1" lets
cgroup_migrate_dynmods switch favordynmods on, for the rest of the boot: cgroup_migrate then
skips itself in the later cycles.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from . import carry
from . import profile as profiles
from .common import Context, DriverError, read_text_file, run_logged, say, user_path, write_json
from .params import SUITE_MODULE, param_rules, refused_value, suite_parameters, with_selfcheck
from .pipeline import choose_qemu, prepare
from .console import build_report, strip_prefix
from .export import write_summary
from .report import INTERRUPTED, Report
from .run import (HANG_S, ExecResult, StopRules, build, build_failure, kunit_env, new_results,
                  watch)
from .summary import format_summary

MODULE_RUN_KCONFIG = (
    "CONFIG_MODULES=y", "CONFIG_MODULE_UNLOAD=y", "CONFIG_CGROUP_KUNIT_TEST=m",
    "CONFIG_DEBUG_FS=y", "CONFIG_KUNIT_DEBUGFS=y", "CONFIG_DEBUG_KMEMLEAK=y",
    "CONFIG_BLK_DEV_INITRD=y", "CONFIG_BINFMT_ELF=y", "CONFIG_BINFMT_SCRIPT=y",
    "CONFIG_PROC_FS=y", "CONFIG_SYSFS=y",
)
MARK = "cgk-module:"
BUSYBOX = Path("/bin/busybox")
MODULE = f"{SUITE_MODULE}.ko"
MAX_CYCLES = 1000
# Per cycle, on top of the profile's own run timeout: the watchdog's hang and failure rules
# end a broken boot long before it.
CYCLE_TIMEOUT_S = 600
# kmemleak reports an object only once it has been unreferenced this long (its min_age is
# 5 s): the script waits this long after the last unload before it scans.
KMEMLEAK_SETTLE_S = 6

CYCLE_START = re.compile(rf"{re.escape(MARK)} cycle (\d+) of \d+: insmod\s*$")
CYCLE_UNLOADED = re.compile(rf"{re.escape(MARK)} cycle (\d+) of \d+: unloaded\s*$")
CYCLE_FAILED = re.compile(rf"{re.escape(MARK)} cycle (\d+): (insmod|rmmod) failed.*$")
DEBUGFS = re.compile(rf"{re.escape(MARK)} cycle (\d+): debugfs (\S+) (pass|fail)\s*$")
KMEMLEAK_BEGIN = re.compile(rf"{re.escape(MARK)} kmemleak begin: (\d+)\s*$")
KMEMLEAK_END = re.compile(rf"{re.escape(MARK)} kmemleak end\s*$")
KMEMLEAK_OFF = re.compile(rf"{re.escape(MARK)} kmemleak: unavailable")
DONE = re.compile(rf"{re.escape(MARK)} done: (\w+)\s*$")


# --- input ---------------------------------------------------------------------------------

def module_args(text: str, repo: Path) -> list[str]:
    """MODULE_ARGS as words for insmod; DriverError (exit 2) for a name the suite does not
    declare (the kernel would only warn and load with the defaults) or a word without '='."""
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise DriverError(f"MODULE_ARGS: {e}") from None
    known = suite_parameters(repo)
    rules = param_rules(repo)
    for word in words:
        name = word.split("=", 1)[0]
        if name.startswith(f"{SUITE_MODULE}."):
            raise DriverError(f"MODULE_ARGS: {word}: module parameters take no "
                              f"'{SUITE_MODULE}.' prefix at insmod")
        if known and name not in known:
            raise DriverError(f"MODULE_ARGS: {name} is not a parameter of {SUITE_MODULE} "
                              f"(it has: {', '.join(known)})")
        if "=" not in word or not re.fullmatch(r"[A-Za-z0-9_.,:+-]*", word.split("=", 1)[1]):
            raise DriverError(f"MODULE_ARGS: {word}: want {name}=<value> "
                              "(letters, digits and _.,:+- only)")
        want = refused_value(name, word.split("=", 1)[1], rules)
        if want:
            raise DriverError(f"MODULE_ARGS: {word}: the suite wants {want}")
    return words


def check_cycles(cycles: int) -> int:
    if not 1 <= cycles <= MAX_CYCLES:
        raise DriverError(f"CYCLES={cycles}: want 1..{MAX_CYCLES}")
    return cycles


# --- a user's kernel build directory (KDIR) ----------------------------------------------------

# What the guest kernel needs for module-run, besides the series' KUnit helpers.
KDIR_NEEDS = (
    "CONFIG_X86_64=y", "CONFIG_MODULES=y", "CONFIG_MODULE_UNLOAD=y", "CONFIG_KUNIT=y",
    "CONFIG_KUNIT_DEBUGFS=y", "CONFIG_DEBUG_FS=y", "CONFIG_CGROUPS=y", "CONFIG_USER_NS=y",
    "CONFIG_TRACEPOINTS=y", "CONFIG_BLK_DEV_INITRD=y", "CONFIG_BINFMT_SCRIPT=y",
)
KMEMLEAK = "CONFIG_DEBUG_KMEMLEAK=y"
# The first KUnit helper of the series that the suite's migrate, rstat and css_set cases need.
HELPER_MARK = ("include/linux/cgroup.h", "cgroup_create_for_test")


@dataclass
class Kdir:
    """A kernel build directory the suite is built against (make -C KDIR M=...)."""
    path: Path
    source: Path                 # its source tree (the same dir, or O='s "source" link)
    image: Path
    release: str
    kmemleak: bool


def read_kconfig(path: Path) -> set[str]:
    """The NAME=value lines of a .config."""
    return {line.strip() for line in path.read_text(errors="replace").splitlines()
            if line.startswith("CONFIG_")}


def check_kdir(text: str) -> Kdir:
    """KDIR checked before anything runs: a built x86_64 kernel with modules, KUnit and its
    debugfs; DriverError (exit 2) naming the first thing missing."""
    kdir = user_path(text, f"KDIR={text}")
    if not kdir.is_dir():
        raise DriverError(f"KDIR={text}: not a directory")
    kdir = kdir.resolve()
    for need in (".config", "Module.symvers", "include/config/kernel.release"):
        if not (kdir / need).is_file():
            raise DriverError(f"KDIR={kdir}: no {need}: want a configured and built kernel "
                              "(make -C <source> O=<KDIR> bzImage modules)")
    config = read_kconfig(kdir / ".config")
    missing = [c for c in KDIR_NEEDS if c not in config]
    if missing:
        raise DriverError(f"KDIR={kdir}: its .config lacks {', '.join(missing)}")
    image = kdir / "arch" / "x86" / "boot" / "bzImage"
    if not image.is_file():
        raise DriverError(f"KDIR={kdir}: no {image.relative_to(kdir)}: build the kernel image")
    source = (kdir / "source").resolve() if (kdir / "source").is_dir() else kdir
    header, symbol = HELPER_MARK
    try:
        helpers = symbol in (source / header).read_text(errors="replace")
    except OSError:
        raise DriverError(f"KDIR={kdir}: cannot read {source / header}") from None
    if not helpers:
        raise DriverError(f"KDIR={kdir}: {source} does not carry kernel/series "
                          f"({symbol} is not in {header}): apply the series and rebuild")
    release = read_text_file(kdir / "include" / "config" / "kernel.release").strip()
    return Kdir(path=kdir, source=source, image=image, release=release,
                kmemleak=KMEMLEAK in config)


# An external-module build reads no Kconfig: the suite's symbols are set on make's command
# line, each where the kernel has what its Kconfig entry depends on besides the suite: one of
# the configs listed (none: never in a module).
SUITE_DEPENDS: dict[str, tuple[str, ...]] = {
    "CGROUP_KUNIT_BENCH": (),
    "CGROUP_PIDS_KUNIT_TEST": ("CONFIG_CGROUP_PIDS=y",),
    "CGROUP_DEVRES_KUNIT_TEST": ("CONFIG_CGROUP_RDMA=y", "CONFIG_CGROUP_DMEM=y"),
}


def kdir_suite_symbols(repo: Path, kdir: Kdir) -> list[str]:
    """The suite's Kconfig symbols (besides CGROUP_KUNIT_TEST) to set in a build against kdir:
    those its source can build without backports (carry.py) whose dependencies its .config
    has."""
    carried = carry.plan(kdir.source, repo, backports=False)
    if carried.describe():
        say(f"KDIR={kdir.path}: carrying the suite onto it: {carried.describe()}")
    config = read_kconfig(kdir.path / ".config")
    return [s for s in carry.suite_symbols(repo) if s and s not in carried.off
            and (s not in SUITE_DEPENDS or any(d in config for d in SUITE_DEPENDS[s]))]


def kdir_make_command(kdir: Path, src: Path, jobs: int, symbols: Sequence[str] = ()) -> list[str]:
    """Kbuild's external-module build of the suite copied to src, with the suite's symbols."""
    return ["make", "-C", str(kdir), f"M={src}", "CONFIG_CGROUP_KUNIT_TEST=m",
            *(f"CONFIG_{s}=y" for s in symbols), f"-j{jobs}", "modules"]


def build_module_kdir(ctx: Context, kdir: Kdir, jobs: int | None) -> Path:
    """cgroup_kunit.ko built out of tree against kdir, from a copy of lib/kunit-cgroup under
    the build root (Kbuild writes its objects next to the sources)."""
    src = ctx.build / "module-kdir" / "src"
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(ctx.repo / "lib" / "kunit-cgroup", src)
    log = src.parent / "build.log"
    say(f"building {MODULE} against KDIR {kdir.path} ({kdir.release}); log {log}")
    symbols = kdir_suite_symbols(ctx.repo, kdir)
    rc, secs = run_logged(kdir_make_command(kdir.path, src, jobs or os.cpu_count() or 1, symbols), log,
                          f"building {MODULE}")
    if rc != 0:
        raise DriverError(f"building {MODULE} against {kdir.path} failed: "
                          f"{build_failure(log.read_text(errors='backslashreplace'))}; see {log}")
    say(f"built {MODULE} in {secs:.0f}s")
    return src / MODULE


# --- the initramfs ---------------------------------------------------------------------------

def init_script(cycles: int, args: Sequence[str]) -> str:
    """The guest's /init: CYCLES loads and unloads, the debugfs verdicts, kmemleak."""
    insmod = " ".join(["insmod", f"/{MODULE}", *args])
    return f"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t debugfs debugfs /sys/kernel/debug
say() {{ echo "{MARK} $*"; }}
K=/sys/kernel/debug/kmemleak
say "start: {cycles} cycles: {insmod}"
if [ -w $K ]; then echo scan > $K; echo clear > $K; else say "kmemleak: unavailable"; fi
i=1
status=ok
while [ $i -le {cycles} ]; do
	say "cycle $i of {cycles}: insmod"
	if ! {insmod}; then say "cycle $i: insmod failed"; status=insmod; break; fi
	for d in /sys/kernel/debug/kunit/*; do
		[ -f "$d/results" ] || continue
		if grep -q "not ok" "$d/results"; then v=fail; else v=pass; fi
		say "cycle $i: debugfs ${{d##*/}} $v"
	done
	if ! rmmod {SUITE_MODULE}; then say "cycle $i: rmmod failed"; status=rmmod; break; fi
	say "cycle $i of {cycles}: unloaded"
	i=$((i + 1))
done
if [ -w $K ]; then
	sleep {KMEMLEAK_SETTLE_S}
	echo scan > $K
	echo scan > $K
	say "kmemleak begin: $(grep -c 'unreferenced object' $K)"
	cat $K
	say "kmemleak end"
fi
say "done: $status"
# QEMU runs with -no-reboot: a reboot ends it (there is no ACPI to power off with).
reboot -f
"""


def _cpio_entry(name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0),
                ino: int = 1) -> bytes:
    """One newc cpio record (the format the kernel's initramfs unpacker reads)."""
    name_b = name.encode() + b"\0"
    fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(name_b), 0]
    head = b"070701" + b"".join(f"{v:08x}".encode() for v in fields)
    out = head + name_b
    out += b"\0" * (-len(out) % 4)
    out += data
    out += b"\0" * (-len(out) % 4)
    return out


def write_initramfs(dest: Path, module: Path, script: str, busybox: Path = BUSYBOX) -> Path:
    """An uncompressed newc initramfs with busybox, the module, /init and /dev/console."""
    entries: list[bytes] = []
    ino = 1
    for d in ("bin", "dev", "proc", "sys", "tmp"):
        entries.append(_cpio_entry(d, stat.S_IFDIR | 0o755, ino=ino))
        ino += 1
    entries.append(_cpio_entry("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1), ino=ino))
    ino += 1
    for name, path_or_text, mode in (("bin/busybox", busybox, 0o755), (MODULE, module, 0o644),
                                     ("init", script, 0o755)):
        data = path_or_text.encode() if isinstance(path_or_text, str) else path_or_text.read_bytes()
        entries.append(_cpio_entry(name, stat.S_IFREG | mode, data, ino=ino))
        ino += 1
    entries.append(_cpio_entry("TRAILER!!!", 0, ino=0))
    blob = b"".join(entries)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_bytes(blob + b"\0" * (-len(blob) % 512))
    os.replace(tmp, dest)
    return dest


# --- the console, cut per cycle ------------------------------------------------------------------

@dataclass
class Cycle:
    """One load and unload."""
    number: int
    start_line: int
    lines: list[str] = field(default_factory=list)
    unloaded: bool = False
    failed: str = ""                 # "insmod" or "rmmod"
    debugfs: dict[str, str] = field(default_factory=dict)


@dataclass
class GuestLog:
    """What the init script said, and the console cut into cycles."""
    cycles: list[Cycle]
    kmemleak: int | None = None      # objects reported; None: no scan ran (or unavailable)
    kmemleak_off: bool = False
    kmemleak_text: list[str] = field(default_factory=list)
    done: str = ""                   # "ok", "insmod", "rmmod"; "" if never printed


def _text(line: str) -> str:
    return strip_prefix(line.rstrip("\n"))


def split_console(text: str) -> GuestLog:
    """Cut a module-run console into cycles (each from its insmod marker to the next)."""
    log = GuestLog(cycles=[])
    current: Cycle | None = None
    in_leak = False
    for i, raw in enumerate(text.splitlines()):
        line = _text(raw)
        if in_leak:
            if KMEMLEAK_END.search(line):
                in_leak = False
            else:
                log.kmemleak_text.append(line)
            continue
        m = CYCLE_START.search(line)
        if m:
            current = Cycle(number=int(m.group(1)), start_line=i + 1)
            log.cycles.append(current)
            continue
        if (m := CYCLE_UNLOADED.search(line)) and current and int(m.group(1)) == current.number:
            current.unloaded = True
            current = None
            continue
        if (m := CYCLE_FAILED.search(line)) and current and int(m.group(1)) == current.number:
            current.failed = m.group(2)
            current.lines.append(raw)
            continue
        if (m := DEBUGFS.search(line)) and current and int(m.group(1)) == current.number:
            current.debugfs[m.group(2)] = m.group(3)
            continue
        if (m := KMEMLEAK_BEGIN.search(line)):
            log.kmemleak, in_leak, current = int(m.group(1)), True, None
            continue
        if KMEMLEAK_OFF.search(line):
            log.kmemleak_off = True
            continue
        if (m := DONE.search(line)):
            log.done, current = m.group(1), None
            continue
        if current is not None:
            current.lines.append(raw)
    return log


# --- verdicts --------------------------------------------------------------------------------

@dataclass
class CycleResult:
    number: int
    status: str                      # the cycle's report status, or "insmod"/"rmmod"/"lost"
    passed: int
    failed: int
    skipped: int
    crashed: int
    splats: int
    debugfs_mismatch: list[str]
    results: str
    failed_tests: list[str] = field(default_factory=list)


def suite_status(report: Report) -> dict[str, str]:
    """Each suite's status in a cycle's report ("pass"/"fail"/...)."""
    return {t.name: t.status for t in report.tests if t.level == "suite"}


def debugfs_mismatches(report: Report, debugfs: dict[str, str]) -> list[str]:
    """Suites whose debugfs verdict disagrees with the console's (or that one side lacks)."""
    console = {name: ("pass" if status.upper() in ("PASS", "SKIP") else "fail")
               for name, status in suite_status(report).items()}
    out = []
    for name in sorted(set(console) | set(debugfs)):
        a, b = console.get(name, "missing"), debugfs.get(name, "missing")
        if a != b:
            out.append(f"{name}: console {a}, debugfs {b}")
    return out


def cycle_report(results: Path, cycle: Cycle, verdict: str, profile: str,
                 tree_label: str, base: str) -> tuple[Report, CycleResult]:
    """Write the cycle's console and its report (summary and results files)."""
    out = results / f"cycle-{cycle.number:03d}"
    out.mkdir(parents=True, exist_ok=True)
    console = out / "console.log"
    console.write_text("\n".join(cycle.lines) + "\n")
    write_json(out / "exec.json", {"verdict": verdict, "elapsed": 0.0, "profile": profile,
                                   "cycle": cycle.number})
    report = build_report(console, verdict, profile=profile, tree=tree_label, base=base)
    report.replay_target = "make module-run"
    write_summary(report, out)
    status = cycle.failed or report.status
    mismatch = [] if cycle.failed else debugfs_mismatches(report, cycle.debugfs)
    return report, CycleResult(number=cycle.number, status=status, passed=report.counts.passed,
                               failed=report.counts.failed, skipped=report.counts.skipped,
                               crashed=report.counts.crashed, splats=len(report.splats),
                               debugfs_mismatch=mismatch, results=str(out),
                               failed_tests=[t.id for t in report.tests
                                             if t.level == "case" and t.status in ("FAIL", "CRASH")])


def problems_of(log: GuestLog, cycles: list[CycleResult], wanted: int, verdict: str,
                kmemleak: bool = True) -> list[str]:
    """Everything that fails the run, one line each (kmemleak False: the kernel has none,
    so no scan is not a problem)."""
    out = []
    for c in cycles:
        if c.status in ("insmod", "rmmod"):
            out.append(f"cycle {c.number}: {c.status} failed")
        elif c.status != "pass":
            which = f": {', '.join(c.failed_tests[:3])}" if c.failed_tests else ""
            out.append(f"cycle {c.number}: {c.status} ({c.failed} failed, {c.crashed} crashed, "
                       f"{c.splats} reports{which}); see {c.results}/summary.txt")
        out += [f"cycle {c.number}: {m}" for m in c.debugfs_mismatch]
    completed = sum(1 for c in log.cycles if c.unloaded)
    if completed < wanted and not any(c.status in ("insmod", "rmmod") for c in cycles):
        out.append(f"{completed} of {wanted} cycles completed (the guest {verdict})")
    if not kmemleak:
        pass
    elif log.kmemleak_off:
        out.append("kmemleak was not available in the guest")
    elif log.kmemleak is None:
        out.append("no kmemleak scan ran")
    elif log.kmemleak:
        out.append(f"kmemleak: {log.kmemleak} unreferenced object(s)")
    return out


# --- the command ----------------------------------------------------------------------------------

def qemu_command(image: Path, initramfs: Path, prof: profiles.Profile, kernel_args: Sequence[str],
                 memory_mb: int = 2048) -> list[str]:
    """The guest: kunit.py's QEMU line for x86_64, with our initramfs; the PATH shim keeps
    only the -accel the probe chose."""
    append = ["console=ttyS0", "panic=-1", "kmemleak=on", *prof.kernel_args, *kernel_args]
    return ["qemu-system-x86_64", "-nodefaults", "-m", str(memory_mb),
            "-smp", str(prof.qemu_smp or 1), "-kernel", str(image), "-initrd", str(initramfs),
            "-append", " ".join(append), "-no-reboot", "-nographic",
            "-accel", "kvm", "-accel", "tcg", "-serial", "stdio", "-bios", "qboot.rom"]


@dataclass
class Guest:
    """The kernel module-run boots and the module it loads."""
    image: Path
    ko: Path
    label: str                       # where it came from, for the summary
    base: str
    kmemleak: bool
    results_name: str
    work: Path                       # where the initramfs goes and QEMU runs


def own_guest(ctx: Context, prof: profiles.Profile, kernel_src: str | None, kernel_ref: str,
              jobs: int | None) -> Guest:
    """The profile's kernel with the series, the suite =m, modules and kmemleak."""
    tree, base = prepare(ctx, kernel_src, kernel_ref)
    out = ctx.build / "out" / f"{prof.name}-module-run"
    build(tree.path, prof, ctx.repo, ctx.build, jobs, out=out, kconfig_add=MODULE_RUN_KCONFIG)
    ko = out / "lib" / "kunit-cgroup" / MODULE
    image = out / "arch" / "x86" / "boot" / "bzImage"
    for need in (ko, image):
        if not need.is_file():
            raise DriverError(f"the module-run build of {prof.name} produced no {need}")
    return Guest(image=image, ko=ko, base=base, kmemleak=True,
                 label=f"{tree.path} @ {tree.head_commit[:12]}",
                 results_name=f"{prof.name}-module-run", work=out)


def kdir_guest(ctx: Context, kdir: Kdir, jobs: int | None) -> Guest:
    """A user's built kernel (KDIR) and the suite built against it."""
    ko = build_module_kdir(ctx, kdir, jobs)
    if not ko.is_file():
        raise DriverError(f"building against {kdir.path} produced no {MODULE}")
    if not kdir.kmemleak:
        say(f"KDIR {kdir.path}: no {KMEMLEAK}: the run cannot check for leaks")
    return Guest(image=kdir.image, ko=ko, base=f"KDIR {kdir.release}",
                 kmemleak=kdir.kmemleak, label=f"KDIR {kdir.path}", results_name="kdir-module-run",
                 work=ko.parent.parent)


def module_run(ctx: Context, profile_name: str, cycles: int, args_text: str,
               filter_glob: str, kernel_src: str | None, kernel_ref: str = "HEAD",
               jobs: int | None = None, echo: bool = False, kdir_text: str = "") -> int:
    """Build (or, with kdir_text, build the module against KDIR), boot, load and unload
    CYCLES times; print the summary; the exit status."""
    check_cycles(cycles)
    # the oracle's self-checks on real reports, as in every run of the driver, unless asked
    args = [a.removeprefix(f"{SUITE_MODULE}.")
            for a in with_selfcheck([f"{SUITE_MODULE}.{w}" for w in module_args(args_text, ctx.repo)])]
    prof = profiles.load_profile(ctx.repo, profile_name)
    if prof.arch != "x86_64":
        raise DriverError(f"module-run needs an x86_64 profile, not {prof.name} ({prof.arch})")
    if not BUSYBOX.is_file():
        raise DriverError(f"{BUSYBOX} missing: install busybox-static (make deps does)")
    if kdir_text:
        guest = kdir_guest(ctx, check_kdir(kdir_text), jobs)
    else:
        guest = own_guest(ctx, prof, kernel_src, kernel_ref, jobs)
    ko, image, out = guest.ko, guest.image, guest.work
    results = profiles.results_dir(ctx.build, guest.results_name)
    initramfs = write_initramfs(out / "initramfs.cpio", ko, init_script(cycles, args))
    kernel_args = [f"kunit.filter_glob={filter_glob}"] if filter_glob else []
    cmd = qemu_command(image, initramfs, prof, kernel_args)
    shim, accel = choose_qemu(prof, image, ctx.build)
    say(f"module-run {prof.name}: {cycles} cycles of insmod {' '.join([MODULE, *args])}"
        + (f", filter {filter_glob}" if filter_glob else "") + f" (QEMU {accel})")
    interrupted = False
    with new_results(results) as stage:  # the earlier run's results stay until this one's
        started = time.monotonic()
        try:
            ex = watch(cmd, stage / "console.log", f"module-run {prof.name}", cwd=out,
                       env=kunit_env(shim), boot_timeout=prof.boot_timeout,
                       timeout=prof.timeout + cycles * CYCLE_TIMEOUT_S, hang_timeout=HANG_S,
                       echo=echo, rules=StopRules.of(prof))
        except KeyboardInterrupt:
            if not (stage / "console.log").is_file() or not (stage / "console.log").stat().st_size:
                raise
            interrupted = True
            ex = ExecResult(verdict=INTERRUPTED, console_log=stage / "console.log",
                            elapsed=time.monotonic() - started)
    text = (results / "console.log").read_text(errors="backslashreplace")
    log = split_console(text)
    reports, done = [], []
    for cycle in log.cycles:
        verdict = "completed" if cycle.unloaded or cycle.failed else ex.verdict
        report, result = cycle_report(results, cycle, verdict, prof.name, guest.label,
                                      guest.base)
        reports.append(report)
        done.append(result)
    refused = {p.describe(): p for r in reports for p in r.bad_parameters}
    if refused:  # the module's param set() returned -EINVAL: insmod failed, nothing ran
        raise DriverError(f"MODULE_ARGS: the suite refused {'; '.join(refused)}; "
                          "insmod failed with -EINVAL")
    problems = problems_of(log, done, cycles, ex.verdict, guest.kmemleak)
    status = INTERRUPTED if interrupted else "fail" if problems else "pass"
    summary: dict[str, Any] = {
        "profile": prof.name, "cycles_wanted": cycles, "module_args": args,
        "filter": filter_glob, "accel": accel, "elapsed": round(ex.elapsed, 1),
        "verdict": ex.verdict, "stops": [s.to_json() for s in ex.stops],
        "cycles_completed": sum(1 for c in log.cycles if c.unloaded),
        "kmemleak": log.kmemleak, "status": status,
        "problems": problems, "cycles": [asdict(c) for c in done],
        "tree": guest.label, "base": guest.base, "command": cmd,
        "kernel": f"{guest.label} ({prof.name}'s watchdog)" if kdir_text else "",
    }
    write_json(results / "module-run.json", summary)
    (results / "kmemleak.txt").write_text("\n".join(log.kmemleak_text) + "\n")
    print(format_module_run(summary, reports[0] if reports else None), end="", flush=True)
    if interrupted:
        raise KeyboardInterrupt
    return 1 if problems else 0


def format_module_run(summary: dict[str, Any], first: Report | None) -> str:
    """The one-screen summary."""
    who = summary.get("kernel") or summary["profile"]
    head = (f"cgkunit: {who} module-run: {summary['status'].upper()}: "
            f"{summary['cycles_completed']} of {summary['cycles_wanted']} load/unload cycles "
            f"in {summary['elapsed']:.0f}s (QEMU {summary['accel']})")
    lines = [head]
    totals = {k: sum(c[k] for c in summary["cycles"]) for k in ("passed", "failed", "skipped",
                                                                "crashed", "splats")}
    lines.append(f"  tests over all cycles: {totals['passed']} passed, {totals['failed']} failed, "
                 f"{totals['skipped']} skipped, {totals['crashed']} crashed; "
                 f"{totals['splats']} report(s)")
    leak = summary["kmemleak"]
    lines.append("  kmemleak: " + ("no scan" if leak is None else
                                   "clean" if leak == 0 else f"{leak} unreferenced object(s)"))
    lines += [f"  {p}" for p in summary["problems"][:20]]
    if len(summary["problems"]) > 20:
        lines.append(f"  ... {len(summary['problems']) - 20} more in module-run.json")
    if first is not None and first.status != "pass":
        lines.append("  first cycle:")
        lines += ["    " + x for x in format_summary(first).splitlines()[:12]]
    return "\n".join(lines) + "\n"

