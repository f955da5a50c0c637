"""The machine a measurement ran on, and what else was running on it."""
from __future__ import annotations

import os
from pathlib import Path

from . import procs

CPUINFO = Path("/proc/cpuinfo")
LOADAVG = Path("/proc/loadavg")


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
