"""export: results.ktap, results.xml (JUnit) and results.json (kunit.py's KernelCI JSON)
written from the report of recorded consoles."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from cgkunit import export
from cgkunit import console as cr
from cgkunit import report as rp
from conftest import DATA

REPO = Path(__file__).resolve().parents[3]
# kunit_json.py's keys: of a group (with the common fields of get_json_result), a case, misc
GROUP_KEYS = ["name", "sub_groups", "test_cases", "misc", "arch", "defconfig",
              "build_environment", "lab_name", "kernel", "job", "git_branch"]
MISC_KEYS = ["tests", "passed", "failed", "crashed", "skipped", "errors"]
LOGS = sorted(p.name for p in DATA.glob("*.log"))


def written(name: str, tmp_path: Path) -> tuple[rp.Report, Path]:
    report = cr.parse_console((DATA / name).read_text())
    export.write_summary(report, tmp_path)
    return report, tmp_path


def check_group(group: dict[str, Any]) -> dict[str, int]:
    """Assert the kunit_json.py schema of group and its counts; its cases by JSON status."""
    assert list(group) == GROUP_KEYS
    assert list(group["misc"]) == MISC_KEYS
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0, "ERROR": 0}
    for case in group["test_cases"]:
        assert list(case) == ["name", "status"] and case["status"] in counts
        counts[case["status"]] += 1
    for sub in group["sub_groups"]:
        for status, n in check_group(sub).items():
            counts[status] += n
    misc = group["misc"]
    assert (misc["passed"], misc["skipped"], misc["errors"]) == (counts["PASS"], counts["SKIP"], 0)
    assert misc["failed"] + misc["crashed"] >= counts["FAIL"] + counts["ERROR"]
    assert misc["tests"] == misc["passed"] + misc["failed"] + misc["crashed"] + misc["skipped"]
    return counts


def check_suite(suite: ET.Element) -> dict[str, int]:
    """Assert a <testsuite>'s counts are those of the cases under it."""
    cases = list(suite.iter("testcase"))
    want = {"tests": len(cases), "failures": sum(c.find("failure") is not None for c in cases),
            "skipped": sum(c.find("skipped") is not None for c in cases),
            "errors": sum(c.find("error") is not None for c in cases)}
    assert {k: int(suite.get(k, "-1")) for k in want} == want, suite.get("name")
    for sub in suite.findall("testsuite"):
        check_suite(sub)
    return want


@pytest.mark.parametrize("name", LOGS)
def test_results_files_of_every_recorded_console(name: str, tmp_path: Path) -> None:
    report, d = written(name, tmp_path)
    assert report.files["ktap"] == str(d / "results.ktap")
    ktap = (d / "results.ktap").read_text().splitlines()
    assert ktap == report.ktap and (not ktap or "TAP version" in ktap[0])
    data = json.loads((d / "results.json").read_text())
    assert data["name"] == "KUnit Test Group"
    counts = check_group(data)
    hosts = {t.parent for t in report.tests if t.level == "crash"}  # a crash is a case under it
    leaves = [t for t in report.tests if not t.children and t.id not in hosts]
    assert sum(counts.values()) == len(leaves)
    root = ET.parse(d / "results.xml").getroot()
    assert root.tag == "testsuite" and root.get("name") == "main"
    junit = check_suite(root)
    failed = junit["failures"] + junit["errors"]
    assert (failed == 0) == (report.status in ("pass", "no-tests") and not report.splats)


def test_junit_failure_names_the_report_and_the_diagnostics(tmp_path: Path) -> None:
    _, d = written("02_lockdep_param_ok.log", tmp_path)
    root = ET.parse(d / "results.xml").getroot()
    [failure] = root.iter("failure")
    case = next(c for c in root.iter("testcase") if c.find("failure") is not None)
    assert (case.get("name"), case.get("classname")) == ("4 threads", "cgroup_ucount.ucount_inc_dec")
    assert failure.get("message", "").startswith(
        "lockdep: WARNING: possible circular locking dependency detected")
    assert "failed: splat even though KUnit said ok" in (failure.text or "")
    assert "seed=" in (failure.text or "")  # its diagnostics


def test_junit_kunit_failure_and_skip(tmp_path: Path) -> None:
    _, d = written("10_seed_replay.log", tmp_path)
    failures = {c.get("name"): c.find("failure") for c in
                ET.parse(d / "results.xml").getroot().iter("testcase")}
    leaked = failures["16 threads"]
    assert leaked is not None
    assert "worker 11 of 16: RLIMIT_NPROC count leaked" in (leaked.text or "")
    _, d = written("08_skipped.log", tmp_path)
    skipped = [c.find("skipped") for c in ET.parse(d / "results.xml").getroot().iter("testcase")]
    assert "expected to fail; enable with cgroup_kunit.provoke=kcsan" in \
        [s.get("message") for s in skipped if s is not None]


def test_crash_point_and_boot_report_are_cases(tmp_path: Path) -> None:
    _, d = written("05_panic_mid_suite.log", tmp_path)
    root = ET.parse(d / "results.xml").getroot()
    [error] = root.iter("error")
    assert "Kernel panic - not syncing" in (error.text or "")
    group = json.loads((d / "results.json").read_text())["sub_groups"][1]["sub_groups"][0]
    assert group["name"] == "rlimit_add_sub" and group["test_cases"][-1] == {
        "name": "running when the kernel stopped (after cgroup_ucount.rlimit_add_sub.8 threads)",
        "status": "ERROR"}
    _, d = written("06_boot_splat.log", tmp_path)
    boot = next(c for c in ET.parse(d / "results.xml").getroot().iter("testcase")
                if c.get("name") == "boot")
    failure = boot.find("failure")
    assert failure is not None
    assert "WARNING: kernel/cgroup/cgroup.c:6412" in failure.get("message", "")


def kunit_tool() -> Path:
    """The kernel tree's tools/testing/kunit, when a tree was prepared here."""
    found = sorted((REPO / "build" / "trees").glob("*/tools/testing/kunit/kunit_json.py"))
    if not found:
        pytest.skip("no prepared kernel tree with kunit_json.py under build/trees")
    return found[0].parent


KUNIT_JSON = """import sys
sys.path.insert(0, sys.argv[1])
import kunit_json, kunit_parser, kunit_printer
with open(sys.argv[2], errors="backslashreplace") as f:
    test = kunit_parser.parse_run_tests(f.read().splitlines(), kunit_printer.null_printer)
print(kunit_json.get_json_result(test, kunit_json.Metadata()))
"""


@pytest.mark.parametrize("name", ["01_all_pass.log", "10_seed_replay.log", "real_um_all_pass.log"])
def test_json_is_what_kunit_py_writes(name: str) -> None:
    """Where KUnit's verdict is the report's, results.json is kunit.py's --json, byte for byte."""
    tool = kunit_tool()
    proc = subprocess.run([sys.executable, "-c", KUNIT_JSON, str(tool), str(DATA / name)],
                          capture_output=True, text=True, check=True)
    report = cr.parse_console((DATA / name).read_text())
    assert json.dumps(export.kernelci_json(report), indent=4) == proc.stdout.rstrip("\n")


def test_kcidb_payload_reads_the_json(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("kcidb_payload_x",
                                                  REPO / "ci" / "kernelci" / "kcidb_payload.py")
    assert spec is not None and spec.loader is not None
    kp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kp)
    report, d = written("02_lockdep_param_ok.log", tmp_path)
    payload = kp.build_payload(d, "cgkunit", profile="um-lockdep", arch="um")
    status = {t["path"]: t["status"] for t in payload["tests"]}
    leaves = [t for t in report.tests if not t.children]
    assert len(status) == len(leaves)
    assert status["kunit.cgroup_ucount.ucount_inc_dec.4_threads"] == "FAIL"
    assert all(s == "PASS" for p, s in status.items() if not p.endswith("4_threads"))
