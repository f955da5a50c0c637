"""mbox: the series and the suite as one patch set with a cover letter, checked to apply."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cgkunit import mbox, pipeline
from cgkunit import tree as tr
from cgkunit.common import Context, DriverError
import test_tree as tt
from test_tree import env  # noqa: F401  (the fixture)

SUITE_MSG = """cgroup: add the suites

Body of the suite patch.

Signed-off-by: Ann Maintainer <ann@example.com>
"""
COVER = "cgroup: the series\n\nWhat it does.\n"


def _prepare(env_: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    def fake(ctx: Context, kernel_src: str | None, *a: Any, **k: Any) -> Any:
        assert kernel_src is None
        t = tr.prepare_tree(ctx.repo, ctx.build, None, str(env_["kernel"]))  # type: ignore[arg-type]
        return t, "label"
    monkeypatch.setattr(pipeline, "prepare", fake)


def test_hook_message_and_author(tmp_path: Path) -> None:
    (tmp_path / "kernel").mkdir()
    assert tr.hook_message(tmp_path)[0] == tr.HOOK_MSG + "\n"
    (tmp_path / "kernel" / "suite.msg").write_text(SUITE_MSG + "\n\n")
    msg, author = tr.hook_message(tmp_path)
    assert msg == SUITE_MSG
    assert (author["GIT_AUTHOR_NAME"], author["GIT_AUTHOR_EMAIL"]) == ("Ann Maintainer", "ann@example.com")
    assert author["GIT_AUTHOR_DATE"] == tr.FIXED_DATE


def test_mbox_writes_series_suite_and_cover(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    repo = env["repo"]
    (repo / "kernel" / "suite.msg").write_text(SUITE_MSG)
    (repo / "kernel" / "cover.msg").write_text(COVER)
    _prepare(env, monkeypatch)
    out = env["build"] / "results" / "mbox"
    files = mbox.export_mbox(Context(repo, env["build"]), out)
    assert [f.name[:4] for f in files] == ["0000", "0001", "0002", "0003"]
    cover = files[0].read_text()
    assert "Subject: [PATCH 0/3] cgroup: the series" in cover and "What it does." in cover
    assert "*** " not in cover and "base-commit: " in cover
    suite = files[3].read_text()
    assert "From: Ann Maintainer <ann@example.com>" in suite
    assert "Subject: [PATCH 3/3] cgroup: add the suites" in suite
    assert "lib/kunit-cgroup/x.c" in suite and "x.o" not in suite.split("---", 1)[1].split("\n")[0]
    # a second export replaces the first with the same files
    assert mbox.export_mbox(Context(repo, env["build"]), out) == files


def test_mbox_amends_the_hook_when_the_message_changes(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    repo = env["repo"]
    (repo / "kernel" / "cover.msg").write_text(COVER)
    _prepare(env, monkeypatch)
    out = env["build"] / "mb"
    first = mbox.export_mbox(Context(repo, env["build"]), out)[3].read_text()
    assert f"Subject: [PATCH 3/3] {tr.HOOK_MSG}" in first
    (repo / "kernel" / "suite.msg").write_text(SUITE_MSG)
    again = mbox.export_mbox(Context(repo, env["build"]), out)[3].read_text()
    assert "Subject: [PATCH 3/3] cgroup: add the suites" in again


def test_apply_check_catches_a_patch_that_does_not_apply(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    repo = env["repo"]
    (repo / "kernel" / "cover.msg").write_text(COVER)
    _prepare(env, monkeypatch)
    out = env["build"] / "mb"
    files = mbox.export_mbox(Context(repo, env["build"]), out)
    t = tr.prepare_tree(repo, env["build"], None, str(env["kernel"]))  # type: ignore[arg-type]
    broken = files[1].read_text().replace("-ucount line 240\n", "-ucount line 241\n")
    files[1].write_text(broken)
    with pytest.raises(DriverError, match=r"^0001-.*\.patch does not apply on the base: "):
        mbox.apply_check(t.path, t.base_commit, t.head_commit, files[1:])
    with pytest.raises(DriverError, match="not the prepared tree's"):
        mbox.apply_check(t.path, t.base_commit, t.head_commit, files[2:3])


@pytest.mark.parametrize("text, why", [
    (None, "kernel/cover.msg is missing"),
    ("subject only\n", "want a subject line, a blank line, then the text"),
    ("\n\nbody\n", "want a subject line"),
])
def test_cover_msg_errors(tmp_path: Path, text: str | None, why: str) -> None:
    (tmp_path / "kernel").mkdir()
    if text is not None:
        (tmp_path / "kernel" / "cover.msg").write_text(text)
    with pytest.raises(DriverError, match=why):
        mbox.cover_text(tmp_path)


def test_fill_cover() -> None:
    letter = "Subject: [PATCH 0/2] *** SUBJECT HERE ***\n\n*** BLURB HERE ***\n\nA (2):\n"
    assert mbox.fill_cover(letter, "S", "B") == "Subject: [PATCH 0/2] S\n\nB\n\nA (2):\n"
    with pytest.raises(DriverError, match="without its placeholders"):
        mbox.fill_cover("Subject: x\n", "S", "B")


def test_real_cover_and_suite_messages_are_kernel_style() -> None:
    repo = Path(__file__).resolve().parents[3]
    subject, body = mbox.cover_text(repo)
    msg, author = tr.hook_message(repo)
    assert author["GIT_AUTHOR_NAME"] != tr.AUTHOR_ENV["GIT_AUTHOR_NAME"]
    for text in (subject + "\n\n" + body, msg):
        first = text.splitlines()[0]
        assert len(first) <= 75, first
        assert all(len(line) <= 75 for line in text.splitlines()
                   if not line.startswith("Signed-off-by: ")), text


# The cgroup section as 7.3's MAINTAINERS has it, between two neighbours.
MAINTAINERS_7_3 = """CONTEXT TRACKING
M:\tFrederic Weisbecker <frederic@kernel.org>
S:\tMaintained

CONTROL GROUP (CGROUP)
M:\tTejun Heo <tj@kernel.org>
L:\tcgroups@vger.kernel.org
S:\tMaintained
T:\tgit git://git.kernel.org/pub/scm/linux/kernel/git/tj/cgroup.git
F:\tDocumentation/admin-guide/cgroup-v1/
F:\tDocumentation/admin-guide/cgroup-v2.rst
F:\tinclude/linux/cgroup*
F:\tkernel/cgroup/
F:\ttools/testing/selftests/cgroup/

CONTROL GROUP - BLOCK IO CONTROLLER (BLKIO)
F:\tblock/blk-cgroup.c
"""


def test_maintainers_line_goes_in_order_into_the_cgroup_section() -> None:
    new = tr.with_maintainers_line(MAINTAINERS_7_3)
    assert new.replace("F:\tlib/kunit-cgroup/\n", "", 1) == MAINTAINERS_7_3
    assert "F:\tkernel/cgroup/\nF:\tlib/kunit-cgroup/\nF:\ttools/testing/selftests/cgroup/\n" in new
    assert tr.with_maintainers_line(new) == new
    last = MAINTAINERS_7_3.replace("F:\ttools/testing/selftests/cgroup/\n", "")
    assert "F:\tkernel/cgroup/\nF:\tlib/kunit-cgroup/\n\nCONTROL GROUP - BLOCK" in tr.with_maintainers_line(last)
    other = MAINTAINERS_7_3.replace("CONTROL GROUP (CGROUP)", "CONTROL GROUPS")
    assert tr.with_maintainers_line(other) == other


def test_mbox_suite_patch_adds_the_maintainers_line(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    kernel = env["kernel"]
    (kernel / "MAINTAINERS").write_text(MAINTAINERS_7_3)
    tt.git(kernel, "add", "MAINTAINERS")
    tt.git(kernel, "commit", "-q", "-m", "maintainers")
    repo = env["repo"]
    (repo / "kernel" / "cover.msg").write_text(COVER)
    _prepare(env, monkeypatch)
    out = env["build"] / "mb"
    # a hook commit made before the line existed is amended to carry it
    monkeypatch.setattr(tr, "ensure_maintainers", lambda tree: False)
    before = mbox.export_mbox(Context(repo, env["build"]), out)[3].read_text()
    assert "MAINTAINERS" not in before
    monkeypatch.undo()
    _prepare(env, monkeypatch)
    suite = mbox.export_mbox(Context(repo, env["build"]), out)[3].read_text()
    assert " MAINTAINERS " in suite and "+F:\tlib/kunit-cgroup/\n" in suite
    assert "+F:\tlib/kunit-cgroup/\n F:\ttools/testing/selftests/cgroup/\n" in suite


# --- where mbox writes (issue 31) -----------------------------------------------------------

def test_mbox_never_removes_what_it_did_not_write(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch,  # noqa: F811
                                                  tmp_path: Path) -> None:
    repo = env["repo"]
    (repo / "kernel" / "cover.msg").write_text(COVER)
    _prepare(env, monkeypatch)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    (mine / "old.patch").write_text("mine too")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for out, why in ((mine, "a directory with files mbox did not write"),
                     (a_file, "not a directory"), (tmp_path, "a directory with files")):
        with pytest.raises(DriverError, match=why):
            mbox.export_mbox(Context(repo, env["build"]), out)
    assert (mine / "notes.txt").read_text() == "mine" and (mine / "old.patch").read_text() == "mine too"
    assert a_file.read_text() == "x"
    # a new directory: made and marked; the next export replaces its patches, nothing else
    new = tmp_path / "new" / "mbox"
    files = mbox.export_mbox(Context(repo, env["build"]), new)
    assert (new / mbox.OUT_MARK).is_file() and len(files) == 4
    (new / "README").write_text("added by hand")
    (new / "9999-stale.patch").write_text("an earlier export's")
    assert mbox.export_mbox(Context(repo, env["build"]), new) == files
    assert (new / "README").read_text() == "added by hand" and not (new / "9999-stale.patch").exists()
    # an empty directory is fine, and becomes mbox's
    empty = tmp_path / "empty"
    empty.mkdir()
    assert len(mbox.export_mbox(Context(repo, env["build"]), empty)) == 4


def test_mbox_out_on_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """--out . (a working directory with files), --out on a file: one line, exit 2, nothing
    touched (before the lock, the fetch or the tree)."""
    from cgkunit import cli
    from test_bad_input import fails, listing
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.c").write_text("int x;\n")
    monkeypatch.chdir(work)
    build = tmp_path / "build"
    monkeypatch.setattr(pipeline, "prepare", lambda *a, **k: pytest.fail("prepared"))
    before = listing(tmp_path)
    assert fails(["--build-dir", str(build), "mbox", "--out", "."], capsys).startswith(
        f"--out {work}: a directory with files mbox did not write")
    assert fails(["--build-dir", str(build), "mbox", "--out", "keep.c"], capsys) == \
        f"--out {work / 'keep.c'}: not a directory"
    assert listing(tmp_path) == before and cli.LOCKED
