"""series-check: does every commit of the series build and pass the suite on its own?

For the prepared tree's commits (base, then one per patch of kernel/series; --from starts
at a later one), one after another in a private shared clone of the prepared tree
(<build>/series-check/<profile>/linux; the prepared tree is only read), as bisect tests a
commit (commits.Workspace): check it out, hook the suite into its work tree, build the
profile into a build directory of its own (<build>/out/<profile>+series-check, so
consecutive commits build incrementally), boot it once with the kernel arguments and a
seed, and read the console with console.py. The suites whose hooks the commit lacks are
turned off in its build (carry.py); which suite files were built is read from kbuild's
command for lib/kunit-cgroup/built-in.a.

Per commit: built or not (and the build log's first error line), the KUnit totals, the
seed, the suite files built, the build and boot time. A progress line per step, a table on
stdout; series-check.json, series-check.txt, series-check.xml (JUnit, one testcase per
commit) and a directory per commit (its console, summary, build.log of a failed build) in
<build>/results/<profile>+series-check/.
"""
from __future__ import annotations

import random
import re
import shutil
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from . import pipeline
from . import profile as profiles
from . import report as rp
from .commits import (BASE, Workspace, clone_path, ensure_clone, prepared_commits, series_pick,
                      subject_of, unhook)
from .common import Context, DriverError, fmt_time, plural, say, write_json
from .fixes import load_fixed_by, pending_fixes, split_expected
from .params import (DURATION, SEED_PARAM, SUITE_MODULE, check_filter, check_kernel_args,
                     draw_seeds, seed_in_args, sets, without_seed)
from .signature import signatures
from .tree import SUITE_DIR, series_names

TOOL = "series-check"                # the clone: <build>/series-check/<profile>/linux
VARIANT = "series-check"             # <build>/out/<profile>+series-check, results likewise
JSON_FILE, TEXT_FILE, JUNIT_FILE = "series-check.json", "series-check.txt", "series-check.xml"
# Shorter cases by default: 22 boots of the whole suite at its default (1000 ms a gang) take
# hours. harness.c accepts 10..600000; below 1000 a case that did not reach its race in time
# is skipped, not failed. KERNEL_ARGS with a cgroup_kunit.duration_ms of its own wins.
DEFAULT_DURATION_MS = 200
DEFAULT_ARGS = (f"{SUITE_MODULE}.{DURATION}={DEFAULT_DURATION_MS}",)
BUILD_LOG = "build.log"
BUILT_IN_CMD = ".built-in.a.cmd"     # kbuild's saved command of lib/kunit-cgroup/built-in.a
OBJECT = re.compile(r"[A-Za-z0-9_-]+\.o")
ERROR_LINE = re.compile(r"\berror\b:", re.IGNORECASE)
NAME_WIDTH = 44

SERIES_CHECK_DESCRIPTION = f"""Check that every commit of kernel/series builds and passes the
suite on its own: for the prepared tree's commits (base, then one per patch; --from starts
at a later one), hook the suite in as bisect does, build the profile incrementally in a build
directory of its own (build/out/<profile>+{VARIANT}), boot it once and read the console.
Per commit: built or the first error line, the KUnit totals, the seed, the suite files
built (the suites whose hooks the commit lacks are turned off), the build and
boot time. Unless --kernel-args sets {SUITE_MODULE}.{DURATION}, it adds
{DEFAULT_ARGS[0]} (cases shortened; a case that does not reach its race in
that time is skipped, not failed). Only the prepared tree of kernel/series on the pinned
base: KERNEL_SRC is refused.
Time per commit (measured on 2 cores, um-lockdep): an incremental UML build of one patch
about 1-2 min (the first commit of a new build directory is a full build), a run of the
whole suite at the default duration_ms=1000 about 4-5 min, at {DEFAULT_DURATION_MS} ms about
2 min. 30 commits from base took 45 min with a warm ccache (2026-11-26).
A case that tools/kunit/fixed-by.json says a later patch fixes fails as expected before that
patch: the commit passes, and says so.
Results in build/results/<profile>+{VARIANT}/ ({JSON_FILE}, {TEXT_FILE}, {JUNIT_FILE})."""
SERIES_CHECK_EXIT_HELP = """exit status:
  0  every commit built, booted and passed (no failed or crashed test, no report)
  1  a commit did not: its build failed, a test failed or crashed, a report was printed,
     the kernel hung or did not boot (each named in the last lines)
  2  bad input: an unknown profile, a --from that is not base or a patch of kernel/series,
     KERNEL_SRC given, a bad --filter or --kernel-args, a value the suite refused"""


# --- input ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SeriesCheckOptions:
    """What one `series-check` asks for."""
    profile: str = "um-lockdep"
    start: str = ""                      # FROM: base or a patch of kernel/series ("": base)
    kernel_args: tuple[str, ...] = ()
    filter_glob: str = ""
    kernel_src: str | None = None        # refused: the prepared tree of kernel/series only
    jobs: int | None = None
    echo: bool = False


@dataclass(frozen=True)
class Plan:
    """The checked input: where to start, the fixed seed (None: a new one each commit), the
    kernel arguments (seed aside) and whether the default duration was added."""
    start: int
    seed: int | None
    kernel_args: tuple[str, ...]
    defaulted: bool
    fixed_by: dict[str, str] = field(default_factory=dict)   # fixes.py


def check_input(repo: Path, opts: SeriesCheckOptions) -> Plan:
    """Every input checked before anything is fetched or built; DriverError naming the first
    bad one."""
    if opts.kernel_src:
        raise DriverError(f"KERNEL_SRC={opts.kernel_src}: series-check checks the commits of the "
                          f"prepared tree of kernel/series on the pinned base only; unset "
                          f"KERNEL_SRC (make bisect KERNEL_SRC=... tests your own commits)")
    prof = profiles.load_profile(repo, opts.profile)
    check_filter(opts.filter_glob, "--filter (or FILTER)", repo)
    check_kernel_args(opts.kernel_args, repo)
    seed = seed_in_args(opts.kernel_args, "--kernel-args (or KERNEL_ARGS)")
    names = series_names(repo)
    start = series_pick(names, opts.start, "FROM") if opts.start else 0
    args = tuple(without_seed(opts.kernel_args))
    defaulted = not sets([*prof.kernel_args, *args], DURATION)  # a profile's own wins too
    return Plan(start=start, seed=seed, kernel_args=(*DEFAULT_ARGS, *args) if defaulted else args,
                defaulted=defaulted, fixed_by=load_fixed_by(repo, names))


# --- one commit --------------------------------------------------------------------------------

@dataclass
class CommitResult:
    """What one commit of the series did."""
    index: int                 # 1.. in this run
    name: str                  # base, or the patch's file name
    commit: str
    subject: str
    seed: int
    status: str = ""           # the report's (pass, fail, crash, hang, ...), build-failed, error
    build_error: str = ""      # the build log's first error line
    counts: rp.Counts = field(default_factory=rp.Counts)
    failed_tests: list[str] = field(default_factory=list)
    # failed as expected: case -> the later patch that fixes what it catches (fixes.py)
    before_fix: dict[str, str] = field(default_factory=dict)
    signatures: list[str] = field(default_factory=list)
    suite_files: list[str] | None = None  # None: not built
    build_seconds: float = 0.0
    boot_seconds: float = 0.0
    results: str = ""
    reason: str = ""           # why it could not boot (no image, no QEMU), or what was refused
    refused: str = ""          # a parameter the suite refused (bad input)

    @property
    def ok(self) -> bool:
        return self.status == "pass"

    @property
    def built(self) -> bool:
        return self.suite_files is not None

    @property
    def seconds(self) -> float:
        return self.build_seconds + self.boot_seconds

    @property
    def label(self) -> str:
        return display_name(self.name)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "commit": self.commit,
                "subject": self.subject, "seed": self.seed, "built": self.built,
                "build_error": self.build_error, "status": self.status, "ok": self.ok,
                "counts": vars(self.counts).copy(), "failed_tests": self.failed_tests,
                "failed_before_fix": self.before_fix,
                "signatures": self.signatures, "suite_files": self.suite_files,
                "build_seconds": round(self.build_seconds, 1),
                "boot_seconds": round(self.boot_seconds, 1), "results": self.results,
                "reason": self.reason, "refused": self.refused}


def display_name(name: str) -> str:
    return name.removesuffix(".patch")


def first_error(log_text: str) -> str:
    """The first error line of a build log ("" when it has none)."""
    return next((ln.strip() for ln in log_text.splitlines() if ERROR_LINE.search(ln)), "")[:300]


def suite_files_built(out: Path) -> list[str]:
    """The suite's source files (name.c) the last build of out linked in, in link order: the
    objects of kbuild's command for lib/kunit-cgroup/built-in.a (the members of the
    module's composite object when it is one); [] when the command is not there."""
    where = out / SUITE_DIR
    objects = _objects(where / BUILT_IN_CMD)
    if f"{SUITE_MODULE}.o" in objects:
        objects = _objects(where / f".{SUITE_MODULE}.o.cmd")
    return [f"{o.removesuffix('.o')}.c" for o in objects]


def _objects(cmd_file: Path) -> list[str]:
    """The object files (by name) a kbuild .cmd file's saved command takes, its target aside."""
    try:
        text = cmd_file.read_text(errors="replace")
    except OSError:
        return []
    line = next((ln for ln in text.splitlines() if ln.startswith(("savedcmd_", "cmd_"))), "")
    target, _, command = line.partition(":=")
    names = (Path(word.strip("\"'")).name for word in command.split())
    return [n for n in dict.fromkeys(names) if OBJECT.fullmatch(n) and n != Path(target.strip()).name]


def status_of(report: rp.Report) -> str:
    """The commit's status from its report: the report's, error when it refused a parameter."""
    return "error" if report.bad_parameters else report.status


def check_commit(ws: Workspace, index: int, name: str, commit: str, seed: int,
                 kernel_args: Sequence[str], filter_glob: str, results: Path,
                 progress: Callable[[str], None],
                 pending: dict[str, str] | None = None) -> CommitResult:
    """Build and boot one commit (the hook undone afterwards); its result, never a
    DriverError (a build or boot that fails is the commit's result). A case of `pending`
    (case -> the later patch that fixes what it catches) fails as expected: the commit
    passes if nothing else failed, crashed or printed a report."""
    res = CommitResult(index=index, name=name, commit=commit, subject=subject_of(ws.clone, commit),
                       seed=seed, results=str(results))
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir(parents=True, exist_ok=True)
    progress("building")
    start, began = time.monotonic(), time.time()
    try:
        ws.build_commit(commit)
    except DriverError as e:
        res.build_seconds = time.monotonic() - start
        log = ws.out / BUILD_LOG  # not when the build failed before kunit.py ran: an older one
        fresh = log.is_file() and log.stat().st_mtime >= began - 1
        text = log.read_text(errors="backslashreplace") if fresh else ""
        if text:
            (results / BUILD_LOG).write_text(text)
        res.status, res.build_error = "build-failed", first_error(text) or e.reason
        return res
    try:
        res.build_seconds = time.monotonic() - start
        res.suite_files = suite_files_built(ws.out)
        progress(f"built in {fmt_time(res.build_seconds)}; booting (seed={seed})")
        start = time.monotonic()
        try:
            report = ws.booter(commit, f"{TOOL} {display_name(name)} @ {commit[:12]}")(
                results, [f"{SEED_PARAM}={seed}", *kernel_args], filter_glob)
        except DriverError as e:  # no kernel image, no QEMU: it cannot boot here
            res.status, res.reason = "error", e.reason
            return res
        finally:
            res.boot_seconds = time.monotonic() - start
    finally:
        unhook(ws.clone)
    res.status, res.counts = status_of(report), report.counts
    res.failed_tests = list(dict.fromkeys(t.parent if t.level == "param" and t.parent else t.id
                                          for t in report.failed_tests() if not t.children))
    res.refused = rp.refused_message([report]) or ""
    expected, res.failed_tests = split_expected(res.failed_tests, pending or {})
    res.before_fix = {t: display_name((pending or {})[t]) for t in expected}
    # a failure's own signature is its case's; any other (a report, a crash) still counts
    res.signatures = [s.key for s in signatures(report)
                      if not (s.kind == "fail" and ".".join(s.test.split(".")[:2]) in expected)]
    if (expected and res.status == "fail" and not res.failed_tests and not res.signatures
            and not res.counts.crashed):
        res.status = "pass"
    return res


def outcome_line(res: CommitResult) -> str:
    """'PASS 120 passed, 3 skipped; 1m31s (build 40s, boot 51s)' and the like."""
    times = f"{fmt_time(res.seconds)} (build {fmt_time(res.build_seconds)}, " \
            f"boot {fmt_time(res.boot_seconds)})"
    if not res.built:
        return f"BUILD FAILED: {res.build_error}; {fmt_time(res.build_seconds)}"
    if res.status == "error" and res.reason:
        return f"ERROR: {res.refused or res.reason}; {times}"
    c = res.counts
    totals = ", ".join([f"{c.passed} passed"] + [f"{n} {what}" for n, what in (
        (c.failed, "failed"), (c.skipped, "skipped"), (c.crashed, "crashed")) if n])
    why = "".join(f" ({t} failed before {fix}, which fixes it)" for t, fix in res.before_fix.items())
    if not res.ok:
        named = res.failed_tests or res.signatures
        why = f" ({', '.join(named[:3])}{', ...' if len(named) > 3 else ''})" if named else ""
        if res.refused:
            why = f" ({res.refused})"
    return f"{res.status.upper()} {totals}{why}; {times}"


# --- the whole series --------------------------------------------------------------------------

@dataclass
class SeriesCheck:
    """A run: what was asked and what each commit did."""
    profile: str
    tree: str
    base: str
    start: str
    kernel_args: list[str]
    defaulted: bool
    filter_glob: str
    planned: list[tuple[str, str]]       # (name, commit) of every commit to check
    results: list[CommitResult] = field(default_factory=list)
    stopped: str = ""
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return len(self.results) == len(self.planned) and not self.stopped

    def failed(self) -> list[CommitResult]:
        return [r for r in self.results if not r.ok]

    def exit_code(self) -> int:
        if any(r.refused for r in self.results):
            return rp.EXIT_ERROR
        return rp.EXIT_PASS if self.complete and not self.failed() else rp.EXIT_FAIL

    def to_json(self) -> dict[str, Any]:
        failed = self.failed()
        return {"profile": self.profile, "tree": self.tree, "base": self.base,
                "from": self.start or BASE, "kernel_args": self.kernel_args,
                "default_kernel_args": list(DEFAULT_ARGS) if self.defaulted else [],
                "filter": self.filter_glob, "planned": [n for n, _ in self.planned],
                "commits": [r.to_json() for r in self.results], "complete": self.complete,
                "stopped": self.stopped or None, "seconds": round(self.seconds, 1),
                "result": {"ok": self.exit_code() == rp.EXIT_PASS,
                           "checked": len(self.results), "planned": len(self.planned),
                           "failed": [r.name for r in failed], "exit": self.exit_code()}}


def args_line(run: SeriesCheck) -> str:
    args = " ".join(run.kernel_args) or "(none)"
    note = (f" ({DEFAULT_ARGS[0]} is series-check's default: shorter cases; set "
            f"{SUITE_MODULE}.{DURATION} in KERNEL_ARGS for another)") if run.defaulted else ""
    return f"kernel args {args}{note}; filter {run.filter_glob or '(whole suite)'}"


def files_cell(res: CommitResult, before: list[str] | None) -> str:
    """How many suite files the commit built, and which came or went since the commit before."""
    if res.suite_files is None:
        return "-"
    now = res.suite_files
    added = [f.removesuffix(".c") for f in now if before is not None and f not in before]
    gone = [f.removesuffix(".c") for f in (before or []) if f not in now]
    return " ".join([str(len(now))] + [f"+{f}" for f in added] + [f"-{f}" for f in gone])


def table(results: Sequence[CommitResult]) -> list[str]:
    head = ["#", "commit", "sha", "build", "result", "passed", "failed", "skipped", "crashed",
            "seed", "build time", "boot time", "suite files"]
    rows = [head]
    before: list[str] | None = None
    for r in results:
        name = r.label if len(r.label) <= NAME_WIDTH else r.label[:NAME_WIDTH - 3] + "..."
        c = r.counts
        booted = r.built and not r.reason
        rows.append([str(r.index), name, r.commit[:12], "ok" if r.built else "FAILED",
                     r.status.upper() if booted else ("-" if not r.built else "ERROR"),
                     *(str(n) if booted else "-" for n in (c.passed, c.failed, c.skipped, c.crashed)),
                     str(r.seed), fmt_time(r.build_seconds),
                     fmt_time(r.boot_seconds) if r.built else "-", files_cell(r, before)])
        if r.suite_files is not None:
            before = r.suite_files
    widths = [max(len(row[i]) for row in rows) for i in range(len(head) - 1)]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1]
            for row in rows]


def format_run(run: SeriesCheck, json_path: Path, junit_path: Path) -> str:
    first, last = (display_name(run.planned[0][0]), display_name(run.planned[-1][0])) \
        if run.planned else ("-", "-")
    out = [f"cgkunit series-check: {run.profile}, {plural(len(run.planned), 'commit')} of "
           f"kernel/series ({first} .. {last}); {len(run.results)} checked",
           f"  tree {run.tree}  base {run.base}", f"  {args_line(run)}", ""]
    out += table(run.results) + [""]
    failed = run.failed()
    for r in failed:
        what = (f"build failed: {r.build_error}" if not r.built else
                f"{r.refused or r.reason}" if r.status == "error" else
                f"{r.status}: " + ", ".join(r.failed_tests or r.signatures or [r.status]))
        out.append(f"not ok: {r.label} ({r.commit[:12]}): {what}; {r.results}")
    if run.stopped:
        out.append(f"stopped: {run.stopped}")
    if failed:
        out.append(f"FAIL: {len(failed)} of {len(run.results)} commits did not pass: "
                   f"{', '.join(r.label for r in failed)}")
    elif run.complete:
        out.append(f"PASS: every commit built and passed ({len(run.results)} of {len(run.planned)})")
    else:
        out.append(f"not finished: {len(run.results)} of {len(run.planned)} commits checked")
    out += [f"total time: {fmt_time(run.seconds)}", f"json: {json_path}", f"junit: {junit_path}"]
    return "\n".join(out) + "\n"


def junit_xml(run: SeriesCheck) -> str:
    """One testsuite, one testcase per commit checked: a failure when it did not pass (type
    build, or the report's status), its details in system-out."""
    failures = len(run.failed())
    root = ET.Element("testsuite", {"name": f"{TOOL} {run.profile}", "tests": str(len(run.results)),
                                    "failures": str(failures), "errors": "0", "skipped": "0",
                                    "time": f"{run.seconds:.1f}"})
    for r in run.results:
        case = ET.SubElement(root, "testcase", {"name": r.label, "classname": f"{TOOL}.{run.profile}",
                                                "time": f"{r.seconds:.1f}"})
        if not r.built:
            ET.SubElement(case, "failure", {"type": "build", "message": f"build failed: {r.build_error}"}
                          ).text = r.build_error
        elif not r.ok:
            ET.SubElement(case, "failure", {"type": r.status, "message": outcome_line(r)}).text = \
                "\n".join(r.failed_tests + r.signatures + [x for x in (r.reason, r.refused) if x])
        c = r.counts
        ET.SubElement(case, "system-out").text = "\n".join([
            f"commit {r.commit} {r.subject}", f"seed {r.seed}",
            f"{c.passed} passed, {c.failed} failed, {c.skipped} skipped, {c.crashed} crashed",
            "suite files: " + (" ".join(r.suite_files) if r.suite_files is not None else "(not built)"),
            f"build {r.build_seconds:.1f} s, boot {r.boot_seconds:.1f} s", f"results {r.results}"])
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_files(run: SeriesCheck, dest: Path) -> tuple[Path, Path]:
    """series-check.json and .xml (after every commit: a run stopped midway keeps them)."""
    json_path, junit_path = dest / JSON_FILE, dest / JUNIT_FILE
    write_json(json_path, run.to_json())
    junit_path.write_text(junit_xml(run))
    return json_path, junit_path


def clear_dest(dest: Path) -> None:
    """Remove an earlier series-check's results of this profile."""
    if dest.is_dir():
        shutil.rmtree(dest)
    dest.mkdir(parents=True, exist_ok=True)


def run_series_check(ctx: Context, opts: SeriesCheckOptions,
                     rng: random.Random | None = None) -> int:
    """Check the input, then build and boot every commit from opts.start on; print the table,
    write the files; the exit status (DriverError when the suite refused a parameter)."""
    began = time.monotonic()
    plan = check_input(ctx.repo, opts)
    prof = profiles.load_profile(ctx.repo, opts.profile)
    tree, base = pipeline.prepare(ctx, None)
    planned = prepared_commits(tree)[plan.start:]
    series = series_names(ctx.repo)
    dest = profiles.results_dir(ctx.build, prof.name, VARIANT)
    run = SeriesCheck(profile=prof.name, tree=str(tree.path), base=base, start=opts.start,
                      kernel_args=list(plan.kernel_args), defaulted=plan.defaulted,
                      filter_glob=opts.filter_glob, planned=planned)
    clear_dest(dest)
    clone = ensure_clone(clone_path(ctx.build, TOOL, prof.name), tree.path)
    ws = Workspace(ctx=ctx, prof=prof, clone=clone, out=profiles.out_dir(ctx.build, prof, VARIANT),
                   jobs=opts.jobs, echo=opts.echo)
    say(f"series-check {prof.name}: {plural(len(planned), 'commit')}, "
        f"{display_name(planned[0][0])} .. {display_name(planned[-1][0])}; {args_line(run)}")
    seeds: Iterator[int] = draw_seeds(plan.seed, rng)
    try:
        for i, (name, commit) in enumerate(planned, 1):
            head = f"commit {i} of {len(planned)}: {display_name(name)}"

            def progress(what: str, head: str = head) -> None:
                say(f"{head}: {what}")
            res = check_commit(ws, i, name, commit, next(seeds), plan.kernel_args,
                               opts.filter_glob, dest / display_name(name), progress,
                               pending_fixes(plan.fixed_by, series, name))
            run.results.append(res)
            progress(outcome_line(res))
            run.seconds = time.monotonic() - began
            write_files(run, dest)
            if res.refused:
                run.stopped = f"the suite refused a parameter at {res.label}"
                break
    except KeyboardInterrupt:
        run.stopped = f"interrupted after {plural(len(run.results), 'commit')}"
    finally:
        unhook(clone)
    run.seconds = time.monotonic() - began
    json_path, junit_path = write_files(run, dest)
    text = format_run(run, json_path, junit_path)
    print(text, end="", flush=True)
    (dest / TEXT_FILE).write_text(text)
    if run.stopped.startswith("interrupted"):
        raise KeyboardInterrupt
    refused = next((r.refused for r in run.results if r.refused), "")
    if refused:
        raise DriverError(refused)
    return run.exit_code()
