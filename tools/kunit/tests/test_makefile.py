"""The Makefile passes its variables to the driver through the environment, as typed (issue
31): `$(shell ...)`, `$(...)`, `;` and `#` in any of them reach the driver as text and
nothing runs; no recipe holds a user's value; the driver's first command (make deps) checks
every variable against what the goals run, before anything is installed, fetched or built.

make runs for real here, with PYTHON a stub that records each driver command and its
environment: `deps` is the real driver (its package installation stubbed out), every other
command only records itself (no kernel is fetched, built or booted)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cgkunit import cli
from conftest import KUNIT_DIR

REPO = KUNIT_DIR.parent.parent
MAKEFILE = (REPO / "Makefile").read_text()
TARGETS = ["run", "kcsan", "kasan", "lockdep-x86", "check", "module", "module-run", "bench",
           "coverage", "reach", "stress", "bisect", "bisect-selftest", "mbox", "series-check", "test"]
VARIABLES = ["KERNEL_SRC", "KERNEL_REF", "KERNEL_ARGS", "FILTER", "PROFILE", "RUNS", "SEED",
             "UNTIL_FAIL", "FROM", "GOOD", "BAD", "SIGNATURE", "REPS", "DURATION_MS", "ROUNDS",
             "VCPUS", "DEPTH", "ONLY", "CYCLES", "MODULE_ARGS", "KDIR", "CGKUNIT_ACCEL",
             "CGKUNIT_BUILD", "CGKUNIT_ISOLATE", "CGKUNIT_UNPINNED", "CGKUNIT_WAIT_LOCK",
             "CGKUNIT_APT_MIRROR"]

STUB = '''#!{python}
import json, os, sys
with open(os.environ["STUB_LOG"], "a") as f:
    f.write(json.dumps({{"argv": sys.argv[2:], "env": dict(os.environ)}}) + "\\n")
if sys.argv[2:3] == ["deps"]:
    sys.path.insert(0, {kunit!r})
    from cgkunit import cli, deps
    deps.ensure_deps = lambda *a, **k: []
    sys.exit(cli.main(sys.argv[2:]))
'''

make_missing = shutil.which("make") is None


@pytest.fixture
def stub(tmp_path: Path) -> dict[str, Path]:
    exe = tmp_path / "python-stub"
    exe.write_text(STUB.format(python=os.path.realpath(os.sys.executable), kunit=str(KUNIT_DIR)))
    exe.chmod(0o755)
    return {"exe": exe, "log": tmp_path / "calls.jsonl", "build": tmp_path / "build",
            "tmp": tmp_path}


def make(stub: dict[str, Path], *args: str, env: dict[str, str] | None = None,
         dry: bool = False) -> subprocess.CompletedProcess[str]:
    """make -C <repo> args with PYTHON the stub (a clean environment: none of the variables
    unless env says)."""
    base = {k: v for k, v in os.environ.items()
            if k not in VARIABLES and not k.startswith(("MAKE", "MFLAGS", "CGKUNIT_"))}
    full = {**base, "STUB_LOG": str(stub["log"]), "CGKUNIT_BUILD": str(stub["build"]),
            **(env or {})}
    cmd = ["make", "-s", "-C", str(REPO), *(["-n"] if dry else []), *args,
           f"PYTHON={stub['exe']}"]
    return subprocess.run(cmd, capture_output=True, text=True, env=full, cwd=stub["tmp"],
                          timeout=120, stdin=subprocess.DEVNULL)


def calls(stub: dict[str, Path]) -> list[dict[str, Any]]:
    if not stub["log"].exists():
        return []
    return [json.loads(line) for line in stub["log"].read_text().splitlines()]


def hostile(var: str, marker: Path) -> str:
    """A value that runs `touch` if make or a shell ever reads it as code, and that make
    would change if it expanded it."""
    return f"$(shell touch {marker}-{var}) $(x) ${{y}} $$z {var};touch {marker}-sh-{var} #c"


# --- the Makefile's text ----------------------------------------------------------------------

def test_no_recipe_references_a_variable() -> None:
    """Recipes hold no user value: only $(CGKUNIT) / $(PYTHON) and fixed words."""
    for line in MAKEFILE.splitlines():
        if line.startswith("\t"):
            refs = set(re.findall(r"\$\(([A-Za-z_]+)", line))
            assert refs <= {"CGKUNIT", "PYTHON"}, line


def test_every_driver_variable_is_passed_through() -> None:
    listed = re.search(r"^CGKUNIT_VARS := ((?:.*\\\n)*.*)$", MAKEFILE, re.M)
    assert listed is not None
    assert sorted(listed.group(1).replace("\\", " ").split()) == sorted(VARIABLES)
    # and every variable a driver option reads is one of them
    options = {v for p in cli._commands(cli.make_parser()).values() for v in p.env_vars}
    assert options <= set(VARIABLES)


# --- make, for real ---------------------------------------------------------------------------

@pytest.mark.skipif(make_missing, reason="make not installed")
@pytest.mark.parametrize("origin", ["command line", "environment"])
def test_values_reach_the_driver_as_text(stub: dict[str, Path], origin: str) -> None:
    marker = stub["tmp"] / "ran"
    values = {var: hostile(var, marker) for var in VARIABLES}
    args = [f"{k}={v}" for k, v in values.items()] if origin == "command line" else []
    proc = make(stub, "stress", *args, env=values if origin == "environment" else None)
    seen = calls(stub)
    assert [c["argv"] for c in seen] == [["deps"]]  # the driver refused: nothing else ran
    assert proc.returncode == 2
    err = proc.stderr.splitlines()
    assert err[0].startswith("cgkunit: error: make stress: ") and "Traceback" not in proc.stderr
    env = seen[0]["env"]
    assert {k: env.get(k) for k in VARIABLES} == values
    assert not list(stub["tmp"].glob("ran*")) and not (REPO / "F").exists()
    # nor can the kernel's make, run by kunit.py, read them from MAKEFLAGS
    assert "KERNEL_ARGS" not in env.get("MAKEFLAGS", "")


@pytest.mark.skipif(make_missing, reason="make not installed")
@pytest.mark.parametrize("target", TARGETS)
def test_dry_run_shows_no_value(stub: dict[str, Path], target: str) -> None:
    marker = stub["tmp"] / "ran"
    proc = make(stub, target, *[f"{v}={hostile(v, marker)}" for v in VARIABLES], dry=True)
    assert proc.returncode == 0, proc.stderr
    assert "$(x)" not in proc.stdout and "touch" not in proc.stdout and ";" not in proc.stdout
    assert not list(stub["tmp"].glob("ran*")) and not calls(stub)


@pytest.mark.skipif(make_missing, reason="make not installed")
@pytest.mark.parametrize("target,assign,message", [
    ("stress", "PROFILE=nope; touch F #", "unknown profile 'nope; touch F #'"),
    ("stress", "UNTIL_FAIL=maybe", "UNTIL_FAIL=maybe: want 1 or 0 (yes/no, true/false)"),
    ("stress", "RUNS=many", "invalid int value: 'many' (or from $RUNS)"),
    ("run", "FILTER=$(x)", "bad --filter (or FILTER) '$(x)': '$' is not part of a KUnit filter glob"),
    ("run", "KERNEL_ARGS=cgroup_kunit.seed=1;", "cgroup_kunit.seed=1;: the suite wants an unsigned"),
    ("run", "PROFILE=x86_64-kasan", "make run: PROFILE='x86_64-kasan' does not apply: it runs "
                                    "cgkunit.py run --profile um-lockdep, which sets --profile "
                                    "itself; unset PROFILE (make kasan runs x86_64-kasan)"),
    ("kcsan", "RUNS=3", "make kcsan: RUNS='3' does not apply: it runs cgkunit.py run --profile "
                        "x86_64-kcsan, which does not read it; unset RUNS"),
    ("check", "FILTER=cgroup_rstat*", "make check: FILTER='cgroup_rstat*' does not apply: it runs "
                                      "cgkunit.py check, which does not read it; unset FILTER "
                                      "(each check of tools/kunit/checks.json sets its own)"),
    ("check", "KERNEL_ARGS=cgroup_kunit.seed=1", "make check: KERNEL_ARGS="),
    ("check", "ONLY=no-such-check", "no check named 'no-such-check'"),
    ("test", "FILTER=cgroup_rstat*", "make test: FILTER='cgroup_rstat*' does not apply: it runs "
                                     "cgkunit.py module --profile um-lockdep"),
    ("bench", "REPS=0", "--reps must be in 1..50, got 0"),
    ("module-run", "MODULE_ARGS=threads=65", "MODULE_ARGS: threads=65: the suite wants 1..64"),
    ("series-check", "FROM=0999", "FROM=0999: no patch of kernel/series starts with it"),
    ("bisect", "GOOD=", "GOOD (--good) is required"),
    ("mbox", "KERNEL_SRC=/tmp", "make mbox: KERNEL_SRC='/tmp' does not apply"),
])
def test_bad_values_stop_make_at_deps(stub: dict[str, Path], target: str, assign: str,
                                      message: str) -> None:
    """One line, exit status 2, before anything is installed or run: only `deps` ran."""
    proc = make(stub, target, assign)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("make")]
    assert len(lines) == 1 and lines[0].startswith("cgkunit: error: "), proc.stderr
    assert message in lines[0]
    assert [c["argv"] for c in calls(stub)] == [["deps"]]
    assert not (REPO / "F").exists() and not stub["build"].exists()


@pytest.mark.skipif(make_missing, reason="make not installed")
def test_good_values_reach_the_command(stub: dict[str, Path]) -> None:
    proc = make(stub, "stress", "PROFILE=um-lockdep", "RUNS=3", "SEED=5", "UNTIL_FAIL=no",
                "FILTER=cgroup_rstat.*", "KERNEL_ARGS=cgroup_kunit.threads=4")
    assert proc.returncode == 0, proc.stderr
    seen = calls(stub)
    assert [c["argv"] for c in seen] == [["deps"], ["stress"]]
    env = seen[1]["env"]
    # the driver reads them as its options' defaults: UNTIL_FAIL=no is no
    saved = {k: os.environ.get(k) for k in VARIABLES}
    try:
        os.environ.update({k: env[k] for k in VARIABLES if k in env})
        args = cli.make_parser().parse_args(["stress"])
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    assert (args.profile, args.runs, args.seed, args.until_fail, args.filter, args.kernel_args) \
        == ("um-lockdep", 3, 5, False, "cgroup_rstat.*", "cgroup_kunit.threads=4")


@pytest.mark.parametrize("text,value", [("1", True), ("yes", True), ("TRUE", True), ("0", False),
                                        ("no", False), ("false", False), ("", False)])
def test_until_fail_words(monkeypatch: pytest.MonkeyPatch, text: str, value: bool) -> None:
    monkeypatch.setenv("UNTIL_FAIL", text)
    assert cli.make_parser().parse_args(["stress"]).until_fail is value
    assert cli.make_parser().parse_args(["stress", "--until-fail"]).until_fail is True
    assert cli.make_parser().parse_args(["stress", "--until-fail", "no"]).until_fail is False


@pytest.mark.skipif(make_missing, reason="make not installed")
def test_bench_keeps_its_variables_and_defaults(stub: dict[str, Path]) -> None:
    proc = make(stub, "bench", "REPS=7", "DURATION_MS=500", "ROUNDS=2", "VCPUS=2",
                "DEPTH=5", "ONLY=rstat")
    assert proc.returncode == 0, proc.stderr
    env = calls(stub)[-1]["env"]
    assert calls(stub)[-1]["argv"] == ["bench"]
    assert [env[k] for k in ("REPS", "DURATION_MS", "ROUNDS", "VCPUS", "DEPTH", "ONLY")] == \
        ["7", "500", "2", "2", "5", "rstat"]
    assert "help" not in MAKEFILE.split("\nbench:", 1)[1].split("\n\n", 1)[0]


@pytest.mark.skipif(make_missing, reason="make not installed")
def test_ci_run_calls_exactly_make_test() -> None:
    text = (REPO / ".ci" / "run").read_text()
    assert text.strip().splitlines()[-1] == "exec make test"
