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


# ---- the flag arguments of the charge and migration entry points ------------------------

def _anchored_source(path: str) -> list[str]:
    """A stand-in for the tree's file: the recorded anchor lines at their numbers."""
    anchors = json.loads((DATA / "coverage_arguments_anchors.json").read_text())[path]
    last = max([int(n) for n in anchors] + [8000])
    lines = [""] * last
    for n, text in anchors.items():
        lines[int(n) - 1] = "\t" + text
    return lines


def _real_arguments() -> dict[str, cov.ArgReach]:
    """The ARGUMENTS rows of a real make coverage at 38f53df (um-coverage, 2026-11-27)."""
    files = cov.parse_info((DATA / "coverage_arguments.info").read_text())
    return {p.name: cov.measure_argument(p, files, _anchored_source(p.path))
            for p in cov.ARGUMENTS}


def test_arguments_of_a_real_run() -> None:
    got = _real_arguments()
    assert got["inc_rlimit_get_ucounts(): override_rlimit"].counts == {
        "false (per level)": 33335092, "true (per level)": 348065}
    lock = got["cgroup_attach_lock(): lock_mode"].counts
    assert lock == {"CGRP_ATTACH_LOCK_NONE": 638, "CGRP_ATTACH_LOCK_GLOBAL": 931483,
                    "CGRP_ATTACH_LOCK_PER_THREADGROUP": 672782}
    assert got["__cgroup1_procs_write(): threadgroup"].counts == {
        "true (cgroup.procs)": 8376, "false (tasks)": 8405}
    start = got["cgroup_procs_write_start_task(): threadgroup, self"].counts
    assert start["threadgroup"] == 1564327 and start["one thread"] == 8405
    # the cells this run left empty: the to-do list
    assert got["cgroup_css_set_fork(): kargs->flags"].counts["CLONE_INTO_CGROUP"] == 0
    assert got["__send_signal_locked(): sig, override_rlimit"].counts[
        "below SIGRTMIN: forced unless si_code < 0"] == 0
    assert all(not r.problems for r in got.values())


def test_arguments_table_says_never_and_unknown() -> None:
    got = list(_real_arguments().values())
    got.append(cov.ArgReach("f(): x", "kernel/x.c", {"1": None}, ["f(): x = 1: no counted line"]))
    table = cov.format_arguments(got)
    row = next(ln for ln in table.splitlines() if "CLONE_INTO_CGROUP" in ln
               and "without" not in ln)
    assert row.split()[-1] == "never"
    assert any(ln.split()[-1] == "?" for ln in table.splitlines() if ln.startswith("f(): x"))
    assert "  f(): x = 1: no counted line" in table


def test_argument_anchor_not_in_the_source_is_a_problem_not_a_zero() -> None:
    files = cov.parse_info((DATA / "coverage_arguments.info").read_text())
    probe = next(p for p in cov.ARGUMENTS if p.function == "cgroup_attach_lock")
    source = _anchored_source(probe.path)
    source[2549 - 1] = "\tpercpu_down_write(&something_else);"
    got = cov.measure_argument(probe, files, source)
    assert got.counts["CGRP_ATTACH_LOCK_GLOBAL"] is None
    assert got.counts["CGRP_ATTACH_LOCK_NONE"] is None     # it subtracts GLOBAL
    assert got.counts["CGRP_ATTACH_LOCK_PER_THREADGROUP"] == 672782
    assert any("percpu_down_write(&cgroup_threadgroup_rwsem);" in p for p in got.problems)


def test_argument_without_source_or_record_says_why() -> None:
    files = cov.parse_info((DATA / "coverage_arguments.info").read_text())
    probe = cov.ARGUMENTS[0]
    unreadable = cov.measure_argument(probe, files, None)
    assert set(unreadable.counts.values()) == {None}
    assert unreadable.problems == [f"{probe.path}: source not readable"]
    elsewhere = cov.ArgProbe("kernel/pid.c", "alloc_pid", "x", (cov.ArgValue("1", cov.Calls("a")),))
    assert "not in the coverage data" in cov.measure_argument(elsewhere, files, []).problems[0]


def test_report_json_lists_the_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cov, "html", lambda info, files, dest: None)
    info = tmp_path / "coverage.info"
    info.write_text(SMALL)
    cov.report(info, tmp_path, "pass")
    data = json.loads((tmp_path / "coverage.json").read_text())
    names = [a["name"] for a in data["arguments"]]
    assert names == [p.name for p in cov.ARGUMENTS]
    assert "argument" in (tmp_path / "coverage.txt").read_text()
