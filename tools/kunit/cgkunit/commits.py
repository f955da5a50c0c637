"""Commits one after another in a private clone: what bisect and series-check do at each.

The commits of the prepared tree are named as kernel/series names them: `base` (the base
commit), then each patch by its file name or a unique prefix (`0012`). A private shared
clone of a tree under the build root (<build>/<tool>/<profile>/linux; the source is only
read) checks each commit out, hooks the suite into its work tree (tree.hook_suite: nothing
committed, undone with unhook; carry.py turns off the suites the commit cannot build), builds a profile into a build directory of its own (so
consecutive commits build incrementally) and boots it (pipeline.boot_and_report).
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from . import carry, pipeline
from . import profile as profiles
from .common import Context, DriverError, read_json, run_cmd, say, write_json
from .report import Report
from .run import build as build_kernel
from .tree import GIT_CONFIG, SUITE_DIR, PreparedTree, git, hook_suite, rev

BASE = "base"
CLONE_STAMP = "cgkunit-bisect.json"  # in the clone's .git: the tree it was cloned from


# --- the prepared tree's commits, by name ---------------------------------------------------

def series_pick(names: Sequence[str], name: str, what: str) -> int:
    """Position of a patch of kernel/series named by name (its file name or a unique prefix,
    e.g. 0012): 0 for base, i+1 for names[i]; DriverError otherwise."""
    if name == BASE:
        return 0
    exact = [i for i, n in enumerate(names) if n == name]
    hits = exact or [i for i, n in enumerate(names) if n.startswith(name)]
    if len(hits) == 1:
        return hits[0] + 1
    why = "no patch of kernel/series starts with it" if not hits else \
        f"{len(hits)} patches of kernel/series start with it"
    raise DriverError(f"{what}={name}: {why} (want {BASE} or a patch name such as "
                      f"{names[0][:4] if names else '0001'})")


def prepared_commits(tree: PreparedTree) -> list[tuple[str, str]]:
    """(name, commit) of the prepared tree's commits in series_pick's positions: base, then
    one per patch of kernel/series."""
    return [(BASE, tree.base_commit), *tree.patches]


# --- the clone ----------------------------------------------------------------------------

def clone_path(build: Path, tool: str | Path, profile: str) -> Path:
    """Where a tool (bisect, series-check) keeps its clone for profile."""
    return build / tool / profile / "linux"


def ensure_clone(clone: Path, src: Path) -> Path:
    """The private shared clone of src at clone (made again when src changed)."""
    stamp = read_json(clone / ".git" / CLONE_STAMP)
    if isinstance(stamp, dict) and stamp.get("source") == str(src) and rev(clone, "HEAD"):
        return clone
    shutil.rmtree(clone, ignore_errors=True)
    clone.parent.mkdir(parents=True, exist_ok=True)
    say(f"cloning {src} into {clone} (shared; {src} is only read)")
    run_cmd(["git", *GIT_CONFIG, "clone", "-q", "--shared", "--no-checkout", str(src), str(clone)])
    git(clone, "config", "gc.auto", "0")  # a shared clone must never prune
    say(f"checking out {clone} (once; ~90k files take a while)")
    git(clone, "checkout", "-q", "-f", "--detach", "HEAD")
    write_json(clone / ".git" / CLONE_STAMP, {"source": str(src)})
    return clone


def subject_of(tree: Path, commit: str) -> str:
    return git(tree, "log", "-1", "--format=%s", commit).stdout.strip()


def unhook(tree: Path) -> None:
    """Undo the hook's edits of tracked files (the suite's untracked files stay, unchanged
    files keep their times, so the next build is incremental)."""
    git(tree, "reset", "-q", "--hard", "HEAD")


def checkout(tree: Path, commit: str) -> None:
    if rev(tree, "HEAD") != commit:
        say(f"checking out {commit[:12]} in {tree}")
        git(tree, "checkout", "-q", "-f", "--detach", commit)


# --- build and boot one commit --------------------------------------------------------------

Boot = Callable[[Path, list[str], str], Report]  # (results dir, kernel args, filter) -> report


@dataclass(frozen=True)
class Workspace:
    """A clone and the build directory its commits are built into."""
    ctx: Context
    prof: profiles.Profile
    clone: Path
    out: Path
    jobs: int | None = None
    echo: bool = False

    def build_commit(self, commit: str) -> float:
        """Check commit out, carry the suite onto it (carry.py: hooked in, with its backports,
        the suites the commit cannot build turned off) and build the profile: the build's
        seconds. DriverError when it fails (the hook undone); else unhook() after the boots."""
        checkout(self.clone, commit)
        try:
            carried = carry.plan(self.clone, self.ctx.repo)
            if carried.describe():
                say(f"carrying the suite onto {commit[:12]}: {carried.describe()}")
            hook_suite(self.clone, self.ctx.repo / SUITE_DIR,
                       [self.ctx.repo / b.patch for b in carried.backports])
            return build_kernel(self.clone, self.prof, self.ctx.repo, self.ctx.build, self.jobs,
                                out=self.out, kconfig_add=carried.kconfig)
        except DriverError:
            unhook(self.clone)
            raise

    def booter(self, commit: str, base: str) -> Boot:
        """What boots the commit just built (base: the report's base label); DriverError when
        there is no image (or, x86_64, no QEMU)."""
        image = pipeline.require_image(self.ctx.build, self.prof, self.out)
        shim, _ = pipeline.choose_qemu(self.prof, image, self.ctx.build)
        tree = PreparedTree(path=self.clone, base_commit=commit, head_commit=commit)

        def boot(results: Path, kernel_args: list[str], filter_glob: str) -> Report:
            return pipeline.boot_and_report(self.ctx, self.prof, tree, base, results,
                                            kernel_args, filter_glob, shim=shim, out=self.out,
                                            echo=self.echo)
        return boot
