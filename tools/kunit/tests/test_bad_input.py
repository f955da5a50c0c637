"""Bad input (issue 12): exit status 2 and one 'cgkunit: error:' line, found before any long
work, and nothing outside the build root touched -- above all never a user's KERNEL_SRC."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from cgkunit import cli, common, coverage, deps, fetch, pipeline, run
from cgkunit import profile as pf
from cgkunit import tree as tr
from cgkunit.common import DriverError, build_root, find_repo_root
from conftest import KUNIT_DIR
from test_tree import KERNEL_FILES, make_kernel, snapshot, write_files

REPO = KUNIT_DIR.parent.parent
PROFILE = "um-lockdep"
TREE_COMMANDS = [["prepare"], ["build", "--profile", PROFILE], ["module", "--profile", PROFILE],
                 ["run", "--profile", PROFILE], ["check"], ["bench"], ["coverage"]]


@pytest.fixture(autouse=True)
def no_long_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fetching, preparing, building, installing or booting fails the test."""
    def reached(*args: Any, **kw: Any) -> Any:
        raise AssertionError("long work started before the bad input was found")
    for mod, name in ((pipeline, "prepare"), (pipeline, "fetch_base"), (cli, "fetch_base"),
                      (pipeline, "build"), (run, "build"), (pipeline, "prepare_tree"),
                      (coverage, "run_coverage"), (deps, "ensure_deps")):
        monkeypatch.setattr(mod, name, reached)


def fails(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run cli.main(argv); assert exit 2 and one stderr line; the message after the prefix."""
    try:
        code = cli.main(argv)
    except SystemExit as e:  # argparse errors
        code = e.code  # type: ignore[assignment]
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert code == 2, captured.err
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("cgkunit: error: ")
    assert "Traceback" not in captured.err and captured.out == ""
    return lines[0][len("cgkunit: error: "):]


def listing(root: Path) -> dict[str, bytes | None]:
    """Every path under root with its content (None for directories)."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*"))}


# --- 1. KERNEL_SRC in (or holding) the build root ------------------------------------------

@pytest.mark.parametrize("command", TREE_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("how", ["option", "environment"])
def test_kernel_src_inside_the_build_root_is_refused_untouched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        command: list[str], how: str) -> None:
    build = tmp_path / "build"
    src = make_kernel(build / "trees" / "user-0123456789ab")
    before = snapshot(src)
    argv = ["--build-dir", str(build), *command]
    if how == "option":
        argv += ["--kernel-src", str(src)]
    else:
        monkeypatch.setenv("KERNEL_SRC", str(src))
    msg = fails(argv, capsys)
    assert msg.startswith(f"KERNEL_SRC={src}: is inside the build root {build}")
    assert src.is_dir() and snapshot(src) == before


def test_kernel_src_equal_to_or_holding_the_build_root(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = make_kernel(tmp_path / "linux")
    before = snapshot(src)
    msg = fails(["--build-dir", str(src), "prepare", "--kernel-src", str(src)], capsys)
    assert msg.startswith(f"KERNEL_SRC={src}: is the build root {src}")
    msg = fails(["--build-dir", str(src / "build"), "run", "--profile", PROFILE,
                 "--kernel-src", str(src)], capsys)
    assert msg.startswith(f"KERNEL_SRC={src}: contains the build root {src / 'build'}")
    assert snapshot(src) == before and not (src / "build").exists()


def test_kernel_src_through_a_symlink_into_the_build_root(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build = tmp_path / "build"
    src = make_kernel(build / "trees" / "debian-1")
    link = tmp_path / "linux"
    link.symlink_to(src)
    before = snapshot(src)
    assert "is inside the build root" in fails(
        ["--build-dir", str(build), "prepare", "--kernel-src", str(link)], capsys)
    assert snapshot(src) == before


def fake_repo(root: Path) -> Path:
    """A project repo with an empty series and the suite, for tree.prepare_tree."""
    (root / "kernel").mkdir(parents=True)
    (root / "kernel" / "series").write_text("")
    write_files(root / "lib" / "kunit-cgroup", {"Kconfig": "config CGROUP_KUNIT_TEST\n",
                                                "x.c": "int x;\n"})
    return root


def test_prepared_tree_as_kernel_src_is_not_deleted(tmp_path: Path) -> None:
    """The reported bug: a prepared tree given back as KERNEL_SRC at the base commit was
    'cloned read-only' into itself, i.e. deleted first."""
    repo, build = fake_repo(tmp_path / "repo"), tmp_path / "build"
    prepared = tr.prepare_tree(repo, build, None, str(make_kernel(tmp_path / "linux")))
    before = snapshot(prepared.path)
    with pytest.raises(DriverError) as exc:
        tr.prepare_tree(repo, build, None, str(prepared.path), tr.BASE_TAG)
    assert str(exc.value).startswith(f"KERNEL_SRC={prepared.path}: is inside the build root")
    assert prepared.path.is_dir() and snapshot(prepared.path) == before


def test_ensure_user_base_never_removes_its_source(tmp_path: Path) -> None:
    src = make_kernel(tmp_path / "linux")
    before = snapshot(src)
    sha = tr.rev(src, "HEAD")
    assert sha
    for tree in (src, src / "sub", tmp_path):
        with pytest.raises(DriverError, match="which cgkunit replaces"):
            tr.ensure_user_base(tree, src, sha, "user:x")
    assert snapshot(src) == before


# --- 2. --jobs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["0", "-3"])
@pytest.mark.parametrize("command", [c for c in TREE_COMMANDS if c[0] not in ("prepare", "check")],
                         ids=lambda c: c[0])
def test_non_positive_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                           command: list[str], value: str) -> None:
    msg = fails(["--build-dir", str(tmp_path), *command, "--jobs", value], capsys)
    assert msg == f"argument --jobs: must be at least 1, got {value}"
    assert list(tmp_path.iterdir()) == []


# --- 3. FILTER and CGKUNIT_ACCEL up front ---------------------------------------------------

@pytest.mark.parametrize("command", [["run", "--profile", PROFILE], ["coverage"]],
                         ids=lambda c: c[0])
@pytest.mark.parametrize("how", ["option", "environment"])
def test_bad_filter_before_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str], command: list[str],
                                     how: str) -> None:
    argv = ["--build-dir", str(tmp_path), *command]
    if how == "option":
        argv.append("--filter=-x")
    else:
        monkeypatch.setenv("FILTER", "-x")
    assert fails(argv, capsys) == ("bad --filter (or FILTER) '-x': a KUnit filter glob "
                                   "cannot start with '-'")


@pytest.mark.parametrize("command", [["run", "--profile", PROFILE], ["check"], ["bench"],
                                     ["coverage"]], ids=lambda c: c[0])
def test_bad_accel_before_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    monkeypatch.setenv("CGKUNIT_ACCEL", "hvf")
    assert fails(["--build-dir", str(tmp_path), *command], capsys) == \
        "CGKUNIT_ACCEL must be one of auto, kvm, tcg, got 'hvf'"


def test_bad_filter_in_checks_json() -> None:
    from cgkunit import checklist
    with pytest.raises(DriverError, match="^bad checks.json: c: filter '-x'"):
        checklist.parse_checks([{"name": "c", "profile": PROFILE, "filter": "-x"}], "checks.json")


def test_filter_and_accel_checks_are_shared(tmp_path: Path) -> None:
    assert run.check_filter("cgroup_*.a*") == "cgroup_*.a*" and run.check_filter("") == ""
    with pytest.raises(DriverError, match="bad filter '--evil'"):
        run.exec_command(Path("/t"), pf.Profile(name="p", arch="um", fragment=Path("/p")),
                         Path("/r"), Path("/b"), [], "--evil")
    assert pf.accel_mode(None) == "auto" and pf.accel_mode(" KVM ") == "kvm"
    with pytest.raises(DriverError, match="CGKUNIT_ACCEL must be one of"):
        pf.choose_accel(tmp_path, tmp_path, env={"CGKUNIT_ACCEL": "xen"})


# --- 4. downloads ---------------------------------------------------------------------------

PKG, VER = "linux-source-7.3", "7.3.4-1~bpo13+1"
DEB = f"{PKG}_{VER}_all.deb"


def fake_download(monkeypatch: pytest.MonkeyPatch, content: bytes,
                  then: Callable[[], None] | None = None) -> list[Path]:
    """fetch.run_cmd as `apt-get download`: writes content under the .deb's name in cwd,
    then calls then (to fail or be interrupted); the cwds it was given."""
    cwds: list[Path] = []

    def run_cmd(args: list[str], *, cwd: Path | None = None, **kw: Any) -> Any:
        assert cwd is not None and args[0] == "apt-get" and "download" in args
        cwds.append(cwd)
        (cwd / DEB).write_bytes(content)
        if then:
            then()
    monkeypatch.setattr(fetch, "run_cmd", run_cmd)
    return cwds


def interrupted() -> None:
    raise KeyboardInterrupt


def failed() -> None:
    raise DriverError("apt-get download failed: E: connection reset")


@pytest.mark.parametrize("then,error", [(interrupted, KeyboardInterrupt), (failed, DriverError)])
def test_interrupted_download_leaves_no_deb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            then: Callable[[], None], error: type) -> None:
    cwds = fake_download(monkeypatch, b"half a deb", then)
    with pytest.raises(error):
        fetch.download_deb([], tmp_path, PKG, VER, None)
    assert cwds[0].parent == tmp_path and cwds[0] != tmp_path  # a temporary in the same dir
    assert fetch.deb_path(tmp_path, PKG, VER) is None and list(tmp_path.iterdir()) == []


def test_bad_download_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_download(monkeypatch, b"not the real thing")
    with pytest.raises(DriverError, match=re.escape(f"checksum mismatch for {DEB}: ")):
        fetch.download_deb([], tmp_path, PKG, VER, "0" * 64)
    assert list(tmp_path.iterdir()) == []


def test_complete_download_is_renamed_into_place(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib
    stale = tmp_path / f"{fetch.DOWNLOAD_PREFIX}old"
    stale.mkdir()
    (stale / DEB).write_bytes(b"partial from a killed run")
    fake_download(monkeypatch, b"the deb")
    digest = hashlib.sha256(b"the deb").hexdigest()
    deb, got = fetch.download_deb([], tmp_path, PKG, VER, digest)
    assert (deb, got) == (tmp_path / DEB, digest) and deb.read_bytes() == b"the deb"
    assert [p.name for p in tmp_path.iterdir()] == [DEB]


# --- 5. build root and ~user paths -------------------------------------------------------------

def deny_writes(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """Make path unwritable, also for root (who ignores the mode bits)."""
    path.chmod(0o555)
    if os.geteuid() == 0:
        real = os.access

        def access(p: Any, mode: int, **kw: Any) -> bool:
            if Path(p) == path and mode & os.W_OK:
                return False
            return real(p, mode, **kw)
        monkeypatch.setattr(os, "access", access)


def test_build_dir_that_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "afile"
    f.write_text("keep me")
    assert fails(["--build-dir", str(f), "prepare"], capsys) == f"--build-dir {f}: not a directory"
    assert fails(["--build-dir", str(f / "sub"), "report", "--profile", PROFILE], capsys) == \
        f"--build-dir {f / 'sub'}: {f} is not a directory"
    monkeypatch.setenv("CGKUNIT_BUILD", str(f))
    assert fails(["run", "--profile", PROFILE], capsys) == f"CGKUNIT_BUILD {f}: not a directory"
    assert f.read_text() == "keep me" and listing(tmp_path) == {"afile": b"keep me"}


def test_unwritable_build_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    ro = tmp_path / "results"
    ro.mkdir()
    deny_writes(monkeypatch, ro)
    try:
        assert fails(["--build-dir", str(ro), "prepare"], capsys) == f"--build-dir {ro}: not writable"
        assert fails(["--build-dir", str(ro / "b"), "fetch"], capsys) == \
            f"--build-dir {ro / 'b'}: {ro} is not writable"
        # a run finds its results directory read-only before the build, not after it
        assert fails(["--build-dir", str(tmp_path), "run", "--profile", PROFILE], capsys) == \
            f"results directory {ro}: not writable"
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o755)


@pytest.mark.parametrize("option", ["--build-dir", "--kernel-src"])
def test_tilde_unknown_user(tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str) -> None:
    raw = "~cgkunit_no_such_user/x"
    argv = ["--build-dir", str(tmp_path), "prepare"]
    argv = [option, raw, "prepare"] if option == "--build-dir" else argv + [option, raw]
    msg = fails(argv, capsys)
    what = "--build-dir" if option == "--build-dir" else f"KERNEL_SRC={raw}"
    assert msg == f"{what}: cannot expand {raw!r} (no such user or no home directory)"
    assert list(tmp_path.iterdir()) == []


def test_build_root_function_directly(tmp_path: Path) -> None:
    assert build_root(tmp_path, str(tmp_path / "new")) == tmp_path / "new"
    assert not (tmp_path / "new").exists()  # checked, not created
    with pytest.raises(DriverError, match="^CGKUNIT_BUILD: cannot expand '~nobody_cgkunit/b'"):
        build_root(tmp_path, env={"CGKUNIT_BUILD": "~nobody_cgkunit/b"})


# --- 6. kernel/BASE, kernel/series, profiles that cannot be read ------------------------------

def project(root: Path) -> Path:
    """A copy of the project's inputs: kernel/BASE, kernel/series (+ patches), one profile."""
    shutil.copytree(REPO / "kernel", root / "kernel")
    (root / pf.PROFILES_DIR).mkdir(parents=True)
    shutil.copy(REPO / pf.PROFILES_DIR / f"{PROFILE}.config", root / pf.PROFILES_DIR)
    return root


def spoil(path: Path, kind: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Make path a directory, unreadable or invalid UTF-8; the reason the error gives."""
    if kind == "directory":
        path.unlink()
        path.mkdir()
        return "Is a directory"
    if kind == "utf8":
        path.write_bytes(b"# \xff\xfe not UTF-8\n")
        return "not valid UTF-8 (byte 2)"
    path.chmod(0)
    if os.geteuid() == 0:  # root reads anything: fail the read as it would fail for a user
        real = Path.read_text

        def read_text(self: Path, *args: Any, **kw: Any) -> str:
            if self == path:
                raise PermissionError(13, "Permission denied", str(self))
            return real(self, *args, **kw)
        monkeypatch.setattr(Path, "read_text", read_text)
    return "Permission denied"


@pytest.mark.parametrize("kind", ["directory", "unreadable", "utf8"])
@pytest.mark.parametrize("target", ["kernel/BASE", "kernel/series", f"{pf.PROFILES_DIR}/{PROFILE}.config"])
def test_unreadable_inputs_name_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str],
                                         target: str, kind: str) -> None:
    repo = project(tmp_path / "repo")
    monkeypatch.setattr(cli, "find_repo_root", lambda: repo)
    path = repo / target
    reason = spoil(path, kind, monkeypatch)
    build = tmp_path / "build"
    msg = fails(["--build-dir", str(build), "run", "--profile", PROFILE], capsys)
    assert msg == f"cannot read {path}: {reason}"
    assert not build.exists()
    path.chmod(0o755 if path.is_dir() else 0o644)


@pytest.mark.parametrize("kind", ["directory", "unreadable", "utf8"])
def test_readers_directly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    repo = project(tmp_path / "repo")
    for path, read in ((repo / "kernel" / "BASE", lambda: fetch.parse_base(repo / "kernel" / "BASE")),
                       (repo / "kernel" / "series", lambda: tr.series_names(repo)),
                       (repo / pf.PROFILES_DIR / f"{PROFILE}.config",
                        lambda: pf.load_profile(repo, PROFILE))):
        reason = spoil(path, kind, monkeypatch)
        with pytest.raises(DriverError) as exc:
            read()
        assert str(exc.value) == f"cannot read {path}: {reason}"
    assert find_repo_root(repo / "kernel") == repo  # a bad kernel/BASE still marks the root


# --- 7. git missing -------------------------------------------------------------------------

def test_git_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "linux"
    write_files(src, KERNEL_FILES)
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(DriverError) as exc:
        tr.git(src, "status")
    assert str(exc.value) == "command not found: git"
    assert fails(["--build-dir", str(tmp_path / "build"), "prepare", "--kernel-src", str(src)],
                 capsys) == "command not found: git"
    assert fails(["--build-dir", str(tmp_path / "build"), "prepare"], capsys) == \
        "command not found: git"
    assert not (tmp_path / "build").exists()


# --- 8. issue 31: every input checked, every error one line -------------------------------

@pytest.mark.parametrize("raw", ["/", "/proc/cgkunit", "/sys/kernel/cgkunit", "/dev/shm/x", "/usr",
                                 "/tmp"])
def test_system_directories_are_no_build_root(raw: str, capsys: pytest.CaptureFixture[str]) -> None:
    msg = fails(["--build-dir", raw, "run", "--profile", PROFILE], capsys)
    assert msg.startswith(f"--build-dir {raw}: a system directory")


def test_the_project_is_no_build_root(capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert "the project itself" in fails(["--build-dir", str(REPO), "prepare"], capsys)
    if REPO.parent.resolve() in common.SYSTEM_DIRS:  # a clone in /tmp: refused as that first
        return
    assert "holds the project" in fails(["--build-dir", str(REPO.parent), "prepare"], capsys)
    monkeypatch.setenv("HOME", str(REPO.parent))
    assert "your home directory" in fails(["--build-dir", str(REPO.parent), "prepare"], capsys)


def test_jobs_is_capped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    msg = fails(["--build-dir", str(tmp_path), "build", "--profile", PROFILE, "--jobs", "99999999"],
                capsys)
    assert msg == f"argument --jobs: at most {cli.jobs_max()} (4 per CPU of this machine), got 99999999"


@pytest.mark.parametrize("glob,why", [
    ("cgroup_rstat.a b", "' ' is not part of a KUnit filter glob"),
    ("cgroup_rstat.'x'", "\"'\" is not part of"),
    ("cgroup_rstat\nx", "'\\n' is not part of"),
    ('cgroup_"rstat"', "'\"' is not part of"),
    ("cgroup_rstat;true", "';' is not part of"),
    ("nosuchsuite.*", "'nosuchsuite' matches none of the suites (cgroup_"),
    ("cgroup_rst.*", "'cgroup_rst' matches none of the suites"),
    ("cgroup_ucount.no_such_case", "'no_such_case' matches no case of cgroup_ucount "
                                   "(ucount_inc_dec, rlimit_add_sub, "),
    ("cgroup_rstat*.migrate_*", "'migrate_*' matches no case of the 2 suites 'cgroup_rstat*' "
                                "matches"),
    ("*.x", "'x' matches no case of the "),
    ("cgroup_migrate_dynmods.", "'' matches no case of cgroup_migrate_dynmods (migrate_idle, "),
])
@pytest.mark.parametrize("command", [["run", "--profile", PROFILE], ["module-run"],
                                     ["stress"], ["series-check"]], ids=lambda c: c[0])
def test_filter_checked_against_the_suites(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           glob: str, why: str, command: list[str]) -> None:
    msg = fails(["--build-dir", str(tmp_path), *command, "--filter", glob], capsys)
    assert msg.startswith("bad --filter (or FILTER) ") and why in msg


def test_good_filters_pass() -> None:
    from cgkunit.params import check_filter, suite_names
    assert "cgroup_rstat" in suite_names(REPO) and "cgroup_migrate_dynmods" in suite_names(REPO)
    for glob in ("cgroup_rstat.rstat_base_exact", "cgroup_*", "cgroup_kunit_oracle*",
                 "cgroup_[mr]*.*_[!a]?c*", "*.migrate_idle", "cgroup_ucount.rlimit_exact_limit",
                 "cgroup_ucount.ucount_sysctl_per_ns", "cgroup_bench.bench_*", "*.*",
                 "cgroup_rstat.rstat_removed_unqueued", "cgroup_migrate*.migrate_everything"):
        assert check_filter(glob, "f", REPO) == glob


def test_the_cases_of_each_suite() -> None:
    """suite_cases() reads every case macro and the array each suite's .test_cases names:
    KUNIT_CASE, KUNIT_CASE_SLOW, KUNIT_CASE_PARAM(_ATTR) over lines, CGK_CASE, and the one
    list migrate_kunit.c's MG_CASES() makes both migrate suites' arrays of."""
    from cgkunit.params import dynmods_cases, suite_cases
    cases = suite_cases(REPO)
    assert cases["cgroup_bench"] == ["bench_rstat_read", "bench_ucount_charge"]
    assert cases["cgroup_ucount"][0] == "ucount_inc_dec" and \
        cases["cgroup_ucount"][-1] == "ucount_sysctl_per_ns"
    assert cases["cgroup_rstat"][-1] == "rstat_removed_unqueued"
    assert cases["cgroup_migrate"] == cases["cgroup_migrate_dynmods"] == dynmods_cases(REPO)
    assert all(cases.values()), [s for s, c in cases.items() if not c]
    for path in (REPO / "lib" / "kunit-cgroup").glob("*_kunit.c"):  # every entry of every array
        text = path.read_text()
        entries = re.findall(r"^\t(?:\w+_CASE\w*)\((\w+)[,)]", text, re.M)
        assert entries and set(entries) <= {c for cs in cases.values() for c in cs}, path


def test_the_cases_of_a_stub_suite(tmp_path: Path) -> None:
    """A suite of another tree: its own macros, a commented-out case, a second suite whose
    array a macro makes, and a suite whose cases cannot be read (any case may be there)."""
    from cgkunit.params import check_filter, suite_cases
    write_files(tmp_path, {"lib/kunit-cgroup/a_kunit.c": """\
#define CGK_CASE(fn) KUNIT_CASE_PARAM_ATTR(fn, cgk_threads_gen, { .speed = KUNIT_SPEED_SLOW })
#define TWO(name)				\\
static struct kunit_case name[] = {		\\
	KUNIT_CASE_SLOW(two_slow), /* not three */	\\
	{}					\\
}

static struct kunit_case a_cases[] = {
	CGK_CASE(a_gang),
	KUNIT_CASE_PARAM(a_param, a_gen_params),
	/* KUNIT_CASE(a_gone), */
	KUNIT_CASE_PARAM_ATTR(a_attr, a_gen_params,
			      { .speed = KUNIT_SPEED_SLOW }),
	{ .run_case = a_plain, .name = "a_named" },
	{}
};

TWO(two_cases);

static struct kunit_suite a_suite = {
	.name = "a",	/* "not_a" */
	.test_cases = a_cases,
};

static struct kunit_suite two_suite = {
	.name = "a_two",
	.test_cases = two_cases,
};

static struct kunit_suite elsewhere_suite = {
	.name = "a_elsewhere",
	.test_cases = cases_in_another_file,
};
"""})
    assert suite_cases(tmp_path) == {"a": ["a_gang", "a_param", "a_attr", "a_named"],
                                     "a_two": ["two_slow"], "a_elsewhere": []}
    for glob in ("a.a_gang", "a.a_param", "a*.*_slow", "a.a_[np]*", "a_two", "a_elsewhere.x",
                 "a*.x", "a_*.a_gang"):
        assert check_filter(glob, "FILTER", tmp_path) == glob
    for glob, why in (("a.a_gone", "'a_gone' matches no case of a (a_gang, a_param, a_attr, "
                                   "a_named)"),
                      ("a.three", "'three' matches no case of a ("),
                      ("a_t*.a_*", "'a_*' matches no case of a_two (two_slow)"),
                      ("a?two.*gang", "'*gang' matches no case of a_two")):
        with pytest.raises(DriverError, match=re.escape(f"bad FILTER {glob!r}: ")) as exc:
            check_filter(glob, "FILTER", tmp_path)
        assert why in str(exc.value) and "\n" not in str(exc.value)


def test_every_filter_of_the_repo_passes() -> None:
    """The filters of checks.json and bench.json, and the FILTER= examples of the Makefile,
    README.md and docs/ (not results.md: a dated log of runs), select cases of the suite."""
    from cgkunit.params import check_filter
    kunit = REPO / "tools" / "kunit"
    checks = json.loads((kunit / "checks.json").read_text())["checks"]
    globs = {str(c["filter"]) for c in checks if c.get("filter")}
    globs.add(str(json.loads((kunit / "bench.json").read_text())["filter"]))
    assert len(globs) > 20 and "cgroup_ucount.rlimit_[fo][ov]*" in globs
    docs = [REPO / "Makefile", REPO / "README.md",
            *(p for p in (REPO / "docs").glob("*") if p.name != "results.md")]
    examples = {m for p in docs for m in
                re.findall(r"FILTER=(?:'([^']*)'|([A-Za-z*][A-Za-z0-9_.*?\[\]]*))", p.read_text())}
    found = {q or bare for q, bare in examples} - {"", "suite.case"}  # Makefile's placeholder
    assert "cgroup_ucount.ucount_inc_dec" in found and "cgroup_rstat*" in found
    for glob in sorted(globs | found):
        assert check_filter(glob, "f", REPO) == glob


@pytest.mark.parametrize("variant", ["x/../../..", "../..", "a/b", ".hidden", "..", ""])
def test_report_variant_is_a_name(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  variant: str) -> None:
    build = tmp_path / "build"
    (build / "results" / PROFILE).mkdir(parents=True)
    (build / "results" / PROFILE / "console.log").write_text("x\n")
    before = listing(tmp_path)
    argv = ["--build-dir", str(build), "report", "--profile", PROFILE, "--variant", variant]
    if not variant:  # the profile's own results: a report, written where they are
        cli.main(argv)
        capsys.readouterr()
        return
    assert fails(argv, capsys) == f"--variant {variant!r}: want a name (letters, digits and _.+-), " \
                                  "not a path"
    assert listing(tmp_path) == before


def test_inside_the_build_root(tmp_path: Path) -> None:
    from cgkunit.common import inside
    assert inside(tmp_path, tmp_path / "results" / "x", "w") == (tmp_path / "results" / "x")
    for out in (tmp_path / ".." / "x", tmp_path.parent):
        with pytest.raises(DriverError, match="is outside the build root"):
            inside(tmp_path, out, "w")


def test_a_write_that_fails_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A read-only results directory (or disk full, ...) met in the middle of a run."""
    summary = tmp_path / "results" / PROFILE / "summary.json"

    def fails_to_write(*a: Any, **k: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(summary))
    monkeypatch.setattr(pipeline, "run_profile", fails_to_write)
    assert fails(["--build-dir", str(tmp_path), "run", "--profile", PROFILE], capsys) == \
        f"{summary}: Permission denied"
    monkeypatch.setattr(pipeline, "run_profile", lambda *a, **k: b"\xff".decode())
    assert fails(["--build-dir", str(tmp_path), "run", "--profile", PROFILE], capsys).startswith(
        "not valid utf-8 text (byte 0)")


def test_malformed_exec_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from conftest import DATA
    results = tmp_path / "results" / PROFILE
    results.mkdir(parents=True)
    shutil.copy(DATA / "01_all_pass.log", results / "console.log")
    for text in ('{"elapsed": "soon", "stops": "none", "kernel_args": 3, "verdict": 7}',
                 "{not json", '["a list"]', "\xff"):
        (results / "exec.json").write_text(text, errors="surrogateescape")
        code = cli.main(["--build-dir", str(tmp_path), "report", "--profile", PROFILE])
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        assert code in (0, 1, 2) and (captured.out.startswith(f"cgkunit: {PROFILE}: ")
                                      or captured.err.startswith("cgkunit: error: "))


def kdir(root: Path, release: bytes) -> Path:
    from cgkunit import module_run
    write_files(root, {".config": "\n".join(module_run.KDIR_NEEDS) + "\n", "Module.symvers": "",
                       "arch/x86/boot/bzImage": "x",
                       "include/linux/cgroup.h": "void cgroup_create_for_test(void);\n"})
    (root / "include" / "config").mkdir(parents=True, exist_ok=True)
    (root / "include" / "config" / "kernel.release").write_bytes(release)
    return root


def test_kdir_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fails(["--build-dir", str(tmp_path), "module-run", "--kdir", "~nosuchuser"], capsys) == \
        "KDIR=~nosuchuser: cannot expand '~nosuchuser' (no such user or no home directory)"
    k = kdir(tmp_path / "kdir", b"7.3.4\xff\n")
    release = k / "include" / "config" / "kernel.release"
    assert fails(["--build-dir", str(tmp_path / "b"), "module-run", "--kdir", str(k)], capsys) == \
        f"cannot read {release}: not valid UTF-8 (byte 5)"


@pytest.mark.parametrize("name", ["suite.msg", "BASE", "series"])
def test_non_utf8_project_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str], name: str) -> None:
    repo = project(tmp_path / "repo")
    monkeypatch.setattr(cli, "find_repo_root", lambda: repo)
    path = repo / "kernel" / name
    path.write_bytes(b"x\xfe\n")
    msg = fails(["--build-dir", str(tmp_path / "build"), "run", "--profile", PROFILE], capsys)
    assert msg == f"cannot read {path}: not valid UTF-8 (byte 1)"


def test_a_maintainers_file_that_is_not_utf8_keeps_its_bytes(tmp_path: Path) -> None:
    raw = "CONTROL GROUP (CGROUP)\nF:\tkernel/cgroup/\nM:\tJ\xf6rg\n".encode("latin-1")
    (tmp_path / "MAINTAINERS").write_bytes(raw)
    assert tr.ensure_maintainers(tmp_path)
    assert (tmp_path / "MAINTAINERS").read_bytes() == raw.replace(
        b"F:\tkernel/cgroup/\n", b"F:\tkernel/cgroup/\nF:\tlib/kunit-cgroup/\n")


def test_missing_base_and_titles_are_one_line(tmp_path: Path) -> None:
    """kernel/BASE missing (the driver reads report_titles.h first of all, which once
    looked for the project root by kernel/BASE and raised there): one line, exit 2."""
    import subprocess
    import sys
    proj = tmp_path / "proj"
    shutil.copytree(KUNIT_DIR / "cgkunit", proj / "tools" / "kunit" / "cgkunit",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(KUNIT_DIR / "cgkunit.py", proj / "tools" / "kunit" / "cgkunit.py")
    titles = proj / "lib" / "kunit-cgroup" / "report_titles.h"
    titles.parent.mkdir(parents=True)
    shutil.copy(REPO / "lib" / "kunit-cgroup" / "report_titles.h", titles)

    def run_it() -> list[str]:
        proc = subprocess.run([sys.executable, str(proj / "tools" / "kunit" / "cgkunit.py"),
                               "run", "--profile", PROFILE], capture_output=True, text=True,
                              cwd="/", timeout=60)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        return proc.stderr.splitlines()
    assert run_it() == [f"cgkunit: error: {proj / 'kernel' / 'BASE'} is missing: the pinned "
                        "base (package, version, sha256) every build starts from"]
    titles.unlink()
    assert run_it() == [f"cgkunit: error: cannot read {titles}: No such file or directory"]


def test_kernel_series_missing_duplicate_or_empty(tmp_path: Path) -> None:
    repo = project(tmp_path / "repo")
    names = tr.series_names(repo)
    series = repo / "kernel" / "series"
    series.write_text("\n".join([*names[:2], names[0]]) + "\n")
    with pytest.raises(DriverError, match=rf"^kernel/series:3: {names[0]} is listed twice "
                                          r"\(first on line 1\)"):
        tr.read_series(repo)
    (repo / "kernel" / "patches" / "0099-empty.patch").write_text("")
    series.write_text("0099-empty.patch\n")
    with pytest.raises(DriverError, match="0099-empty.patch is empty"):
        tr.read_series(repo)
    series.write_text("")
    assert tr.read_series(repo) == []  # an empty series is one
    series.unlink()
    with pytest.raises(DriverError, match=r"^kernel/series is missing"):
        tr.read_series(repo)


@pytest.mark.parametrize("version", ["7.3.4-1~bpo13+1 junk", "", "latest", "7.3.4;rm"])
def test_a_corrupted_base_version_is_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str],
                                               version: str) -> None:
    repo = project(tmp_path / "repo")
    monkeypatch.setattr(cli, "find_repo_root", lambda: repo)
    base = repo / "kernel" / "BASE"
    base.write_text(re.sub(r"(?m)^version=.*$", f"version={version}", base.read_text()))
    msg = fails(["--build-dir", str(tmp_path / "build"), "run", "--profile", PROFILE], capsys)
    assert msg.startswith(str(base)) and ("is not a Debian version" in msg or "expected key=value" in msg)


def test_every_checks_json_entry_is_checked(tmp_path: Path) -> None:
    from cgkunit import checklist
    repo = project(tmp_path / "repo")
    shutil.copytree(REPO / "lib" / "kunit-cgroup", repo / "lib" / "kunit-cgroup")
    ok = {"name": "ok", "profile": PROFILE, "filter": "cgroup_rstat*"}
    for bad, why in (({"profile": "nope"}, "unknown profile 'nope'"),
                     ({"extra_patches": ["tools/kunit/breakage/none.patch"]},
                      "extra patch tools/kunit/breakage/none.patch does not exist"),
                     ({"filter": "nosuite.*"}, "'nosuite' matches none of the suites"),
                     ({"kernel_args": ["cgroup_kunit.threads=65"]}, "the suite wants 1..64"),
                     ({"expect_status": "fail|crashed"}, "expect_status 'fail|crashed': want")):
        checks = [ok, {**ok, "name": "last", **bad}]
        write_files(repo, {str(checklist.CHECKS_FILE): json.dumps({"checks": checks})})
        with pytest.raises(DriverError) as exc:
            checklist.load_checks(repo)
        assert f"{repo / checklist.CHECKS_FILE}: last: " in str(exc.value) and why in str(exc.value)
