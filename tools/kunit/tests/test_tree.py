"""tree: prepared git tree from KERNEL_SRC or a Debian base, idempotent, never touching the user's repo."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import fields
from pathlib import Path

import pytest

from cgkunit import tree as tr
from cgkunit.common import DriverError
from cgkunit.fetch import BaseSource

IDENT = {"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
         "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}
UCOUNT = "".join(f"ucount line {i}\n" for i in range(1, 301))
KERNEL_FILES = {
    "Makefile": "all:\n",
    "kernel/cgroup/cgroup.c": "int cgroup_init(void) { return 0; }\n",
    "kernel/ucount.c": UCOUNT,
    "lib/Kconfig.debug": 'menu "Kernel hacking"\nendmenu\n',
    "lib/Makefile": "obj-y += string.o\n",
    "tools/testing/kunit/kunit.py": "#!/usr/bin/env python3\n",
}


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env=dict(os.environ, **IDENT), check=True)
    return proc.stdout.strip()


def write_files(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def make_kernel(root: Path) -> Path:
    write_files(root, KERNEL_FILES)
    git(root, "init", "-q", "-b", "master")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "linux")
    return root


def make_patch(kernel: Path, work: Path, out: Path, edits: dict[str, str], subject: str,
               prepare: dict[str, str] | None = None) -> Path:
    """A git format-patch file of `edits` (applied after the uncommitted-away `prepare`)."""
    if work.exists():
        shutil.rmtree(work)
    git(kernel.parent, "clone", "-q", str(kernel), str(work))
    if prepare:
        write_files(work, prepare)
        git(work, "commit", "-q", "-am", "prepare")
    write_files(work, edits)
    git(work, "commit", "-q", "-am", subject)
    out.mkdir(parents=True, exist_ok=True)
    name = git(work, "format-patch", "-1", "-o", str(out))
    shutil.rmtree(work)
    return Path(name)


def edit_line(text: str, n: int, new: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[n - 1] = new + "\n"
    return "".join(lines)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, Path]:
    kernel = make_kernel(tmp_path / "linux")
    repo = tmp_path / "repo"
    patches = repo / "kernel" / "patches"
    p1 = make_patch(kernel, tmp_path / "w", patches,
                    {"kernel/ucount.c": edit_line(UCOUNT, 240, "ucount line 240 fixed")},
                    "ucount: fix line 240")
    p2 = make_patch(kernel, tmp_path / "w", patches,
                    {"kernel/cgroup/cgroup.c": "int cgroup_init(void) { return 1; }\n"},
                    "cgroup: return 1")
    (repo / "kernel" / "series").write_text(f"# the series\n{p1.name}\n\n{p2.name}  # second\n")
    (repo / "kernel" / "BASE").write_text("package=linux-source-7.3\n")
    write_files(repo / "lib" / "kunit-cgroup", {
        "Kconfig": "config CGROUP_KUNIT_TEST\n\ttristate \"x\"\n",
        "Makefile": "obj-$(CONFIG_CGROUP_KUNIT_TEST) += cgroup_kunit.o\n",
        "x.c": "int x;\n", "x.o": "junk", ".x.o.cmd": "junk", "cgroup_kunit.ko": "junk",
        "cgroup_kunit.mod.c": "junk", "modules.order": "junk"})
    return {"kernel": kernel, "repo": repo, "build": tmp_path / "build", "p1": p1, "p2": p2,
            "tmp": tmp_path}


def snapshot(repo: Path) -> dict[str, object]:
    """Everything about a user's repo that must not change."""
    files = {}
    for dirpath, _, names in os.walk(repo):
        for n in names:
            p = Path(dirpath) / n
            st = p.stat()
            files[str(p.relative_to(repo))] = (st.st_size, st.st_mtime_ns)
    return {"files": files, "status": git(repo, "--no-optional-locks", "status", "--porcelain"),
            "refs": git(repo, "for-each-ref"), "head": git(repo, "rev-parse", "HEAD")}


def tree_mtimes(path: Path) -> dict[str, int]:
    out = {}
    for dirpath, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".git"]
        for n in names:
            p = Path(dirpath) / n
            out[str(p.relative_to(path))] = p.stat().st_mtime_ns
    return out


def prepare(env: dict[str, Path], **kw: object) -> tr.PreparedTree:
    return tr.prepare_tree(env["repo"], env["build"], None, str(env["kernel"]), **kw)  # type: ignore[arg-type]


def subjects(path: Path) -> list[str]:
    return git(path, "log", "--format=%s").splitlines()


# --- KERNEL_SRC ----------------------------------------------------------------

def test_prepare_from_kernel_src_leaves_the_user_repo_untouched(env: dict[str, Path]) -> None:
    before = snapshot(env["kernel"])
    t = prepare(env)
    assert snapshot(env["kernel"]) == before
    head = git(env["kernel"], "rev-parse", "HEAD")
    assert t.path == env["build"] / "trees" / f"user-{head[:12]}"
    assert t.base_commit == head == git(t.path, "rev-parse", "cgkunit-base")
    assert subjects(t.path) == ["kunit-cgroup: hook in the test suite", "cgroup: return 1",
                                "ucount: fix line 240", "linux"]
    assert [n for n, _ in t.patches] == [env["p1"].name, env["p2"].name]
    assert t.patches[1][1] == git(t.path, "rev-parse", "HEAD^")
    assert git(t.path, "log", "-1", "--format=%an <%ae>", "HEAD^") == "Dev <dev@example.com>"
    assert t.head_commit == git(t.path, "rev-parse", "HEAD") == git(t.path, "rev-parse", "cgkunit-suite")
    assert t.variant == ""
    suite = t.path / "lib" / "kunit-cgroup"
    assert sorted(p.name for p in suite.iterdir()) == ["Kconfig", "Makefile", "x.c"]
    assert (t.path / "lib" / "Kconfig.debug").read_text().endswith('source "lib/kunit-cgroup/Kconfig"\n')
    assert (t.path / "lib" / "Makefile").read_text().endswith(
        "obj-$(CONFIG_CGROUP_KUNIT_TEST) += kunit-cgroup/\n")
    assert "ucount line 240 fixed" in (t.path / "kernel" / "ucount.c").read_text()
    assert git(t.path, "status", "--porcelain") == ""
    assert (t.path / ".git" / tr.STAMP).is_file()


def test_kernel_src_ref(env: dict[str, Path]) -> None:
    first = git(env["kernel"], "rev-parse", "HEAD")
    write_files(env["kernel"], {"Makefile": "all: new\n"})
    git(env["kernel"], "commit", "-q", "-am", "newer")
    t = prepare(env, kernel_ref=first)
    assert t.base_commit == first
    assert (t.path / "Makefile").read_text() == "all:\n"


def test_hook_lines_not_duplicated(env: dict[str, Path]) -> None:
    write_files(env["kernel"], {"lib/Makefile": "obj-$(CONFIG_CGROUP_KUNIT_TEST) += kunit-cgroup/\n"})
    git(env["kernel"], "commit", "-q", "-am", "already hooked")
    t = prepare(env)
    assert (t.path / "lib" / "Makefile").read_text().count("kunit-cgroup/") == 1


@pytest.mark.parametrize("case,needle", [
    ("missing", "does not exist"),
    ("file", "not a directory"),
    ("notlinux", "not a Linux source tree (no kernel/cgroup/cgroup.c)"),
    ("nogit", "not a git tree"),
    ("badref", "unknown ref nosuchref"),
])
def test_bad_kernel_src(env: dict[str, Path], case: str, needle: str) -> None:
    tmp = env["tmp"]
    ref = "HEAD"
    if case == "missing":
        src = tmp / "nope"
    elif case == "file":
        src = tmp / "afile"
        src.write_text("x")
    elif case == "notlinux":
        src = tmp / "notlinux"
        write_files(src, {"Makefile": "", "tools/testing/kunit/kunit.py": ""})
    elif case == "nogit":
        src = tmp / "nogit"
        write_files(src, KERNEL_FILES)
    else:
        src, ref = env["kernel"], "nosuchref"
    with pytest.raises(DriverError) as exc:
        tr.prepare_tree(env["repo"], env["build"], None, str(src), ref)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg == f"KERNEL_SRC={src}: {needle}"
    assert not (env["build"] / "trees").exists() or not any((env["build"] / "trees").iterdir())


def test_kernel_src_inside_another_git_repo_is_not_a_git_tree(env: dict[str, Path]) -> None:
    src = env["kernel"] / "sub"
    write_files(src, KERNEL_FILES)
    with pytest.raises(DriverError, match="not a git tree"):
        tr.prepare_tree(env["repo"], env["build"], None, str(src))


# --- series -----------------------------------------------------------------------

def test_patch_that_does_not_apply(env: dict[str, Path]) -> None:
    bad = make_patch(env["kernel"], env["tmp"] / "w", env["tmp"] / "bad",
                     {"kernel/ucount.c": edit_line(edit_line(UCOUNT, 240, "other 240"), 241, "again")},
                     "conflicting change",
                     prepare={"kernel/ucount.c": edit_line(UCOUNT, 240, "other 240")})
    target = env["repo"] / "kernel" / "patches" / "0003-bad.patch"
    shutil.copy(bad, target)
    series = env["repo"] / "kernel" / "series"
    series.write_text(series.read_text() + "0003-bad.patch\n")
    with pytest.raises(DriverError) as exc:
        prepare(env)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith("patch 0003-bad.patch does not apply: error: patch failed: kernel/ucount.c:")
    path = next((env["build"] / "trees").iterdir())
    assert git(path, "rev-parse", "HEAD") == git(path, "rev-parse", "cgkunit-base")
    assert git(path, "status", "--porcelain") == ""
    assert not (path / ".git" / tr.STAMP).exists()
    assert not (path / ".git" / "rebase-apply").exists()
    series.write_text(series.read_text().replace("0003-bad.patch\n", ""))
    t = prepare(env)  # recovers once the series is fixed
    assert subjects(t.path)[0] == "kunit-cgroup: hook in the test suite"


def test_missing_series_entry(env: dict[str, Path]) -> None:
    series = env["repo"] / "kernel" / "series"
    series.write_text(series.read_text() + "9999-nope.patch\n")
    with pytest.raises(DriverError, match="kernel/patches/9999-nope.patch does not exist"):
        prepare(env)


def test_rerun_is_a_noop(env: dict[str, Path]) -> None:
    t1 = prepare(env)
    mtimes = tree_mtimes(t1.path)
    t2 = prepare(env)
    assert t2 == t1
    assert tree_mtimes(t2.path) == mtimes


def test_changed_suite_file_is_picked_up_by_amending(env: dict[str, Path]) -> None:
    t1 = prepare(env)
    mtimes = tree_mtimes(t1.path)
    (env["repo"] / "lib" / "kunit-cgroup" / "x.c").write_text("int x = 2;\n")
    (env["repo"] / "lib" / "kunit-cgroup" / "y.c").write_text("int y;\n")
    t2 = prepare(env)
    assert t2.head_commit != t1.head_commit
    assert git(t2.path, "rev-parse", "HEAD^") == git(t1.path, "rev-parse", f"{t1.head_commit}^")
    assert len(subjects(t2.path)) == 4
    assert (t2.path / "lib" / "kunit-cgroup" / "x.c").read_text() == "int x = 2;\n"
    assert (t2.path / "lib" / "kunit-cgroup" / "y.c").exists()
    after = tree_mtimes(t2.path)
    changed = {k for k in after if after[k] != mtimes.get(k)}
    assert changed == {"lib/kunit-cgroup/x.c", "lib/kunit-cgroup/y.c"}
    assert git(t2.path, "status", "--porcelain") == ""
    (env["repo"] / "lib" / "kunit-cgroup" / "y.c").unlink()
    t3 = prepare(env)
    assert not (t3.path / "lib" / "kunit-cgroup" / "y.c").exists()
    assert git(t3.path, "status", "--porcelain") == ""


def test_changed_series_is_reapplied_from_the_first_change(env: dict[str, Path]) -> None:
    t1 = prepare(env)
    make_patch(env["kernel"], env["tmp"] / "w", env["tmp"] / "new",
               {"kernel/cgroup/cgroup.c": "int cgroup_init(void) { return 2; }\n"}, "cgroup: return 1")
    new = next((env["tmp"] / "new").iterdir())
    shutil.copy(new, env["repo"] / "kernel" / "patches" / env["p2"].name)
    mtimes = tree_mtimes(t1.path)
    t2 = prepare(env)
    assert t2.patches[0] == t1.patches[0]
    assert t2.patches[1] != t1.patches[1]
    assert "return 2" in (t2.path / "kernel" / "cgroup" / "cgroup.c").read_text()
    after = tree_mtimes(t2.path)
    assert after["kernel/ucount.c"] == mtimes["kernel/ucount.c"]  # untouched by the re-apply
    (env["repo"] / "kernel" / "series").write_text(f"{env['p2'].name}\n")  # drop and reorder
    t3 = prepare(env)
    assert [n for n, _ in t3.patches] == [env["p2"].name]
    assert "ucount line 240\n" in (t3.path / "kernel" / "ucount.c").read_text()


def test_variant_applied_then_removed(env: dict[str, Path]) -> None:
    base = prepare(env)
    extra = make_patch(env["kernel"], env["tmp"] / "w", env["tmp"] / "breakage",
                       {"kernel/cgroup/cgroup.c": "int cgroup_init(void) { return -1; }\n"},
                       "break cgroup", prepare={"kernel/cgroup/cgroup.c":
                                                "int cgroup_init(void) { return 1; }\n"})
    brk = env["repo"] / "tools" / "kunit" / "breakage"
    brk.mkdir(parents=True)
    shutil.copy(extra, brk / "broken-init.patch")
    v = prepare(env, extra_patches=[Path("tools/kunit/breakage/broken-init.patch")])
    assert v.variant == "broken-init"
    assert git(v.path, "rev-parse", "HEAD^") == base.head_commit
    assert "return -1" in (v.path / "kernel" / "cgroup" / "cgroup.c").read_text()
    again = prepare(env, extra_patches=[Path("tools/kunit/breakage/broken-init.patch")])
    assert again.head_commit == v.head_commit
    back = prepare(env)
    assert back.head_commit == base.head_commit and back.variant == ""
    assert "return 1" in (back.path / "kernel" / "cgroup" / "cgroup.c").read_text()


def test_hand_edits_are_reset(env: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    t = prepare(env)
    (t.path / "kernel" / "ucount.c").write_text("scribble\n")
    (t.path / "stray.txt").write_text("x")
    t2 = prepare(env)
    assert t2.head_commit == t.head_commit
    assert "ucount line 240 fixed" in (t.path / "kernel" / "ucount.c").read_text()
    assert not (t.path / "stray.txt").exists()
    assert "modified by hand; resetting it (it is ours)" in capsys.readouterr().err


def test_head_moved_is_put_back(env: dict[str, Path]) -> None:
    t = prepare(env)
    git(t.path, "checkout", "-q", "--detach", "cgkunit-base")
    assert prepare(env).head_commit == t.head_commit
    assert git(t.path, "rev-parse", "HEAD") == t.head_commit


# --- the stamp ---------------------------------------------------------------------

FULL_STAMP = tr.TreeStamp(
    base="user:/src:abc", series=(("0001-a.patch", "aa"), ("0002-b.patch", "bb")),
    patch_commits=(("0001-a.patch", "c1"), ("0002-b.patch", "c2")), series_commit="c2",
    hook_commit="h", hook_parent="c2", suite_files={"Kconfig": "k", "x.c": "x"},
    variant="broken", variant_patches=(("broken.patch", "dd"),), variant_parent="h", head="v")


def test_stamp_json_round_trip() -> None:
    data = FULL_STAMP.to_json()
    assert set(data) == {f.name for f in fields(tr.TreeStamp)}
    assert set(tr.TreeStamp.STRINGS) | set(tr.TreeStamp.PAIRS) | {"suite_files"} == set(data)
    assert data["series"] == [["0001-a.patch", "aa"], ["0002-b.patch", "bb"]]
    assert tr.TreeStamp.from_json(json.loads(json.dumps(data))) == FULL_STAMP
    assert tr.TreeStamp.from_json({}) == tr.TreeStamp()


def test_stamp_of_a_run_cut_short_and_unknown_or_null_keys() -> None:
    old = {"base": "b", "series": [["0001-a.patch", "aa"]], "patch_commits": [["0001-a.patch", "c1"]],
           "series_commit": "c1", "head": None, "from_a_later_version": {"x": 1}}
    assert tr.TreeStamp.from_json(old) == tr.TreeStamp(
        base="b", series=(("0001-a.patch", "aa"),), patch_commits=(("0001-a.patch", "c1"),),
        series_commit="c1")


@pytest.mark.parametrize("data", [
    None, [], "stamp", 3, {"base": 1}, {"head": ["c"]}, {"series": "0001-a.patch"},
    {"series": [["0001-a.patch"]]}, {"patch_commits": [["0001-a.patch", 7]]},
    {"variant_patches": [("a", "b", "c")]}, {"suite_files": ["x.c"]}, {"suite_files": {"x.c": 1}},
])
def test_garbage_is_no_stamp(data: object, tmp_path: Path) -> None:
    assert tr.TreeStamp.from_json(data) is None
    path = tmp_path / tr.STAMP
    path.write_text(json.dumps(data))
    assert tr.TreeStamp.load(path) == tr.TreeStamp()
    path.write_text("{not json")
    assert tr.TreeStamp.load(path) == tr.TreeStamp()
    assert tr.TreeStamp.load(tmp_path / "missing.json") == tr.TreeStamp()


def test_prepare_stamps_the_tree(env: dict[str, Path]) -> None:
    t = prepare(env)
    stamp = tr.TreeStamp.load(t.path / ".git" / tr.STAMP)
    assert stamp.base == f"user:{env['kernel'].resolve()}:{t.base_commit}"
    assert [n for n, _ in stamp.series] == [env["p1"].name, env["p2"].name]
    assert list(stamp.patch_commits) == t.patches and stamp.series_commit == t.patches[-1][1]
    assert stamp.hook_parent == stamp.series_commit
    assert stamp.hook_commit == stamp.variant_parent == stamp.head == t.head_commit
    assert sorted(stamp.suite_files) == ["Kconfig", "Makefile", "x.c"]
    assert (stamp.variant, stamp.variant_patches) == ("", ())


@pytest.mark.parametrize("garbage", ["{not json", "[1, 2]", '{"base": "%s", "series": 7}'])
def test_a_garbage_stamp_makes_the_same_tree_again(env: dict[str, Path], garbage: str) -> None:
    t1 = prepare(env)
    stamp_file = t1.path / ".git" / tr.STAMP
    stamp = stamp_file.read_text()
    stamp_file.write_text(garbage.replace("%s", tr.TreeStamp.load(stamp_file).base))
    assert prepare(env) == t1  # the series re-applied: the same commits
    assert stamp_file.read_text() == stamp


def test_a_stamp_cut_short_after_the_series_keeps_it(env: dict[str, Path]) -> None:
    t1 = prepare(env)
    stamp_file = t1.path / ".git" / tr.STAMP
    full = json.loads(stamp_file.read_text())
    stamp_file.write_text(json.dumps({k: full[k] for k in ("base", "series", "patch_commits",
                                                            "series_commit")}))
    git(t1.path, "checkout", "-q", "--detach", t1.patches[-1][1])
    mtimes = tree_mtimes(t1.path)
    assert prepare(env) == t1
    assert tree_mtimes(t1.path)["kernel/ucount.c"] == mtimes["kernel/ucount.c"]  # not re-applied
    assert json.loads(stamp_file.read_text()) == full


# --- Debian base -------------------------------------------------------------------

def test_debian_base_is_committed_once_and_reproducibly(env: dict[str, Path]) -> None:
    src = env["tmp"] / "unpacked"
    write_files(src, KERNEL_FILES)
    base = BaseSource(path=src, package="linux-source-7.3", version="7.3.4-1~bpo13+1",
                      sha256="ab" * 32, pinned=True)
    t1 = tr.prepare_tree(env["repo"], env["build"], base, None)
    assert t1.path == env["build"] / "trees" / "debian-7.3.4-1~bpo13+1"
    assert git(t1.path, "log", "-1", "--format=%s|%an|%ad", "--date=iso", "cgkunit-base") == \
        "base: linux-source-7.3 7.3.4-1~bpo13+1|cgkunit|2000-01-01 00:00:00 +0000"
    t2 = tr.prepare_tree(env["repo"], env["tmp"] / "build2", base, None)
    assert t2.base_commit == t1.base_commit  # reproducible
    assert t2.head_commit == t1.head_commit
    again = tr.prepare_tree(env["repo"], env["build"], base, None)
    assert again == t1
