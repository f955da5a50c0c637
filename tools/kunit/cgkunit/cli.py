"""Command line: python3 tools/kunit/cgkunit.py <command> [options]."""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import NoReturn, Sequence

from . import bench, coverage
from . import check as checks
from . import bisection
from . import deps, mbox, module_run, pipeline, stress
from . import series_check
from .common import BASE_FILE, DriverError, build_root, find_repo_root, one_line, say, user_path
from .fetch import fetch_base, parse_base
from .params import check_kernel_args
from .profile import accel_mode, isolate_mode, list_profiles, load_profile, results_dir
from .report import EXIT_ERROR, EXIT_HELP, Report, exit_code, format_summary, raise_refused
from .run import check_filter
from .tree import read_series, validate_kernel_src

DESCRIPTION = """Drive the cgroup KUnit suite: fetch the pinned base, prepare a git tree
(base + kernel/series + the suite), build a profile with the tree's own kunit.py,
boot it under a watchdog and report tests, splats and seeds."""
BENCH_DESCRIPTION = """Build the base (kernel/series up to tools/kunit/bench.json's base_before)
and the whole series with bench.json's profile, boot each once with the same seed,
and compare their metric lines: a table on stdout; bench.json, bench.txt and plots
in build/results/bench/."""
ENV_HELP = """environment: KERNEL_SRC, KERNEL_REF, KERNEL_ARGS, FILTER (defaults of the
options), CGKUNIT_BUILD (build root), CGKUNIT_APT_MIRROR (Debian mirror),
CGKUNIT_ACCEL=auto|kvm|tcg (QEMU accelerator for x86_64 profiles),
CGKUNIT_ISOLATE=suite|test|none (default of --isolate for run and check)."""
ISOLATE_HELP = ("boot once per suite or per test (kunit.py --run_isolated), so a crash or a "
                "stopped kernel costs only its own suite or test; 'none': one boot "
                "(default $CGKUNIT_ISOLATE, else the profile's '#@ isolate:', else none)")


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"cgkunit: error: {one_line(message)}", file=sys.stderr)
        sys.exit(EXIT_ERROR)


def _jobs(text: str) -> int:
    """--jobs: a positive integer (an argparse type)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _cycles(text: str) -> int:
    """CYCLES / --cycles: an integer in 1..module_run.MAX_CYCLES."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"CYCLES={text}: want a number") from None
    try:
        return module_run.check_cycles(n)
    except DriverError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _tree_opts(p: argparse.ArgumentParser, ref: bool = True) -> None:
    p.add_argument("--kernel-src", default=os.environ.get("KERNEL_SRC") or None, metavar="PATH",
                   help="your own Linux git tree instead of the Debian base (default $KERNEL_SRC); "
                        "it is only read, never modified")
    if not ref:
        return
    p.add_argument("--kernel-ref", default=os.environ.get("KERNEL_REF") or "HEAD", metavar="REF",
                   help="commit of --kernel-src to use (default $KERNEL_REF or HEAD)")


def _boot_opts(p: argparse.ArgumentParser, no_build: bool = True) -> None:
    """Options of a command that builds and boots one profile (run, coverage)."""
    p.add_argument("--kernel-args", default=os.environ.get("KERNEL_ARGS", ""), metavar='"A=B C=D"',
                   help="extra kernel command line, e.g. cgroup_kunit.seed=123 (default $KERNEL_ARGS); "
                        "a cgroup_kunit.* name the suite does not declare, or a value it "
                        "refuses, is bad input (exit status 2)")
    p.add_argument("--filter", default=os.environ.get("FILTER", ""), metavar="GLOB",
                   help="KUnit filter glob, e.g. 'suite.case*' (default $FILTER: the whole suite)")
    if no_build:
        p.add_argument("--no-build", action="store_true", help="boot the kernel built last time")
    p.add_argument("--jobs", type=_jobs, metavar="N")
    p.add_argument("--verbose", action="store_true", help="echo the console while it runs")


def _runs(text: str) -> int:
    """RUNS / --runs of bisect: a number in bisection.RUNS (an argparse type)."""
    try:
        return bisection.parse_runs(text)
    except DriverError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _isolate_opt(p: argparse.ArgumentParser, extra: str = "") -> None:
    p.add_argument("--isolate", default=os.environ.get("CGKUNIT_ISOLATE") or None,
                   metavar="suite|test|none", help=ISOLATE_HELP + extra)


def make_parser() -> Parser:
    parser = Parser(prog="cgkunit", description=DESCRIPTION, epilog=EXIT_HELP + "\n\n" + ENV_HELP,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", metavar="DIR",
                        help="build root (default $CGKUNIT_BUILD or <repo>/build)")
    sub = parser.add_subparsers(dest="command", metavar="command", required=True)
    sub.add_parser("deps", help="install missing Debian build dependencies (as root)")
    sub.add_parser("fetch", help="download, verify and unpack the pinned base source")
    p = sub.add_parser("prepare", help="prepare the git tree (base + series + suite)")
    _tree_opts(p)
    p = sub.add_parser("mbox", help="kernel/series and the suite as one patch set with a cover "
                       "letter (git format-patch files), checked to apply on the base")
    p.add_argument("--out", metavar="DIR", help="where to write them (default <build>/results/mbox)")
    p = sub.add_parser("build", help="prepare and build one profile")
    p.add_argument("--profile", required=True)
    p.add_argument("--jobs", type=_jobs, metavar="N")
    _tree_opts(p)
    p = sub.add_parser("module", help="build the suite as a module (cgroup_kunit.ko)")
    p.add_argument("--profile", required=True)
    p.add_argument("--jobs", type=_jobs, metavar="N")
    _tree_opts(p)
    p = sub.add_parser("module-run", help="load and unload cgroup_kunit.ko in a booted x86_64 "
                       "guest CYCLES times, under kmemleak (exit status below)",
                       epilog=EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", default="x86_64-kasan")
    p.add_argument("--cycles", type=_cycles, default=os.environ.get("CYCLES") or "1", metavar="N",
                   help="load/unload cycles, 1..1000 (default $CYCLES, else 1)")
    p.add_argument("--module-args", default=os.environ.get("MODULE_ARGS", ""),
                   metavar='"seed=N threads=N"',
                   help="insmod parameters (default $MODULE_ARGS); a name the suite does not "
                        "declare, or a value it refuses, is bad input (exit status 2). "
                        "dynmods=1 also runs cgroup_migrate_dynmods, which switches favordynmods "
                        "on for the rest of the boot: cgroup_migrate then skips itself in later "
                        "cycles")
    p.add_argument("--filter", default=os.environ.get("FILTER", ""), metavar="GLOB",
                   help="kunit.filter_glob for the module's suites (default $FILTER: all)")
    p.add_argument("--kdir", default=os.environ.get("KDIR", ""), metavar="PATH",
                   help="build the module against this built x86_64 kernel (it must carry "
                        "kernel/series) and boot that kernel's bzImage (default $KDIR)")
    p.add_argument("--jobs", type=_jobs, metavar="N")
    p.add_argument("--verbose", action="store_true", help="echo the console while it runs")
    _tree_opts(p)
    p = sub.add_parser("run", help="prepare, build, boot, report (exit status below)",
                       epilog=EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", required=True)
    _boot_opts(p)
    _isolate_opt(p)
    _tree_opts(p)
    p = sub.add_parser("bench", help="benchmarks: the base kernel against base + kernel/series",
                       description=BENCH_DESCRIPTION,
                       epilog=EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=bench.BenchOptions.reps, metavar="N",
                   help=f"repetitions of every point ({bench.REPS[0]}..{bench.REPS[1]}, "
                        f"default %(default)s)")
    p.add_argument("--duration-ms", type=int, default=bench.BenchOptions.duration_ms, metavar="MS",
                   help=f"length of one rep ({bench.DURATION_MS[0]}..{bench.DURATION_MS[1]}, "
                        f"default %(default)s)")
    p.add_argument("--only", metavar="NAMES",
                   help=f"comma-separated subset of {','.join(bench.BENCH_KEYS)} (default all)")
    p.add_argument("--seed", type=int, metavar="N", help="suite seed for both boots (default random)")
    p.add_argument("--vcpus", type=int, metavar="N",
                   help="QEMU vCPUs instead of the profile's (host cores, at least 4)")
    p.add_argument("--rounds", type=int, default=bench.BenchOptions.rounds, metavar="N",
                   help=f"boot base and series alternately N times, reps of each boot pooled "
                        f"({bench.ROUNDS[0]}..{bench.ROUNDS[1]}, default %(default)s)")
    p.add_argument("--no-build", action="store_true", help="boot the kernels built last time")
    p.add_argument("--jobs", type=_jobs, metavar="N")
    p.add_argument("--report", action="store_true",
                   help="aggregate the console logs of the last run again (no build, no boot)")
    p.add_argument("--verbose", action="store_true", help="echo the console while it runs")
    _tree_opts(p)
    p = sub.add_parser("stress", help="boot one kernel many times: how often, and how, it fails",
                       description=stress.STRESS_DESCRIPTION, epilog=stress.STRESS_EXIT_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", required=True)
    p.add_argument("--runs", type=int, default=stress.StressOptions.runs, metavar="N",
                   help=f"boots ({stress.RUNS[0]}..{stress.RUNS[1]}, default %(default)s)")
    p.add_argument("--seed", type=int, metavar="N",
                   help="suite seed of every boot (default: a new random one each boot, "
                        "or the cgroup_kunit.seed of --kernel-args)")
    p.add_argument("--until-fail", action="store_true", help="stop at the first failed run")
    _boot_opts(p)
    _tree_opts(p)
    p = sub.add_parser("bisect", help="git bisect run over repeated boots: the commit that "
                       "introduced a failure signature, with a confidence",
                       description=bisection.BISECT_DESCRIPTION, epilog=bisection.BISECT_EXIT_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--good", default=os.environ.get("GOOD", ""), metavar="REV",
                   help="a commit without the failure (default $GOOD); without --kernel-src: "
                        "base or a patch of kernel/series, e.g. 0012")
    p.add_argument("--bad", default=os.environ.get("BAD", ""), metavar="REV",
                   help="a commit with it (default $BAD)")
    p.add_argument("--profile", default="um-lockdep")
    p.add_argument("--signature", default=os.environ.get("SIGNATURE") or bisection.AUTO,
                   metavar="KEY", help="the failure signature sought, as make stress prints it "
                   "('*' wildcards), or auto: the most frequent at BAD (default $SIGNATURE, else auto)")
    p.add_argument("--runs", type=_runs, default=bisection.BisectOptions.runs, metavar="N",
                   help=f"boots per commit ({bisection.RUNS[0]}..{bisection.RUNS[1]}, default %(default)s)")
    _boot_opts(p, no_build=False)
    _tree_opts(p, ref=False)
    p = sub.add_parser("bisect-step")  # what git bisect run calls (no help: not for users)
    p.add_argument("--profile", required=True)
    p = sub.add_parser("bisect-selftest", help="bisect a throwaway tree with a known culprit "
                       "(a breakage patch): it must be named with confidence >= 0.9")
    p.add_argument("--runs", type=_runs, default=bisection.SELFTEST_RUNS, metavar="N",
                   help="boots per commit (default %(default)s)")
    p.add_argument("--jobs", type=_jobs, metavar="N")
    p.add_argument("--verbose", action="store_true", help="echo the console while it runs")
    p = sub.add_parser("series-check", help="build and boot every commit of kernel/series on its "
                       "own: does each build and pass the suite?",
                       description=series_check.SERIES_CHECK_DESCRIPTION,
                       epilog=series_check.SERIES_CHECK_EXIT_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", default=series_check.SeriesCheckOptions.profile,
                   help="default %(default)s")
    p.add_argument("--from", dest="start", default=os.environ.get("FROM", ""), metavar="PATCH",
                   help="start at this commit: base, or a patch of kernel/series by its name "
                        "or number, e.g. 0012 (default $FROM, else base)")
    _boot_opts(p, no_build=False)
    p = sub.add_parser("coverage", help="the suite on um-coverage (UML gcov): line and branch "
                                        "coverage of the cgroup and ucount files, lcov HTML",
                       epilog=EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _boot_opts(p)
    _tree_opts(p)
    p = sub.add_parser("check", help="prove the oracle: runs that must fail as expected")
    p.add_argument("--only", metavar="NAME", help="run just this check")
    p.add_argument("--list", action="store_true", help="list the checks and exit")
    _isolate_opt(p, " (a check's own \"isolate\" key in checks.json wins)")
    _tree_opts(p)
    p = sub.add_parser("report", help="re-print the report of an earlier run")
    p.add_argument("--profile", required=True)
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
            "stress", "bisect", "bisect-selftest", "series-check")
BOOTS = ("run", "module-run", "bench", "coverage", "check", "stress", "bisect", "bisect-selftest",
         "series-check")


def preflight(args: argparse.Namespace, repo: Path, build: Path) -> None:
    """Check a command's inputs before any long work (fetch, prepare, build, boot): the
    profile, --filter, the cgroup_kunit.* words of --kernel-args (names the suite declares),
    CGKUNIT_ACCEL, KERNEL_SRC (never in the build root) or kernel/BASE, kernel/series and
    git; DriverError naming the first bad one."""
    if args.command not in PREPARES or (args.command == "check" and args.list) \
            or (args.command == "bench" and args.report):
        return
    if getattr(args, "profile", None):
        load_profile(repo, args.profile)
    if args.command == "coverage":
        load_profile(repo, coverage.PROFILE)
    if getattr(args, "filter", ""):
        check_filter(args.filter, "--filter (or FILTER)")
    if getattr(args, "kernel_args", ""):
        check_kernel_args(_split_args(args.kernel_args), repo)
    if args.command == "module-run":
        module_run.check_cycles(args.cycles)
        module_run.module_args(args.module_args, repo)
        if args.kdir:
            module_run.check_kdir(args.kdir)
    if args.command == "stress":
        stress.check_options(args.runs, args.seed, _split_args(args.kernel_args))
    if args.command in BOOTS:
        accel_mode(os.environ.get("CGKUNIT_ACCEL"))
    if getattr(args, "kdir", ""):
        return  # KDIR's kernel is used as it is: no base, series or tree to check
    if shutil.which("git") is None:
        raise DriverError("command not found: git")
    if getattr(args, "kernel_src", None):
        validate_kernel_src(args.kernel_src, getattr(args, "kernel_ref", "HEAD"), build)
    else:
        parse_base(repo / BASE_FILE)
    read_series(repo)


def dispatch(args: argparse.Namespace) -> int:
    """Run one command; DriverError propagates."""
    if args.command == "deps":
        deps.ensure_deps()
        return 0
    repo = find_repo_root()
    build = build_root(repo, args.build_dir)
    preflight(args, repo, build)
    if args.command == "fetch":
        base = fetch_base(repo, build)
        print(base.path)
        return 0
    if args.command == "prepare":
        tree, label = pipeline.prepare(repo, build, args.kernel_src, args.kernel_ref)
        print(tree.path)
        return 0
    if args.command == "mbox":
        if os.environ.get("KERNEL_SRC"):
            raise DriverError("mbox exports kernel/series on the pinned base; unset KERNEL_SRC")
        out = user_path(args.out, "--out") if args.out else build / "results" / "mbox"
        for f in mbox.export_mbox(repo, build, out):
            print(f)
        return 0
    if args.command == "build":
        pipeline.build_profile(repo, build, args.profile, args.kernel_src, args.kernel_ref, args.jobs)
        return 0
    if args.command == "module":
        for ko in pipeline.build_module(repo, build, args.profile, args.kernel_src,
                                        args.kernel_ref, args.jobs):
            print(ko)
        return 0
    if args.command == "module-run":
        return module_run.module_run(repo, build, args.profile, args.cycles, args.module_args,
                                     args.filter, args.kernel_src, args.kernel_ref, args.jobs,
                                     echo=args.verbose, kdir_text=args.kdir)
    if args.command == "run":
        opts = pipeline.RunOptions(profile=args.profile, kernel_args=_split_args(args.kernel_args),
                                   filter_glob=args.filter, no_build=args.no_build,
                                   kernel_src=args.kernel_src, kernel_ref=args.kernel_ref,
                                   echo=args.verbose, jobs=args.jobs,
                                   isolate=_isolate(args.isolate))
        report = pipeline.run_profile(repo, build, opts)
        raise_refused([report])  # a parameter the suite refused: bad input, exit status 2
        return exit_code(report.status)
    if args.command == "bench":
        opts = bench.BenchOptions(reps=args.reps, duration_ms=args.duration_ms,
                                  only=bench.parse_only(args.only), seed=args.seed,
                                  no_build=args.no_build, jobs=args.jobs, report_only=args.report,
                                  echo=args.verbose, kernel_src=args.kernel_src,
                                  kernel_ref=args.kernel_ref, vcpus=args.vcpus,
                                  rounds=args.rounds)
        return bench.run_bench(repo, build, opts)
    if args.command == "stress":
        return stress.run_stress(repo, build, stress.StressOptions(
            profile=args.profile, runs=args.runs, seed=args.seed, until_fail=args.until_fail,
            kernel_args=tuple(_split_args(args.kernel_args)), filter_glob=args.filter,
            no_build=args.no_build, jobs=args.jobs, echo=args.verbose,
            kernel_src=args.kernel_src, kernel_ref=args.kernel_ref))
    if args.command == "bisect":
        return bisection.run_bisect(repo, build, bisection.BisectOptions(
            good=args.good, bad=args.bad, profile=args.profile, signature=args.signature,
            runs=args.runs, filter_glob=args.filter, kernel_args=tuple(_split_args(args.kernel_args)),
            kernel_src=args.kernel_src, jobs=args.jobs, echo=args.verbose))
    if args.command == "bisect-step":
        return bisection.step(repo, build, args.profile)
    if args.command == "bisect-selftest":
        return bisection.run_selftest(repo, build, args.runs, args.jobs, args.verbose)
    if args.command == "series-check":
        return series_check.run_series_check(repo, build, series_check.SeriesCheckOptions(
            profile=args.profile, start=args.start, kernel_args=tuple(_split_args(args.kernel_args)),
            filter_glob=args.filter, kernel_src=os.environ.get("KERNEL_SRC") or None,
            jobs=args.jobs, echo=args.verbose))
    if args.command == "coverage":
        return coverage.run_coverage(repo, build, pipeline.RunOptions(
            profile=coverage.PROFILE, kernel_args=_split_args(args.kernel_args),
            filter_glob=args.filter, no_build=args.no_build, kernel_src=args.kernel_src,
            kernel_ref=args.kernel_ref, echo=args.verbose, jobs=args.jobs))
    if args.command == "check":
        isolate = _isolate(args.isolate)
        found = checks.load_checks(repo)
        if args.list:
            for c in found:
                print(f"{c.name}\t{c.profile}\t{' '.join(c.kernel_args)}")
            return 0

        def runner(c: checks.Check) -> Report:
            return pipeline.run_profile(repo, build, pipeline.RunOptions(
                profile=c.profile, kernel_args=list(c.kernel_args), filter_glob=c.filter,
                kernel_src=args.kernel_src, kernel_ref=args.kernel_ref,
                extra_patches=[Path(p) for p in c.extra_patches], results_tag=f"check-{c.name}",
                isolate=checks.check_isolate(c, isolate)), printer=checks.report_line)
        code, table = checks.run_checks(found, runner, args.only)
        print(table, end="")
        return code
    if args.command == "report":
        load_profile(repo, args.profile)
        report = pipeline.rereport(repo, build, args.profile,
                                   results_dir(build, args.profile, args.variant))
        print(format_summary(report), end="", flush=True)
        raise_refused([report])
        return exit_code(report.status)
    if args.command == "profiles":
        for name in list_profiles(repo):
            prof = load_profile(repo, name)
            print(f"{name}\t{prof.arch}\t{prof.description}")
        return 0
    raise DriverError(f"unknown command {args.command}")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse argv, run, map errors to exit status 2."""
    args = make_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return dispatch(args)
    except DriverError as e:
        print(f"cgkunit: error: {e.reason}", file=sys.stderr, flush=True)
        return EXIT_ERROR
    except KeyboardInterrupt:
        say("interrupted")
        return 130
