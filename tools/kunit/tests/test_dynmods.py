"""cgroup_migrate_dynmods in a boot of its own: which filters need that second boot and with
which glob, cgroup_kunit.dynmods=1 on its command line, and the two consoles merged into the
one report of the run (the recorded real UML console cut into the two boots it is now)."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from cgkunit import module_run as mr
from cgkunit import pipeline
from cgkunit import console as cr
from cgkunit import export
from cgkunit import report as rp
from cgkunit import run
from cgkunit.common import Context
from cgkunit.export import kernelci_json
from cgkunit.params import (DYNMODS_ON, DYNMODS_SUITE, MIGRATE, dynmods_cases,
                            suite_parameters)
from conftest import DATA
from test_pipeline import fake_run_setup
from test_run import prof
from test_tree import write_files

REPO = Path(__file__).resolve().parents[3]
CASES = dynmods_cases(REPO)
REAL = DATA / "real_um_all_pass.log"  # one boot that ran cgroup_migrate_dynmods itself


# --- the glob decision ---------------------------------------------------------------------------

@pytest.mark.parametrize("glob,alone", [
    ("", f"{DYNMODS_SUITE}*"),
    ("*", f"{DYNMODS_SUITE}*"),
    ("cgroup_*", f"{DYNMODS_SUITE}*"),
    ("cgroup_migrate*", f"{DYNMODS_SUITE}*"),
    ("cgroup_migrate_dynmods*", f"{DYNMODS_SUITE}*"),
    ("cgroup_migrate_dynmods", DYNMODS_SUITE),
    ("cgroup_migrate_dynmods.*", f"{DYNMODS_SUITE}.*"),
    ("cgroup_migrate*.migrate_everything", f"{DYNMODS_SUITE}.migrate_everything"),
    ("*.migrate_everything", f"{DYNMODS_SUITE}.migrate_everything"),
    ("*.migrate_[ei]*", f"{DYNMODS_SUITE}.migrate_[ei]*"),
    ("cgroup_migrate_?ynmods.migrate_idle", f"{DYNMODS_SUITE}.migrate_idle"),
    # what selects none of it: other suites, a case it does not have
    ("cgroup_migrate", None),
    ("cgroup_migrate.*", None),
    ("cgroup_migrate.migrate_idle", None),
    ("cgroup_rstat*", None),
    ("cgroup_kunit_oracle*", None),
    ("*.rstat_base_exact", None),
    ("cgroup_migrate_dynmods.rstat*", None),
    ("cgroup_migrate_dynmods.", None),
    ("cgroup_migrate_dynmods_reach", None),
    ("cgroup_reach", None),
])
def test_which_filters_select_the_dynmods_suite(glob: str, alone: str | None) -> None:
    assert CASES is not None and "migrate_everything" in CASES
    assert run.dynmods_filter(glob, CASES) == alone


def test_unknown_cases_may_match_any_case_glob() -> None:
    """Without migrate_kunit.c (another tree's suite) a case glob is not ruled out."""
    assert run.dynmods_filter("*.rstat_base_exact", None) == f"{DYNMODS_SUITE}.rstat_base_exact"
    assert run.dynmods_filter("cgroup_rstat*", None) is None
    assert dynmods_cases(Path("/nonexistent")) is None


def test_the_cases_come_from_migrate_kunit_c() -> None:
    text = (REPO / MIGRATE).read_text()
    assert CASES == re.findall(r"^\tCGK_CASE\((\w+)\),", text, re.M)
    assert len(CASES) == 8 and CASES[0] == "migrate_idle"
    # the parameter the driver sets is the one the suite declares, and its skip reason names it
    assert "dynmods" in suite_parameters(REPO)
    assert DYNMODS_ON in text and f'.name = "{DYNMODS_SUITE}"' in text


# --- the plan: which boots, with which kernel arguments ------------------------------------------

def test_the_main_boot_as_asked_then_the_dynmods_suite_alone() -> None:
    plan = run.boot_plan(["cgroup_kunit.seed=5"], "*.migrate_everything", "", CASES)
    assert plan == [
        run.Boot(("cgroup_kunit.seed=5",), "*.migrate_everything", "main"),
        run.Boot(("cgroup_kunit.seed=5", "cgroup_kunit.dynmods=1"),
                 "cgroup_migrate_dynmods.migrate_everything", "dynmods")]
    assert plan[0].describe() == "*.migrate_everything; cgroup_migrate_dynmods skips itself"
    assert plan[1].describe() == "cgroup_migrate_dynmods.migrate_everything, cgroup_kunit.dynmods=1"
    assert [b.filter_glob for b in run.boot_plan([], "", "", CASES)] == ["", f"{DYNMODS_SUITE}*"]


def test_one_boot_when_the_filter_leaves_the_suite_out() -> None:
    assert run.boot_plan(["x=1"], "cgroup_rstat*", "", CASES) == [run.Boot(("x=1",), "cgroup_rstat*")]


@pytest.mark.parametrize("glob,isolate", [
    ("cgroup_migrate_dynmods", ""), ("cgroup_migrate_dynmods.migrate_idle", ""),
    ("", "suite"), ("cgroup_migrate*", "test")])
def test_one_boot_with_dynmods_when_the_suite_runs_alone_anyway(glob: str, isolate: str) -> None:
    """The filter names only that suite (a replay), or kunit.py boots once per suite or test."""
    assert run.boot_plan(["a=b"], glob, isolate, CASES) == [run.Boot(("a=b", DYNMODS_ON), glob)]


@pytest.mark.parametrize("arg", ["cgroup_kunit.dynmods=1", "cgroup_kunit.dynmods=0",
                                 "cgroup-kunit.dynmods=y"])
def test_kernel_args_that_set_dynmods_get_one_boot_as_asked(arg: str) -> None:
    assert run.boot_plan([arg], "", "", CASES) == [run.Boot((arg,), "")]


def test_the_second_boot_has_dynmods_on_its_kunit_py_command_line() -> None:
    main, dyn = run.boot_plan(["cgroup_kunit.seed=5"], "cgroup_*", "", CASES)
    cmds = [run.exec_command(Path("/t"), prof(kernel_args=["ncpus=4"]), Path("/r"), Path("/b"),
                             b.kernel_args, b.filter_glob) for b in (main, dyn)]
    assert "--kernel_args=cgroup_kunit.dynmods=1" not in cmds[0] and cmds[0][-1] == "cgroup_*"
    assert [a for a in cmds[1] if a.startswith("--kernel_args=")] == [
        "--kernel_args=ncpus=4", "--kernel_args=cgroup_kunit.seed=5",
        "--kernel_args=cgroup_kunit.dynmods=1", "--kernel_args=cgroup_kunit.selfcheck=1"]
    assert cmds[1][-1] == f"{DYNMODS_SUITE}*"


def test_module_run_takes_dynmods() -> None:
    assert mr.module_args("dynmods=1 threads=4", REPO) == ["dynmods=1", "threads=4"]


# --- two recorded consoles, one report ---------------------------------------------------------------

SKIPPED = "favordynmods cannot be switched off again: runs only with cgroup_kunit.dynmods=1, " \
          "in a boot of its own"


def split_real_console() -> tuple[str, str]:
    """The recorded boot that ran cgroup_migrate_dynmods after everything before it, as the
    two boots of a run now: the main boot, where its cases skip as migrate_kunit.c skips them
    without dynmods=1 (no parameters, the reason on the case), and a boot of its own."""
    lines = REAL.read_text().splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.startswith("KTAP version 1"))
    first = next(i for i, ln in enumerate(lines) if ln == f"    # Subtest: {DYNMODS_SUITE}\n") - 1
    last = next(i for i, ln in enumerate(lines) if ln.startswith(f"ok 4 {DYNMODS_SUITE}"))
    cases = [m.groups() for ln in lines[first:last]
             if (m := re.match(r"^    ok (\d+) (\w+)$", ln))]
    skipped = [f"    KTAP version 1\n    # Subtest: {DYNMODS_SUITE}\n    # module: cgroup_kunit\n"
               f"    1..{len(cases)}\n"]
    skipped += [f"        KTAP version 1\n        # Subtest: {name}\n    # {name}.speed: slow\n"
                f"    ok {n} {name} # SKIP {SKIPPED}\n" for n, name in cases]
    skipped += [f"# {DYNMODS_SUITE}: pass:0 fail:0 skip:{len(cases)} total:{len(cases)}\n",
                f"# Totals: pass:0 fail:0 skip:{len(cases)} total:{len(cases)}\n",
                f"ok 4 {DYNMODS_SUITE} # SKIP \n"]
    main = "".join(lines[:first] + skipped + lines[last + 1:])
    alone = "".join(lines[:start] + ["KTAP version 1\n", "1..1\n"] + lines[first:last]
                    + [f"ok 1 {DYNMODS_SUITE}\n", "reboot: System halted\n"])
    return main, alone


def merged(tmp_path: Path, main_verdict: str = "completed",
           stops: tuple[list[run.Stop], list[run.Stop]] = ([], [])) -> run.ExecResult:
    main, alone = split_real_console()
    (tmp_path / "console.main.log").write_text(main)
    (tmp_path / "console.dynmods.log").write_text(alone)
    execs = [run.ExecResult(main_verdict, tmp_path / "console.main.log", 100.0, stops[0]),
             run.ExecResult("completed", tmp_path / "console.dynmods.log", 20.0, stops[1])]
    return run.join_boots(execs, 2, tmp_path / "console.log")


def statuses(report: rp.Report) -> list[tuple[str, str]]:
    return sorted((t.id, t.status) for t in report.tests)


def test_the_main_boot_alone_skips_the_dynmods_cases() -> None:
    main, _ = split_real_console()
    r = cr.parse_console(main)
    dyn = [t for t in r.tests if t.id.startswith(f"{DYNMODS_SUITE}.")]
    assert r.status == "pass" and len(dyn) == 7
    assert all(t.status == "SKIP" and t.skip_reason == SKIPPED and not t.children for t in dyn)


def test_two_consoles_merge_into_the_report_of_one_boot(tmp_path: Path) -> None:
    """The run's report equals that of the recorded boot that ran everything in one: the
    skipped copy of the dynmods suite gives way to the boot that ran it."""
    ex = merged(tmp_path)
    assert ex.verdict == "completed" and ex.elapsed == 120.0
    text = ex.console_log.read_text()
    assert text.count("Starting KUnit Kernel (1/2)...") == 1
    assert text.count("Starting KUnit Kernel (2/2)...") == 1
    assert "(1/1)" not in text
    report = cr.build_report(ex.console_log, ex.verdict)
    once = cr.parse_console(REAL.read_text())
    assert statuses(report) == statuses(once)
    assert vars(report.counts) == vars(once.counts)
    assert report.status == "pass" and not report.not_run and not report.notes
    ids = [t.id for t in report.tests]
    assert len(ids) == len(set(ids))
    for t in report.tests:
        assert t.boot == (2 if t.id.startswith(DYNMODS_SUITE) else 1), t.id
    # the run's own KTAP is the console's: both boots, the skips of the first one included
    ktap = [line for line in report.ktap if line == "KTAP version 1"]
    assert len(ktap) == 2 and f"    ok 1 migrate_idle # SKIP {SKIPPED}" in report.ktap
    # JSON and JUnit: the suite once, as the second boot ran it
    groups = [g for g in kernelci_json(report)["sub_groups"] if g["name"] == DYNMODS_SUITE]
    assert len(groups) == 1 and groups[0]["misc"]["passed"] == 21
    export.write_summary(report, tmp_path)
    root = ET.parse(tmp_path / "results.xml").getroot()
    suites = [s for s in root.iter("testsuite") if s.get("name") == DYNMODS_SUITE]
    assert len(suites) == 1 and suites[0].get("skipped") == "0" and suites[0].get("tests") == "21"
    assert root.get("failures") == "0"


def test_a_stop_in_the_second_boot_is_named_on_its_crash(tmp_path: Path) -> None:
    main, alone = split_real_console()
    cut = alone.index("        ok 2 4 threads")  # the kernel stopped in migrate_idle's 2nd instance
    (tmp_path / "console.main.log").write_text(main)
    (tmp_path / "console.dynmods.log").write_text(alone[:cut] + "Kernel panic - not syncing: x\n")
    stop = run.Stop(rule="panic", reason="panic (x)", at=9.0, report="x", line=5, boot=1, boots=1)
    ex = run.join_boots([run.ExecResult("completed", tmp_path / "console.main.log", 1.0),
                         run.ExecResult(stop.verdict, tmp_path / "console.dynmods.log", 1.0,
                                        [stop])], 2, tmp_path / "console.log")
    assert ex.verdict == stop.verdict and (ex.stops[0].boot, ex.stops[0].boots) == (2, 2)
    write_files(tmp_path, {"exec.json": json.dumps({"stops": [s.to_json() for s in ex.stops]})})
    report = cr.build_report(ex.console_log, ex.verdict)
    [crash] = [t for t in report.tests if t.level == "crash"]
    assert crash.boot == 2 and crash.parent == f"{DYNMODS_SUITE}.migrate_idle"
    assert any("(boot 2 of 2)" in n for n in crash.notes)
    assert report.status == "crash"
    # the first boot's skipped copy of the cases never reached stays: they did not run
    skipped = {t.id for t in report.tests if t.status == "SKIP"}
    assert f"{DYNMODS_SUITE}.migrate_everything" in skipped
    assert f"{DYNMODS_SUITE}.migrate_idle" not in skipped


def test_a_second_boot_that_never_started_is_not_run(tmp_path: Path) -> None:
    main, _ = split_real_console()
    (tmp_path / "console.main.log").write_text(main)
    ex = run.join_boots([run.ExecResult("completed", tmp_path / "console.main.log", 1.0)], 2,
                        tmp_path / "console.log")
    report = cr.build_report(ex.console_log, ex.verdict)
    assert [n.describe() for n in report.not_run] == [
        "1 more kunit.py boot never started (after boot 1 of 2)"]


# --- exec_tests: the boots, their consoles and exec.json --------------------------------------------

def fake_boots(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
               verdicts: list[str]) -> list[tuple[list[str], str]]:
    """exec_tests with a built image and watch() replaced by boots ending in verdicts that
    print the two recorded halves; (command, label) of each."""
    image = tmp_path / "linux"
    image.write_text("")
    monkeypatch.setattr(run, "kernel_image", lambda *a, **k: image)
    consoles = split_real_console()
    calls: list[tuple[list[str], str]] = []

    def fake_watch(cmd: list[str], console: Path, label: str, **kw: object) -> run.ExecResult:
        calls.append((cmd, label))
        dynmods = f"--kernel_args={DYNMODS_ON}" in cmd
        console.write_text("[12:00:00] Starting KUnit Kernel (1/1)...\n" + consoles[dynmods])
        return run.ExecResult(verdict=verdicts[len(calls) - 1], console_log=console, elapsed=1.0)
    monkeypatch.setattr(run, "watch", fake_watch)
    return calls


def test_exec_tests_boots_twice_and_keeps_both_consoles(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    calls = fake_boots(monkeypatch, tmp_path, ["completed", "boot-timeout", "completed"])
    results = tmp_path / "results"
    write_files(results, {"console.dynmods.log": "an earlier run"})
    r = run.exec_tests(tmp_path, prof(), REPO, tmp_path, results, ["cgroup_kunit.seed=5"], "cgroup_*")
    assert r.verdict == "completed" and len(calls) == 3
    assert [label for _, label in calls] == ["running um-p (boot 1 of 2)"] + \
        ["running um-p (boot 2 of 2)"] * 2
    assert sorted(p.name for p in results.iterdir()) == [
        "console.dynmods.boot-timeout-1.log", "console.dynmods.log", "console.log",
        "console.main.log", "exec.json"]
    joined = (results / "console.log").read_text()
    assert joined.startswith("[12:00:00] Starting KUnit Kernel (1/2)...\n")
    assert "[12:00:00] Starting KUnit Kernel (2/2)...\n" in joined
    main = (results / "console.main.log").read_text()
    assert main.startswith("[12:00:00] Starting KUnit Kernel (1/1)")
    info = run.read_exec_info(results)
    assert info["kernel_args"] == ["cgroup_kunit.seed=5"] and info["filter"] == "cgroup_*"
    boots = info["boots"]
    assert isinstance(boots, list) and [b["name"] for b in boots] == ["main", "dynmods"]
    assert boots[1]["kernel_args"] == ["cgroup_kunit.seed=5", DYNMODS_ON]
    assert boots[1]["filter"] == f"{DYNMODS_SUITE}*" and boots[1]["console"] == "console.dynmods.log"
    assert info["boot_retries"] == [{"verdict": "boot-timeout", "elapsed": 1.0,
                                     "console": "console.dynmods.boot-timeout-1.log"}]
    err = capsys.readouterr().err
    assert "boot 1 of 2: cgroup_*; cgroup_migrate_dynmods skips itself" in err
    assert "boot 2 of 2: cgroup_migrate_dynmods*, cgroup_kunit.dynmods=1" in err
    report = cr.build_report(results / "console.log", r.verdict)
    assert statuses(report) == statuses(cr.parse_console(REAL.read_text()))


def test_no_second_boot_after_a_kernel_that_never_reached_kunit(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    calls = fake_boots(monkeypatch, tmp_path, ["boot-timeout", "boot-timeout"])
    results = tmp_path / "results"
    r = run.exec_tests(tmp_path, prof(), REPO, tmp_path, results)
    assert r.verdict == "boot-timeout" and len(calls) == 2  # boot 1 and its retry
    boots = run.read_exec_info(results)["boots"]
    assert isinstance(boots, list) and [b["name"] for b in boots] == ["main"]


# --- the whole run, with a fake kunit.py -----------------------------------------------------------

FAKE_KUNIT = '''#!/usr/bin/env python3
import os, sys
args = sys.argv[1:]
dynmods = "--kernel_args=cgroup_kunit.dynmods=1" in args
with open(os.environ["FAKE_ARGS"], "a") as f:
    f.write(" ".join(args) + "\\n")
print("[12:00:00] Starting KUnit Kernel (1/1)...")
with open(os.environ["FAKE_DYNMODS" if dynmods else "FAKE_MAIN"]) as f:
    print(f.read(), end="")
'''


def test_run_profile_covers_the_dynmods_suite_in_a_boot_of_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    kernel, repo, build = fake_run_setup(
        tmp_path, FAKE_KUNIT, repo_files={str(MIGRATE): (REPO / MIGRATE).read_text()})
    main, alone = split_real_console()
    write_files(tmp_path, {"main.log": main, "dynmods.log": alone})
    monkeypatch.setenv("FAKE_MAIN", str(tmp_path / "main.log"))
    monkeypatch.setenv("FAKE_DYNMODS", str(tmp_path / "dynmods.log"))
    monkeypatch.setenv("FAKE_ARGS", str(tmp_path / "args"))
    r = pipeline.run_profile(Context(repo, build), pipeline.RunOptions(
        profile="um-t", no_build=True, kernel_src=str(kernel), filter_glob="cgroup_m*"))
    assert r.status == "pass"
    first, second = (tmp_path / "args").read_text().splitlines()
    assert "cgroup_kunit.dynmods=1" not in first and first.endswith(" cgroup_m*")
    assert "--kernel_args=cgroup_kunit.dynmods=1" in second and second.endswith(f" {DYNMODS_SUITE}*")
    results = build / "results" / "um-t"
    kept = {p.name for p in results.iterdir()}
    assert {"console.log", "console.main.log", "console.dynmods.log"} <= kept
    data = json.loads((results / "results.json").read_text())
    assert [g["name"] for g in data["sub_groups"]].count(DYNMODS_SUITE) == 1
    out = capsys.readouterr().out
    assert out.startswith("cgkunit: um-t: PASS")
    # the report of an earlier run, again from its files: the same
    again = pipeline.rereport(Context(repo, build), "um-t", results)
    assert statuses(again) == statuses(r)
