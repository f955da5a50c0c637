"""make coverage: the lcov tracefile reader, the per-target arithmetic, the table."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cgkunit import coverage as cov
from cgkunit.common import DriverError

DATA = Path(__file__).parent / "data"

SMALL = """TN:
SF:/b/trees/t/kernel/ucount.c
FN:10,alpha
FN:20,beta
FN:30,gamma
FNDA:4,alpha
FNDA:0,beta
FNDA:1,gamma
FNF:3
FNH:2
BRDA:11,0,0,3
BRDA:11,0,1,-
BRDA:22,0,0,0
BRDA:22,0,1,-
DA:10,4
DA:11,4
DA:12,0
DA:20,0
DA:21,0
DA:30,1
DA:31,1
LF:7
LH:4
end_of_record
SF:/b/trees/t/kernel/cgroup/cgroup-v1.c
FN:5,cgroup_attach_task_all
FNDA:2,cgroup_attach_task_all
DA:5,2
DA:6,0
end_of_record
"""


def test_parse_info_reads_lines_functions_branches() -> None:
    files = cov.parse_info(SMALL)
    f = files["/b/trees/t/kernel/ucount.c"]
    assert f.lines == {10: 4, 11: 4, 12: 0, 20: 0, 21: 0, 30: 1, 31: 1}
    assert f.functions == {"alpha": 10, "beta": 20, "gamma": 30}
    assert f.calls == {"alpha": 4, "beta": 0, "gamma": 1}
    assert f.branches[(11, "0", "1")] == 0 and f.branches[(11, "0", "0")] == 3


def test_parse_info_sums_repeated_records_of_a_file() -> None:
    text = SMALL + "SF:/b/trees/t/kernel/ucount.c\nDA:12,5\nFNDA:2,beta\nend_of_record\n"
    f = cov.parse_info(text)["/b/trees/t/kernel/ucount.c"]
    assert f.lines[12] == 5 and f.lines[10] == 4 and f.calls["beta"] == 2


def test_parse_info_rejects_garbage_numbers_with_the_line() -> None:
    with pytest.raises(DriverError, match=r"x.info:3: not a number"):
        cov.parse_info("SF:/a/kernel/ucount.c\nDA:1,1\nDA:zz,1\n", "x.info")


def test_whole_file_target() -> None:
    r = cov.measure(cov.Target("kernel/ucount.c"), cov.parse_info(SMALL))
    assert (r.lines_hit, r.lines_total) == (4, 7)
    assert (r.branches_hit, r.branches_total) == (1, 4)
    assert r.never_entered == ["beta"] and r.functions_total == 3


def test_function_group_counts_only_its_functions() -> None:
    t = cov.Target("kernel/ucount.c", "group", ("alpha", "gamma", "nosuch"))
    r = cov.measure(t, cov.parse_info(SMALL))
    assert (r.lines_hit, r.lines_total) == (4, 5)   # 10-12 and 30-31
    assert (r.branches_hit, r.branches_total) == (1, 2)
    assert r.never_entered == [] and r.missing_functions == ["nosuch"]


def test_target_matches_by_path_suffix_only() -> None:
    files = cov.parse_info(SMALL)
    assert cov.find_file(files, "kernel/cgroup/cgroup-v1.c") is not None
    assert cov.find_file(files, "cgroup/cgroup.c") is None   # not cgroup-v1.c
    assert cov.find_file(files, "v1.c") is None              # a whole path component


def test_missing_file_is_reported_not_zero() -> None:
    r = cov.measure(cov.Target("kernel/cgroup/pids.c"), cov.parse_info(SMALL))
    assert not r.found
    assert "not in the coverage data" in cov.format_table([r])


def test_table_lists_never_entered_and_fits_a_line_each() -> None:
    files = cov.parse_info(SMALL)
    rows = [cov.measure(t, files) for t in (cov.Target("kernel/ucount.c"),
                                            cov.Target("kernel/cgroup/cgroup-v1.c"))]
    table = cov.format_table(rows)
    assert " 57.1% 4/7 " in table and "1 of 3 functions" in table
    assert "  kernel/ucount.c: beta" in table
    assert max(len(line) for line in table.splitlines()) < 100


def test_clear_counts_removes_only_gcda(tmp_path: Path) -> None:
    (tmp_path / "kernel").mkdir()
    (tmp_path / "kernel" / "a.gcda").write_text("x")
    (tmp_path / "kernel" / "a.gcno").write_text("x")
    assert cov.clear_counts(tmp_path) == 1
    assert (tmp_path / "kernel" / "a.gcno").exists()


def test_capture_without_gcda_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cov, "lcov_tools", lambda: ("lcov", "genhtml", "gcov"))
    (tmp_path / "kernel").mkdir()
    with pytest.raises(DriverError, match="did not exit normally"):
        cov.capture(tmp_path, tmp_path)


def test_every_target_names_distinct() -> None:
    names = [t.name for t in cov.TARGETS]
    assert len(names) == len(set(names))


def test_report_writes_json_and_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cov, "html", lambda info, files, dest: None)
    info = tmp_path / "coverage.info"
    info.write_text(SMALL)
    cov.report(info, tmp_path, "pass")
    data = json.loads((tmp_path / "coverage.json").read_text())
    ucount = next(t for t in data["targets"] if t["name"] == "kernel/ucount.c")
    assert ucount["lines"] == {"hit": 4, "total": 7, "percent": 57.1}
    assert data["run_status"] == "pass"
    assert "kernel/ucount.c" in capsys.readouterr().out


def test_real_capture_of_a_um_coverage_run() -> None:
    """kernel/ucount.c, rstat.c and cgroup-v1.c records of a real make coverage (series 0014)."""
    files = cov.parse_info((DATA / "coverage_real.info").read_text())
    got = {t.path: cov.measure(t, files) for t in cov.TARGETS if not t.functions}
    assert (got["kernel/ucount.c"].lines_hit, got["kernel/ucount.c"].lines_total) == (164, 186)
    assert (got["kernel/cgroup/rstat.c"].lines_hit, got["kernel/cgroup/rstat.c"].lines_total) \
        == (285, 329)
    assert "set_lookup" in got["kernel/ucount.c"].never_entered
    v1 = cov.measure(next(t for t in cov.TARGETS if t.name == "cgroup-v1.c: attach"), files)
    assert v1.lines_hit == 0 and v1.never_entered[0] == "cgroup_attach_task_all"
    assert not got["kernel/cgroup/pids.c"].found   # not in this excerpt
