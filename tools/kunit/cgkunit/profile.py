"""Test profiles (kconfig fragments with #@ metadata) and the QEMU accel choice."""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from .common import DriverError, read_json, read_text_file, say, write_json
from .machine import host_cores

PROFILES_DIR = Path("tools") / "kunit" / "profiles"
ARCHES = ("um", "x86_64")
ACCEL_MODES = ("auto", "kvm", "tcg")
QEMU = "qemu-system-x86_64"
KNOWN_KEYS = ("arch", "kernel_args", "qemu_smp", "ncpus", "boot_timeout", "timeout", "description",
              "crash_grace", "storm_repeats", "storm_window", "post_report_silence", "isolate")
SMP_HOST = "host"
MIN_HOST_SMP = 4
# The watchdog's failure-state rules (run.Watchdog); a profile may set each, 0 turns it off.
CRASH_GRACE_S = 5.0         # after an Oops/BUG: stop unless KUnit prints a result within this
STORM_REPEATS = 3           # the same report this often with no KTAP result between them ...
STORM_WINDOW_S = 30.0       # ... and still no result this long after the first: a storm
POST_REPORT_SILENCE_S = 30.0  # after a lockdep/hung-task/stall/lockup report: console silence
ISOLATE_MODES = ("suite", "test")  # kunit.py --run_isolated=; "" (or "none"): one boot


# The make target that runs one profile (what the README and the Makefile say); a profile
# not here is run, and replayed, with the driver itself. test_profile checks this table
# against the Makefile's recipes.
MAKE_TARGETS = {"um-lockdep": "make run", "x86_64-kcsan": "make kcsan",
                "x86_64-kasan": "make kasan", "x86_64-lockdep": "make lockdep-x86"}


def make_target(profile: str) -> str:
    """The command that runs one profile: its make target, else the driver's run command."""
    return MAKE_TARGETS.get(profile, f"python3 tools/kunit/cgkunit.py run --profile {profile}")


@dataclass(frozen=True)
class Profile:
    """One test configuration."""
    name: str
    arch: str
    fragment: Path
    kernel_args: list[str] = field(default_factory=list)
    qemu_smp: int | None = None
    ncpus: int | None = None      # UML SMP: ncpus=N on the command line (with seccomp=on)
    boot_timeout: int = 120
    timeout: int = 900
    description: str = ""
    crash_grace: float = CRASH_GRACE_S
    storm_repeats: int = STORM_REPEATS
    storm_window: float = STORM_WINDOW_S
    post_report_silence: float = POST_REPORT_SILENCE_S
    isolate: str = ""


def list_profiles(repo: Path) -> list[str]:
    """Names of the profiles in tools/kunit/profiles."""
    return sorted(p.stem for p in (repo / PROFILES_DIR).glob("*.config"))


def _positive_int(path: Path, n: int, key: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise DriverError(f"{path}:{n}: {key} must be a positive integer, got {value!r}")
    return number


def _seconds(path: Path, n: int, key: str, value: str) -> float:
    """A number of seconds >= 0 (0: the rule is off)."""
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number >= 0 or number == float("inf"):
        raise DriverError(f"{path}:{n}: {key} must be a number of seconds >= 0 (0: off), "
                          f"got {value!r}")
    return number


def _repeats(path: Path, n: int, value: str) -> int:
    """storm_repeats: 0 (off) or a count of at least 2."""
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0 or number == 1:
        raise DriverError(f"{path}:{n}: storm_repeats must be 0 (off) or an integer >= 2, "
                          f"got {value!r}")
    return number


def isolate_mode(value: str | None, where: str = "isolate") -> str:
    """'suite', 'test' or '' (from '', 'none' or None); DriverError otherwise."""
    mode = (value or "").strip().lower()
    if mode in ("", "none"):
        return ""
    if mode not in ISOLATE_MODES:
        raise DriverError(f"{where} must be one of {', '.join(ISOLATE_MODES)} or none, got {value!r}")
    return mode


def host_smp(cores: int | None = None) -> int:
    """vCPUs for `qemu_smp: host`: the host's cores, at least MIN_HOST_SMP."""
    return max(MIN_HOST_SMP, cores if cores is not None else os.cpu_count() or 1)


def _qemu_smp(path: Path, n: int, value: str, key: str = "qemu_smp",
              host: int | None = None) -> int:
    """A positive vCPU count, or `host` resolved on this machine (host_smp() unless host)."""
    if value == SMP_HOST:
        return host if host is not None else host_smp()
    try:
        return _positive_int(path, n, key, value)
    except DriverError:
        raise DriverError(f"{path}:{n}: {key} must be a positive integer or {SMP_HOST!r}, "
                          f"got {value!r}") from None


def with_cpus(profile: Profile, n: int) -> Profile:
    """The profile with n vCPUs: QEMU's -smp, or UML's ncpus= (replacing the profile's)."""
    if profile.arch == "x86_64":
        return replace(profile, qemu_smp=n)
    args = [a for a in profile.kernel_args if not a.startswith("ncpus=")]
    return replace(profile, ncpus=n, kernel_args=[*args, f"ncpus={n}"])


def vcpus(profile: Profile) -> int:
    """vCPUs a boot of the profile gets (UML without ncpus=: 1)."""
    if profile.arch == "x86_64":
        return profile.qemu_smp or 1
    for a in reversed(profile.kernel_args):
        if a.startswith("ncpus=") and a[6:].isdigit():
            return int(a[6:])
    return 1


def parse_profile(name: str, path: Path) -> Profile:
    """Parse the '#@ key: value' metadata of a profile fragment."""
    meta: dict[str, tuple[int, str]] = {}
    for n, raw in enumerate(read_text_file(path).splitlines(), 1):
        if not raw.startswith("#@"):
            continue
        key, sep, value = raw[2:].partition(":")
        key = key.strip()
        if not sep or not key:
            raise DriverError(f"{path}:{n}: expected '#@ key: value'")
        if key not in KNOWN_KEYS:
            say(f"{path}:{n}: ignoring unknown metadata key {key!r}")
            continue
        meta[key] = (n, value.strip())
    arch = meta.get("arch", (0, "um"))[1]
    if arch not in ARCHES:
        raise DriverError(f"{path}: arch must be one of {', '.join(ARCHES)}, got {arch!r}")
    ints = {k: _positive_int(path, meta[k][0], k, meta[k][1])
            for k in ("boot_timeout", "timeout") if k in meta}
    if "qemu_smp" in meta:
        ints["qemu_smp"] = _qemu_smp(path, *meta["qemu_smp"])
    if "ncpus" in meta:
        if arch != "um":
            raise DriverError(f"{path}:{meta['ncpus'][0]}: ncpus is for arch um (x86_64: qemu_smp)")
        ints["ncpus"] = _qemu_smp(path, *meta["ncpus"], key="ncpus", host=host_cores())
    try:
        kernel_args = shlex.split(meta.get("kernel_args", (0, ""))[1])
    except ValueError as e:
        raise DriverError(f"{path}: kernel_args: {e}") from None
    secs = {k: _seconds(path, meta[k][0], k, meta[k][1])
            for k in ("crash_grace", "storm_window", "post_report_silence") if k in meta}
    repeats = _repeats(path, *meta["storm_repeats"]) if "storm_repeats" in meta else STORM_REPEATS
    isolate = ""
    if "isolate" in meta:
        isolate = isolate_mode(meta["isolate"][1], f"{path}:{meta['isolate'][0]}: isolate")
    prof = Profile(name=name, arch=arch, fragment=path.resolve(), kernel_args=kernel_args,
                   qemu_smp=ints.get("qemu_smp") if arch == "x86_64" else None,
                   boot_timeout=ints.get("boot_timeout", 120), timeout=ints.get("timeout", 900),
                   description=meta.get("description", (0, ""))[1],
                   crash_grace=secs.get("crash_grace", CRASH_GRACE_S), storm_repeats=repeats,
                   storm_window=secs.get("storm_window", STORM_WINDOW_S),
                   post_report_silence=secs.get("post_report_silence", POST_REPORT_SILENCE_S),
                   isolate=isolate)
    return with_cpus(prof, ints["ncpus"]) if "ncpus" in ints else prof


def load_profile(repo: Path, name: str) -> Profile:
    """The named profile; DriverError listing the known ones otherwise."""
    path = repo / PROFILES_DIR / f"{name}.config"
    if "/" in name or not path.exists():  # a directory or unreadable file: parse_profile says so
        known = ", ".join(list_profiles(repo)) or "none"
        raise DriverError(f"unknown profile {name!r} (known: {known})")
    return parse_profile(name, path)


def _with_variant(name: str, variant: str) -> str:
    return f"{name}+{variant}" if variant else name


def out_dir(build: Path, profile: Profile, variant: str = "") -> Path:
    """Kernel build directory of a profile (and variant)."""
    return build / "out" / _with_variant(profile.name, variant)


def results_dir(build: Path, profile_name: str, variant: str = "") -> Path:
    """Results directory of a profile (and variant)."""
    return build / "results" / _with_variant(profile_name, variant)


# --- accelerator -------------------------------------------------------------

def probe_kvm(kernel_image: Path, qemu: str, seconds: float = 5.0) -> bool:
    """True when a KVM guest prints 'Linux version' within seconds."""
    cmd = [qemu, "-accel", "kvm", "-nodefaults", "-nographic", "-no-reboot", "-m", "256",
           "-serial", "stdio", "-kernel", str(kernel_image),
           "-append", "console=ttyS0 earlyprintk=serial panic=-1"]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError:
        return False
    seen = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if b"Linux version" in line:
                seen.set()
                break

    threading.Thread(target=reader, daemon=True).start()
    ok = seen.wait(seconds)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    return ok


def _boot_id(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def accel_mode(value: str | None) -> str:
    """CGKUNIT_ACCEL checked: 'auto' (also when unset), 'kvm' or 'tcg'; DriverError otherwise."""
    mode = (value or "auto").strip().lower()
    if mode not in ACCEL_MODES:
        raise DriverError(f"CGKUNIT_ACCEL must be one of {', '.join(ACCEL_MODES)}, got {mode!r}")
    return mode


def choose_accel(kernel_image: Path, build: Path, mode: str | None = None, *,
                 env: Mapping[str, str] | None = None, kvm_dev: Path = Path("/dev/kvm"),
                 qemu: str | None = None, boot_id_file: Path = Path("/proc/sys/kernel/random/boot_id"),
                 probe_seconds: float = 5.0) -> tuple[str, str]:
    """(accel, reason): CGKUNIT_ACCEL=kvm|tcg forces, auto probes KVM once per boot."""
    env = os.environ if env is None else env
    mode = accel_mode(mode or env.get("CGKUNIT_ACCEL"))
    if mode != "auto":
        accel, reason = mode, f"forced by CGKUNIT_ACCEL={mode}"
    elif not os.access(kvm_dev, os.R_OK | os.W_OK):
        accel, reason = "tcg", f"{kvm_dev} is not accessible"
    elif not kernel_image.is_file():
        accel, reason = "tcg", f"no kernel image {kernel_image} to probe KVM with"
    else:
        cache = build / "accel.json"
        boot_id = _boot_id(boot_id_file)
        cached = read_json(cache)
        if isinstance(cached, dict) and boot_id and cached.get("boot_id") == boot_id \
                and cached.get("accel") in ("kvm", "tcg"):
            accel, reason = cached["accel"], f"{cached.get('reason', '')} (cached for this boot)"
        else:
            say(f"probing KVM with a {probe_seconds:.0f}s test boot")
            if probe_kvm(kernel_image, qemu or find_real_qemu(build / "shim"), probe_seconds):
                accel, reason = "kvm", f"KVM probe printed 'Linux version' within {probe_seconds:.0f}s"
            else:
                accel, reason = "tcg", f"KVM probe did not print 'Linux version' within {probe_seconds:.0f}s"
            write_json(cache, {"boot_id": boot_id, "accel": accel, "reason": reason})
    say(f"QEMU accel: {accel} ({reason})")
    return accel, reason


def find_real_qemu(shim_dir: Path, path_env: str | None = None) -> str:
    """qemu-system-x86_64 on PATH, skipping the shim dir."""
    path_env = os.environ.get("PATH", "") if path_env is None else path_env
    shim = os.path.realpath(shim_dir)
    dirs = [d for d in path_env.split(os.pathsep) if d and os.path.realpath(d) != shim]
    found = shutil.which(QEMU, path=os.pathsep.join(dirs))
    if not found:
        raise DriverError(f"{QEMU} not found on PATH (apt-get install qemu-system-x86)")
    return found


SHIM = """#!/bin/sh
# Generated by cgkunit (tools/kunit/cgkunit/profile.py). kunit.py passes
# "-accel kvm -accel hvf -accel tcg"; keep only the accelerator cgkunit chose.
real={real}
want={accel}
kept=0
n=$#
while [ "$n" -gt 0 ]; do
    a=$1; shift; n=$((n - 1))
    if [ "$a" = "-accel" ] && [ "$n" -gt 0 ]; then
        v=$1; shift; n=$((n - 1))
        case "$v" in
            "$want"|"$want",*) set -- "$@" -accel "$v"; kept=1 ;;
        esac
        continue
    fi
    set -- "$@" "$a"
done
if [ "$kept" = 0 ]; then
    set -- "$@" -accel "$want"
fi
exec "$real" "$@"
"""


def make_shim(build: Path, accel: str, real: str | None = None) -> Path:
    """Write <build>/shim/qemu-system-x86_64 keeping only -accel <accel>; returns the dir."""
    if accel not in ("kvm", "tcg"):
        raise DriverError(f"unsupported accel {accel!r}")
    shim_dir = build / "shim"
    shim_dir.mkdir(parents=True, exist_ok=True)
    real = real or find_real_qemu(shim_dir)
    fd, tmp = tempfile.mkstemp(dir=shim_dir, prefix=".qemu.")
    with os.fdopen(fd, "w") as f:
        f.write(SHIM.format(real=shlex.quote(real), accel=shlex.quote(accel)))
    os.chmod(tmp, 0o755)
    os.replace(tmp, shim_dir / QEMU)
    return shim_dir
