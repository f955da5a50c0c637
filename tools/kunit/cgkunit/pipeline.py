"""The one-way flow: base -> tree -> build -> boot -> report."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from . import profile as profiles
from .common import Context, DriverError, InfraError, read_json, say
from .fetch import BaseSource, fetch_base
from .console import build_report
from .export import write_summary
from .report import Report
from .run import ExecResult, Interrupted, build, exec_tests, kernel_image, read_exec_info
from .summary import format_summary, replay_env
from .tree import PreparedTree, prepare_tree


@dataclass
class RunOptions:
    """What one `run` (or one check) asks for."""
    profile: str
    kernel_args: list[str] = field(default_factory=list)
    filter_glob: str = ""
    no_build: bool = False
    kernel_src: str | None = None
    kernel_ref: str = "HEAD"
    extra_patches: list[Path] = field(default_factory=list)
    echo: bool = False
    jobs: int | None = None
    results_tag: str = ""
    isolate: str | None = None  # "suite"/"test": kunit.py --run_isolated; "": one boot; None: profile's


def base_label(base: BaseSource | None, tree: PreparedTree, kernel_src: str | None) -> str:
    """Human description of the base the tree was made from."""
    if base is None:
        return f"KERNEL_SRC {kernel_src} @ {tree.base_commit[:12]}"
    pin = "pinned" if base.pinned else f"UNPINNED fallback, sha256 {base.sha256}"
    return f"{base.package} {base.version} ({pin})"


def prepare(ctx: Context, kernel_src: str | None, kernel_ref: str = "HEAD",
            extra_patches: list[Path] | None = None) -> tuple[PreparedTree, str]:
    """Fetch (unless KERNEL_SRC) and prepare the tree; (tree, base label). The fetch's
    inputs were checked before (kernel/BASE): what fails in it now is the mirror's, the
    network's or the disk's, an InfraError (make check stops at the first, rather than
    meeting it again in each of its checks)."""
    try:
        base = None if kernel_src else fetch_base(ctx.repo, ctx.build)
    except InfraError:
        raise
    except DriverError as e:
        raise InfraError(e.reason) from None
    tree = prepare_tree(ctx.repo, ctx.build, base, kernel_src, kernel_ref, extra_patches or [])
    say(f"tree {tree.path} at {tree.head_commit[:12]}"
        + (f" (variant {tree.variant})" if tree.variant else ""))
    return tree, base_label(base, tree, kernel_src)


def build_profile(ctx: Context, name: str, kernel_src: str | None, kernel_ref: str = "HEAD",
                  jobs: int | None = None) -> None:
    """fetch + prepare + build for one profile."""
    prof = profiles.load_profile(ctx.repo, name)
    tree, _ = prepare(ctx, kernel_src, kernel_ref)
    build(tree.path, prof, ctx.repo, ctx.build, jobs)


MODULE_KCONFIG = ("CONFIG_MODULES=y", "CONFIG_CGROUP_KUNIT_TEST=m")


def build_module(ctx: Context, name: str, kernel_src: str | None, kernel_ref: str = "HEAD",
                 jobs: int | None = None) -> list[Path]:
    """Build the suite as a module (own build dir <build>/out/<profile>-module); the .ko files."""
    prof = profiles.load_profile(ctx.repo, name)
    tree, _ = prepare(ctx, kernel_src, kernel_ref)
    out = ctx.build / "out" / f"{prof.name}-module"
    build(tree.path, prof, ctx.repo, ctx.build, jobs, out=out, kconfig_add=MODULE_KCONFIG)
    modules = sorted((out / "lib" / "kunit-cgroup").glob("*.ko"))
    if not modules:
        raise DriverError(f"module build of {prof.name} produced no .ko in {out / 'lib/kunit-cgroup'}")
    return modules


def require_image(build_root: Path, prof: profiles.Profile, out: Path | None = None) -> Path:
    """The built kernel image; DriverError when it is missing."""
    image = kernel_image(build_root, prof, out)
    if not image.is_file():
        raise DriverError(f"no kernel built for {prof.name} ({image} missing); run without --no-build")
    return image


def choose_qemu(prof: profiles.Profile, image: Path, build_root: Path) -> tuple[Path | None, str]:
    """(PATH shim, accel) for an x86_64 profile, once per run; (None, "") for UML."""
    if prof.arch != "x86_64":
        return None, ""
    accel, _ = profiles.choose_accel(image, build_root)
    return profiles.make_shim(build_root, accel), accel


def boot_and_report(ctx: Context, prof: profiles.Profile, tree: PreparedTree, base: str,
                    results: Path, kernel_args: list[str], filter_glob: str, *,
                    shim: Path | None, out: Path | None = None, echo: bool = False,
                    isolate: str | None = None, replay_env: Sequence[str] = ()) -> Report:
    """exec + the report, written to results (summary not printed); replay_env: the
    KERNEL_SRC/KERNEL_REF words of its replay lines. An interrupted run (run.Interrupted)
    gets its report written too, and the exception carries it on."""
    try:
        ex = exec_tests(tree.path, prof, ctx.repo, ctx.build, results, kernel_args, filter_glob,
                        shim=shim, echo=echo, out=out, isolate=isolate)
    except Interrupted as stop:
        stop.report = _report(stop.result, prof.name, tree, base, results, replay_env)
        raise
    return _report(ex, prof.name, tree, base, results, replay_env)


def _report(ex: ExecResult, profile: str, tree: PreparedTree, base: str, results: Path,
            replay_env: Sequence[str]) -> Report:
    report = build_report(ex.console_log, ex.verdict, profile=profile,
                          tree=f"{tree.path} @ {tree.head_commit[:12]}", base=base,
                          elapsed=ex.elapsed)
    report.replay_target = profiles.make_target(profile)
    report.replay_env = list(replay_env)
    write_summary(report, results)
    return report


def _number(value: object) -> float:
    """A number of exec.json (0 for anything else: a file edited or cut short)."""
    try:
        return float(str(value))
    except ValueError:
        return 0.0


def rereport(ctx: Context, profile: str, results: Path,
             hint: str = "run the profile first") -> Report:
    """The report of an earlier run, rebuilt from its console log (no boot); summary rewritten."""
    console = results / "console.log"
    if not console.is_file():
        raise DriverError(f"no console log at {console}; {hint}")
    info = read_exec_info(results)
    old = read_json(results / "summary.json")
    old = old if isinstance(old, dict) else {}
    env = old.get("replay_env")
    report = build_report(console, str(info.get("verdict", "completed")), profile=profile,
                          tree=str(old.get("tree", "")), base=str(old.get("base", "")),
                          elapsed=_number(info.get("elapsed", 0.0)))
    report.replay_target = profiles.make_target(profile)
    report.replay_env = [str(w) for w in env] if isinstance(env, list) else []
    write_summary(report, results)
    return report


@dataclass
class Kernel:
    """A built kernel ready to boot, any number of times."""
    profile: profiles.Profile
    tree: PreparedTree
    base: str             # base_label
    shim: Path | None     # QEMU PATH shim (x86_64), None for UML
    accel: str            # "kvm" or "tcg" (x86_64), "" for UML


def ready_kernel(ctx: Context, opts: RunOptions) -> Kernel:
    """fetch + prepare + build (unless opts.no_build) + the QEMU accelerator choice."""
    prof = profiles.load_profile(ctx.repo, opts.profile)
    tree, base = prepare(ctx, opts.kernel_src, opts.kernel_ref, opts.extra_patches)
    if not opts.no_build:
        build(tree.path, prof, ctx.repo, ctx.build, opts.jobs)
    image = require_image(ctx.build, prof)
    shim, accel = choose_qemu(prof, image, ctx.build)
    return Kernel(profile=prof, tree=tree, base=base, shim=shim, accel=accel)


def print_summary(report: Report) -> None:
    """The default printer of run_profile: the whole summary."""
    print(format_summary(report), end="", flush=True)


def run_profile(ctx: Context, opts: RunOptions,
                printer: Callable[[Report], None] = print_summary) -> Report:
    """fetch + prepare + build + exec + parse + report; the report goes to printer (that
    of an interrupted run too, before run.Interrupted goes on)."""
    k = ready_kernel(ctx, opts)
    results = profiles.results_dir(ctx.build, k.profile.name, opts.results_tag or k.tree.variant)
    env = replay_env(opts.kernel_src, k.tree.base_commit) if opts.kernel_src else ()
    try:
        report = boot_and_report(ctx, k.profile, k.tree, k.base, results, opts.kernel_args,
                                 opts.filter_glob, shim=k.shim, echo=opts.echo,
                                 isolate=opts.isolate, replay_env=env)
    except Interrupted as stop:
        if stop.report is not None:
            printer(stop.report)
        raise
    printer(report)
    return report
