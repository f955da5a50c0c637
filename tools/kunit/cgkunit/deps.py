"""Ensure the Debian packages needed to fetch, build and boot are installed."""
from __future__ import annotations

import os
import subprocess
from typing import Callable, Sequence

from .common import DriverError, run_cmd, say

PACKAGES: tuple[str, ...] = (
    "flex", "bison", "bc", "libelf-dev", "libssl-dev", "qemu-system-x86",
    "ccache", "rsync", "git", "xz-utils", "build-essential", "debian-archive-keyring",
    "python3-matplotlib",  # make bench's plots (optional: without it, no plots)
    "busybox-static",  # make module-run's initramfs
)

Query = Callable[[str], bool]


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
    run_cmd(["apt-get", "update"], env=env)
    run_cmd(["apt-get", "install", "-y", *missing], env=env)
    still = missing_packages(missing, query)
    if still:
        raise DriverError(f"apt-get install did not install: {' '.join(still)}")
    return missing
