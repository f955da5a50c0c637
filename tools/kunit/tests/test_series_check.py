"""series-check: every commit of a synthetic series checked out, hooked and "built" in the
private clone, with the build (kunit.py build) and the boot (kunit.py exec) replaced by fakes:
the build writes what kbuild would (the image, built-in.a's saved command, a build.log with
errors), the boot serves a recorded console. No kernel is built or booted."""
from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from cgkunit import cli, commits, pipeline
from cgkunit import console as cr
from cgkunit import export
from cgkunit import fixes as fx
from cgkunit import report as rp
from cgkunit import series_check as sc
from cgkunit.common import Context, DriverError
from cgkunit.params import draw_seeds
from cgkunit.tree import MAKEFILE_LINE, PreparedTree, prepare_tree, series_names
from conftest import DATA, KUNIT_DIR
from test_tree import UCOUNT, edit_line, git, make_kernel, make_patch, write_files

REPO = KUNIT_DIR.parent.parent
ENTRY = KUNIT_DIR / "cgkunit.py"
PASS_LOG, LEAK_LOG = "real_um_all_pass.log", "real_um_leaked_reference.log"
HEADER = "include/linux/cgroup_kunit.h"
USER_NS = "include/linux/user_namespace.h"
CGROUP_C = "int cgroup_init(void) { return 0; }\n"
HARNESS = ("module_param_cb(seed, &seed_ops, &seed_param, 0444);\n"
           "module_param_cb(threads, &threads_ops, &threads_param, 0444);\n"
           "module_param_cb(duration_ms, &duration_ops, &duration_param, 0444);\n")
# The suite's Makefile: its objects by Kconfig symbol, which the fake build reads as kbuild does
MAKEFILE = ("obj-$(CONFIG_CGROUP_KUNIT_TEST) += cgroup_kunit.o\n"
            "cgroup_kunit-y := harness.o oracle_kunit.o\n"
            "cgroup_kunit-$(CONFIG_CGROUP_UCOUNT_KUNIT_TEST) += ucount_kunit.o\n"
            "cgroup_kunit-$(CONFIG_CGROUP_MIGRATE_KUNIT_TEST) += migrate_kunit.o victims.o "
            "hierarchy.o\n")
UCOUNT_HOOKS = ("bool ucounts_nr_hashed_for_uid(void);\nbool ucounts_escrow_read_for_test(void);\n"
                "unsigned long ucounts_shared_writes_for_test(void);\n")
CGROUP_HOOKS = ("int cgroup_create_for_test(void);\nenum { CGROUP_FORK_TEST_USER };\n"
                "int cgroup_subtree_control_write_for_test(void);\n")
FIRST_ERROR = "kernel/cgroup/cgroup.c:1:1: error: unknown type name 'BROKEN'"
LAST_ERROR = "kernel/cgroup/cgroup.c:2:1: error: expected ';' at end of input"
SAVED_CMD = ('savedcmd_lib/kunit-cgroup/built-in.a := rm -f lib/kunit-cgroup/built-in.a;  printf '
             '"lib/kunit-cgroup/%s " {} | xargs ar cDPrST lib/kunit-cgroup/built-in.a\n')

# The patches a synthetic series is made of: name -> (edits, what they apply on).
PATCHES: dict[str, tuple[dict[str, str], dict[str, str] | None]] = {
    "hooks": ({HEADER: UCOUNT_HOOKS}, None),
    "more-hooks": ({HEADER: UCOUNT_HOOKS + CGROUP_HOOKS}, {HEADER: UCOUNT_HOOKS}),
    "break": ({"kernel/cgroup/cgroup.c": "BROKEN\n" + CGROUP_C}, None),
    "fix": ({"kernel/cgroup/cgroup.c": CGROUP_C}, {"kernel/cgroup/cgroup.c": "BROKEN\n" + CGROUP_C}),
    "leak": ({"kernel/ucount.c": edit_line(UCOUNT, 240, "LEAK")}, None),
    "leak-fixed": ({"kernel/ucount.c": UCOUNT}, {"kernel/ucount.c": edit_line(UCOUNT, 240, "LEAK")}),
    "note": ({"Makefile": "all:\n\t@true\n"}, None),
}


def make_series(tmp: Path, kinds: list[str]) -> dict[str, Any]:
    """A kernel, a project whose kernel/series is one patch of each kind in order, and a
    build root."""
    kernel = make_kernel(tmp / "linux")
    # the patches edit the hooks' header (make_patch adds no new file); the base has the
    # inc_rlimit_get_ucounts() of the series
    write_files(kernel, {HEADER: "", USER_NS: "bool inc_rlimit_get_ucounts(struct ucounts *u, "
                                              "bool override_rlimit, unsigned long limit);\n"})
    git(kernel, "add", HEADER, USER_NS)
    git(kernel, "commit", "-q", "-m", "an empty cgroup_kunit.h")
    repo, build = tmp / "repo", tmp / "build"
    names = []
    for i, kind in enumerate(kinds, 1):
        edits, before = PATCHES[kind]
        path = make_patch(kernel, tmp / "work", tmp / "made", edits, f"{kind} change", before)
        name = f"{i:04d}-{kind}.patch"
        write_files(repo, {f"kernel/patches/{name}": path.read_text()})
        names.append(name)
    write_files(repo, {"kernel/BASE": "package=x\n", "kernel/series": "".join(f"{n}\n" for n in names),
                      "lib/kunit-cgroup/Kconfig": "config CGROUP_KUNIT_TEST\n",
                      "lib/kunit-cgroup/harness.c": HARNESS,
                      "lib/kunit-cgroup/Makefile": MAKEFILE,
                      "tools/kunit/profiles/um-lockdep.config":
                          "#@ arch: um\n#@ kernel_args: seccomp=on ncpus=4\n",
                      ".kunitconfig": "CONFIG_KUNIT=y\n"})
    build.mkdir()
    return {"kernel": kernel, "repo": repo, "build": build, "names": names}


class Fakes:
    """kunit.py build and exec replaced: what they saw, what they did."""

    def __init__(self) -> None:
        self.built: list[str] = []                 # commits built, in order
        self.kconfig: list[list[str]] = []         # the --kconfig_add words of each build
        self.boots: list[tuple[str, list[str], str]] = []  # (commit, kernel args, filter)

    def build(self, tree: Path, profile: Any, repo: Path, build_root: Path, jobs: int | None = None,
              *, out: Path | None = None, kconfig_add: Any = ()) -> float:
        """kunit.py build: the suite must be hooked in; a tree whose cgroup.c says BROKEN fails
        with two errors, else the image and the command of built-in.a with the objects of
        the suite's Makefile whose symbols kconfig_add does not turn off."""
        assert out is not None and out.name == "um-lockdep+series-check"
        assert (tree / "lib/kunit-cgroup/harness.c").is_file()
        assert MAKEFILE_LINE in (tree / "lib/Makefile").read_text()
        self.built.append(git(tree, "rev-parse", "HEAD"))
        self.kconfig.append(list(kconfig_add))
        out.mkdir(parents=True, exist_ok=True)
        if "BROKEN" in (tree / "kernel/cgroup/cgroup.c").read_text():
            (out / "build.log").write_text(f"  CC      kernel/cgroup/cgroup.o\n{FIRST_ERROR}\n"
                                           f"{LAST_ERROR}\nmake[3]: *** Error 1\n")
            raise DriverError(f"build of um-lockdep failed: {LAST_ERROR}; see {out / 'build.log'}")
        objects = []
        for line in (tree / "lib/kunit-cgroup/Makefile").read_text().splitlines():
            m = re.match(r"cgroup_kunit-(y|\$\(CONFIG_(\w+)\)) [:+]= (.*)", line)
            if m and f"CONFIG_{m[2]}=n" not in kconfig_add:
                objects += m[3].split()
        write_files(out, {"linux": "elf", "build.log": "  LD      linux\n",
                          "lib/kunit-cgroup/.built-in.a.cmd": SAVED_CMD.format(" ".join(objects))})
        return 1.0

    def boot(self, ctx: Context, prof: Any, tree: PreparedTree, base: str, results: Path,
             kernel_args: list[str], filter_glob: str, *, shim: Path | None,
             out: Path | None = None, echo: bool = False, isolate: str | None = None) -> rp.Report:
        """kunit.py exec: the recorded console of a leaking kernel where ucount.c says LEAK, of
        a passing one elsewhere, with the seed of the kernel arguments; the report as
        pipeline.boot_and_report makes it."""
        assert (tree.path / "lib/kunit-cgroup/harness.c").is_file() and shim is None
        commit = git(tree.path, "rev-parse", "HEAD")
        assert commit == tree.head_commit
        self.boots.append((commit, list(kernel_args), filter_glob))
        log = LEAK_LOG if "LEAK" in (tree.path / "kernel/ucount.c").read_text() else PASS_LOG
        if "cgroup_kunit.threads=99" in kernel_args:
            log = "11_bad_parameters.log"
        seed = next(a.split("=")[1] for a in kernel_args if a.startswith("cgroup_kunit.seed="))
        text = (DATA / log).read_text(errors="backslashreplace")
        results.mkdir(parents=True, exist_ok=True)
        (results / "console.log").write_text(re.sub(r"cgroup_kunit: seed=\d+",
                                                    f"cgroup_kunit: seed={seed}", text))
        report = cr.build_report(results / "console.log", "completed", profile=prof.name,
                                 tree=f"{tree.path} @ {commit[:12]}", base=base, elapsed=2.0)
        export.write_summary(report, results)
        return report


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Fakes:
    f = Fakes()
    monkeypatch.setattr(commits, "build_kernel", f.build)
    monkeypatch.setattr(pipeline, "boot_and_report", f.boot)
    return f


def use_series(monkeypatch: pytest.MonkeyPatch, env: dict[str, Any]) -> None:
    """pipeline.prepare: the prepared tree of the synthetic kernel and series (no fetch)."""
    def prepare(ctx: Context, kernel_src: str | None, *a: Any) -> tuple[PreparedTree, str]:
        assert kernel_src is None
        return prepare_tree(ctx.repo, ctx.build, None, str(env["kernel"])), "synthetic base"
    monkeypatch.setattr(pipeline, "prepare", prepare)


def series(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kinds: list[str]) -> dict[str, Any]:
    env = make_series(tmp_path, kinds)
    use_series(monkeypatch, env)
    return env


def check(env: dict[str, Any], **kw: Any) -> int:
    return sc.run_series_check(Context(env["repo"], env["build"]), sc.SeriesCheckOptions(**kw),
                               rng=random.Random(5))


def dest_of(env: dict[str, Any]) -> Path:
    return Path(env["build"]) / "results" / "um-lockdep+series-check"


def data_of(env: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((dest_of(env) / "series-check.json").read_text())
    return data


def junit_of(env: dict[str, Any]) -> ET.Element:
    return ET.parse(dest_of(env) / "series-check.xml").getroot()


def checked(tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
            kinds: list[str], code: int) -> tuple[dict[str, Any], str, str, dict[str, Any]]:
    """series-check over a series of kinds, which must exit with code: (the project, stdout,
    stderr, series-check.json)."""
    env = series(tmp, monkeypatch, kinds)
    assert check(env) == code
    out, err = capsys.readouterr()
    return env, out, err, data_of(env)


def row_of(out: str, name: str) -> list[str]:
    """The table's row of a commit, split into its cells."""
    return next(line for line in out.splitlines() if f" {name} " in line).split()


def prepared(env: dict[str, Any]) -> Path:
    return next((Path(env["build"]) / "trees").iterdir())


def counts(log: str) -> dict[str, int]:
    return vars(cr.build_report(DATA / log, "completed").counts)


# --- whole runs ---------------------------------------------------------------------------------

def test_every_commit_builds_and_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        fakes: Fakes, capsys: pytest.CaptureFixture[str]) -> None:
    env, out, err, data = checked(tmp_path, monkeypatch, capsys, ["hooks", "note", "more-hooks"], 0)
    names = ["base", *env["names"]]
    assert [c["name"] for c in data["commits"]] == names and data["planned"] == names
    assert data["complete"] and data["result"] == {"ok": True, "checked": 4, "planned": 4,
                                                   "failed": [], "exit": 0}
    tree = prepared(env)
    expect = [git(tree, "rev-parse", "cgkunit-base")] + \
        [git(tree, "rev-parse", f"cgkunit-suite~{n}") for n in (3, 2, 1)]
    assert [c["commit"] for c in data["commits"]] == expect == fakes.built
    assert [b[0] for b in fakes.boots] == expect
    seeds = draw_seeds(None, random.Random(5))
    want_seeds = [next(seeds) for _ in names]
    assert [c["seed"] for c in data["commits"]] == want_seeds
    # every boot: its seed, then series-check's default duration (printed and recorded)
    assert [b[1] for b in fakes.boots] == [[f"cgroup_kunit.seed={s}", "cgroup_kunit.duration_ms=200"]
                                           for s in want_seeds]
    assert data["kernel_args"] == ["cgroup_kunit.duration_ms=200"]
    assert data["default_kernel_args"] == ["cgroup_kunit.duration_ms=200"]
    assert "cgroup_kunit.duration_ms=200 is series-check's default" in err
    # the suites each commit cannot build turned off (the suite's symbols it lacks hooks for),
    # so the suite files built at each commit are those whose hooks it has
    assert fakes.kconfig == [
        ["CONFIG_CGROUP_UCOUNT_KUNIT_TEST=n", "CONFIG_CGROUP_MIGRATE_KUNIT_TEST=n"],
        ["CONFIG_CGROUP_MIGRATE_KUNIT_TEST=n"], ["CONFIG_CGROUP_MIGRATE_KUNIT_TEST=n"], []]
    assert [c["suite_files"] for c in data["commits"]] == [
        ["harness.c", "oracle_kunit.c"], ["harness.c", "oracle_kunit.c", "ucount_kunit.c"],
        ["harness.c", "oracle_kunit.c", "ucount_kunit.c"],
        ["harness.c", "oracle_kunit.c", "ucount_kunit.c", "migrate_kunit.c", "victims.c",
         "hierarchy.c"]]
    assert "carrying the suite onto " in err and "CGROUP_MIGRATE_KUNIT_TEST off (it lacks " \
        "the cgroup test helpers, controllers enabled from KUnit, killable and freezable " \
        "test tasks)" in err
    for c in data["commits"]:
        assert c["built"] and c["ok"] and c["status"] == "pass" and c["build_error"] == ""
        assert c["counts"] == counts(PASS_LOG) and c["failed_tests"] == []
        assert c["build_seconds"] >= 0 and c["boot_seconds"] >= 0
        assert (Path(c["results"]) / "summary.json").is_file()
    # progress: a line per step of every commit
    assert "[cgkunit] commit 1 of 4: base: building\n" in err
    assert re.search(r"\[cgkunit\] commit 2 of 4: 0001-hooks: built in \d+s; booting "
                     rf"\(seed={want_seeds[1]}\)\n", err)
    assert re.search(r"\[cgkunit\] commit 4 of 4: 0003-more-hooks: PASS 99 passed, 3 skipped; "
                     r"\d+s \(build \d+s, boot \d+s\)\n", err)
    # the table, also in series-check.txt
    assert (dest_of(env) / "series-check.txt").read_text() == out
    assert out.startswith("cgkunit series-check: um-lockdep, 4 commits of kernel/series "
                          "(base .. 0003-more-hooks); 4 checked\n")
    row = row_of(out, "0003-more-hooks")
    assert row[:9] == ["4", "0003-more-hooks", expect[3][:12], "ok", "PASS", "99", "0", "3", "0"]
    assert row[-4:] == ["6", "+migrate_kunit", "+victims", "+hierarchy"]
    assert "PASS: every commit built and passed (4 of 4)" in out
    # JUnit: a testcase per commit, none failed
    suite = junit_of(env)
    assert suite.get("tests") == "4" and suite.get("failures") == "0"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["base", "0001-hooks", "0002-note", "0003-more-hooks"]
    assert not suite.findall(".//failure")
    assert f"seed {want_seeds[0]}" in (cases[0].findtext("system-out") or "")
    # nothing left behind but the build dir and the results; the prepared tree untouched
    assert sorted(p.name for p in env["build"].iterdir()) == ["out", "results", "series-check", "trees"]
    assert [p.name for p in (env["build"] / "out").iterdir()] == ["um-lockdep+series-check"]
    assert [p.name for p in (env["build"] / "results").iterdir()] == ["um-lockdep+series-check"]
    assert git(tree, "status", "--porcelain") == ""
    assert git(tree, "rev-parse", "HEAD") == git(tree, "rev-parse", "cgkunit-suite")
    clone = env["build"] / "series-check" / "um-lockdep" / "linux"
    assert git(clone, "status", "--porcelain", "--untracked-files=no") == ""  # hook undone
    assert git(env["kernel"], "status", "--porcelain") == ""


def test_a_build_failure_at_one_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       fakes: Fakes, capsys: pytest.CaptureFixture[str]) -> None:
    env, out, err, data = checked(tmp_path, monkeypatch, capsys, ["hooks", "break", "fix"], 1)
    broken = data["commits"][2]
    assert broken["name"] == "0002-break.patch" and not broken["built"] and not broken["ok"]
    assert broken["status"] == "build-failed" and broken["build_error"] == FIRST_ERROR
    assert broken["suite_files"] is None and broken["counts"] == vars(rp.Counts())
    assert (Path(broken["results"]) / "build.log").read_text().splitlines()[1] == FIRST_ERROR
    # the build failed at one commit only: the others were built and booted
    assert [c["ok"] for c in data["commits"]] == [True, True, False, True]
    assert len(fakes.built) == 4 and len(fakes.boots) == 3
    assert data["result"]["failed"] == ["0002-break.patch"] and data["result"]["exit"] == 1
    assert f"[cgkunit] commit 3 of 4: 0002-break: BUILD FAILED: {FIRST_ERROR}; " in err
    row = row_of(out, "0002-break")
    assert row[3:9] == ["FAILED", "-", "-", "-", "-", "-"] and row[-1] == "-"
    assert f"not ok: 0002-break ({broken['commit'][:12]}): build failed: {FIRST_ERROR}" in out
    assert "FAIL: 1 of 4 commits did not pass: 0002-break\n" in out
    failures = junit_of(env).findall(".//failure")
    assert len(failures) == 1 and failures[0].get("type") == "build"
    assert failures[0].get("message") == f"build failed: {FIRST_ERROR}"
    clone = env["build"] / "series-check" / "um-lockdep" / "linux"
    assert git(clone, "status", "--porcelain", "--untracked-files=no") == ""


def test_a_failed_test_at_one_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     fakes: Fakes, capsys: pytest.CaptureFixture[str]) -> None:
    env, out, err, data = checked(tmp_path, monkeypatch, capsys, ["hooks", "leak", "note"], 1)
    leak = data["commits"][2]
    assert leak["built"] and leak["status"] == "fail" and not leak["ok"]
    assert leak["counts"] == counts(LEAK_LOG) == {"passed": 6, "failed": 12, "skipped": 0,
                                                  "crashed": 0}
    assert leak["failed_tests"][:2] == ["cgroup_ucount.rlimit_get_put",
                                        "cgroup_ucount.rlimit_get_put_hardirq"]
    assert "fail:cgroup_ucount.rlimit_get_put:(init, uid N): reference count not back" in leak["signatures"]
    # the leak stays in the commits after it
    assert [c["status"] for c in data["commits"]] == ["pass", "pass", "fail", "fail"]
    assert data["result"]["failed"] == ["0002-leak.patch", "0003-note.patch"]
    assert re.search(r"\[cgkunit\] commit 3 of 4: 0002-leak: FAIL 6 passed, 12 failed "
                     r"\(cgroup_ucount\.rlimit_get_put, cgroup_ucount\.rlimit_get_put_hardirq, "
                     r"[a-z_.]+, \.\.\.\); ", err)
    assert "FAIL: 2 of 4 commits did not pass: 0002-leak, 0003-note\n" in out
    row = row_of(out, "0002-leak")
    assert row[3:9] == ["ok", "FAIL", "6", "12", "0", "0"]
    cases = junit_of(env).findall("testcase")
    failure = cases[2].find("failure")
    assert failure is not None and failure.get("type") == "fail"
    assert "cgroup_ucount.rlimit_get_put" in (failure.text or "")
    assert cases[1].find("failure") is None


def leak_cases() -> list[str]:
    """suite.case of every case the recorded leak fails."""
    report = cr.build_report(DATA / LEAK_LOG, "completed")
    return list(dict.fromkeys(".".join(t.id.split(".")[:2]) for t in report.failed_tests()
                              if not t.children))


def test_a_case_fails_before_the_patch_that_fixes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fakes: Fakes,
        capsys: pytest.CaptureFixture[str]) -> None:
    """tools/kunit/fixed-by.json names the patch that fixes what each case catches: before it
    the case's failure is expected (the commit passes and says so), from it on it counts."""
    env = series(tmp_path, monkeypatch, ["hooks", "leak", "leak-fixed"])
    cases = leak_cases()
    assert len(cases) >= 3
    write_files(env["repo"], {"tools/kunit/fixed-by.json":
                              json.dumps(dict.fromkeys(cases, "0003-leak-fixed.patch"))})
    assert check(env) == 0
    out, err = capsys.readouterr()
    leak = data_of(env)["commits"][2]
    assert leak["status"] == "pass" and leak["ok"] and leak["failed_tests"] == []
    assert leak["failed_before_fix"] == dict.fromkeys(cases, "0003-leak-fixed")
    assert leak["counts"]["failed"] == 12 and leak["signatures"] == []
    assert f"0002-leak: PASS 6 passed, 12 failed ({cases[0]} failed before 0003-leak-fixed, " \
           "which fixes it)" in err
    # one case the file does not name: the commit fails on it alone
    write_files(env["repo"], {"tools/kunit/fixed-by.json":
                              json.dumps(dict.fromkeys(cases[1:], "0003-leak-fixed.patch"))})
    assert check(env) == 1
    leak = data_of(env)["commits"][2]
    assert leak["status"] == "fail" and leak["failed_tests"] == [cases[0]]
    assert all(k.startswith(f"fail:{cases[0]}:") for k in leak["signatures"])
    # the fixing patch is the last word: from it on, the case must pass
    assert fx.pending_fixes({"a.b": "0003-leak-fixed.patch"}, env["names"],
                            "0003-leak-fixed.patch") == {}
    assert fx.pending_fixes({"a.b": "0003-leak-fixed.patch"}, env["names"], "base") == \
        {"a.b": "0003-leak-fixed.patch"}


@pytest.mark.parametrize("text, message", [
    ("[1]", "want an object"),
    ("{", "not readable as JSON"),
    ('{"cgroup_rstat": "0001-hooks.patch"}', "'cgroup_rstat' is not a case name"),
    ('{"a.b": "0009-nope.patch"}', "a.b: '0009-nope.patch' is not a patch of kernel/series"),
    ('{"a.b": 3}', "a.b: 3 is not a patch of kernel/series"),
])
def test_fixed_by_bad_input(tmp_path: Path, text: str, message: str) -> None:
    write_files(tmp_path, {"tools/kunit/fixed-by.json": text})
    with pytest.raises(DriverError) as e:
        fx.load_fixed_by(tmp_path, ["0001-hooks.patch"])
    assert message in e.value.reason and "\n" not in e.value.reason
    assert fx.load_fixed_by(tmp_path / "none", []) == {}


def test_the_projects_fixed_by_names_patches_of_its_series() -> None:
    got = fx.load_fixed_by(REPO, series_names(REPO))
    assert got["cgroup_rstat.rstat_removed_unqueued"].startswith("0024-cgroup-rstat-flush-a-removed")


def test_from_starts_at_a_patch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                fakes: Fakes, capsys: pytest.CaptureFixture[str]) -> None:
    env = series(tmp_path, monkeypatch, ["hooks", "note", "more-hooks"])
    assert check(env, start="0002", kernel_args=("cgroup_kunit.seed=77",
                                                 "cgroup_kunit.duration_ms=50")) == 0
    err = capsys.readouterr().err
    data = data_of(env)
    assert [c["name"] for c in data["commits"]] == ["0002-note.patch", "0003-more-hooks.patch"]
    assert data["from"] == "0002" and data["planned"] == ["0002-note.patch", "0003-more-hooks.patch"]
    assert [c["seed"] for c in data["commits"]] == [77, 77]
    # a duration of its own: no default added
    assert fakes.boots[0][1] == ["cgroup_kunit.seed=77", "cgroup_kunit.duration_ms=50"]
    assert data["kernel_args"] == ["cgroup_kunit.duration_ms=50"] and data["default_kernel_args"] == []
    assert "[cgkunit] commit 1 of 2: 0002-note: building\n" in err and "series-check's default" not in err
    assert [c.get("name") for c in junit_of(env).findall("testcase")] == ["0002-note", "0003-more-hooks"]
    check(env, start="0003-more-hooks.patch")
    assert [c["name"] for c in data_of(env)["commits"]] == ["0003-more-hooks.patch"]
    check(env, start="base", filter_glob="cgroup_ucount*")
    assert len(data_of(env)["commits"]) == 4 and fakes.boots[-1][2] == "cgroup_ucount*"


def test_a_refused_parameter_stops_at_once_as_bad_input(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        fakes: Fakes,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    env = series(tmp_path, monkeypatch, ["hooks"])
    monkeypatch.setattr(sc, "check_kernel_args", lambda *a, **k: None)  # let it reach the boot
    with pytest.raises(DriverError, match="the suite refused cgroup_kunit.threads=99: want 1..64"):
        check(env, kernel_args=("cgroup_kunit.threads=99",))
    out = capsys.readouterr().out
    data = data_of(env)
    assert len(data["commits"]) == 1 and data["stopped"] == "the suite refused a parameter at base"
    assert data["result"]["exit"] == 2 and not data["complete"]
    assert "stopped: the suite refused a parameter at base" in out


# --- bad input --------------------------------------------------------------------------------------

def run_entry(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os
    return subprocess.run([sys.executable, str(ENTRY), *args], capture_output=True, text=True,
                          cwd="/", timeout=60, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("args,env,message", [
    (["--profile", "no-such"], {}, "unknown profile 'no-such' (known: "),
    (["--from", "0999"], {}, "FROM=0999: no patch of kernel/series starts with it (want base "
                             "or a patch name such as 0001)"),
    (["--from", "00"], {}, "FROM=00: "),
    ([], {"FROM": "nope"}, "FROM=nope: no patch of kernel/series starts with it"),
    ([], {"KERNEL_SRC": "/tmp/linux"}, "KERNEL_SRC=/tmp/linux: series-check checks the commits of "
                                       "the prepared tree of kernel/series on the pinned base only"),
    (["--kernel-src", "/tmp/linux"], {}, "unrecognized arguments: --kernel-src"),
    (["--kernel-args", "cgroup_kunit.sed=5"], {}, "KERNEL_ARGS: unknown parameter cgroup_kunit.sed "),
    (["--kernel-args", "cgroup_kunit.seed=x"], {}, "cgroup_kunit.seed=x: the suite wants an "
                                                   "unsigned 64-bit number"),
    (["--filter=-x"], {}, "bad --filter (or FILTER) '-x': a KUnit filter glob cannot start with '-'"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], env: dict[str, str], message: str,
                                          tmp_path: Path) -> None:
    proc = run_entry("--build-dir", str(tmp_path), "series-check", *args, env=env)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("cgkunit: error: ") and message in lines[0], proc.stderr
    assert proc.stdout == "" and not any(tmp_path.iterdir())


def test_help_says_how_long_a_commit_takes() -> None:
    proc = run_entry("series-check", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "--from PATCH" in text and "about 1-2 min" in text and "about 4-5 min" in text
    assert "cgroup_kunit.duration_ms=200" in text and "30 commits from base took 45 min" in text
    assert "fixed-by.json" in text
    assert "1 a commit did not" in text


def test_cli_dispatches_series_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[sc.SeriesCheckOptions] = []

    def fake(ctx: Context, opts: sc.SeriesCheckOptions, rng: Any = None) -> int:
        seen.append(opts)
        return 1
    monkeypatch.setattr(sc, "run_series_check", fake)
    monkeypatch.setattr(cli, "preflight", lambda *a: None)
    monkeypatch.setenv("FILTER", "cgroup_rstat*")
    monkeypatch.setenv("KERNEL_ARGS", "cgroup_kunit.threads=8")
    monkeypatch.setenv("FROM", "0012")
    assert cli.main(["--build-dir", str(tmp_path), "series-check", "--jobs", "2"]) == 1
    assert cli.main(["--build-dir", str(tmp_path), "series-check", "--from", "base",
                     "--profile", "x86_64-kcsan"]) == 1
    assert seen == [sc.SeriesCheckOptions(start="0012", kernel_args=("cgroup_kunit.threads=8",),
                                          filter_glob="cgroup_rstat*", jobs=2),
                    sc.SeriesCheckOptions(profile="x86_64-kcsan", start="base",
                                          kernel_args=("cgroup_kunit.threads=8",),
                                          filter_glob="cgroup_rstat*")]


def test_makefile_series_check_target() -> None:
    text = (REPO / "Makefile").read_text()
    # PROFILE and FROM reach it through the environment (test_makefile)
    assert re.search(r"^series-check: deps\n\t\$\(CGKUNIT\) series-check$", text, re.M)
    args = cli.make_parser().parse_args(["series-check"])
    assert (args.profile, args.start) == ("um-lockdep", "")
    assert re.search(r"^\.PHONY:.* series-check\b", text, re.M)
    assert re.search(r'^\t@echo "make series-check ', text, re.M)
    assert re.search(r"^# make series-check: .*FROM=", text, re.M)
    test_recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", text, re.M)
    assert test_recipe is not None and "series-check" not in test_recipe.group(0)


# --- pieces ----------------------------------------------------------------------------------------

def test_first_error_line_of_a_build_log() -> None:
    log = ("  CC      kernel/fork.o\nwarning: something\n" + FIRST_ERROR + "\n" + LAST_ERROR +
           "\nERROR: modpost: missing\n")
    assert sc.first_error(log) == FIRST_ERROR
    assert sc.first_error("ERROR:root:config mismatch\n") == "ERROR:root:config mismatch"
    assert sc.first_error("  CC x.o\n") == ""


def test_suite_files_from_kbuilds_saved_command(tmp_path: Path) -> None:
    where = tmp_path / "lib" / "kunit-cgroup"
    assert sc.suite_files_built(tmp_path) == []
    # as a real um-lockdep build wrote it (a stale freeze_kill_kunit.o beside it does not count)
    write_files(where, {".built-in.a.cmd": SAVED_CMD.format(
        "harness.o oracle_kunit.o ucount_kunit.o victims.o migrate_kunit.o rstat_kunit.o"),
        "freeze_kill_kunit.o": ""})
    assert sc.suite_files_built(tmp_path) == ["harness.c", "oracle_kunit.c", "ucount_kunit.c",
                                              "victims.c", "migrate_kunit.c", "rstat_kunit.c"]
    # a composite object in built-in.a: its members
    write_files(where, {".built-in.a.cmd": SAVED_CMD.format("cgroup_kunit.o"),
                        ".cgroup_kunit.o.cmd": "savedcmd_lib/kunit-cgroup/cgroup_kunit.o := ld -r "
                                               "-o lib/kunit-cgroup/cgroup_kunit.o "
                                               "lib/kunit-cgroup/harness.o lib/kunit-cgroup/cpus.o\n"})
    assert sc.suite_files_built(tmp_path) == ["harness.c", "cpus.c"]


def test_default_duration_is_in_harness_bounds() -> None:
    from cgkunit.params import DURATION_RANGE
    assert DURATION_RANGE[0] <= sc.DEFAULT_DURATION_MS < 1000 <= DURATION_RANGE[1]
    harness = (REPO / "lib" / "kunit-cgroup" / "harness.c").read_text()
    assert f"want {DURATION_RANGE[0]}..{DURATION_RANGE[1]}" in harness


def test_series_commits_are_named_as_bisect_names_them() -> None:
    tree = PreparedTree(path=Path("/t"), base_commit="b" * 40, head_commit="h" * 40,
                        patches=[("0001-a.patch", "1" * 40), ("0002-b.patch", "2" * 40)])
    names = ["0001-a.patch", "0002-b.patch"]
    got = commits.prepared_commits(tree)
    assert got == [("base", "b" * 40), ("0001-a.patch", "1" * 40), ("0002-b.patch", "2" * 40)]
    assert [got[commits.series_pick(names, n, "FROM")][0] for n in ("base", "0002", "0001-a.patch")] \
        == ["base", "0002-b.patch", "0001-a.patch"]
