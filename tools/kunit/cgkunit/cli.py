"""Command line: python3 tools/kunit/cgkunit.py <command> [options]."""
from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Mapping, NoReturn, Sequence

from . import bench, coverage
from . import check
from . import checklist
from . import bisection
from . import deps, mbox, module_run, pipeline, reach, stress
from . import series_check, titles
from .common import (BASE_FILE, Context, DriverError, build_root, check_build_dir, env_flag,
                     error_line, find_repo_root, flag_value, inside, one_line, read_text_file,
                     safe_name, say, user_path)
from .fetch import fetch_base, parse_base
from .lock import WAIT_ENV, BuildLock
from .params import check_filter, check_kernel_args
from .profile import (MAKE_TARGETS, accel_mode, isolate_mode, list_profiles, load_profile,
                      results_dir)
from .report import EXIT_ERROR, EXIT_HELP, EXIT_INTERRUPTED, Report, exit_code, raise_refused
from .summary import format_summary
from .tree import hook_message, read_series, validate_kernel_src

DESCRIPTION = """Drive the cgroup KUnit suite: fetch the pinned base, prepare a git tree
(base + kernel/series + the suite), build a profile with the tree's own kunit.py,
boot it under a watchdog and report tests, splats and seeds."""
BENCH_DESCRIPTION = """Build the base (kernel/series up to tools/kunit/bench.json's base_before)
and the whole series with bench.json's profile, boot each once with the same seed,
and compare their metric lines: a table on stdout; bench.json, bench.txt and plots
in build/results/bench/."""
ENV_HELP = """environment: KERNEL_SRC, KERNEL_REF, KERNEL_ARGS, FILTER, PROFILE, RUNS, SEED,
UNTIL_FAIL, FROM, GOOD, BAD, SIGNATURE, REPS, DURATION_MS, ROUNDS, VCPUS, DEPTH, ONLY,
CYCLES, MODULE_ARGS, KDIR (the defaults of the options of those names: how the Makefile's
variables reach the driver), CGKUNIT_BUILD (build root), CGKUNIT_APT_MIRROR (Debian
mirror), CGKUNIT_ACCEL=auto|kvm|tcg (QEMU accelerator for x86_64 profiles),
CGKUNIT_ISOLATE=suite|test|none (default of --isolate for run and check),
CGKUNIT_UNPINNED=1 (kernel/BASE's version gone from the mirror: build the newest one,
without the sha256 pin; else that is exit status 2), CGKUNIT_WAIT_LOCK=1 (another
command holds the build root: wait for it, as --wait-lock)."""
ISOLATE_HELP = ("boot once per suite or per test (kunit.py --run_isolated), so a crash or a "
                "stopped kernel costs only its own suite or test; 'none': one boot "
                "(default $CGKUNIT_ISOLATE, else the profile's '#@ isolate:', else none)")


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line and exit status 2, and which knows which
    environment variable each option takes its default from (env_vars)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.env_vars: dict[str, str] = {}  # variable -> the option whose default it is

    def error(self, message: str) -> NoReturn:
        print(f"cgkunit: error: {one_line(message)}", file=sys.stderr)
        sys.exit(EXIT_ERROR)


def env_opt(p: argparse.ArgumentParser, flag: str, var: str, default: Any = None,
            **kw: Any) -> None:
    """An option whose default is $var when that is set and not empty (checked by the
    option's type, as if given on the command line), else default; what the Makefile's
    variables reach the driver through."""
    value = os.environ.get(var)
    p.add_argument(flag, default=value if value else default, **kw)
    if isinstance(p, Parser):
        p.env_vars[var] = flag


def _number(what: str, low: int | None = None,
            check: Callable[[int], object] | None = None) -> Callable[[str], int]:
    """An argparse type: an integer (at least low; check may raise DriverError); what names
    where it may come from ('$RUNS'), for a value that is not a number."""
    def parse(text: str) -> int:
        try:
            n = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}"
                                             + (f" (or from {what})" if what else "")) from None
        if low is not None and n < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {n}")
        try:
            if check is not None:
                check(n)
        except DriverError as e:
            raise argparse.ArgumentTypeError(e.reason) from None
        return n
    return parse


def _flag(var: str) -> Callable[[str], bool]:
    """An argparse type: 1/0, yes/no, true/false (UNTIL_FAIL=no is no)."""
    def parse(text: str) -> bool:
        try:
            return flag_value(var, text)
        except DriverError as e:
            raise argparse.ArgumentTypeError(e.reason) from None
    return parse


def jobs_max() -> int:
    """The most --jobs a build may ask for: 4 per CPU of this machine (at least 8)."""
    return max(8, 4 * (os.cpu_count() or 1))


def _check_jobs(n: int) -> None:
    if n > jobs_max():
        raise DriverError(f"at most {jobs_max()} (4 per CPU of this machine), got {n}")


_jobs = _number("", 1, _check_jobs)
_cycles = _number("$CYCLES", None, module_run.check_cycles)


def _jobs_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", type=_jobs, metavar="N",
                   help="parallel build jobs (default: the CPUs; at most 4 per CPU)")


def _profile_opt(p: argparse.ArgumentParser, default: str | None = None, help: str = "") -> None:
    required = default is None and not os.environ.get("PROFILE")
    env_opt(p, "--profile", "PROFILE", default, required=required, metavar="NAME",
            help=(help + " " if help else "") + "(default $PROFILE"
            + (f", else {default})" if default else ")"))


def _tree_opts(p: argparse.ArgumentParser, ref: bool = True) -> None:
    env_opt(p, "--kernel-src", "KERNEL_SRC", metavar="PATH",
            help="your own Linux git tree instead of the Debian base (default $KERNEL_SRC); "
                 "it is only read, never modified")
    if not ref:
        return
    env_opt(p, "--kernel-ref", "KERNEL_REF", "HEAD", metavar="REF",
            help="commit of --kernel-src to use (default $KERNEL_REF or HEAD)")


def _filter_opt(p: argparse.ArgumentParser, help: str) -> None:
    env_opt(p, "--filter", "FILTER", "", metavar="GLOB", help=help)


def _boot_opts(p: argparse.ArgumentParser, no_build: bool = True) -> None:
    """Options of a command that builds and boots one profile (run, coverage)."""
    env_opt(p, "--kernel-args", "KERNEL_ARGS", "", metavar='"A=B C=D"',
            help="extra kernel command line, e.g. cgroup_kunit.seed=123 (default $KERNEL_ARGS); "
                 "a cgroup_kunit.* name the suite does not declare, or a value it "
                 "refuses, is bad input (exit status 2)")
    _filter_opt(p, "KUnit filter glob, e.g. 'suite.case*' (default $FILTER: the whole suite)")
    if no_build:
        p.add_argument("--no-build", action="store_true", help="boot the kernel built last time")
    _jobs_opt(p)
    p.add_argument("--verbose", action="store_true", help="echo the console while it runs")


def _runs(text: str) -> int:
    """RUNS / --runs of bisect: a number in bisection.RUNS (an argparse type)."""
    try:
        return bisection.parse_runs(text)
    except DriverError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _isolate_opt(p: argparse.ArgumentParser, extra: str = "") -> None:
    env_opt(p, "--isolate", "CGKUNIT_ISOLATE", metavar="suite|test|none",
            help=ISOLATE_HELP + extra)


def make_parser() -> Parser:
    parser = Parser(prog="cgkunit", description=DESCRIPTION, epilog=EXIT_HELP + "\n\n" + ENV_HELP,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", metavar="DIR",
                        help="build root (default $CGKUNIT_BUILD or <repo>/build)")
    parser.add_argument("--wait-lock", action="store_true",
                        help=f"when another command holds the build root, wait for it (also "
                             f"${WAIT_ENV}=1) instead of stopping with exit status 2")
    sub = parser.add_subparsers(dest="command", metavar="command", required=True)
    sub.add_parser("deps", help="install missing Debian build dependencies (as root)")
    sub.add_parser("fetch", help="download, verify and unpack the pinned base source")
    p = sub.add_parser("prepare", help="prepare the git tree (base + series + suite)")
    _tree_opts(p)
    p = sub.add_parser("mbox", help="kernel/series and the suite as one patch set with a cover "
                       "letter (git format-patch files), checked to apply on the base")
    p.add_argument("--out", metavar="DIR", help="where to write them (default "
                   "<build>/results/mbox): a new or empty directory, or one mbox wrote before")
    p = sub.add_parser("build", help="prepare and build one profile")
    _profile_opt(p)
    _jobs_opt(p)
    _tree_opts(p)
    p = sub.add_parser("module", help="build the suite as a module (cgroup_kunit.ko)")
    _profile_opt(p)
    _jobs_opt(p)
    _tree_opts(p)
    p = sub.add_parser("module-run", help="load and unload cgroup_kunit.ko in a booted x86_64 "
                       "guest CYCLES times, under kmemleak (exit status below)",
                       epilog=EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _profile_opt(p, "x86_64-kasan")
    env_opt(p, "--cycles", "CYCLES", 1, type=_cycles, metavar="N",
            help="load/unload cycles, 1..1000 (default $CYCLES, else 1)")
    env_opt(p, "--module-args", "MODULE_ARGS", "", metavar='"seed=N threads=N"',
            help="insmod parameters (default $MODULE_ARGS); a name the suite does not "
                 "declare, or a value it refuses, is bad input (exit status 2). "
                 "dynmods=1 also runs cgroup_migrate_dynmods, which switches favordynmods "
                 "on for the rest of the boot: cgroup_migrate then skips itself in later "
                 "cycles")
    _filter_opt(p, "kunit.filter_glob for the module's suites (default $FILTER: all)")
    env_opt(p, "--kdir", "KDIR", "", metavar="PATH",
            help="build the module against this built x86_64 kernel (it must carry "
                 "kernel/series) and boot that kernel's bzImage (default $KDIR)")
    _jobs_opt(p)
    p.add_argument("--verbose", action="store_true", help="echo the console while it runs")
    _tree_opts(p)
    p = sub.add_parser("run", help="prepare, build, boot, report (exit status below)",
                       epilog=EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _profile_opt(p)
    _boot_opts(p)
    _isolate_opt(p)
    _tree_opts(p)
    p = sub.add_parser("bench", help="benchmarks: the base kernel against base + kernel/series",
                       description=BENCH_DESCRIPTION,
                       epilog=EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    env_opt(p, "--reps", "REPS", bench.BenchOptions.reps, type=_number("$REPS"),
            metavar="N", help=f"repetitions of every point ({bench.REPS[0]}..{bench.REPS[1]}, "
                              f"default $REPS, else %(default)s)")
    env_opt(p, "--duration-ms", "DURATION_MS", bench.BenchOptions.duration_ms,
            type=_number("$DURATION_MS"), metavar="MS",
            help=f"length of one rep ({bench.DURATION_MS[0]}..{bench.DURATION_MS[1]}, "
                 f"default $DURATION_MS, else %(default)s)")
    env_opt(p, "--only", "ONLY", metavar="NAMES",
            help=f"comma-separated subset of {','.join(bench.BENCH_KEYS)} (default $ONLY, else all)")
    env_opt(p, "--seed", "SEED", type=_number("$SEED"), metavar="N",
            help="suite seed for both boots (default $SEED, else random)")
    env_opt(p, "--profile", "PROFILE", metavar="NAME",
            help="bench profile (default $PROFILE, else bench.json's: um-bench, UML SMP on "
                 "the host's own cores; x86_64-bench where KVM works)")
    env_opt(p, "--vcpus", "VCPUS", type=_number("$VCPUS"), metavar="N",
            help="vCPUs instead of the profile's (default $VCPUS, else the host's cores; more "
                 "than that is oversubscribed, and said beside every number)")
    env_opt(p, "--rounds", "ROUNDS", bench.BenchOptions.rounds, type=_number("$ROUNDS"),
            metavar="N", help=f"rounds of base, series and control (the base again) boots, "
                              f"alternating, reps pooled ({bench.ROUNDS[0]}..{bench.ROUNDS[1]}, default $ROUNDS, "
                              f"else %(default)s)")
    env_opt(p, "--depth", "DEPTH", bench.BenchOptions.depth, type=_number("$DEPTH"),
            metavar="N", help=f"depth of the leaves the rstat benchmark charges, the root's "
                              f"children at 1 ({bench.DEPTH[0]}..{bench.DEPTH[1]}, default $DEPTH, "
                              f"else %(default)s)")
    p.add_argument("--no-build", action="store_true", help="boot the kernels built last time")
    _jobs_opt(p)
    p.add_argument("--report", action="store_true",
                   help="aggregate the console logs of the last run again (no build, no boot)")
    p.add_argument("--verbose", action="store_true", help="echo the console while it runs")
    _tree_opts(p)
    p = sub.add_parser("stress", help="boot one kernel many times: how often, and how, it fails",
                       description=stress.STRESS_DESCRIPTION, epilog=stress.STRESS_EXIT_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _profile_opt(p, "um-lockdep")
    env_opt(p, "--runs", "RUNS", stress.StressOptions.runs, type=_number("$RUNS"),
            metavar="N", help=f"boots ({stress.RUNS[0]}..{stress.RUNS[1]}, default $RUNS, "
                              f"else %(default)s)")
    env_opt(p, "--seed", "SEED", type=_number("$SEED"), metavar="N",
            help="suite seed of every boot (default $SEED, else a new random one each boot, "
                 "or the cgroup_kunit.seed of --kernel-args)")
    env_opt(p, "--until-fail", "UNTIL_FAIL", False, nargs="?", const=True,
            type=_flag("UNTIL_FAIL"), metavar="yes|no",
            help="stop at the first failed run (default $UNTIL_FAIL: 1/0, yes/no, true/false)")
    _boot_opts(p)
    _tree_opts(p)
    p = sub.add_parser("bisect", help="git bisect run over repeated boots: the commit that "
                       "introduced a failure signature, with a confidence",
                       description=bisection.BISECT_DESCRIPTION, epilog=bisection.BISECT_EXIT_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    env_opt(p, "--good", "GOOD", "", metavar="REV",
            help="a commit without the failure (default $GOOD); without --kernel-src: "
                 "base or a patch of kernel/series, e.g. 0012")
    env_opt(p, "--bad", "BAD", "", metavar="REV", help="a commit with it (default $BAD)")
    _profile_opt(p, "um-lockdep")
    env_opt(p, "--signature", "SIGNATURE", bisection.AUTO,
            metavar="KEY", help="the failure signature sought, as make stress prints it "
            "('*' wildcards), or auto: the most frequent at BAD (default $SIGNATURE, else auto)")
    env_opt(p, "--runs", "RUNS", bisection.BisectOptions.runs, type=_runs, metavar="N",
            help=f"boots per commit ({bisection.RUNS[0]}..{bisection.RUNS[1]}, default $RUNS, "
                 f"else %(default)s)")
    _boot_opts(p, no_build=False)
    _tree_opts(p, ref=False)
    p = sub.add_parser("bisect-step")  # what git bisect run calls (no help: not for users)
    p.add_argument("--profile", required=True)
    p = sub.add_parser("bisect-selftest", help="bisect a throwaway tree with a known culprit "
                       "(a breakage patch): it must be named with confidence >= 0.9")
    env_opt(p, "--runs", "RUNS", bisection.SELFTEST_RUNS, type=_runs, metavar="N",
            help="boots per commit (default $RUNS, else %(default)s)")
    _jobs_opt(p)
    p.add_argument("--verbose", action="store_true", help="echo the console while it runs")
    p = sub.add_parser("series-check", help="build and boot every commit of kernel/series on its "
                       "own: does each build and pass the suite?",
                       description=series_check.SERIES_CHECK_DESCRIPTION,
                       epilog=series_check.SERIES_CHECK_EXIT_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _profile_opt(p, series_check.SeriesCheckOptions.profile)
    env_opt(p, "--from", "FROM", "", dest="start", metavar="PATCH",
            help="start at this commit: base, or a patch of kernel/series by its name "
                 "or number, e.g. 0012 (default $FROM, else base)")
    _boot_opts(p, no_build=False)
    p = sub.add_parser("coverage", help="the suite on um-coverage (UML gcov): line and branch "
                                        "coverage of the cgroup and ucount files, lcov HTML",
                       epilog=EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _boot_opts(p)
    _tree_opts(p)
    p = sub.add_parser("reach", help="the lockdep usage the suite reached for each target lock "
                       "class, beside the contexts the kernel's own code takes it in",
                       description=reach.__doc__,
                       epilog=EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _profile_opt(p, "um-lockdep", help=f"a lockdep profile: {', '.join(reach.PROFILES)}")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--last", action="store_true",
                     help="no build, no boot: the console of the profile's last run "
                          "(make run) in build/results/<profile>/")
    src.add_argument("--console", metavar="FILE",
                     help="no build, no boot: a console log of a run that had cgroup_reach")
    p.add_argument("--why", action="store_true", help="also print every cell's reason")
    env_opt(p, "--kernel-args", "KERNEL_ARGS", "", metavar='"A=B C=D"',
            help="extra kernel command line (default $KERNEL_ARGS)")
    p.add_argument("--no-build", action="store_true", help="boot the kernel built last time")
    _jobs_opt(p)
    p.add_argument("--verbose", action="store_true", help="echo the console while it runs")
    _tree_opts(p)
    p = sub.add_parser("check", help="prove the oracle: runs that must fail as expected")
    env_opt(p, "--only", "ONLY", metavar="NAME", help="run just this check (default $ONLY)")
    p.add_argument("--list", action="store_true", help="list the checks and exit")
    p.add_argument("--profiles", metavar="A,B", default="",
                   help="only the checks that boot one of these profiles (default all)")
    _isolate_opt(p, " (a check's own \"isolate\" key in checks.json wins)")
    _tree_opts(p)
    p = sub.add_parser("report", help="re-print the report of an earlier run")
    _profile_opt(p)
    p.add_argument("--variant", default="",
                   help="results of a variant or check run (e.g. check-oracle-lockdep)")
    sub.add_parser("profiles", help="list the profiles")
    return parser


def _split_args(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as e:
        raise DriverError(f"bad --kernel-args {text!r}: {e}") from None


def _isolate(value: str | None) -> str | None:
    """--isolate / $CGKUNIT_ISOLATE checked: None when not given (the profile decides)."""
    return None if value is None else isolate_mode(value, "--isolate (or CGKUNIT_ISOLATE)")


PREPARES = ("prepare", "mbox", "build", "module", "module-run", "run", "bench", "coverage", "check",
            "stress", "bisect", "bisect-selftest", "series-check", "reach")
BOOTS = ("run", "module-run", "bench", "coverage", "check", "stress", "bisect", "bisect-selftest",
         "series-check", "reach")
# the commands that write under the build root, each holding its lock (lock.BuildLock);
# bisect-step runs under the lock of the bisect that git bisect run is part of
LOCKED = (*PREPARES, "fetch", "report", "bisect-step")
MAKE_GOALS_ENV = "CGKUNIT_MAKE_GOALS"  # the Makefile's goals ($(MAKECMDGOALS)), as typed
# what make passes its sub-makes: the driver's kunit.py runs make, which must not read the
# variables given on the outer make's command line (they would be expanded there)
MAKE_ENV = ("MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKELEVEL")


def _bench_options(args: argparse.Namespace) -> bench.BenchOptions:
    return bench.BenchOptions(reps=args.reps, duration_ms=args.duration_ms,
                              only=bench.parse_only(args.only), seed=args.seed,
                              no_build=args.no_build, jobs=args.jobs, report_only=args.report,
                              echo=args.verbose, kernel_src=args.kernel_src,
                              kernel_ref=args.kernel_ref, vcpus=args.vcpus,
                              rounds=args.rounds, profile=args.profile, depth=args.depth)


def _bisect_options(args: argparse.Namespace) -> bisection.BisectOptions:
    return bisection.BisectOptions(
        good=args.good, bad=args.bad, profile=args.profile, signature=args.signature,
        runs=args.runs, filter_glob=args.filter, kernel_args=tuple(_split_args(args.kernel_args)),
        kernel_src=args.kernel_src, jobs=args.jobs, echo=args.verbose)


def _series_options(args: argparse.Namespace) -> series_check.SeriesCheckOptions:
    return series_check.SeriesCheckOptions(
        profile=args.profile, start=args.start, kernel_args=tuple(_split_args(args.kernel_args)),
        filter_glob=args.filter, kernel_src=os.environ.get("KERNEL_SRC") or None,
        jobs=args.jobs, echo=args.verbose)


def _mbox_out(args: argparse.Namespace, build: Path) -> Path:
    return user_path(args.out, "--out").absolute() if args.out else mbox.default_out(build)


def _results(args: argparse.Namespace, build: Path) -> Path:
    """report's results directory: the profile's, or a variant's (a plain name: never a
    path out of the build root)."""
    if args.variant:
        safe_name(args.variant, "--variant")
    return inside(build, results_dir(build, args.profile, args.variant), "--variant")


def preflight(args: argparse.Namespace, ctx: Context) -> None:
    """Check a command's inputs before any long work (fetch, prepare, build, boot): the
    profile, --filter (its characters, and a suite it matches), the cgroup_kunit.* words of
    --kernel-args (names the suite declares, values it takes), each command's own options
    (checks.json for check, the bench, stress, bisect and series-check options, mbox's
    --out), CGKUNIT_ACCEL, KERNEL_SRC (never in the build root) or kernel/BASE,
    kernel/series, kernel/suite.msg and git; DriverError naming the first bad one."""
    repo = ctx.repo
    if args.command == "report":
        load_profile(repo, args.profile)
        _results(args, ctx.build)
    if args.command == "reach":
        reach.check_profile(args.profile)
        if args.console:
            user_path(args.console, "--console")
    if args.command not in PREPARES or (args.command == "check" and args.list) \
            or (args.command == "bench" and args.report) \
            or (args.command == "reach" and (args.last or args.console)):
        return
    if getattr(args, "profile", None):
        load_profile(repo, args.profile)
    if args.command == "coverage":
        load_profile(repo, coverage.PROFILE)
    if getattr(args, "filter", ""):
        check_filter(args.filter, "--filter (or FILTER)", repo)
    own_check = COMMAND_CHECKS.get(args.command)
    if own_check is not None:
        own_check(args, ctx)
    if getattr(args, "kernel_args", ""):
        check_kernel_args(_split_args(args.kernel_args), repo)
    if args.command in BOOTS:
        accel_mode(os.environ.get("CGKUNIT_ACCEL"))
        check_build_dir(ctx.build / "results", "results directory")
    if getattr(args, "kdir", ""):
        return  # KDIR's kernel is used as it is: no base, series or tree to check
    if shutil.which("git") is None:
        raise DriverError("command not found: git")
    if getattr(args, "kernel_src", None):
        validate_kernel_src(args.kernel_src, getattr(args, "kernel_ref", "HEAD"), ctx.build)
    else:
        parse_base(repo / BASE_FILE)
    read_series(repo)
    hook_message(repo)


# The options of one command, checked as the command itself checks them first (preflight).

def _check_module_run(args: argparse.Namespace, ctx: Context) -> None:
    module_run.check_cycles(args.cycles)
    module_run.module_args(args.module_args, ctx.repo)
    if args.kdir:
        module_run.check_kdir(args.kdir)


def _check_stress(args: argparse.Namespace, ctx: Context) -> None:
    stress.check_options(args.runs, args.seed, _split_args(args.kernel_args))


def _check_bench(args: argparse.Namespace, ctx: Context) -> None:
    bench.validate_options(_bench_options(args))


def _check_bisect(args: argparse.Namespace, ctx: Context) -> None:
    bisection.check_input(ctx, _bisect_options(args))


def _check_series_check(args: argparse.Namespace, ctx: Context) -> None:
    series_check.check_input(ctx.repo, _series_options(args))


def _check_check(args: argparse.Namespace, ctx: Context) -> None:
    found = checklist.load_checks(ctx.repo)
    if args.only and args.only not in [c.name for c in found]:
        raise DriverError(f"no check named {args.only!r} (make check lists them: "
                          "python3 tools/kunit/cgkunit.py check --list)")


def _check_mbox(args: argparse.Namespace, ctx: Context) -> None:
    if os.environ.get("KERNEL_SRC"):
        raise DriverError("mbox exports kernel/series on the pinned base; unset KERNEL_SRC")
    mbox.cover_text(ctx.repo)
    mbox.check_out(_mbox_out(args, ctx.build), ctx.build)


COMMAND_CHECKS: dict[str, Callable[[argparse.Namespace, Context], None]] = {
    "module-run": _check_module_run, "stress": _check_stress, "bench": _check_bench,
    "bisect": _check_bisect, "series-check": _check_series_check, "check": _check_check,
    "mbox": _check_mbox,
}


# --- make -------------------------------------------------------------------------------------

RULE = re.compile(r"^([A-Za-z0-9_.-]+)\s*:(?!=)")
DRIVER = "$(CGKUNIT) "


def makefile_recipes(text: str) -> dict[str, list[str]]:
    """Rule name -> its recipe lines, from a Makefile's text."""
    recipes: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = RULE.match(line)
        if m:
            current = recipes.setdefault(m.group(1), [])
        elif line.startswith("\t") and current is not None:
            current.append(line.strip())
        elif line.strip() and not line.startswith("#"):
            current = None
    return recipes


def makefile_commands(text: str, target: str) -> list[list[str]] | None:
    """The driver commands (the words after cgkunit.py) of a target's own recipe in a
    Makefile's text; None when it has no such rule."""
    recipe = makefile_recipes(text).get(target)
    if recipe is None:
        return None
    return [shlex.split(line[len(DRIVER):]) for line in recipe if line.startswith(DRIVER)]


def _commands(parser: argparse.ArgumentParser) -> dict[str, Parser]:
    """The subcommands' parsers by name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {name: p for name, p in action.choices.items() if isinstance(p, Parser)}
    return {}


def check_make_goals(parser: Parser, repo: Path, goals: Sequence[str],
                     env: Mapping[str, str]) -> None:
    """What `make <goals>` will run, checked before the first of it (make deps is where
    every target that calls the driver starts): each goal a target of the Makefile, each
    Makefile variable that is set read by every driver command of each goal (one that
    would ignore it, or set that option itself, is bad input: `make check FILTER=x`,
    `make run PROFILE=x86_64-kasan`), and each command's options and inputs as it will
    check them (preflight). DriverError naming the goal and the first problem."""
    text = read_text_file(repo / "Makefile")
    commands = _commands(parser)
    variables = sorted({v for p in commands.values() for v in p.env_vars
                        if not v.startswith("CGKUNIT_")})
    build: Path | None = None
    for goal in goals:
        argvs = makefile_commands(text, goal)
        if argvs is None:
            raise DriverError(f"make {goal}: no such target (make help lists them)")
        argvs = [a for a in argvs if a and a[0] != "deps"]
        for var in variables:
            value = env.get(var, "")
            for argv in argvs if value else []:
                flag = commands[argv[0]].env_vars.get(var) if argv[0] in commands else None
                if flag is None or flag in argv:
                    raise DriverError(
                        f"make {goal}: {var}={value!r} does not apply: it runs cgkunit.py "
                        f"{' '.join(argv)}, which " + (f"sets {flag} itself" if flag else
                                                       "does not read it")
                        + f"; unset {var}" + _make_hint(var, value, goal))
        for argv in argvs:
            build = build or build_root(repo, None, env)
            preflight(parser.parse_args(argv), Context(repo, build))


def _make_hint(var: str, value: str, goal: str) -> str:
    if var == "PROFILE":
        target = MAKE_TARGETS.get(value)
        return (f" ({target} runs {value})" if target and target != f"make {goal}" else
                f" (python3 tools/kunit/cgkunit.py run --profile {value} runs a profile "
                "of your choice)")
    if goal == "check":
        return " (each check of tools/kunit/checks.json sets its own)"
    return ""


def dispatch(args: argparse.Namespace, parser: Parser | None = None) -> int:
    """Run one command; DriverError propagates. Commands that write under the build root
    run holding its lock."""
    if args.command == "deps":
        goals = os.environ.get(MAKE_GOALS_ENV)
        if goals is not None and parser is not None:
            check_make_goals(parser, find_repo_root(), goals.split() or ["help"], os.environ)
        deps.ensure_deps()
        return 0
    repo = find_repo_root()
    ctx = Context(repo, build_root(repo, args.build_dir))
    preflight(args, ctx)
    if args.command not in LOCKED or (args.command == "check" and args.list) \
            or (args.command == "reach" and args.console):
        return run_command(args, ctx)  # writes nothing under the build root
    words = ["cgkunit", *getattr(args, "argv", [args.command])]
    with BuildLock(ctx.build).acquire([shlex.quote(w) for w in words],
                                      wait=args.wait_lock or env_flag(WAIT_ENV)):
        return run_command(args, ctx)


def run_command(args: argparse.Namespace, ctx: Context) -> int:
    """One command, its inputs checked (preflight): its handler of HANDLERS."""
    handler = HANDLERS.get(args.command)
    if handler is None:
        raise DriverError(f"unknown command {args.command}")
    return handler(args, ctx)


# --- the commands ------------------------------------------------------------------------------
# (deps runs before there is a context: dispatch)

def fetch_handler(args: argparse.Namespace, ctx: Context) -> int:
    print(fetch_base(ctx.repo, ctx.build).path)
    return 0


def prepare_handler(args: argparse.Namespace, ctx: Context) -> int:
    tree, _ = pipeline.prepare(ctx, args.kernel_src, args.kernel_ref)
    print(tree.path)
    return 0


def mbox_handler(args: argparse.Namespace, ctx: Context) -> int:
    for f in mbox.export_mbox(ctx, _mbox_out(args, ctx.build)):
        print(f)
    return 0


def build_handler(args: argparse.Namespace, ctx: Context) -> int:
    pipeline.build_profile(ctx, args.profile, args.kernel_src, args.kernel_ref, args.jobs)
    return 0


def module_handler(args: argparse.Namespace, ctx: Context) -> int:
    for ko in pipeline.build_module(ctx, args.profile, args.kernel_src, args.kernel_ref,
                                    args.jobs):
        print(ko)
    return 0


def module_run_handler(args: argparse.Namespace, ctx: Context) -> int:
    return module_run.module_run(ctx, args.profile, args.cycles, args.module_args, args.filter,
                                 args.kernel_src, args.kernel_ref, args.jobs, echo=args.verbose,
                                 kdir_text=args.kdir)


def run_handler(args: argparse.Namespace, ctx: Context) -> int:
    opts = pipeline.RunOptions(profile=args.profile, kernel_args=_split_args(args.kernel_args),
                               filter_glob=args.filter, no_build=args.no_build,
                               kernel_src=args.kernel_src, kernel_ref=args.kernel_ref,
                               echo=args.verbose, jobs=args.jobs, isolate=_isolate(args.isolate))
    report = pipeline.run_profile(ctx, opts)
    raise_refused([report])  # a parameter the suite refused: bad input, exit status 2
    return exit_code(report.status)


def bench_handler(args: argparse.Namespace, ctx: Context) -> int:
    return bench.run_bench(ctx, _bench_options(args))


def stress_handler(args: argparse.Namespace, ctx: Context) -> int:
    return stress.run_stress(ctx, stress.StressOptions(
        profile=args.profile, runs=args.runs, seed=args.seed, until_fail=args.until_fail,
        kernel_args=tuple(_split_args(args.kernel_args)), filter_glob=args.filter,
        no_build=args.no_build, jobs=args.jobs, echo=args.verbose,
        kernel_src=args.kernel_src, kernel_ref=args.kernel_ref))


def bisect_handler(args: argparse.Namespace, ctx: Context) -> int:
    return bisection.run_bisect(ctx, _bisect_options(args))


def bisect_step_handler(args: argparse.Namespace, ctx: Context) -> int:
    return bisection.step(ctx, args.profile)


def bisect_selftest_handler(args: argparse.Namespace, ctx: Context) -> int:
    return bisection.run_selftest(ctx, args.runs, args.jobs, args.verbose)


def series_check_handler(args: argparse.Namespace, ctx: Context) -> int:
    return series_check.run_series_check(ctx, _series_options(args))


def coverage_handler(args: argparse.Namespace, ctx: Context) -> int:
    return coverage.run_coverage(ctx, pipeline.RunOptions(
        profile=coverage.PROFILE, kernel_args=_split_args(args.kernel_args),
        filter_glob=args.filter, no_build=args.no_build, kernel_src=args.kernel_src,
        kernel_ref=args.kernel_ref, echo=args.verbose, jobs=args.jobs))


def reach_handler(args: argparse.Namespace, ctx: Context) -> int:
    console = user_path(args.console, "--console") if args.console else None
    return reach.run_reach(ctx, pipeline.RunOptions(
        profile=args.profile, kernel_args=_split_args(args.kernel_args),
        no_build=args.no_build, kernel_src=args.kernel_src, kernel_ref=args.kernel_ref,
        echo=args.verbose, jobs=args.jobs), console=console, last=args.last, why=args.why)


def check_handler(args: argparse.Namespace, ctx: Context) -> int:
    isolate = _isolate(args.isolate)
    found = check.select_profiles(checklist.load_checks(ctx.repo),
                                  [n for n in args.profiles.split(",") if n],
                                  list_profiles(ctx.repo))
    if args.list:
        for c in found:
            print(f"{c.name}\t{c.profile}\t{' '.join(c.kernel_args)}")
        return 0

    def runner(c: checklist.Check) -> Report:
        return pipeline.run_profile(ctx, pipeline.RunOptions(
            profile=c.profile, kernel_args=list(c.kernel_args), filter_glob=c.filter,
            kernel_src=args.kernel_src, kernel_ref=args.kernel_ref,
            extra_patches=[Path(p) for p in c.extra_patches], results_tag=f"check-{c.name}",
            isolate=checklist.check_isolate(c, isolate)), printer=check.report_line)
    code, table = check.run_checks(found, runner, args.only)
    print(table, end="")
    return code


def report_handler(args: argparse.Namespace, ctx: Context) -> int:
    report = pipeline.rereport(ctx, args.profile, _results(args, ctx.build))
    print(format_summary(report), end="", flush=True)
    raise_refused([report])
    return exit_code(report.status)


def profiles_handler(args: argparse.Namespace, ctx: Context) -> int:
    for name in list_profiles(ctx.repo):
        prof = load_profile(ctx.repo, name)
        print(f"{name}\t{prof.arch}\t{prof.description}")
    return 0


Handler = Callable[[argparse.Namespace, Context], int]
HANDLERS: dict[str, Handler] = {
    "fetch": fetch_handler,
    "prepare": prepare_handler,
    "mbox": mbox_handler,
    "build": build_handler,
    "module": module_handler,
    "module-run": module_run_handler,
    "run": run_handler,
    "bench": bench_handler,
    "stress": stress_handler,
    "bisect": bisect_handler,
    "bisect-step": bisect_step_handler,
    "bisect-selftest": bisect_selftest_handler,
    "series-check": series_check_handler,
    "coverage": coverage_handler,
    "reach": reach_handler,
    "check": check_handler,
    "report": report_handler,
    "profiles": profiles_handler,
}


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM: the path Ctrl-C takes (run.watch() stops the kernel in its finally)."""
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Parse argv, run, map errors to exit status 2 (one line: no traceback for bad input or
    a file the driver cannot read or write) and Ctrl-C or SIGTERM to 130."""
    try:  # every command that reads a console needs them: a bad header is bad input first
        titles.table()
    except (DriverError, OSError, UnicodeError, ValueError) as e:
        print(f"cgkunit: error: {error_line(e)}", file=sys.stderr, flush=True)
        return EXIT_ERROR
    words = list(sys.argv[1:] if argv is None else argv)
    for var in MAKE_ENV:
        os.environ.pop(var, None)
    parser = make_parser()
    args = parser.parse_args(words)
    args.argv = words
    previous = signal.signal(signal.SIGTERM, _terminate) \
        if threading.current_thread() is threading.main_thread() else None
    try:
        return dispatch(args, parser)
    except DriverError as e:
        print(f"cgkunit: error: {e.reason}", file=sys.stderr, flush=True)
        return EXIT_ERROR
    except KeyboardInterrupt:
        say("interrupted")
        return EXIT_INTERRUPTED
    except (OSError, UnicodeError, ValueError) as e:  # json errors are ValueErrors
        print(f"cgkunit: error: {error_line(e)}", file=sys.stderr, flush=True)
        return EXIT_ERROR
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
