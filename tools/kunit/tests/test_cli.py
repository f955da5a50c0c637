"""cli: one-line errors with exit status 2, and the report command end to end."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cgkunit import console as cr
from cgkunit import cli
from cgkunit.common import Context
from cgkunit.profile import list_profiles
from conftest import DATA, KUNIT_DIR

REPO = KUNIT_DIR.parent.parent
ENTRY = KUNIT_DIR / "cgkunit.py"


def run_entry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ENTRY), *args], capture_output=True, text=True,
                          cwd="/", timeout=60)


@pytest.mark.parametrize("args,needle", [
    (["bogus"], "invalid choice: 'bogus'"),
    ([], "the following arguments are required: command"),
    (["run"], "the following arguments are required: --profile"),
    (["run", "--profile", "no-such-profile"], "unknown profile 'no-such-profile' (known: "),
    (["build", "--profile", "x", "--jobs", "many"], "invalid int value: 'many'"),
    (["run", "--profile", "x", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["module-run", "--kdir", "/no/such/kdir"], "KDIR=/no/such/kdir: not a directory"),
    (["module-run", "--kdir", "/", "--cycles", "0"], "CYCLES=0: want 1..1000"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    proc = run_entry(*args)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("cgkunit: error: ") and needle in lines[0]


def test_help_documents_exit_codes() -> None:
    proc = run_entry("--help")
    assert proc.returncode == 0
    assert "exit status:" in proc.stdout and "bisect maps 2 to 125" in proc.stdout
    run_help = run_entry("run", "--help")
    assert "0  pass" in run_help.stdout


def test_bad_kernel_src(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["--build-dir", str(tmp_path), "prepare", "--kernel-src", str(tmp_path / "nope")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"cgkunit: error: KERNEL_SRC={tmp_path / 'nope'}: does not exist"


def test_bad_kernel_args(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = (list_profiles(REPO) or ["x"])[0]
    code = cli.main(["--build-dir", str(tmp_path), "run", "--profile", name,
                     "--kernel-args", "a='unterminated"])
    assert code == 2
    assert "bad --kernel-args" in capsys.readouterr().err


def test_every_command_has_its_handler() -> None:
    """HANDLERS, the subcommand map, runs every command of the parser (deps runs in
    dispatch, before there is a project root); COMMAND_CHECKS only commands."""
    commands = set(cli._commands(cli.make_parser()))
    assert set(cli.HANDLERS) | {"deps"} == commands and "deps" not in cli.HANDLERS
    assert set(cli.COMMAND_CHECKS) <= commands


def test_check_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", "--list"]) == 0
    out = capsys.readouterr().out
    assert "oracle-lockdep\tum-lockdep\tcgroup_kunit.provoke=lockdep" in out


@pytest.mark.parametrize("log,code,word", [("01_all_pass.log", 0, "PASS"),
                                           ("03_kcsan.log", 1, "FAIL"),
                                           ("07_no_tests.log", 2, "NO-TESTS")])
def test_report_command(tmp_path: Path, capsys: pytest.CaptureFixture[str], log: str, code: int,
                        word: str) -> None:
    names = list_profiles(REPO)
    if not names:
        pytest.skip("no profiles in tools/kunit/profiles yet")
    results = tmp_path / "results" / names[0]
    results.mkdir(parents=True)
    shutil.copy(DATA / log, results / "console.log")
    assert cli.main(["--build-dir", str(tmp_path), "report", "--profile", names[0]]) == code
    out = capsys.readouterr().out
    assert out.startswith(f"cgkunit: {names[0]}: {word}")
    assert (results / "summary.json").is_file() and (results / "summary.txt").read_text() == out


def test_report_without_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = list_profiles(REPO)
    if not names:
        pytest.skip("no profiles in tools/kunit/profiles yet")
    assert cli.main(["--build-dir", str(tmp_path), "report", "--profile", names[0]]) == 2
    assert "no console log at" in capsys.readouterr().err


def test_isolate_option_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from cgkunit import pipeline
    from cgkunit import report as rp
    seen: list[pipeline.RunOptions] = []

    def fake_run(ctx: Context, opts: pipeline.RunOptions, printer: object = None) -> rp.Report:
        seen.append(opts)
        return cr.parse_console((DATA / "01_all_pass.log").read_text())
    monkeypatch.setattr(pipeline, "run_profile", fake_run)
    name = (list_profiles(REPO) or ["x"])[0]
    base = ["--build-dir", str(tmp_path), "run", "--profile", name]
    assert cli.main(base) == 0 and seen[-1].isolate is None  # the profile decides
    assert cli.main(base + ["--isolate", "suite"]) == 0 and seen[-1].isolate == "suite"
    assert cli.main(base + ["--isolate", "none"]) == 0 and seen[-1].isolate == ""
    monkeypatch.setenv("CGKUNIT_ISOLATE", "test")
    assert cli.main(base) == 0 and seen[-1].isolate == "test"
    assert cli.main(base + ["--isolate", "cases"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "cgkunit: error: --isolate (or CGKUNIT_ISOLATE) must be one of suite, test or none, "
        "got 'cases'")
    # check: the environment for every check, unless the check says otherwise
    assert cli.main(["--build-dir", str(tmp_path), "check", "--only", "bad-parameters"]) in (0, 1)
    assert seen[-1].isolate == "test" and seen[-1].results_tag == "check-bad-parameters"


def test_report_command_after_a_stop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    names = list_profiles(REPO)
    if not names:
        pytest.skip("no profiles in tools/kunit/profiles yet")
    results = tmp_path / "results" / names[0]
    results.mkdir(parents=True)
    shutil.copy(DATA / "deadlock_after_lockdep.log", results / "console.log")
    verdict = "stopped: silent 30 s after lockdep report (WARNING: inconsistent lock state)"
    (results / "exec.json").write_text(json.dumps({
        "verdict": verdict, "elapsed": 44.5, "filter": "cgroup_css_set.cset_shared_get_put",
        "stops": [{"rule": "silence", "reason": verdict[len("stopped: "):], "at": 43.5,
                   "report": "WARNING: inconsistent lock state", "line": 19, "boot": 1,
                   "boots": 1}]}))
    assert cli.main(["--build-dir", str(tmp_path), "report", "--profile", names[0]]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"cgkunit: {names[0]}: CRASH (run stopped: silent 30 s after lockdep report) in 44s"
    assert out[1] == ("  watchdog: stopped the kernel at 44s: silent 30 s after lockdep report "
                      "(WARNING: inconsistent lock state)")
    assert any(line.startswith("  NOT RUN cgroup_css_set: 5 more cases") for line in out)
