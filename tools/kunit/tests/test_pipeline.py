"""pipeline: replay targets from the Makefile, and the flow up to the boot without kernels."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from cgkunit import pipeline
from cgkunit import console as cr
from cgkunit import summary as sm
from cgkunit.common import Context, DriverError
from conftest import DATA
from test_tree import git, make_kernel, write_files

MAKEFILE = """CGKUNIT := python3 tools/kunit/cgkunit.py
run: deps
\t$(CGKUNIT) run --profile um-lockdep

kcsan: deps
\t$(CGKUNIT) run --profile x86_64-kcsan

test: deps pytest
\t$(CGKUNIT) run --profile um-lockdep
\t$(CGKUNIT) run --profile x86_64-kcsan
"""


def test_replay_hints_use_the_target() -> None:
    r = cr.parse_console((DATA / "03_kcsan.log").read_text())
    r.replay_target = "make kcsan"
    assert sm.replay_hints(r) == ["make kcsan KERNEL_ARGS=\"cgroup_kunit.seed=31337 "
                                  "cgroup_kunit.threads=2\" FILTER='cgroup_kunit_oracle.provoke_kcsan'"]
    r.replay_target = "python3 tools/kunit/cgkunit.py run --profile p"
    assert sm.replay_hints(r) == ["KERNEL_ARGS=\"cgroup_kunit.seed=31337 cgroup_kunit.threads=2\" "
                                  "FILTER='cgroup_kunit_oracle.provoke_kcsan' "
                                  "python3 tools/kunit/cgkunit.py run --profile p"]


def test_run_without_a_built_kernel_stops_before_booting(tmp_path: Path) -> None:
    kernel = make_kernel(tmp_path / "linux")
    repo = tmp_path / "repo"
    write_files(repo, {"kernel/BASE": "package=x\n", "kernel/series": "",
                       "lib/kunit-cgroup/Kconfig": "config CGROUP_KUNIT_TEST\n",
                       "tools/kunit/profiles/um-t.config": "#@ arch: um\nCONFIG_X=y\n",
                       ".kunitconfig": "CONFIG_KUNIT=y\n"})
    opts = pipeline.RunOptions(profile="um-t", no_build=True, kernel_src=str(kernel))
    with pytest.raises(DriverError, match="no kernel built for um-t"):
        pipeline.run_profile(Context(repo, tmp_path / "build"), opts)
    assert (tmp_path / "build" / "trees").is_dir()


FAKE_KUNIT = '''#!/usr/bin/env python3
import os, sys
args = sys.argv[1:]
if args[0] == "exec":
    print("[12:00:00] Starting KUnit Kernel (1/1)...")
    with open(os.environ["FAKE_CONSOLE"]) as f:
        for line in f:
            print(line, end="")
    with open(os.environ["FAKE_ARGS"], "w") as f:
        f.write("\\n".join(args))
else:
    sys.exit(f"the driver does not call kunit.py {args[0]}")
'''


def fake_run_setup(tmp_path: Path, fake_kunit: str, profile: str = "#@ arch: um\n",
                   repo_files: dict[str, str] | None = None) -> tuple[Path, Path, Path]:
    """(kernel, repo, build) for a run of profile um-t: a kernel tree whose kunit.py is
    fake_kunit, a repo with that profile (and repo_files), and a built image."""
    kernel = make_kernel(tmp_path / "linux")
    write_files(kernel, {"tools/testing/kunit/kunit.py": fake_kunit})
    git(kernel, "commit", "-q", "-am", "fake kunit.py")
    repo, build = tmp_path / "repo", tmp_path / "build"
    write_files(repo, {"kernel/BASE": "package=x\n", "kernel/series": "",
                       "lib/kunit-cgroup/Kconfig": "config CGROUP_KUNIT_TEST\n",
                       "tools/kunit/profiles/um-t.config": profile,
                       ".kunitconfig": "CONFIG_KUNIT=y\n", "Makefile": "run:\n\tx run --profile um-t\n",
                       **(repo_files or {})})
    write_files(build, {"out/um-t/linux": "elf"})
    return kernel, repo, build


@pytest.mark.parametrize("log,status", [("03_kcsan.log", "fail"), ("08_skipped.log", "pass")])
def test_run_end_to_end_with_a_fake_kunit_py(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str], log: str,
                                              status: str) -> None:
    kernel, repo, build = fake_run_setup(tmp_path, FAKE_KUNIT,
                                         "#@ arch: um\n#@ kernel_args: ncpus=4\n")
    monkeypatch.setenv("FAKE_CONSOLE", str(DATA / log))
    monkeypatch.setenv("FAKE_ARGS", str(tmp_path / "args"))
    opts = pipeline.RunOptions(profile="um-t", no_build=True, kernel_src=str(kernel),
                               kernel_args=["cgroup_kunit.seed=1"], filter_glob="cgroup_kunit_oracle*")
    r = pipeline.run_profile(Context(repo, build), opts)
    assert r.status == status
    results = build / "results" / "um-t"
    assert (results / "console.log").read_text().startswith("[12:00:00] Starting KUnit Kernel")
    # the results files are the driver's own, from its report of the console
    assert json.loads((results / "results.json").read_text())["name"] == "KUnit Test Group"
    assert (results / "results.ktap").read_text().startswith("KTAP version 1\n1..")
    assert ET.parse(results / "results.xml").getroot().get("failures") == \
        ("1" if status == "fail" else "0")
    assert (results / "summary.json").is_file()
    assert (results / "exec.json").is_file()
    args = (tmp_path / "args").read_text().splitlines()
    assert "--kernel_args=ncpus=4" in args and "--kernel_args=cgroup_kunit.seed=1" in args
    assert args[-1] == "cgroup_kunit_oracle*"
    out = capsys.readouterr().out
    assert out.startswith(f"cgkunit: um-t: {status.upper()}")
    if status == "fail":
        assert "KERNEL_ARGS=" in out and "python3 tools/kunit/cgkunit.py run --profile um-t" in out


def test_replay_of_a_run_on_kernel_src(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The replay line says which tree the run was on (KERNEL_SRC and the commit) and carries
    the run's other kernel arguments: replaying does not test the Debian base instead."""
    kernel, repo, build = fake_run_setup(tmp_path, FAKE_KUNIT)
    monkeypatch.setenv("FAKE_CONSOLE", str(DATA / "03_kcsan.log"))
    monkeypatch.setenv("FAKE_ARGS", str(tmp_path / "args"))
    opts = pipeline.RunOptions(profile="um-t", no_build=True, kernel_src=str(kernel),
                               kernel_args=["cgroup_kunit.seed=1", "cgroup_kunit.duration_ms=200",
                                            "loglevel=7"],
                               filter_glob="cgroup_kunit_oracle*")
    r = pipeline.run_profile(Context(repo, build), opts)
    sha = git(kernel, "rev-parse", "HEAD")
    want = (f"KERNEL_SRC={kernel} KERNEL_REF={sha} "
            "KERNEL_ARGS=\"cgroup_kunit.seed=31337 cgroup_kunit.threads=2 "
            "cgroup_kunit.duration_ms=200 loglevel=7\" FILTER='cgroup_kunit_oracle.provoke_kcsan' "
            "python3 tools/kunit/cgkunit.py run --profile um-t")
    assert sm.replay_hints(r) == [want]
    assert f"    {want}" in capsys.readouterr().out
    # and report, from the files, says the same
    again = pipeline.rereport(Context(repo, build), "um-t", build / "results" / "um-t")
    assert sm.replay_hints(again) == [want]
    assert json.loads((build / "results" / "um-t" / "summary.json").read_text())["replay"] == [want]


def test_replay_words_are_quoted() -> None:
    line = sm.replay_line("make run", ["cgroup_kunit.seed=5"], ["a=b c", "cgroup_kunit.seed=1"],
                          "s.c", sm.replay_env("/my linux", "v7.3"))
    assert line == ("KERNEL_SRC='/my linux' KERNEL_REF=v7.3 make run "
                    "KERNEL_ARGS=\"cgroup_kunit.seed=5 'a=b c'\" FILTER='s.c'")
