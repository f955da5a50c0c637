"""Ensure the Debian packages needed to fetch, build and boot are installed."""
from __future__ import annotations

import os
import subprocess
from typing import Callable, Sequence

from .common import DriverError, Heartbeat, run_cmd, say

PACKAGES: tuple[str, ...] = (
    "flex", "bison", "bc", "libelf-dev", "libssl-dev", "qemu-system-x86",
    "ccache", "rsync", "git", "xz-utils", "build-essential", "debian-archive-keyring",
    "python3-matplotlib",  # make bench's plots (optional: without it, no plots)
    "busybox-static",  # make module-run's initramfs
)

Query = Callable[[str], bool]
UPDATE_TIMEOUT_S = 600.0    # apt-get update of the system's sources
INSTALL_TIMEOUT_S = 3600.0  # apt-get install: downloads and unpacks


def is_installed(package: str) -> bool:
    """True when dpkg says the package is installed."""
    try:
        proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise DriverError("dpkg-query not found: cgkunit needs a Debian-based system") from None
    return proc.returncode == 0 and proc.stdout.strip().endswith(" installed")


def missing_packages(packages: Sequence[str] = PACKAGES, query: Query = is_installed) -> list[str]:
    """Packages of the list that are not installed."""
    return [p for p in packages if not query(p)]


def ensure_deps(packages: Sequence[str] = PACKAGES, query: Query = is_installed,
                is_root: bool | None = None) -> list[str]:
    """Install missing packages when root, else DriverError; returns what was installed."""
    missing = missing_packages(packages, query)
    if not missing:
        say("build dependencies present")
        return []
    root = os.geteuid() == 0 if is_root is None else is_root
    if not root:
        raise DriverError(f"missing Debian packages: {' '.join(missing)} "
                          f"(run as root, or: sudo apt-get install {' '.join(missing)})")
    say(f"installing {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for args, timeout in ((["apt-get", "update"], UPDATE_TIMEOUT_S),
                          (["apt-get", "install", "-y", *missing], INSTALL_TIMEOUT_S)):
        run_cmd(args, env=env, timeout=timeout, heartbeat=Heartbeat(" ".join(args[:2])),
                timeout_hint="the package mirror did not answer, or answered too slowly")
    still = missing_packages(missing, query)
    if still:
        raise DriverError(f"apt-get install did not install: {' '.join(still)}")
    return missing
