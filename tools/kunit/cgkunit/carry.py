"""Carry the suite onto a kernel commit older than it.

bisect, series-check and the benchmarks' base kernel hook today's lib/kunit-cgroup into
commits (of the series, or of KERNEL_SRC) that lack some of the test hooks or kernel changes
it is written against. The suite knows nothing of that: it is written against the whole
series, and each of its suites is a Kconfig symbol of its own, whose objects its Makefile
lists (`cgroup_kunit-$(CONFIG_<symbol>) += a.o b.o`). What the driver knows, and only for
older commits:

- what each object of the suite needs of the kernel (OBJECT_NEEDS), as FEATURES: a test hook
  or a change of the series, each found by a text of the tree's headers (or of
  lib/Kconfig.debug: CONFIG_CGROUP_KUNIT_TEST, which the series defines with its first hooks
  and every build needs, BUILD_NEEDS);
- so which suites a commit cannot build: they are turned off in its build (kunit.py
  --kconfig_add CONFIG_<symbol>=n), and the rest of the suite builds and runs there;
- BACKPORTS: where a suite is wanted on kernels from before a change it builds against (the
  ucount benchmark on make bench's base kernel, before 0026 changed inc_rlimit_get_ucounts()
  and 0028 counted the writes siblings share),
  a patch of tools/kunit/backports/ adapts the hooked-in copy of the suite to them (the work
  tree's lib/kunit-cgroup; the project's is only read).

The prepared tree's head (the whole series) is never carried: a hook missing there is a
build error, not a suite quietly left out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .common import DriverError, read_text_file, sha256_file

HOOKS_H = "include/linux/cgroup_kunit.h"
USER_NS_H = "include/linux/user_namespace.h"
KCONFIG_DEBUG = "lib/Kconfig.debug"
SUITE_MAKEFILE = Path("lib") / "kunit-cgroup" / "Makefile"
SUITE_KCONFIG = Path("lib") / "kunit-cgroup" / "Kconfig"
BACKPORT_DIR = Path("tools") / "kunit" / "backports"
SUITE_MODULE_OBJECTS = "cgroup_kunit"  # the composite object: cgroup_kunit-y, -$(CONFIG_X)
# `cgroup_kunit-y := a.o b.o`, `cgroup_kunit-$(CONFIG_X) += c.o d.o`, one line each
MAKEFILE_LINE = re.compile(rf"^{SUITE_MODULE_OBJECTS}-(y|\$\(CONFIG_(\w+)\))\s*[:+]?=\s*(.*?)\s*$",
                           re.MULTILINE)


@dataclass(frozen=True)
class Feature:
    """Something of the series the suite builds against, and the text of a header of the
    tree that says the tree has it."""
    what: str
    header: str
    text: str

    def found_in(self, headers: dict[str, str]) -> bool:
        text = headers.get(self.header, "")
        word = re.escape(self.text)
        return re.search(rf"(?<!\w){word}(?!\w)", text) is not None


FEATURES: dict[str, Feature] = {
    "module-symbol": Feature("CONFIG_CGROUP_KUNIT_TEST", KCONFIG_DEBUG,
                             "config CGROUP_KUNIT_TEST"),
    "ucount-hooks": Feature("the ucount test hooks", HOOKS_H, "ucounts_nr_hashed_for_uid"),
    "cgroup-hooks": Feature("the cgroup test helpers", HOOKS_H, "cgroup_create_for_test"),
    "controller-hooks": Feature("controllers enabled from KUnit", HOOKS_H,
                                "cgroup_subtree_control_write_for_test"),
    "rstat-hooks": Feature("the rstat test hooks", HOOKS_H, "css_rstat_pending_for_test"),
    "cset-hooks": Feature("the css_set test hooks", HOOKS_H, "cgroup_check_css_sets_for_test"),
    "mount-hooks": Feature("test mounts of cgroup hierarchies", HOOKS_H, "cgroup_mount_for_test"),
    "user-victims": Feature("killable and freezable test tasks", HOOKS_H, "CGROUP_FORK_TEST_USER"),
    "stat-snapshot": Feature("the cpu.stat snapshot", HOOKS_H, "cgroup_base_stat_snapshot"),
    "charge-limit": Feature("inc_rlimit_get_ucounts() checking the caller's limit", USER_NS_H,
                            "bool override_rlimit, unsigned long limit"),
    "escrow-hooks": Feature("the ucount escrow test hooks", HOOKS_H,
                            "ucounts_escrow_read_for_test"),
    "shared-writes": Feature("the count of writes to ucounts siblings share", HOOKS_H,
                             "ucounts_shared_writes_for_test"),
    "cpuset-attach-count": Feature("the count of cpuset attaches in progress", HOOKS_H,
                                   "cpuset_attach_in_progress_for_test"),
}

# What each object of the suite calls (tests/test_carry.py: every object of the Makefile is
# here). The helpers: files.o (cgroup files through a mount), hierarchy.o (test cgroups and
# baselines), victims.o (the tasks moved around).
OBJECT_NEEDS: dict[str, tuple[str, ...]] = {
    "harness.o": (), "cpus.o": (), "oracle_kunit.o": (), "reach_kunit.o": (),
    "taint_kunit.o": (),
    "files.o": ("mount-hooks",),
    "hierarchy.o": ("cgroup-hooks", "controller-hooks"),
    "victims.o": ("cgroup-hooks", "user-victims"),
    "ucount_kunit.o": ("ucount-hooks", "charge-limit", "escrow-hooks", "shared-writes"),
    "migrate_kunit.o": ("cgroup-hooks",),
    "rstat_kunit.o": ("cgroup-hooks", "controller-hooks", "rstat-hooks"),
    "rstat_reader_kunit.o": ("cgroup-hooks", "rstat-hooks", "stat-snapshot"),
    "cset_kunit.o": ("cgroup-hooks", "controller-hooks", "cset-hooks"),
    "v1_kunit.o": ("cgroup-hooks", "cset-hooks", "mount-hooks"),
    "pids_kunit.o": ("cgroup-hooks", "controller-hooks", "mount-hooks", "cpuset-attach-count"),
    "freeze_kill_kunit.o": ("cgroup-hooks", "ucount-hooks", "mount-hooks", "user-victims"),
    "devres_kunit.o": ("cgroup-hooks", "controller-hooks", "mount-hooks"),
    "bench_kunit.o": ("cgroup-hooks", "ucount-hooks", "rstat-hooks", "charge-limit",
                      "shared-writes"),
}


# What every build of the suite needs (the objects always built too): where the tree lacks it,
# its backport, when backports apply; without them (a module built out of tree, whose .config
# then has no CONFIG_CGROUP_KUNIT_TEST) nothing of the suite builds anyway.
BUILD_NEEDS = ("module-symbol",)


@dataclass(frozen=True)
class Backport:
    """A patch of the suite for kernels without a feature."""
    feature: str
    patch: Path  # relative to the project


BACKPORTS: tuple[Backport, ...] = (
    Backport("module-symbol", BACKPORT_DIR / "module-symbol-before-the-hooks.patch"),
    Backport("charge-limit", BACKPORT_DIR / "sigpending-charge-before-limit.patch"),
    Backport("shared-writes", BACKPORT_DIR / "shared-writes-before-the-escrow.patch"),
)


@dataclass(frozen=True)
class Carry:
    """How the suite goes onto one kernel tree."""
    off: dict[str, tuple[str, ...]] = field(default_factory=dict)  # symbol -> features it lacks
    backports: tuple[Backport, ...] = ()

    @property
    def kconfig(self) -> list[str]:
        """The kunit.py --kconfig_add words that turn off the suites the tree cannot build."""
        return [f"CONFIG_{symbol}=n" for symbol in self.off]

    def describe(self) -> str:
        """One line for the progress: what is off and why, and the backports; "" for none."""
        parts = [f"{symbol} off (it lacks {', '.join(FEATURES[f].what for f in lacks)})"
                 for symbol, lacks in self.off.items()]
        parts += [f"backport {b.patch.name}" for b in self.backports]
        return "; ".join(parts)


def suite_symbols(repo: Path) -> dict[str, list[str]]:
    """The suite Makefile's objects by Kconfig symbol ("" for the objects always built; none
    for a suite of one object, which has no suite to turn off); DriverError when the Makefile
    cannot be read."""
    out: dict[str, list[str]] = {}
    for always, symbol, objects in MAKEFILE_LINE.findall(read_text_file(repo / SUITE_MAKEFILE)):
        key = "" if always == "y" else symbol
        out.setdefault(key, []).extend(o for o in objects.split() if o.endswith(".o"))
    return out


def suite_defines_module_symbol(repo: Path) -> bool:
    """Whether the suite's own Kconfig defines CONFIG_CGROUP_KUNIT_TEST (as it did before the
    series defined it with its first hooks): then no tree needs it backported."""
    path = repo / SUITE_KCONFIG
    text = read_text_file(path) if path.is_file() else ""
    return FEATURES["module-symbol"].found_in({KCONFIG_DEBUG: text})


def needs(objects: list[str]) -> list[str]:
    """The features objects need, in FEATURES' order; an object the table does not know needs
    every feature (it builds only where the tree has them all)."""
    wanted = {f for o in objects for f in OBJECT_NEEDS.get(o, tuple(FEATURES))}
    return [f for f in FEATURES if f in wanted]


def header_paths() -> list[str]:
    """The files (headers, and lib/Kconfig.debug) FEATURES are found in."""
    return sorted({f.header for f in FEATURES.values()})


def read_headers(tree: Path) -> dict[str, str]:
    """The headers FEATURES are found in, as tree's work tree has them ("" for one it lacks)."""
    out: dict[str, str] = {}
    for header in header_paths():
        try:
            out[header] = (tree / header).read_text(errors="replace")
        except OSError:
            out[header] = ""
    return out


def plan(tree: Path, repo: Path, backports: bool = True) -> Carry:
    """What carrying the suite onto tree's work tree takes (plan_for its headers)."""
    return plan_for(read_headers(tree), repo, backports)


def plan_for(headers: dict[str, str], repo: Path, backports: bool = True) -> Carry:
    """What carrying the suite onto a tree with these headers takes: the suites it cannot
    build, and the backports applied for the ones it can (whose patches must exist);
    without backports, the suites that would need one are off too."""
    present = {name for name, f in FEATURES.items() if f.found_in(headers)}
    if suite_defines_module_symbol(repo):
        present.add("module-symbol")
    cover = {b.feature: b for b in BACKPORTS} if backports else {}
    off: dict[str, tuple[str, ...]] = {}
    used: dict[str, Backport] = {}
    for symbol, objects in suite_symbols(repo).items():
        if not symbol:
            continue
        missing = [f for f in needs(objects) if f not in present]
        lacks = tuple(f for f in missing if f not in cover)
        if lacks:
            off[symbol] = lacks
        else:
            used.update((f, cover[f]) for f in missing)
    # what every build needs, the objects always built included
    used.update((f, cover[f]) for f in BUILD_NEEDS if f not in present and f in cover)
    for b in used.values():
        if not (repo / b.patch).is_file():
            raise DriverError(f"{b.patch} is missing (the backport for kernels without "
                              f"{FEATURES[b.feature].what})")
    return Carry(off=off, backports=tuple(b for b in BACKPORTS if b.feature in used))


def backport_hashes(repo: Path) -> dict[str, str]:
    """Each backport's patch -> its sha256 (missing ones left out): what a suite hooked in
    with them depends on besides the suite's own files."""
    return {str(b.patch): sha256_file(repo / b.patch) for b in BACKPORTS
            if (repo / b.patch).is_file()}
