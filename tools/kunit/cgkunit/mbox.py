"""make mbox: kernel/series and the suite as one patch set for git am, with a cover letter.

The prepared tree holds the base, one commit per patch of kernel/series and the commit that
adds the suite (its message is kernel/suite.msg). git format-patch of that range, with the
cover letter's subject and text from kernel/cover.msg, is what a maintainer applies; the
patch set is checked to apply on the base and give exactly the prepared tree.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from . import pipeline
from .common import Context, DriverError, read_text_file, say
from .tree import git

COVER_MSG = Path("kernel") / "cover.msg"
SUBJECT_MARK = "*** SUBJECT HERE ***"
BLURB_MARK = "*** BLURB HERE ***"
OUT_MARK = ".cgkunit-mbox"  # in a directory mbox made: its *.patch files are mbox's to replace


def cover_text(repo: Path) -> tuple[str, str]:
    """(subject, body) of kernel/cover.msg: its first line, and the rest after a blank line."""
    path = repo / COVER_MSG
    if not path.is_file():
        raise DriverError(f"{COVER_MSG} is missing: the cover letter's subject and text")
    subject, _, body = read_text_file(path).strip().partition("\n")
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


def default_out(build_root: Path) -> Path:
    return build_root / "results" / "mbox"


def check_out(out: Path, build_root: Path) -> bool:
    """Whether out is mbox's to write into: the default directory, one an earlier export
    made (OUT_MARK in it), an empty one, or one that does not exist yet (True: mbox clears
    it of its patches first); DriverError (nothing touched) for a file, or a directory with
    files of someone else's: mbox never removes what it did not write."""
    where = f"--out {out}"
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise DriverError(f"{where}: not a directory")
    if not out.exists():
        return False
    if out.resolve() == default_out(build_root).resolve() or (out / OUT_MARK).is_file():
        return True
    try:
        if any(out.iterdir()):
            raise DriverError(f"{where}: a directory with files mbox did not write (no "
                              f"{OUT_MARK} in it); give an empty or a new directory")
    except OSError as e:
        raise DriverError(f"{where}: {e.strerror or e}") from None
    return False


def clear_out(out: Path, ours: bool) -> None:
    """Make out an empty place for the patch set: create it (and mark it as mbox's), or
    remove the patches an earlier export wrote there (nothing else)."""
    if ours:
        for old in out.glob("*.patch"):
            old.unlink()
    out.mkdir(parents=True, exist_ok=True)
    (out / OUT_MARK).write_text("written by cgkunit mbox: it replaces the *.patch files here\n")


def export_mbox(ctx: Context, out: Path) -> list[Path]:
    """Write the cover letter and one file per patch into out (check_out: a directory of
    mbox's own, or an empty or new one; its earlier patches removed first); the files."""
    ours = check_out(out, ctx.build)
    subject, body = cover_text(ctx.repo)
    tree, _ = pipeline.prepare(ctx, None)
    if tree.variant:
        raise DriverError("the prepared tree carries extra patches; prepare it without them")
    clear_out(out, ours)
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
