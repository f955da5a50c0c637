"""The files a run's report is written to: summary.json (the report, its replay commands and
failure signatures) and summary.txt (the one-screen summary), and for other tools
results.ktap, results.xml (JUnit) and results.json (KernelCI).

results.json has the keys kunit.py's --json writes (tools/testing/kunit/kunit_json.py) and
the JUnit the nesting of its --junit (kunit_junit.py): a test with subtests is a group
(testsuite), any other a case. The statuses are the report's, so a case under which a
report was printed is a failure here too; a crash point (the test running when the
kernel stopped) is an error case of the test it ran under. In the JUnit a failure
carries the case's reports, notes and diagnostics, and what no case would show is a case
of its own: a group's own failure (reports after its last subtest, fewer subtests than
planned) and the reports outside any test (during boot, at shutdown)."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Union

from .common import write_json
from .report import POINT_LEVELS, Report, TestResult
from .signature import signatures
from .summary import first_failure, format_summary, grouped, not_run_hints, replay_hints, splat_line

# the report's status -> kunit_json.py's (a crash is kunit.py's TEST_CRASHED: ERROR)
JSON_STATUS = {"PASS": "PASS", "SKIP": "SKIP", "FAIL": "FAIL", "CRASH": "ERROR"}
# kunit_json.py's fields of every group when kunit.py parse knows nothing of the build
COMMON = {"arch": "", "defconfig": "", "build_environment": "", "lab_name": None,
          "kernel": None, "job": None, "git_branch": "kselftest"}
ROOT_JSON = "KUnit Test Group"  # kunit_json.py's name of the whole run
ROOT_JUNIT = "main"             # kunit_junit.py's: kunit_parser's top test


@dataclass
class Group:
    """A test with subtests, or the whole run (test None), in KTAP order."""
    name: str
    test: TestResult | None
    members: list[Union["Group", TestResult]] = field(default_factory=list)

    def counts(self) -> Counter[str]:
        """Cases by status, a group's own failure counted when no case shows it."""
        c: Counter[str] = Counter()
        for m in self.members:
            c += m.counts() if isinstance(m, Group) else Counter([m.status])
        own = self.test.status if self.test is not None else ""
        if own in ("FAIL", "CRASH") and not (c["FAIL"] or c["CRASH"]):
            c[own] += 1
        return c


def groups(report: Report, name: str = ROOT_JSON) -> Group:
    """The report's tests as kunit.py nests them, crash points under the test they ran in."""
    index = {t.id: t for t in report.tests if t.level not in POINT_LEVELS}
    hosted: dict[str, list[TestResult]] = {}
    for t in report.tests:
        if t.level in POINT_LEVELS:
            host = t.parent or ""
            while host and host not in index:
                host = host.rpartition(".")[0]
            below = t.id[len(host) + 1:].lstrip() if host else t.id  # 'case: running when ..'
            hosted.setdefault(host, []).append(replace(t, name=below))

    def group(name: str, test: TestResult | None, kids: list[TestResult]) -> Group:
        g = Group(name, test)
        for k in kids:
            sub = [index[c] for c in k.children if c in index] + hosted.get(k.id, [])
            g.members.append(group(k.name, k, sub) if sub else k)
        return g
    top = [t for t in report.tests if t.parent is None and t.level not in POINT_LEVELS]
    return group(name, None, top + hosted.get("", []))


def _misc(c: Counter[str]) -> dict[str, int]:
    """kunit_json.py's counts (kunit.py counts a parse error too; there are none here)."""
    return {"tests": sum(c[s] for s in JSON_STATUS), "passed": c["PASS"], "failed": c["FAIL"],
            "crashed": c["CRASH"], "skipped": c["SKIP"], "errors": 0}


def kernelci_json(report: Report) -> dict[str, Any]:
    """results.json: kunit_json.get_json_result()'s object for the report's tests."""
    def encode(g: Group) -> dict[str, Any]:
        return {"name": g.name,
                "sub_groups": [encode(m) for m in g.members if isinstance(m, Group)],
                "test_cases": [{"name": m.name, "status": JSON_STATUS[m.status]}
                               for m in g.members if not isinstance(m, Group)],
                "misc": _misc(g.counts()), **COMMON}
    return encode(groups(report))


def _failure(t: TestResult) -> tuple[str, str]:
    """(message, text) of a failed test: its first report or failure, then its reports,
    notes and diagnostics."""
    reports = [splat_line(s, n) for s, n in grouped(t.splats)]
    message = next(iter(reports + first_failure(t.diagnostics) + t.notes), "failed")
    return message, "\n".join(reports + t.notes + t.diagnostics)


def _case(suite: ET.Element, t: TestResult, classname: str) -> Counter[str]:
    """One <testcase>: <failure>, <error> (a crash) or <skipped>, else its diagnostics."""
    case = ET.SubElement(suite, "testcase", {"name": t.name, "classname": classname})
    if t.status in ("FAIL", "CRASH"):
        message, text = _failure(t)
        tag = "error" if t.status == "CRASH" else "failure"
        ET.SubElement(case, tag, {"message": message}).text = text
    elif t.status == "SKIP":
        ET.SubElement(case, "skipped", {"message": t.skip_reason})
    elif t.diagnostics:
        ET.SubElement(case, "system-out").text = "\n".join(t.diagnostics)
    return Counter([t.status])


def _suite(suite: ET.Element, g: Group, extra: list[TestResult]) -> Counter[str]:
    """Fill one <testsuite>; the cases written under it, by status."""
    c: Counter[str] = Counter()
    for m in g.members:
        if isinstance(m, Group):
            c += _suite(ET.SubElement(suite, "testsuite", {"name": m.name}), m, [])
        else:
            c += _case(suite, m, m.parent or g.name)
    own = g.test
    if own is not None and (own.splats or own.status in ("FAIL", "CRASH")
                            and not (c["FAIL"] or c["CRASH"])):
        c += _case(suite, own, own.id)  # its reports after its last subtest, a short plan
    for t in extra:
        c += _case(suite, t, ROOT_JUNIT)
    suite.attrib.update({"tests": str(sum(c[s] for s in JSON_STATUS)), "failures": str(c["FAIL"]),
                         "skipped": str(c["SKIP"]), "errors": str(c["CRASH"])})
    return c


def _outside(report: Report) -> list[TestResult]:
    """Cases for the reports outside any test: during boot, at shutdown."""
    out = []
    for where in ("boot", "shutdown"):
        splats = [s for s in report.splats if s.test.split(" ", 1)[0] == where]
        if splats:
            out.append(TestResult(id=where, name=where, path=[where], level=where,
                                  kunit_status="NONE", status="FAIL", line_no=None,
                                  splats=splats))
    return out


def junit_xml(report: Report) -> str:
    """results.xml: kunit_junit.py's nesting, with the report's statuses and reasons."""
    root = ET.Element("testsuite", {"name": ROOT_JUNIT})
    _suite(root, groups(report, ROOT_JUNIT), _outside(report))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_results(report: Report, results: Path) -> None:
    """Write results.ktap (the console's KTAP lines), results.xml and results.json, and
    name them in report.files."""
    files = {"ktap": ("results.ktap", "".join(f"{line}\n" for line in report.ktap)),
             "json": ("results.json", json.dumps(kernelci_json(report), indent=4) + "\n"),
             "junit": ("results.xml", junit_xml(report))}
    for key, (name, text) in files.items():
        (results / name).write_text(text)
        report.files[key] = str(results / name)


def report_json(report: Report) -> dict[str, Any]:
    """The report as summary.json holds it, with the commands that replay its failures or
    run what it never reached (write_summary adds its failure signatures)."""
    return {"profile": report.profile, "tree": report.tree, "base": report.base,
            "status": report.status, "verdict": report.verdict,
            "counts": vars(report.counts).copy(), "elapsed": round(report.elapsed, 3),
            "tests": [t.to_json() for t in report.tests],
            "splats": [s.to_json() for s in report.splats], "notes": report.notes,
            "expected_splats": [s.to_json() for s in report.expected],
            "console_log": report.console_log, "files": report.files,
            "replay": replay_hints(report), "stops": report.stops,
            "not_run": [n.to_json() for n in report.not_run],
            "not_run_hints": not_run_hints(report), "isolate": report.isolate,
            "bad_parameters": [p.to_json() for p in report.bad_parameters],
            "replay_env": report.replay_env}


def write_summary(report: Report, results: Path) -> tuple[Path, Path]:
    """Write results.ktap, .xml and .json, summary.json (the report and its failure
    signatures) and summary.txt."""
    results.mkdir(parents=True, exist_ok=True)
    write_results(report, results)
    js, txt = results / "summary.json", results / "summary.txt"
    report.files["summary"] = str(js)
    data = report_json(report)
    data["signatures"] = [s.to_json() for s in signatures(report)]
    write_json(js, data)
    txt.write_text(format_summary(report))
    return js, txt
