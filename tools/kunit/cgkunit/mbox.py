"""make mbox: kernel/series and the suite as one patch set for git am, with a cover letter.

The prepared tree holds the base, one commit per patch of kernel/series and the commit that
adds the suite (its message is kernel/suite.msg). git format-patch of that range, with the
cover letter's subject and text from kernel/cover.msg, is what a maintainer applies; the
patch set is checked to apply on the base and give exactly the prepared tree.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from . import pipeline
from .common import DriverError, say
from .tree import git

COVER_MSG = Path("kernel") / "cover.msg"
SUBJECT_MARK = "*** SUBJECT HERE ***"
BLURB_MARK = "*** BLURB HERE ***"


def cover_text(repo: Path) -> tuple[str, str]:
    """(subject, body) of kernel/cover.msg: its first line, and the rest after a blank line."""
    path = repo / COVER_MSG
    if not path.is_file():
        raise DriverError(f"{COVER_MSG} is missing: the cover letter's subject and text")
    subject, _, body = path.read_text().strip().partition("\n")
    if not subject.strip() or not body.strip():
        raise DriverError(f"{COVER_MSG}: want a subject line, a blank line, then the text")
    return subject.strip(), body.strip()


def fill_cover(letter: str, subject: str, body: str) -> str:
    """git format-patch's cover letter with its two placeholders replaced."""
    if SUBJECT_MARK not in letter or BLURB_MARK not in letter:
        raise DriverError("git format-patch wrote a cover letter without its placeholders")
    return letter.replace(SUBJECT_MARK, subject).replace(BLURB_MARK, body)


def apply_check(tree: Path, base: str, head: str, patches: list[Path]) -> None:
    """Apply patches on base in a scratch index (no checkout); DriverError unless the result is
    head's tree."""
    with tempfile.TemporaryDirectory(prefix="cgkunit-mbox-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git(tree, "read-tree", base, env=env)
        for p in patches:
            proc = git(tree, "apply", "--cached", str(p), env=env, check=False)
            if proc.returncode != 0:
                why = (proc.stderr.strip().splitlines() or ["?"])[0]
                raise DriverError(f"{p.name} does not apply on the base: {why}")
        got = git(tree, "write-tree", env=env).stdout.strip()
    want = git(tree, "rev-parse", f"{head}^{{tree}}").stdout.strip()
    if got != want:
        raise DriverError(f"the patch set applied on the base gives tree {got[:12]}, "
                          f"not the prepared tree's {want[:12]}")


def export_mbox(repo: Path, build_root: Path, out: Path) -> list[Path]:
    """Write the cover letter and one file per patch into out (emptied first); the files."""
    subject, body = cover_text(repo)
    tree, _ = pipeline.prepare(repo, build_root, None)
    if tree.variant:
        raise DriverError("the prepared tree carries extra patches; prepare it without them")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    git(tree.path, "-c", "core.abbrev=12", "format-patch", "-q", "--zero-commit",
        "--cover-letter", "--base", tree.base_commit, "-o", str(out),
        f"{tree.base_commit}..{tree.head_commit}")
    files = sorted(out.glob("*.patch"))
    if len(files) < 2:
        raise DriverError(f"git format-patch wrote {len(files)} files into {out}")
    cover = files[0]
    cover.write_text(fill_cover(cover.read_text(), subject, body))
    apply_check(tree.path, tree.base_commit, tree.head_commit, files[1:])
    say(f"mbox: {len(files) - 1} patches and a cover letter in {out}; they apply with git am "
        f"on the base ({tree.base_commit[:12]}) and give the prepared tree")
    return files
