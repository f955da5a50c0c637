"""carry.py: which suites a commit can build, read from the suite's Makefile and Kconfig and
the tree's headers; the backports apply to today's suite; the features are what the series
adds."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cgkunit import carry
from cgkunit.common import DriverError
from conftest import KUNIT_DIR

REPO = KUNIT_DIR.parent.parent
SUITE = REPO / "lib" / "kunit-cgroup"
KCONFIG_SYMBOL = re.compile(r"^config (\w+)$", re.MULTILINE)


def headers_with(*features: str) -> dict[str, str]:
    """Headers of a tree that has these features (their texts, one a line)."""
    out = {h: "" for h in carry.header_paths()}
    for name in features:
        f = carry.FEATURES[name]
        out[f.header] += f.text + "\n"
    return out


ALL = tuple(carry.FEATURES)
# kernel/series up to 0022: every hook but the reader snapshot's, the escrow's and the cpuset
# attach count, and inc_rlimit_get_ucounts() as it was (make bench's base kernel)
BENCH_BASE = tuple(f for f in ALL if f not in ("stat-snapshot", "charge-limit", "escrow-hooks",
                                                "shared-writes", "cpuset-attach-count"))
SERIES = [ln.split("#")[0].strip() for ln in (REPO / "kernel" / "series").read_text().splitlines()]
PATCHES = [(REPO / "kernel" / "patches" / name).read_text() for name in SERIES if name]
# what a patch adds to a header: a function's declaration, an enum's constant
DECLARED = re.compile(r"^(?:extern\s+)?(?:const\s+)?(?:(?:struct|enum|unsigned|signed)\s+)?"
                      r"\w+[\s*]+(\w+)\(|^\s+([A-Z][A-Z0-9_]+)\s*(?:=[^,]*)?,?\s*$")
C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
LOCAL_INCLUDE = re.compile(r'^#include "(\w+\.h)"', re.MULTILINE)


def added_lines(patch: str, path: str) -> list[str]:
    """The lines a patch adds to path, without their '+'."""
    out: list[str] = []
    current = None
    for ln in patch.splitlines():
        if ln.startswith("+++ "):
            current = ln[len("+++ b/"):]
        elif current == path and ln.startswith("+"):
            out.append(ln[1:])
    return out


def test_the_makefile_objects_are_known_and_the_symbols_are_the_kconfig_ones() -> None:
    symbols = carry.suite_symbols(REPO)
    objects = {o for objs in symbols.values() for o in objs}
    assert objects == set(carry.OBJECT_NEEDS)
    assert {f"{p.stem}.o" for p in SUITE.glob("*.c")} == objects
    assert symbols[""] == ["harness.o", "cpus.o", "oracle_kunit.o", "reach_kunit.o",
                           "taint_kunit.o"]
    # every symbol the Makefile selects objects with is one of the suite's Kconfig, and
    # every symbol of the suite's Kconfig but the module's selects objects
    kconfig = KCONFIG_SYMBOL.findall((SUITE / "Kconfig").read_text())
    assert sorted(s for s in symbols if s) == sorted(s for s in kconfig if s != "CGROUP_KUNIT_TEST")
    # the objects always built need nothing: they build at every commit
    assert all(carry.OBJECT_NEEDS[o] == () for o in symbols[""])
    assert all(f in carry.FEATURES for needs in carry.OBJECT_NEEDS.values() for f in needs)


def feature_patches() -> dict[str, int]:
    """The number of the patch of kernel/series that adds each feature's text to its header."""
    out: dict[str, int] = {}
    for name, f in carry.FEATURES.items():
        added = [n for n, p in enumerate(PATCHES, 1)
                 if any(f.found_in({f.header: ln}) for ln in added_lines(p, f.header))]
        assert added, name
        out[name] = added[0]
    return out


def test_each_feature_is_added_by_a_patch_of_the_series() -> None:
    """A feature's text is in a line a patch of kernel/series adds to its header."""
    assert sorted(feature_patches()) == sorted(carry.FEATURES)


def test_each_object_needs_the_hooks_it_calls() -> None:
    """An object that calls a hook of include/linux/cgroup_kunit.h (in its code or the suite's
    headers it includes, comments aside) needs a feature the same patch or a later one adds:
    a commit before that patch must not build it (0033's cpuset count, called by the pids
    suite, left the suite to fail to compile at 0021-0032)."""
    hooks: dict[str, int] = {}
    for n, p in enumerate(PATCHES, 1):
        for ln in added_lines(p, carry.HOOKS_H):
            m = DECLARED.match(ln)
            if m:
                hooks.setdefault(m.group(1) or m.group(2), n)
    assert hooks["cgroup_create_for_test"] < hooks["cpuset_attach_in_progress_for_test"]
    added = feature_patches()
    for src in sorted(SUITE.glob("*.c")):
        text = src.read_text() + "".join((SUITE / h).read_text()
                                         for h in LOCAL_INCLUDE.findall(src.read_text())
                                         if (SUITE / h).is_file())
        words = set(re.findall(r"\w+", C_COMMENT.sub("", text)))
        has = max((added[f] for f in carry.OBJECT_NEEDS[f"{src.stem}.o"]), default=0)
        late = sorted(w for w in words & set(hooks) if hooks[w] > has)
        assert not late, f"{src.name} calls {late} but needs nothing added at or after them"


def test_the_whole_series_carries_nothing() -> None:
    plan = carry.plan_for(headers_with(*ALL), REPO)
    assert plan.off == {} and plan.backports == () and plan.kconfig == [] and plan.describe() == ""


def test_the_base_builds_the_harness_alone() -> None:
    plan = carry.plan_for(headers_with(), REPO)
    assert set(plan.off) == {s for s in carry.suite_symbols(REPO) if s}
    # no suite to backport for; the module's symbol, which the series defines with its hooks
    assert [b.feature for b in plan.backports] == ["module-symbol"]
    assert plan.describe().endswith("; backport module-symbol-before-the-hooks.patch")
    assert plan.off["CGROUP_MIGRATE_KUNIT_TEST"] == ("cgroup-hooks", "controller-hooks",
                                                     "user-victims")
    assert "CONFIG_CGROUP_UCOUNT_KUNIT_TEST=n" in plan.kconfig


def test_the_bench_base_builds_the_benchmarks_with_a_backport() -> None:
    plan = carry.plan_for(headers_with(*BENCH_BASE), REPO)
    assert plan.off == {"CGROUP_UCOUNT_KUNIT_TEST": ("escrow-hooks",),
                        "CGROUP_RSTAT_READER_KUNIT_TEST": ("stat-snapshot",),
                        "CGROUP_PIDS_KUNIT_TEST": ("cpuset-attach-count",)}
    assert [b.feature for b in plan.backports] == ["charge-limit", "shared-writes"]
    assert plan.describe() == ("CGROUP_UCOUNT_KUNIT_TEST off (it lacks the ucount escrow test "
                               "hooks); CGROUP_RSTAT_READER_KUNIT_TEST off (it lacks the cpu.stat "
                               "snapshot); CGROUP_PIDS_KUNIT_TEST off (it lacks the count of "
                               "cpuset attaches in progress); "
                               "backport sigpending-charge-before-limit.patch; "
                               "backport shared-writes-before-the-escrow.patch")
    # without backports (a module built out of tree) the benchmarks are off too
    plain = carry.plan_for(headers_with(*BENCH_BASE), REPO, backports=False)
    assert plain.off["CGROUP_KUNIT_BENCH"] == ("charge-limit", "shared-writes")
    assert plain.backports == ()


def test_features_are_words_of_the_header() -> None:
    f = carry.FEATURES["cgroup-hooks"]
    assert f.found_in({f.header: "struct cgroup *cgroup_create_for_test(struct cgroup *p);"})
    assert not f.found_in({f.header: "cgroup_create_for_tests();"})
    assert not f.found_in({})
    limit = carry.FEATURES["charge-limit"]
    assert limit.found_in({limit.header: "\t\t\t    bool override_rlimit, unsigned long limit);"})
    assert not limit.found_in({limit.header: "\t\t\t    bool override_rlimit);"})


def test_an_unknown_object_needs_every_feature() -> None:
    assert carry.needs(["new_kunit.o"]) == list(carry.FEATURES)
    assert carry.needs(["harness.o", "files.o"]) == ["mount-hooks"]


def test_a_missing_makefile_or_backport_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DriverError, match="Makefile"):
        carry.suite_symbols(tmp_path)
    (tmp_path / carry.SUITE_MAKEFILE).parent.mkdir(parents=True)
    shutil.copy(SUITE / "Makefile", tmp_path / carry.SUITE_MAKEFILE)
    with pytest.raises(DriverError, match="sigpending-charge-before-limit.patch is missing"):
        carry.plan_for(headers_with(*BENCH_BASE), tmp_path)


def test_the_backports_apply_to_the_suite(tmp_path: Path) -> None:
    """Each backport applies to today's lib/kunit-cgroup (git apply, as the hook does)."""
    shutil.copytree(SUITE, tmp_path / "lib" / "kunit-cgroup")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for b in carry.BACKPORTS:
        proc = subprocess.run(["git", "-C", str(tmp_path), "apply", "--check", str(REPO / b.patch)],
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{b.patch}: {proc.stderr}"
    assert {b.feature for b in carry.BACKPORTS} <= set(carry.FEATURES)
    assert sorted(p.name for p in (REPO / carry.BACKPORT_DIR).iterdir()) == \
        sorted(b.patch.name for b in carry.BACKPORTS)


def test_a_tree_is_carried_as_its_commit_says(tmp_path: Path) -> None:
    """tree.carry_at reads the headers of the commit, not the work tree; hook_suite applies the
    backports to the hooked-in copy of the suite, and the project's copy stays as it was."""
    from cgkunit import tree as tr
    kernel = tmp_path / "linux"
    files = {"lib/Kconfig.debug": "", "lib/Makefile": "", **headers_with(*BENCH_BASE)}
    for rel, text in files.items():
        (kernel / rel).parent.mkdir(parents=True, exist_ok=True)
        (kernel / rel).write_text(text)
    tr.git(kernel, "init", "-q")
    tr.git(kernel, "add", "-A")
    tr.git(kernel, "commit", "-q", "-m", "0020", env=tr.AUTHOR_ENV)
    old = tr.git(kernel, "rev-parse", "HEAD").stdout.strip()
    (kernel / carry.USER_NS_H).write_text(headers_with("charge-limit")[carry.USER_NS_H])
    plan = tr.carry_at(kernel, old, REPO)
    assert [b.feature for b in plan.backports] == ["charge-limit", "shared-writes"]
    # the work tree has the first feature
    assert [b.feature for b in carry.plan(kernel, REPO).backports] == ["shared-writes"]
    tr.hook_suite(kernel, SUITE, [REPO / b.patch for b in plan.backports])
    hooked = (kernel / "lib" / "kunit-cgroup" / "sigpending.h").read_text()
    assert "n > limit" in hooked and "n > limit" not in (SUITE / "sigpending.h").read_text()
    counted = (kernel / "lib" / "kunit-cgroup" / "shared_writes.h").read_text()
    assert "COUNTED\tfalse" in counted and "COUNTED\ttrue" in (SUITE / "shared_writes.h").read_text()
    assert tr.MAKEFILE_LINE in (kernel / "lib" / "Makefile").read_text()
    # hooked again without the backport: the suite's own file back
    tr.hook_suite(kernel, SUITE)
    assert (kernel / "lib" / "kunit-cgroup" / "sigpending.h").read_text() == \
        (SUITE / "sigpending.h").read_text()


def test_the_module_symbol_comes_from_a_backport_only_where_the_tree_lacks_it() -> None:
    lacking = tuple(f for f in ALL if f != "module-symbol")
    plan = carry.plan_for(headers_with(*lacking), REPO)
    assert plan.off == {} and [b.feature for b in plan.backports] == ["module-symbol"]
    # out of tree (no backports) there is nothing to do: the .config has no symbol either
    assert carry.plan_for(headers_with(*lacking), REPO, backports=False).backports == ()


def test_the_suite_kconfig_goes_right_after_the_module_symbol(tmp_path: Path) -> None:
    """The hook sources the suite's Kconfig after the entry of CONFIG_CGROUP_KUNIT_TEST (help
    text and blank lines in it) where the kernel has one, so that menuconfig nests the suites
    under it; at the end of lib/Kconfig.debug where it does not (the backport defines it)."""
    from cgkunit import tree as tr
    entry = ["config CGROUP_KUNIT_TEST", "\ttristate \"x\"", "\thelp", "\t  One.", "",
             "\t  Two.", ""]
    kd = tmp_path / "Kconfig.debug"
    kd.write_text("\n".join(["config A", "\tbool", ""] + entry + ["config B", "\tbool", ""]))
    assert tr.ensure_line(kd, tr.KCONFIG_LINE, after=tr.KCONFIG_ENTRY)
    lines = kd.read_text().splitlines()
    at = lines.index(tr.KCONFIG_LINE)
    assert lines[at - 2:at + 3] == ["\t  Two.", "", tr.KCONFIG_LINE, "", "config B"]
    assert not tr.ensure_line(kd, tr.KCONFIG_LINE, after=tr.KCONFIG_ENTRY)
    kd.write_text("config A\n\tbool\n")
    assert tr.ensure_line(kd, tr.KCONFIG_LINE, after=tr.KCONFIG_ENTRY)
    assert kd.read_text().splitlines()[-1] == tr.KCONFIG_LINE


def test_no_backport_of_the_symbol_for_a_suite_that_defines_it(tmp_path: Path) -> None:
    (tmp_path / carry.SUITE_MAKEFILE).parent.mkdir(parents=True)
    shutil.copy(SUITE / "Makefile", tmp_path / carry.SUITE_MAKEFILE)
    (tmp_path / carry.SUITE_KCONFIG).write_text("config CGROUP_KUNIT_TEST\n\ttristate \"x\"\n")
    assert carry.plan_for(headers_with(), tmp_path).backports == ()
    assert not carry.suite_defines_module_symbol(REPO)
