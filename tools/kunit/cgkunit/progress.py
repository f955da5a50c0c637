"""How far a kernel build has got: object files written so far, against the last build of the
same profile (recorded in <build dir>/progress.json after each successful build).

kunit.py build runs make with its standard output thrown away (only the compiler's warnings
reach build.log, at the end), so kbuild's '  CC      kernel/cgroup/cgroup.o' lines cannot be
counted. The build directory can: every object kbuild compiles (ccache hits included) is a
*.o file written there, so the objects written since the build started are its progress.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from .common import read_json, write_json

PROGRESS_FILE = "progress.json"
OBJECT_SUFFIX = ".o"


@dataclass(frozen=True)
class BuildRecord:
    """One successful build of a build directory."""
    objects: int    # object files it wrote
    seconds: float  # how long it took
    total: int      # object files in the directory after it: what a build from scratch writes

    def to_json(self) -> dict[str, int | float]:
        return {"objects": self.objects, "seconds": round(self.seconds, 1), "total": self.total}


def _object_mtimes(top: Path) -> Iterator[float]:
    """The modification times of the *.o files below top (symlinks, such as kbuild's 'source'
    link to the kernel tree, are not followed; files that vanish meanwhile are skipped)."""
    dirs = [str(top)]
    while dirs:
        try:
            with os.scandir(dirs.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            dirs.append(entry.path)
                        elif entry.name.endswith(OBJECT_SUFFIX) and \
                                entry.is_file(follow_symlinks=False):
                            yield entry.stat(follow_symlinks=False).st_mtime
                    except OSError:
                        continue
        except OSError:
            continue


def count_objects(out: Path, since: float | None = None) -> int:
    """Object files below out; with since (a time.time()), those written at or after it."""
    return sum(1 for mtime in _object_mtimes(out) if since is None or mtime >= since)


def read_record(out: Path) -> BuildRecord | None:
    """The record of the last successful build in out; None when there is none (or it cannot
    be read: a first build, an older driver, a damaged file)."""
    data = read_json(out / PROGRESS_FILE)
    if not isinstance(data, dict):
        return None
    try:
        objects, seconds, total = int(data["objects"]), float(data["seconds"]), int(data["total"])
    except (KeyError, TypeError, ValueError):
        return None
    if min(objects, seconds, total) < 0:
        return None
    return BuildRecord(objects=objects, seconds=seconds, total=total)


class BuildProgress:
    """The progress line of a build in out, for Heartbeat's status.

    The number of objects a build will write is known only when it starts from an empty
    directory (a build from scratch) and the directory's last build said how many objects a
    complete build leaves (its record survives when only the objects were removed): the line
    then shows 'N/T objects' and, from the rate so far, about how long the rest takes.
    Otherwise kbuild decides what to rebuild as it goes: after a
    one-file change a few objects, after a new tree or config nearly all. A percentage would
    then be a guess, so the line shows the count so far and, for scale, the last build's
    count and time: '12 objects so far, 30s (last build: 721 objects in 449s)'."""

    def __init__(self, out: Path, clock: Callable[[], float] = time.time) -> None:
        self.out = out
        self.clock = clock
        self.start = clock()
        self.last = read_record(out)
        self.present = count_objects(out)  # objects from earlier builds, before this one

    def written(self) -> int:
        """Objects this build has written so far."""
        return count_objects(self.out, self.start)

    def status(self, elapsed: float) -> str:
        """'<objects> ..., <elapsed>s ...' for elapsed seconds since the build started."""
        n = self.written()
        last = self.last
        if last is not None and not self.present and 0 < n < last.total:
            left = elapsed * (last.total - n) / n
            return f"{n}/{last.total} objects, {elapsed:.0f}s, about {left:.0f}s left"
        line = f"{n} objects so far, {elapsed:.0f}s"
        if last is not None:
            line += f" (last build: {last.objects} objects in {last.seconds:.0f}s)"
        return line

    def finish(self, seconds: float) -> BuildRecord | None:
        """Record a successful build that took seconds (None when out is not writable: the
        next build just shows less)."""
        record = BuildRecord(objects=self.written(), seconds=seconds, total=count_objects(self.out))
        try:
            write_json(self.out / PROGRESS_FILE, record.to_json())
        except OSError:
            return None
        return record
