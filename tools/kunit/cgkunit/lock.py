"""One command at a time in a build root: an flock on <build>/.cgkunit.lock.

Two commands in one build root share its trees, build directories and results: one run's
console log replaced by another's, two `prepare`s in one git tree. So every command that
writes there holds this lock for its whole run. The holder writes who it is into the file
(pid, command line, start time), and a second command names it and stops (exit 2), or,
when asked to (--wait-lock, CGKUNIT_WAIT_LOCK=1), waits for it with a line now and then.

A command the holder starts itself (git bisect run calls `cgkunit.py bisect-step`) finds
the holder's pid and build root in CGKUNIT_LOCK_HOLDER and runs under the holder's lock:
it would wait for its own parent forever otherwise.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from pathlib import Path
from typing import IO, Mapping, Sequence

from .common import DriverError, Heartbeat, say

LOCK_FILE = ".cgkunit.lock"
HOLDER_ENV = "CGKUNIT_LOCK_HOLDER"   # "<pid> <build root>" of the command holding the lock
WAIT_ENV = "CGKUNIT_WAIT_LOCK"
class BuildLock:
    """The lock of one build root, held from acquire() to release()."""

    def __init__(self, build: Path) -> None:
        self.build = build
        self.path = build / LOCK_FILE
        self._file: IO[str] | None = None
        self.inherited = False

    def holder(self) -> str:
        """Who holds the lock, as its holder wrote it: 'pid N (command, since time)'."""
        try:
            info = json.loads(self.path.read_text())
        except (OSError, ValueError):
            info = None
        if not isinstance(info, dict):
            return "another command (it has not said which yet)"
        return (f"pid {info.get('pid', '?')} ({info.get('command', '?')}, "
                f"since {info.get('started', '?')})")

    def _holder_pid(self) -> int | None:
        try:
            info = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        pid = info.get("pid") if isinstance(info, dict) else None
        return pid if isinstance(pid, int) else None

    def _try(self, f: IO[str]) -> bool:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise

    def _inherits(self, env: Mapping[str, str], f: IO[str]) -> bool:
        """True when this process runs under its parent's lock: HOLDER_ENV names this build
        root and the pid that holds the lock now."""
        pid, _, root = env.get(HOLDER_ENV, "").partition(" ")
        return (root == str(self.build) and pid.isdigit() and int(pid) != os.getpid()
                and self._holder_pid() == int(pid) and not self._try(f))

    def acquire(self, command: Sequence[str], wait: bool = False,
                env: Mapping[str, str] | None = None, poll: float = 0.5) -> "BuildLock":
        """Take the lock for command (its words, for the holder line); DriverError naming
        the holder when another command has it, unless wait: then wait for it, saying so."""
        env = os.environ if env is None else env
        try:
            self.build.mkdir(parents=True, exist_ok=True)
            f = open(self.path, "a+")
        except OSError as e:
            raise DriverError(f"cannot create the lock file {self.path}: {e.strerror or e}") \
                from None
        try:
            if self._inherits(env, f):
                self.inherited = True
                f.close()
                return self
            if not self._try(f):
                who = self.holder()
                if not wait:
                    raise DriverError(
                        f"the build root {self.build} is in use by {who}; wait for it to end, "
                        f"or set {WAIT_ENV}=1 (--wait-lock) to wait for it")
                say(f"waiting for the build root {self.build}: in use by {who}")
                with Heartbeat("waiting for the build root",
                               status=lambda s: f"still in use by {self.holder()}, "
                                                f"waited {s:.0f}s"):
                    while not self._try(f):
                        time.sleep(poll)
                say(f"the build root {self.build} is ours now")
        except BaseException:
            f.close()
            raise
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"pid": os.getpid(), "command": " ".join(command),
                            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                            "build_root": str(self.build)}) + "\n")
        f.flush()
        self._file = f
        os.environ[HOLDER_ENV] = f"{os.getpid()} {self.build}"
        return self

    def release(self) -> None:
        """Give the lock up (the file stays: a command waiting on it holds it open)."""
        if self._file is not None:
            os.environ.pop(HOLDER_ENV, None)
            self._file.close()  # closing the last descriptor drops the flock
            self._file = None

    def __enter__(self) -> "BuildLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
