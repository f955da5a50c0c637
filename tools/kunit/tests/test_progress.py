"""Build progress (issue 12): objects written so far, against the profile's last build.

build_um_lockdep_module.objects is a recorded build from scratch (the object files a real
kunit.py build wrote, with the second each appeared); kunit_build_um_lockdep.txt is a real
kunit.py build log, which is why the files are counted and not the log's lines.
"""
from __future__ import annotations

import io
import json
import os
import re
import time
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from cgkunit import progress as pg
from cgkunit import run
from cgkunit.common import DriverError, Heartbeat
from cgkunit.profile import Profile
from conftest import DATA

START = 1_800_000_000.0  # the fake clock when a build starts


def recorded() -> list[tuple[float, str]]:
    """(seconds after the build started, path) of the recorded build's objects."""
    rows = []
    for line in (DATA / "build_um_lockdep_module.objects").read_text().splitlines():
        if line and not line.startswith("#"):
            secs, path = line.split(" ", 1)
            rows.append((float(secs), path))
    return rows


def write_objects(out: Path, rows: list[tuple[float, str]], start: float) -> None:
    """The objects of rows in out, each written at start + its seconds."""
    for secs, path in rows:
        f = out / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"\x7fELF")
        os.utime(f, (start + secs, start + secs))


def build_at(out: Path, t: float, start: float = START) -> pg.BuildProgress:
    """A BuildProgress of a build in out started at start (objects before it are earlier
    builds'), and the recorded objects of its first t seconds written."""
    prog = pg.BuildProgress(out, clock=lambda: start)
    write_objects(out, [r for r in recorded() if r[0] <= t], start)
    return prog


def test_the_build_log_has_no_object_lines() -> None:
    # kunit.py runs make with stdout to /dev/null: no '  CC  kernel/...o' line to count
    log = (DATA / "kunit_build_um_lockdep.txt").read_text()
    assert "make all compile_commands.json" in log
    assert not re.search(r"^\s+(CC|LD|AR)\s+\S+", log, re.MULTILINE)


def test_a_first_build_shows_the_count_so_far(tmp_path: Path) -> None:
    rows = recorded()
    assert len(rows) == 93 and rows[-1][1] == ".tmp_vmlinux2.kallsyms.o"
    prog = build_at(tmp_path, 15.0)
    n = sum(1 for secs, _ in rows if secs <= 15.0)
    assert 0 < n < len(rows)
    assert prog.status(15.4) == f"{n} objects so far, 15s"
    assert not (tmp_path / pg.PROGRESS_FILE).exists()
    write_objects(tmp_path, rows, START)
    record = prog.finish(32.0)
    assert record == pg.BuildRecord(objects=93, seconds=32.0, total=93)
    assert json.loads((tmp_path / pg.PROGRESS_FILE).read_text()) == {
        "objects": 93, "seconds": 32.0, "total": 93}
    assert pg.read_record(tmp_path) == record


def test_an_incremental_build_says_the_last_build_not_a_percentage(tmp_path: Path) -> None:
    build_at(tmp_path, 1000.0).finish(449.4)  # the first build, from scratch
    later = START + 3600
    prog = pg.BuildProgress(tmp_path, clock=lambda: later)
    assert prog.present == 93
    assert prog.status(30) == "0 objects so far, 30s (last build: 93 objects in 449s)"
    write_objects(tmp_path, recorded()[40:43], later)  # kbuild rebuilds three of them
    assert prog.status(31) == "3 objects so far, 31s (last build: 93 objects in 449s)"
    assert prog.finish(33.0) == pg.BuildRecord(objects=3, seconds=33.0, total=93)
    prog = pg.BuildProgress(tmp_path, clock=lambda: later + 60)
    assert prog.status(5) == "0 objects so far, 5s (last build: 3 objects in 33s)"


def test_a_build_from_scratch_with_a_known_total_shows_the_time_left(tmp_path: Path) -> None:
    build_at(tmp_path, 1000.0).finish(32.0)
    for obj in tmp_path.rglob("*.o"):  # objects removed, the record kept
        obj.unlink()
    later = START + 3600
    prog = build_at(tmp_path, 12.0, later)
    n = sum(1 for secs, _ in recorded() if secs <= 12.0)
    left = 12.0 * (93 - n) / n
    assert prog.status(12.0) == f"{n}/93 objects, 12s, about {left:.0f}s left"
    # more objects than the last build (a larger config): no made-up percentage
    write_objects(tmp_path, [(20.0, f"extra/{i}.o") for i in range(100)], later)
    assert prog.status(20.0).startswith(f"{100 + n} objects so far, 20s (last build: 93 objects")


def test_only_object_files_count_and_links_are_not_followed(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    write_objects(tree, [(0.0, "kernel/fork.o"), (0.0, "mm/slub.o")], START)
    out = tmp_path / "out"
    write_objects(out, [(0.0, "kernel/cgroup/cgroup.o"), (5.0, "lib/kunit-cgroup/harness.o")],
                  START)
    (out / "source").symlink_to(tree)  # kbuild's link to the kernel tree
    (out / "kernel" / "cgroup" / ".cgroup.o.cmd").write_text("")
    (out / "kernel" / "cgroup" / "built-in.a").write_text("")
    (out / "vmlinux").write_text("")
    assert pg.count_objects(out) == 2
    assert pg.count_objects(out, since=START + 1) == 1
    assert pg.count_objects(tmp_path / "missing") == 0


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"objects": 3}',
                                  '{"objects": "x", "seconds": 1, "total": 3}',
                                  '{"objects": -1, "seconds": 1, "total": 3}'])
def test_a_bad_record_is_no_record(tmp_path: Path, text: str) -> None:
    (tmp_path / pg.PROGRESS_FILE).write_text(text)
    assert pg.read_record(tmp_path) is None
    assert pg.BuildProgress(tmp_path).status(3.0) == "0 objects so far, 3s"


def test_a_record_that_cannot_be_written_is_skipped(tmp_path: Path) -> None:
    (tmp_path / pg.PROGRESS_FILE).mkdir()  # os.replace onto a directory fails
    assert pg.BuildProgress(tmp_path).finish(3.0) is None


def test_the_heartbeat_prints_the_status_or_falls_back() -> None:
    hb = Heartbeat("building um-lockdep", status=lambda s: f"{int(s)} objects so far,\n{s:.0f}s")
    assert re.fullmatch(r"building um-lockdep: \d+ objects so far,; \d+s", hb.line())

    def broken(elapsed: float) -> str:
        raise RuntimeError("a bug")
    assert re.fullmatch(r"building x: still going, \d+s",
                        Heartbeat("building x", status=broken).line())
    assert re.fullmatch(r"x: still going, \d+s", Heartbeat("x").line())
    err = io.StringIO()
    with redirect_stderr(err), Heartbeat("building x", interval=0.05, status=broken):
        time.sleep(0.3)
    lines = err.getvalue().splitlines()
    assert lines and all(re.fullmatch(r"\[cgkunit\] building x: still going, \d+s", ln)
                         for ln in lines)


def _build_tree(tmp_path: Path) -> tuple[Path, Profile, Path]:
    tree, repo = tmp_path / "tree", tmp_path / "repo"
    (tree / run.KUNIT_PY).parent.mkdir(parents=True)
    (tree / run.KUNIT_PY).write_text("")
    repo.mkdir()
    (repo / ".kunitconfig").write_text("")
    fragment = repo / "p.config"
    fragment.write_text("")
    return tree, Profile(name="um-p", arch="um", fragment=fragment), repo


@pytest.mark.parametrize("rc", [0, 2])
def test_build_shows_and_records_its_objects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             rc: int) -> None:
    tree, prof, repo = _build_tree(tmp_path)
    build_root = tmp_path / "build"
    out = build_root / "out" / "um-p"
    shown: list[str] = []

    def fake_run_logged(cmd: list[str], log: Path, label: str, **kw: object) -> tuple[int, float]:
        status = kw["status"]
        assert callable(status)
        now = time.time()
        write_objects(out, [(0.0, "kernel/cgroup/cgroup.o"), (0.0, "lib/kunit-cgroup/harness.o")],
                      now)
        shown.append(status(12.3))
        log.write_text("$ kunit.py build\n")
        return rc, 14.0
    monkeypatch.setattr(run, "run_logged", fake_run_logged)
    if rc:
        with pytest.raises(DriverError):
            run.build(tree, prof, repo, build_root, 2)
        assert not (out / pg.PROGRESS_FILE).exists()
    else:
        assert run.build(tree, prof, repo, build_root, 2) == 14.0
        assert pg.read_record(out) == pg.BuildRecord(objects=2, seconds=14.0, total=2)
    assert shown == ["2 objects so far, 12s"]
