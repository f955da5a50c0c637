"""Prepared git tree: base commit, one commit per series patch, suite hooked in."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from . import carry
from .common import (DriverError, overlaps, read_json, read_text_file, run_logged, say,
                     sha256_file, user_path, write_json)
from .fetch import BaseSource

STAMP = "cgkunit-stamp.json"
BASE_STAMP = "cgkunit-base.json"
BASE_TAG = "cgkunit-base"
SUITE_TAG = "cgkunit-suite"
BASE_SUITE_TAG = "cgkunit-suite-base"
BASE_VARIANT = "base"
HOOK_MSG = "kunit-cgroup: hook in the test suite"
SUITE_MSG = Path("kernel") / "suite.msg"  # the hook commit's message: the suite as a patch
SUITE_DIR = Path("lib") / "kunit-cgroup"
KCONFIG_LINE = 'source "lib/kunit-cgroup/Kconfig"'
# The suite's symbols go right after the module's, which the series defines with its first
# hooks (carry.py backports it for trees without)
KCONFIG_ENTRY = "config CGROUP_KUNIT_TEST"
MAKEFILE_LINE = "obj-$(CONFIG_CGROUP_KUNIT_TEST) += kunit-cgroup/"
MAINTAINERS = "MAINTAINERS"
MAINTAINERS_SECTION = "CONTROL GROUP (CGROUP)"  # the suite is cgroup's to maintain
MAINTAINERS_LINE = "F:\tlib/kunit-cgroup/"
LINUX_MARKERS = ("Makefile", "kernel/cgroup/cgroup.c", "tools/testing/kunit/kunit.py")
FIXED_DATE = "2000-01-01T00:00:00+00:00"
COMMITTER_ENV = {"GIT_COMMITTER_NAME": "cgkunit", "GIT_COMMITTER_EMAIL": "cgkunit@localhost",
                 "GIT_COMMITTER_DATE": FIXED_DATE}
AUTHOR_ENV = {"GIT_AUTHOR_NAME": "cgkunit", "GIT_AUTHOR_EMAIL": "cgkunit@localhost",
              "GIT_AUTHOR_DATE": FIXED_DATE}
GIT_CONFIG = ["-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false",
              "-c", "tag.gpgsign=false", "-c", "gc.auto=0", "-c", "core.autocrlf=false",
              "-c", "advice.detachedHead=false", "-c", "safe.directory=*"]
ARTEFACT_SUFFIXES = (".o", ".ko", ".a", ".mod", ".mod.c", ".cmd", ".d", ".order", ".symvers",
                     ".pyc", ".swp", ".tmp", ".orig", ".rej", "~")


@dataclass
class PreparedTree:
    """A prepared kernel tree and how it was made."""
    path: Path
    base_commit: str
    head_commit: str
    patches: list[tuple[str, str]] = field(default_factory=list)
    variant: str = ""


Pair = tuple[str, str]


@dataclass(frozen=True)
class TreeStamp:
    """How a prepared tree (or the base variant's worktree) was made, kept in its git
    directory as cgkunit-stamp.json for the next run to reuse: "" and () are not made yet."""
    base: str = ""                           # the base id the tree was made from
    series: tuple[Pair, ...] = ()            # (name, sha256) of each kernel/series patch applied
    patch_commits: tuple[Pair, ...] = ()     # (name, commit) of each
    series_commit: str = ""                  # the last of them (or the base)
    hook_commit: str = ""                    # the commit that hooks the suite in
    hook_parent: str = ""                    # the commit under it
    suite_files: dict[str, str] = field(default_factory=dict)  # suite file -> sha256 in it
    variant: str = ""                        # the variant's name ("" for none)
    variant_patches: tuple[Pair, ...] = ()   # (name, sha256) of its extra patches
    variant_parent: str = ""                 # the hook commit they were applied on
    head: str = ""                           # the tree's HEAD: the variant's last commit or the hook

    # the fields by their JSON type: strings, lists of [name, value] pairs (and suite_files)
    STRINGS: ClassVar[tuple[str, ...]] = ("base", "series_commit", "hook_commit", "hook_parent",
                                          "variant", "variant_parent", "head")
    PAIRS: ClassVar[tuple[str, ...]] = ("series", "patch_commits", "variant_patches")

    @classmethod
    def from_json(cls, data: object) -> TreeStamp | None:
        """The stamp in parsed JSON: an object whose known keys have their types (a key that is
        missing or null is not made yet, other keys are ignored); None for anything else."""
        if not isinstance(data, dict):
            return None
        values: dict[str, Any] = {}
        for name, value in data.items():
            if value is None:
                continue
            if name in cls.STRINGS:
                if not isinstance(value, str):
                    return None
                values[name] = value
            elif name in cls.PAIRS:
                if not isinstance(value, list) or not all(
                        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
                        for p in value):
                    return None
                values[name] = tuple((p[0], p[1]) for p in value)
            elif name == "suite_files":
                if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                    return None
                values[name] = dict(value)
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {**data, **{name: [list(p) for p in data[name]] for name in self.PAIRS}}

    @classmethod
    def load(cls, path: Path) -> TreeStamp:
        """The stamp in path; an empty one when path is missing, unreadable or not a stamp."""
        return cls.from_json(read_json(path)) or cls()

    def save(self, path: Path) -> None:
        write_json(path, self.to_json())


def git(repo: Path, *args: str, check: bool = True, env: Mapping[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:
    """Run git in repo; DriverError with git's last line on failure when check."""
    full_env = {**os.environ, **COMMITTER_ENV, **(env or {})}
    try:
        proc = subprocess.run(["git", *GIT_CONFIG, "-C", str(repo), *args], capture_output=True,
                              text=True, errors="backslashreplace", env=full_env,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise DriverError("command not found: git") from None
    if check and proc.returncode != 0:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        raise DriverError(f"git {args[0]} in {repo} failed: {lines[-1] if lines else proc.returncode}")
    return proc


def rev(repo: Path, ref: str) -> str | None:
    """Commit id of ref, or None."""
    proc = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def variant_name(extra_patches: Sequence[Path]) -> str:
    """Variant name from extra patch file names ('a+b' for a.patch, b.patch)."""
    return "+".join(p.stem for p in extra_patches)


# --- inputs from the repo ---------------------------------------------------

SERIES = Path("kernel") / "series"


def _series_lines(repo_root: Path) -> list[tuple[int, str]]:
    """(line number, patch name) for each entry of kernel/series; DriverError when it is
    missing or unreadable (an empty file is an empty series; a missing one is a mistake) or
    names a patch twice."""
    series = repo_root / SERIES
    if not series.exists():
        raise DriverError(f"{SERIES} is missing (an empty file is an empty series)")
    entries = ((n, raw.split("#", 1)[0].strip())
               for n, raw in enumerate(read_text_file(series).splitlines(), 1))
    out = [(n, name) for n, name in entries if name]
    seen: dict[str, int] = {}
    for n, name in out:
        if name in seen:
            raise DriverError(f"{SERIES}:{n}: {name} is listed twice (first on line {seen[name]})")
        seen[name] = n
    return out


def series_names(repo_root: Path) -> list[str]:
    """The patch names of kernel/series, in order."""
    return [name for _, name in _series_lines(repo_root)]


def read_series(repo_root: Path) -> list[tuple[str, Path, str]]:
    """(name, path, sha256) for each patch listed in kernel/series."""
    out: list[tuple[str, Path, str]] = []
    for n, name in _series_lines(repo_root):
        path = repo_root / "kernel" / "patches" / name
        if not path.is_file():
            raise DriverError(f"{SERIES}:{n}: kernel/patches/{name} does not exist")
        if "\ndiff --git " not in "\n" + path.read_text(errors="replace"):
            raise DriverError(f"{SERIES}:{n}: kernel/patches/{name} is empty (no diff in it): "
                              "git am would stop on it")
        out.append((name, path, sha256_file(path)))
    return out


def is_suite_file(rel: Path) -> bool:
    """False for build artefacts, editor droppings and hidden files."""
    if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
        return False
    return not rel.name.endswith(ARTEFACT_SUFFIXES) and rel.name != "modules.order"


def suite_files(src: Path) -> dict[str, str]:
    """Relative path -> sha256 of the suite's source files."""
    out: dict[str, str] = {}
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if p.is_file() and is_suite_file(rel):
            out[rel.as_posix()] = sha256_file(p)
    return out


def sync_suite(src: Path, dst: Path) -> list[str]:
    """Make dst hold exactly src's suite files; touch only what differs."""
    want = suite_files(src)
    changed: list[str] = []
    for rel in want:
        s, d = src / rel, dst / rel
        same = d.is_file() and not d.is_symlink() and d.read_bytes() == s.read_bytes() \
            and (d.stat().st_mode & 0o111) == (s.stat().st_mode & 0o111)
        if not same:
            d.parent.mkdir(parents=True, exist_ok=True)
            if d.is_symlink() or d.is_dir():
                shutil.rmtree(d) if d.is_dir() and not d.is_symlink() else d.unlink()
            shutil.copyfile(s, d)
            shutil.copymode(s, d)
            changed.append(rel)
    if dst.is_dir():
        for p in sorted(dst.rglob("*"), reverse=True):
            rel = p.relative_to(dst).as_posix()
            if (p.is_file() or p.is_symlink()) and rel not in want:
                p.unlink()
                changed.append(f"-{rel}")
            elif p.is_dir() and not any(p.iterdir()):
                p.rmdir()
    return changed


def ensure_line(path: Path, line: str, after: str = "") -> bool:
    """Add line to path unless an identical line is present: after the Kconfig entry that
    starts with the line after (its help and all, a blank line on each side) where path has
    one, else at the end."""
    if not path.is_file():
        raise DriverError(f"{path} is missing from the kernel tree")
    text = path.read_text()
    lines = text.splitlines()
    if any(existing.strip() == line for existing in lines):
        return False
    if after in lines:
        end = lines.index(after) + 1
        while end < len(lines) and (not lines[end] or lines[end][0].isspace()):
            end += 1
        while lines[end - 1] == "":
            end -= 1
        lines[end:end] = ["", line]
        path.write_text("\n".join(lines) + "\n")
        return True
    if text and not text.endswith("\n"):
        text += "\n"
    path.write_text(text + line + "\n")
    return True


def with_maintainers_line(text: str) -> str:
    """MAINTAINERS text with the suite's F: line added to the cgroup section, where its F: lines
    keep their order; text itself when the line or the section is missing."""
    lines = text.split("\n")
    if MAINTAINERS_LINE in lines or MAINTAINERS_SECTION not in lines:
        return text
    start = lines.index(MAINTAINERS_SECTION) + 1
    end = start
    while end < len(lines) and lines[end].strip():
        end += 1
    files = [i for i in range(start, end) if lines[i].startswith("F:\t")]
    later = [i for i in files if lines[i] > MAINTAINERS_LINE]
    pos = later[0] if later else (files[-1] + 1 if files else end)
    return "\n".join(lines[:pos] + [MAINTAINERS_LINE] + lines[pos:])


def ensure_maintainers(tree: Path) -> bool:
    """Add the suite's F: line to tree's MAINTAINERS (if it has one and lacks the line)."""
    path = tree / MAINTAINERS
    if not path.is_file():
        return False
    # bytes that are not UTF-8 (a tree's own business) go back exactly as they came
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    new = with_maintainers_line(text)
    if new == text:
        return False
    path.write_text(new, encoding="utf-8", errors="surrogateescape")
    return True


# --- KERNEL_SRC --------------------------------------------------------------

def check_outside_build(src: Path, build_root: Path, tag: str) -> None:
    """DriverError unless src is outside build_root and does not contain it (both resolved):
    cgkunit removes and rewrites what is under the build root, and a KERNEL_SRC is only read."""
    if not overlaps(src, build_root):
        return
    where = ("is the build root" if src == build_root else
             "is inside the build root" if src.is_relative_to(build_root) else
             "contains the build root")
    raise DriverError(f"{tag}: {where} {build_root}; cgkunit rewrites and deletes what is "
                      f"there, so use a tree outside it (or another --build-dir)")


def validate_kernel_src(kernel_src: str, ref: str, build_root: Path) -> tuple[Path, str]:
    """Check a user's kernel git tree (never inside the build root, nor holding it);
    (resolved path, commit id)."""
    tag = f"KERNEL_SRC={kernel_src}"
    p = user_path(kernel_src, tag)
    if not p.exists():
        raise DriverError(f"{tag}: does not exist")
    if not p.is_dir():
        raise DriverError(f"{tag}: not a directory")
    check_outside_build(p.resolve(), build_root.resolve(), tag)
    for marker in LINUX_MARKERS:
        if not (p / marker).is_file():
            raise DriverError(f"{tag}: not a Linux source tree (no {marker})")
    p = p.resolve()
    top = git(p, "rev-parse", "--show-toplevel", check=False)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != p:
        raise DriverError(f"{tag}: not a git tree")
    sha = rev(p, ref)
    if sha is None:
        raise DriverError(f"{tag}: unknown ref {ref}")
    return p, sha


# --- base commit -----------------------------------------------------------

def _configure(tree: Path) -> None:
    git(tree, "config", "gc.auto", "0")
    git(tree, "config", "core.untrackedCache", "true")
    git(tree, "config", "feature.manyFiles", "true")


def _base_ok(tree: Path, base_id: str) -> str | None:
    marker = read_json(tree / ".git" / BASE_STAMP)
    if isinstance(marker, dict) and marker.get("base") == base_id:
        return rev(tree, BASE_TAG)
    return None


def _fresh_dir(tree: Path) -> Path:
    tmp = tree.with_name(tree.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(tree, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    return tmp


def _finish_base(tmp: Path, tree: Path, base_id: str) -> str:
    git(tmp, "tag", "-f", BASE_TAG, "HEAD")
    commit = rev(tmp, "HEAD")
    assert commit
    write_json(tmp / ".git" / BASE_STAMP, {"base": base_id, "commit": commit})
    os.replace(tmp, tree)
    return commit


def ensure_debian_base(tree: Path, base: BaseSource) -> str:
    """Commit the unpacked Debian source once; returns the base commit."""
    found = _base_ok(tree, base.id)
    if found:
        return found
    say(f"creating {tree} from {base.package} {base.version} (once; committing ~90k files takes a while)")
    tmp = _fresh_dir(tree)
    tmp.mkdir()
    git(tmp, "init", "-q")
    _configure(tmp)
    logs = tree.parent / f"{tree.name}.log"
    for args, label in ((["cp", "-a", f"{base.path}/.", str(tmp)], "copying the base source"),
                        (["git", *GIT_CONFIG, "-C", str(tmp), "add", "-A", "-f", "."], "git add"),
                        (["git", *GIT_CONFIG, "-C", str(tmp), "commit", "-q", "--no-verify",
                          "-m", f"base: {base.package} {base.version}"], "git commit")):
        say(f"{label} ...")
        rc, secs = run_logged(args, logs, label, env=dict(os.environ, **AUTHOR_ENV, **COMMITTER_ENV))
        if rc != 0:
            raise DriverError(f"{label} failed while creating {tree}; see {logs}")
        say(f"{label} done in {secs:.0f}s")
    return _finish_base(tmp, tree, base.id)


def ensure_user_base(tree: Path, src: Path, sha: str, base_id: str) -> str:
    """Shared clone of the user's tree checked out at sha (the user's repo is only read)."""
    for doomed in (tree, tree.with_name(tree.name + ".tmp")):
        if overlaps(doomed.resolve(), src.resolve()):  # _fresh_dir must never remove src
            raise DriverError(f"KERNEL_SRC={src}: overlaps {doomed}, which cgkunit replaces")
    if _base_ok(tree, base_id):
        return sha
    say(f"cloning {src} at {sha[:12]} into {tree} (shared, read-only for {src})")
    tmp = _fresh_dir(tree)
    try:
        proc = subprocess.run(["git", *GIT_CONFIG, "clone", "-q", "--shared", "--no-checkout",
                               str(src), str(tmp)], capture_output=True, text=True,
                              env=dict(os.environ, **COMMITTER_ENV), stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise DriverError("command not found: git") from None
    if proc.returncode != 0:
        raise DriverError(f"git clone of {src} failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    _configure(tmp)
    git(tmp, "checkout", "-q", "--detach", sha)
    return _finish_base(tmp, tree, base_id)


# --- series, hook, variant ---------------------------------------------------

def _goto(tree: Path, commit: str) -> None:
    if rev(tree, "HEAD") != commit:
        git(tree, "reset", "-q", "--hard", commit)


def _clean_if_dirty(tree: Path) -> None:
    if (tree / ".git" / "rebase-apply").exists():
        say(f"{tree}: aborting an interrupted git am")
        git(tree, "am", "--abort", check=False)
    status = git(tree, "status", "--porcelain").stdout
    if status.strip():
        say(f"{tree} was modified by hand; resetting it (it is ours)")
        git(tree, "reset", "-q", "--hard", "HEAD")
        git(tree, "clean", "-ffdq")


def _am_error(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for prefix in ("error: patch failed:", "error:", "fatal:"):
        for ln in lines:
            if ln.startswith(prefix):
                return ln
    return lines[0] if lines else "git am failed"


def apply_patch(tree: Path, name: str, path: Path, reset_to: str) -> str:
    """git am one patch; on failure abort, reset to reset_to and raise."""
    proc = git(tree, "am", "-q", "--keep-cr", "--no-3way", str(path.resolve()), check=False)
    if proc.returncode != 0:
        reason = _am_error(proc.stderr + "\n" + proc.stdout)
        git(tree, "am", "--abort", check=False)
        git(tree, "reset", "-q", "--hard", reset_to, check=False)
        raise DriverError(f"patch {name} does not apply: {reason}")
    head = rev(tree, "HEAD")
    assert head
    return head


def _exists(tree: Path, commit: str) -> bool:
    return bool(commit) and rev(tree, commit) == commit


def _ensure_series(tree: Path, series: list[tuple[str, Path, str]], stamp: TreeStamp,
                   stamp_file: Path, base_id: str) -> TreeStamp:
    """The stamp with series applied on the base: kept when it already is, else a new one
    (its patches re-applied from the first that changed)."""
    want = tuple((n, s) for n, _, s in series)
    have, have_commits = stamp.series, stamp.patch_commits
    if have == want and _exists(tree, stamp.series_commit):
        return replace(stamp, base=base_id)
    prefix = 0
    while (prefix < min(len(have), len(want), len(have_commits)) and have[prefix] == want[prefix]
           and _exists(tree, have_commits[prefix][1])):
        prefix += 1
    commits = list(have_commits[:prefix])
    start = commits[-1][1] if commits else BASE_TAG
    stamp_file.unlink(missing_ok=True)
    todo = series[prefix:]
    say(f"applying {len(todo)} patch(es) from kernel/series"
        + (f" (first {prefix} unchanged)" if prefix else ""))
    git(tree, "reset", "-q", "--hard", start)
    for name, path, _ in todo:
        try:
            commits.append((name, apply_patch(tree, name, path, BASE_TAG)))
        except DriverError:
            stamp_file.unlink(missing_ok=True)
            raise
    head = rev(tree, "HEAD")
    assert head
    return TreeStamp(base=base_id, series=want, patch_commits=tuple(commits), series_commit=head)


HOOKED_FILES = ("lib/Kconfig.debug", "lib/Makefile")  # the kernel files the hook edits


def apply_backports(tree: Path, patches: Sequence[Path]) -> None:
    """Apply backports of the suite (carry.py) to tree's work tree, after the suite's files;
    DriverError naming one that does not apply."""
    for patch in patches:
        proc = git(tree, "apply", "--whitespace=nowarn", str(patch.resolve()), check=False)
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
            raise DriverError(f"backport {patch.name} does not apply to the suite in {tree}: "
                              f"{lines[0] if lines else proc.returncode}")


def hook_suite(tree: Path, suite_src: Path, backports: Sequence[Path] = ()) -> list[str]:
    """Hook the suite into tree's work tree (nothing committed): its files in lib/kunit-cgroup
    (with backports applied to them), its Kconfig and Makefile lines in lib/; the suite files
    that changed. What builds it, and all that series-check and bisect hook onto each commit
    (the hook commit adds MAINTAINERS)."""
    changed = sync_suite(suite_src, tree / SUITE_DIR)
    apply_backports(tree, backports)
    ensure_line(tree / HOOKED_FILES[0], KCONFIG_LINE, after=KCONFIG_ENTRY)
    ensure_line(tree / HOOKED_FILES[1], MAKEFILE_LINE)
    return changed


def _hooked_files(tree: Path) -> list[str]:
    return list(HOOKED_FILES) + ([MAINTAINERS] if (tree / MAINTAINERS).is_file() else [])


def _maintainers_hooked(tree: Path, commit: str) -> bool:
    """Whether commit's MAINTAINERS already has the suite's line (or cannot have it)."""
    proc = git(tree, "show", f"{commit}:{MAINTAINERS}", check=False)
    return proc.returncode != 0 or with_maintainers_line(proc.stdout) == proc.stdout


def _add_suite(tree: Path) -> None:
    tracked = git(tree, "ls-files", "--", str(SUITE_DIR)).stdout.strip()
    if (tree / SUITE_DIR).exists() or tracked:
        git(tree, "add", "-A", "-f", "--", str(SUITE_DIR))


def hook_message(repo_root: Path) -> tuple[str, dict[str, str]]:
    """The hook commit's message (kernel/suite.msg, else HOOK_MSG) and author: the last
    Signed-off-by of the message, so that the commit exports as the series' last patch."""
    p = repo_root / SUITE_MSG
    msg = read_text_file(p).strip() + "\n" if p.is_file() else HOOK_MSG + "\n"
    author = dict(AUTHOR_ENV)
    signers = re.findall(r"^Signed-off-by: (.+?) <([^>]+)>$", msg, re.M)
    if signers:
        author.update(GIT_AUTHOR_NAME=signers[-1][0], GIT_AUTHOR_EMAIL=signers[-1][1])
    return msg, author


def _commit_message(tree: Path, commit: str) -> str:
    return git(tree, "log", "-1", "--format=%B", commit).stdout.strip() + "\n"


def carry_at(tree: Path, commit: str, repo: Path) -> carry.Carry:
    """How the suite is carried onto commit of tree (carry.py), from the headers of that
    commit, whatever the work tree holds."""
    headers = {h: git(tree, "show", f"{commit}:{h}", check=False).stdout
               for h in carry.header_paths()}
    return carry.plan_for(headers, repo)


def _ensure_hook(tree: Path, suite_src: Path, series_commit: str, stamp: TreeStamp,
                 tag: str = SUITE_TAG, carried: bool = False) -> TreeStamp:
    """The stamp with the commit on series_commit that hooks the suite in (made or amended as
    needed, tagged) as its hook_commit; carried: an older commit, with the suite's backports
    applied where it lacks what they stand in for (carry.py)."""
    repo = suite_src.parent.parent
    backports = [repo / b.patch for b in carry_at(tree, series_commit, repo).backports] \
        if carried else []
    files = {**suite_files(suite_src),
             **{k: v for k, v in carry.backport_hashes(repo).items()
                if repo / k in backports}}
    msg, author = hook_message(repo)
    env = dict(author, **COMMITTER_ENV)
    who = f"{author['GIT_AUTHOR_NAME']} <{author['GIT_AUTHOR_EMAIL']}>"
    hook = stamp.hook_commit
    if stamp.hook_parent == series_commit and _exists(tree, hook):
        if (stamp.suite_files == files and _commit_message(tree, hook) == msg
                and _maintainers_hooked(tree, hook)):
            if rev(tree, tag) != hook:
                git(tree, "tag", "-f", tag, hook)
            return stamp
        _goto(tree, hook)
        changed = sync_suite(suite_src, tree / SUITE_DIR)
        apply_backports(tree, backports)
        ensure_maintainers(tree)
        say(f"suite files changed: {', '.join(changed) or 'none in the tree'}; amending the hook commit")
        git(tree, "add", "-f", *_hooked_files(tree))
        _add_suite(tree)
        git(tree, "commit", "-q", "--amend", "--allow-empty", "--no-verify", "--author", who,
            "--cleanup=verbatim", "-m", msg, env=env)
    else:
        _goto(tree, series_commit)
        hook_suite(tree, suite_src, backports)
        ensure_maintainers(tree)
        git(tree, "add", "-f", *_hooked_files(tree))
        _add_suite(tree)
        git(tree, "commit", "-q", "--allow-empty", "--no-verify", "--cleanup=verbatim", "-m", msg,
            env=env)
    new = rev(tree, "HEAD")
    assert new
    git(tree, "tag", "-f", tag, new)
    return replace(stamp, suite_files=files, hook_commit=new, hook_parent=series_commit,
                   variant="", variant_patches=(), variant_parent="", head="")


def _ensure_variant(tree: Path, hook: str, extras: list[tuple[str, Path, str]],
                    stamp: TreeStamp, stamp_file: Path) -> TreeStamp:
    """The stamp with the extra patches applied on hook (none: the tree at hook) as its head."""
    name = variant_name([p for _, p, _ in extras])
    want = tuple((n, s) for n, _, s in extras)
    if not extras:
        if stamp.variant:
            say(f"removing variant {stamp.variant}")
        _goto(tree, hook)
        head = hook
    elif stamp.variant_patches == want and stamp.variant_parent == hook and _exists(tree, stamp.head):
        head = stamp.head
        _goto(tree, head)
    else:
        _goto(tree, hook)
        say(f"applying variant {name}")
        for pname, path, _ in extras:
            try:
                apply_patch(tree, pname, path, SUITE_TAG)
            except DriverError:
                replace(stamp, variant="", variant_patches=(), variant_parent="",
                        head=hook).save(stamp_file)
                raise
        head = rev(tree, "HEAD") or hook
    return replace(stamp, variant=name, variant_patches=want, variant_parent=hook, head=head)


def prepare_tree(repo_root: Path, build_root: Path, base: BaseSource | None,
                 kernel_src: str | None, kernel_ref: str = "HEAD",
                 extra_patches: Sequence[Path] = ()) -> PreparedTree:
    """Make (or bring up to date) the prepared tree; cheap when nothing changed."""
    series = read_series(repo_root)
    extras: list[tuple[str, Path, str]] = []
    for p in extra_patches:
        full = p if p.is_absolute() else repo_root / p
        if not full.is_file():
            raise DriverError(f"extra patch {p} does not exist")
        extras.append((p.name, full, sha256_file(full)))
    suite_src = repo_root / SUITE_DIR
    if not suite_src.is_dir():
        raise DriverError(f"{suite_src} is missing")
    trees = build_root / "trees"
    if kernel_src:
        src, sha = validate_kernel_src(kernel_src, kernel_ref, build_root)
        tree = trees / f"user-{sha[:12]}"
        base_id = f"user:{src}:{sha}"
        say(f"using KERNEL_SRC {src} at {kernel_ref} = {sha[:12]} (committed state only)")
        base_commit = ensure_user_base(tree, src, sha, base_id)
    elif base is not None:
        tree = trees / f"debian-{base.version}"
        base_id = base.id
        base_commit = ensure_debian_base(tree, base)
    else:
        raise DriverError("no kernel source: run fetch or set KERNEL_SRC")
    stamp_file = tree / ".git" / STAMP
    stamp = TreeStamp.load(stamp_file)
    if stamp.base != base_id:
        stamp = TreeStamp()
    _clean_if_dirty(tree)
    stamp = _ensure_series(tree, series, stamp, stamp_file, base_id)
    stamp.save(stamp_file)
    stamp = _ensure_hook(tree, suite_src, stamp.series_commit, stamp)
    stamp.save(stamp_file)
    stamp = _ensure_variant(tree, stamp.hook_commit, extras, stamp, stamp_file)
    stamp.save(stamp_file)
    return PreparedTree(path=tree, base_commit=base_commit, head_commit=stamp.head,
                        patches=list(stamp.patch_commits), variant=stamp.variant)


# --- the base variant (benchmarks) ---------------------------------------------

def patch_parent(prepared: PreparedTree, patch: str) -> tuple[str, list[tuple[str, str]]]:
    """(commit just before patch, the patches below it) in the prepared tree."""
    names = [n for n, _ in prepared.patches]
    if patch not in names:
        raise DriverError(f"patch {patch} is not in kernel/series")
    i = names.index(patch)
    return (prepared.patches[i - 1][1] if i else prepared.base_commit), prepared.patches[:i]


def base_worktree_path(prepared: PreparedTree) -> Path:
    """Where the base variant of a prepared tree lives: <tree>+base beside it."""
    return prepared.path.with_name(f"{prepared.path.name}+{BASE_VARIANT}")


def _git_path(tree: Path, what: str) -> Path | None:
    """`git rev-parse --path-format=absolute <what>` in tree, or None."""
    proc = git(tree, "rev-parse", "--path-format=absolute", what, check=False)
    return Path(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else None


def is_worktree_of(path: Path, main: Path) -> bool:
    """True when path is a linked worktree of main's repository (not a stale copy)."""
    if not (path / ".git").is_file():
        return False
    common = _git_path(path, "--git-common-dir")
    return common is not None and common.resolve() == (main / ".git").resolve()


def _add_worktree(main: Path, path: Path, commit: str) -> None:
    """A fresh detached worktree of main at commit (after clearing what an interrupted try left)."""
    shutil.rmtree(path, ignore_errors=True)
    git(main, "worktree", "prune")
    log = path.parent / f"{path.name}.log"
    say(f"creating {path}, a worktree of {main.name} (once; checking out ~90k files takes a while)")
    rc, secs = run_logged(["git", *GIT_CONFIG, "-C", str(main), "worktree", "add", "-f", "-f",
                           "--detach", str(path), commit], log, "git worktree add",
                          env=dict(os.environ, **COMMITTER_ENV))
    if rc != 0 or not is_worktree_of(path, main):
        raise DriverError(f"git worktree add of {path} failed; see {log}")
    say(f"git worktree add done in {secs:.0f}s")


def ensure_base_worktree(repo_root: Path, prepared: PreparedTree, base_before: str) -> PreparedTree:
    """The base variant: a worktree of the prepared tree at the commit before base_before,
    with the suite hooked in; cheap when nothing changed."""
    parent, patches = patch_parent(prepared, base_before)
    path = base_worktree_path(prepared)
    if not is_worktree_of(path, prepared.path):
        _add_worktree(prepared.path, path, parent)
    git_dir = _git_path(path, "--git-dir")
    if git_dir is None:
        raise DriverError(f"{path}: cannot find its git directory")
    stamp_file = git_dir / STAMP
    stamp = TreeStamp.load(stamp_file)
    _clean_if_dirty(path)
    stamp = _ensure_hook(path, repo_root / SUITE_DIR, parent, stamp, tag=BASE_SUITE_TAG,
                         carried=True)
    hook = stamp.hook_commit
    _goto(path, hook)
    stamp.save(stamp_file)
    say(f"base variant {path} at {hook[:12]} (before {base_before})")
    return PreparedTree(path=path, base_commit=prepared.base_commit, head_commit=hook,
                        patches=patches, variant=BASE_VARIANT)


def kernel_commit(tree: PreparedTree) -> str:
    """The kernel commit under the suite hook: the last patch applied, else the base."""
    return tree.patches[-1][1] if tree.patches else tree.base_commit
