"""The processes a boot starts, found and ended whatever they did to their session.

kunit.py starts the kernel as its child. QEMU stays in the process group the driver
gave kunit.py, but a UML kernel calls setsid() first thing (arch/um/os-Linux/main.c):
killing kunit.py's process group never reaches it, and once kunit.py exits it is
reparented away from us and keeps running, with one host thread per vCPU. So the
driver makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER): whatever a
boot leaves behind is reparented to the driver, not to init, and stays findable by
walking the parent links in /proc from the processes the driver started.
"""
from __future__ import annotations

import ctypes
import os
import signal
import time
from pathlib import Path
from typing import Iterable

PR_SET_CHILD_SUBREAPER = 36
PROC = Path("/proc")
_subreaper = False


def become_subreaper() -> bool:
    """Orphans of our descendants become our children (once per process); False when the
    kernel refuses (then a kernel whose parent died is still found while its parent lives)."""
    global _subreaper
    if not _subreaper:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        except (OSError, AttributeError):
            _subreaper = False
    return _subreaper


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state is [0], ppid [1])."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def parent_map() -> dict[int, list[int]]:
    """ppid -> live children (zombies left out: they run nothing and cannot be killed)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir(PROC)
    except OSError:
        return children
    for entry in entries:
        if not entry.isdigit():
            continue
        f = _stat_fields(int(entry))
        if f is None or len(f) < 2 or f[0] in ("Z", "X"):
            continue
        children.setdefault(int(f[1]), []).append(int(entry))
    return children


def descendants(roots: Iterable[int], tree: dict[int, list[int]] | None = None) -> list[int]:
    """Every live process below roots (roots themselves not included)."""
    tree = parent_map() if tree is None else tree
    out: list[int] = []
    todo = list(roots)
    seen = set(todo)
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in seen:
                seen.add(child)
                out.append(child)
                todo.append(child)
    return out


def children_of_self() -> set[int]:
    """Our live direct children now (what was there before a boot is not the boot's)."""
    return set(parent_map().get(os.getpid(), []))


def _reap(pids: Iterable[int]) -> None:
    """Collect the exit status of those of pids that are our own children (a subreaper
    inherits the kernel's helpers; unreaped they would stay zombies)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except (ChildProcessError, OSError):
            pass


def kill_below(root: int, known: set[int], include_root: bool = False,
               rounds: int = 50, pause: float = 0.02) -> list[int]:
    """SIGKILL everything a boot started: the processes below root now, and our own
    children that were not there before it (known) and are not root (a kernel reparented
    to us), with theirs, again and again until none is left (a dying process may still
    fork, its helpers are reparented to us). What root starts after the first look is
    not touched (kunit.py's next boot of a --run_isolated run). The pids killed; root
    itself only with include_root."""
    killed: list[int] = []
    me = os.getpid()
    tree = parent_map()
    first = descendants([root], tree)
    for _ in range(rounds):
        orphans = [p for p in tree.get(me, []) if p not in known and p != root]
        targets = first + descendants(first, tree) + orphans + descendants(orphans, tree)
        if include_root and alive(root):
            targets.append(root)
        targets = [p for p in dict.fromkeys(targets) if alive(p)]
        if not targets:
            break
        for pid in targets:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
            if pid not in killed:
                killed.append(pid)
        time.sleep(pause)
        _reap([p for p in targets if p != root])
        tree = parent_map()
    return killed


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    f = _stat_fields(pid)
    return f is not None and bool(f) and f[0] not in ("Z", "X")


def processes_of(binary: Path) -> list[int]:
    """Live processes whose executable is binary (a kernel image a boot ran)."""
    try:
        target = binary.resolve()
    except OSError:
        return []
    found: list[int] = []
    try:
        entries = os.listdir(PROC)
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            exe = Path(os.readlink(PROC / entry / "exe"))
        except OSError:
            continue
        if exe == target and alive(int(entry)):
            found.append(int(entry))
    return found
