"""The machine a measurement ran on, and what else was running on it."""
from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

from . import procs

CPUINFO = Path("/proc/cpuinfo")
LOADAVG = Path("/proc/loadavg")
STAT = Path("/proc/stat")


def cpu_model(cpuinfo: str) -> str:
    """The CPU model named in /proc/cpuinfo text (x86 'model name', else other arches' keys)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and value.strip():
            fields.setdefault(key.strip().lower(), value.strip())
    for key in ("model name", "hardware", "cpu model", "processor", "cpu"):
        if key in fields and not fields[key].isdigit():
            return fields[key]
    return "unknown"


def host_cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """This host's CPU model ("unknown" when /proc/cpuinfo cannot be read)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        text = ""
    return cpu_model(text)


def host_cores() -> int:
    """The host's cores (os.cpu_count(), at least 1)."""
    return os.cpu_count() or 1


def load_average(path: Path = LOADAVG) -> float | None:
    """The 1-minute load average, None when it cannot be read."""
    try:
        return float(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_busy_seconds(text: str, ticks_per_s: int) -> float | None:
    """CPU seconds all host CPUs spent busy, from /proc/stat text: user, nice, system,
    irq, softirq and steal (time a hypervisor gave to others); None when unreadable."""
    first = text.split("\n", 1)[0].split()
    if len(first) < 9 or first[0] != "cpu" or ticks_per_s <= 0:
        return None
    try:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in first[1:9])
    except ValueError:
        return None
    return (user + nice + system + irq + softirq + steal) / ticks_per_s


def host_busy_seconds(path: Path = STAT) -> float | None:
    """cpu_busy_seconds() of this host now."""
    try:
        return cpu_busy_seconds(path.read_text(), os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return None


def own_cpu_seconds() -> float:
    """CPU seconds of this process and of every descendant it has waited for: a kernel
    under test counts once kunit.py (which waits for it) has been waited for."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def other_cores(busy: float, own: float, wall: float) -> float | None:
    """Cores the rest of the host kept busy on average: host busy seconds less our own,
    over the wall time (None for no time)."""
    if wall <= 0:
        return None
    return max(0.0, (busy - own) / wall)


@dataclass
class OtherLoad:
    """What else ran on the host while something of ours did (a benchmark boot): the
    interference a load average taken before it cannot show."""
    busy: float | None
    own: float
    since: float

    @classmethod
    def start(cls) -> OtherLoad:
        return cls(host_busy_seconds(), own_cpu_seconds(), time.monotonic())

    def cores(self) -> float | None:
        """other_cores() since start(), once our processes of the interval were waited for."""
        busy = host_busy_seconds()
        if busy is None or self.busy is None:
            return None
        return other_cores(busy - self.busy, own_cpu_seconds() - self.own,
                           time.monotonic() - self.since)


def leftover_kernels(build_root: Path) -> dict[int, Path]:
    """UML kernels of this build root still running (pid -> image): left by a run that
    ended before the driver killed its kernels itself, they take cores from everything
    after them."""
    found: dict[int, Path] = {}
    out = build_root / "out"
    try:
        images = [d / "linux" for d in out.iterdir() if (d / "linux").is_file()]
    except OSError:
        return found
    for image in images:
        # a kernel whose image was rebuilt since it started: its exe is "<image> (deleted)"
        for pid in procs.processes_of(image) + procs.processes_of(Path(f"{image} (deleted)")):
            found[pid] = image
    return found
