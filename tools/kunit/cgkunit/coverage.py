"""make coverage: which lines of the kernel the suite drives (UML gcov + lcov).

The um-coverage profile builds UML with CONFIG_GCOV; each object's .gcda is
written when the kernel exits. lcov turns those of kernel/, mm/ and net/ into one
.info file, which this module reads (the format is plain text: SF/FN/FNDA/BRDA/DA
records) to report line and branch coverage and the functions never entered
for the files and function groups a cgroup maintainer cares about, the attach
and fork callbacks of the controllers among them, and which values of the flag
arguments of the charge and migration entry points ran (ARGUMENTS): for each
value, a source line that runs only with it, found in the tree by its text.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from . import deps
from . import profile as profiles
from .common import Context, DriverError, run_cmd, say, write_json
from .pipeline import RunOptions, run_profile
from .report import exit_code, raise_refused

PROFILE = "um-coverage"
PACKAGES = ("lcov",)
# Object directories (under the build dir) whose .gcda files are captured.
CAPTURE_DIRS = ("kernel", "mm", "net")
NEVER_SHOWN = 6   # names of never-entered functions printed per target (all are in the JSON)


@dataclass(frozen=True)
class Target:
    """A file, or a named group of its functions, whose coverage is reported."""
    path: str                            # source path relative to the tree
    label: str = ""                      # defaults to path
    functions: tuple[str, ...] = ()      # empty: the whole file

    @property
    def name(self) -> str:
        return self.label or self.path


# The migration, attach and css_set functions of cgroup.c: moving tasks
# (cgroup_attach_task() and what it calls), the css_set lookup, linking and
# release paths, and the fork/exit hooks that take and drop css_sets.
CGROUP_MIGRATION = (
    "css_set_threaded", "css_set_populated", "css_set_update_populated",
    "css_set_skip_task_iters", "css_set_move_task", "css_set_hash", "put_css_set_locked",
    "compare_css_sets", "find_existing_css_set", "free_cgrp_cset_links",
    "allocate_cgrp_cset_links", "link_css_set", "find_css_set",
    "cgroup_attach_lock", "cgroup_attach_unlock", "cgroup_migrate_add_task",
    "cgroup_taskset_first", "cgroup_taskset_next", "cgroup_migrate_execute",
    "cgroup_migrate_vet_dst", "cgroup_migrate_finish", "cgroup_migrate_add_src",
    "cgroup_migrate_prepare_dst", "cgroup_migrate", "cgroup_attach_task",
    "cgroup_procs_write_start", "cgroup_procs_write_finish", "cgroup_update_dfl_csses",
    "cgroup_attach_permissions", "__cgroup_procs_write", "cgroup_procs_write",
    "cgroup_fork", "cgroup_css_set_fork", "cgroup_css_set_put_fork", "cgroup_can_fork",
    "cgroup_cancel_fork", "cgroup_post_fork", "cgroup_task_exit", "cgroup_task_dead",
    "cgroup_task_release", "cgroup_task_free",
)
# cgroup-v1.c's attach paths (in-kernel callers and the v1 procs/tasks files).
CGROUP_V1_ATTACH = (
    "cgroup_attach_task_all", "cgroup_transfer_tasks", "__cgroup1_procs_write",
    "cgroup1_procs_write", "cgroup1_tasks_write",
)
# signal.c: the queued-signal allocation and free that charge RLIMIT_SIGPENDING.
SIGQUEUE = ("sig_get_ucounts", "__sigqueue_init", "sigqueue_alloc", "__sigqueue_free")

# The attach and fork callbacks of the controllers the profiles build (struct cgroup_subsys
# .can_attach, .cancel_attach, .attach, .can_fork, .cancel_fork, .fork, .exit, .release):
# whether the suite's migrations and forks ran them with the controller on their hierarchy.
CALLBACKS: tuple[Target, ...] = (
    Target("kernel/cgroup/cpuset.c", "cpuset: attach and fork callbacks",
           ("cpuset_can_attach", "cpuset_cancel_attach", "cpuset_attach", "cpuset_can_fork",
            "cpuset_cancel_fork", "cpuset_fork")),
    Target("kernel/cgroup/pids.c", "pids: attach and fork callbacks",
           ("pids_can_attach", "pids_cancel_attach", "pids_can_fork", "pids_cancel_fork",
            "pids_release")),
    Target("mm/memcontrol.c", "memory: attach and fork callbacks",
           ("mem_cgroup_attach", "mem_cgroup_fork", "mem_cgroup_exit")),
    Target("kernel/cgroup/legacy_freezer.c", "freezer (v1): attach and fork callbacks",
           ("freezer_attach", "freezer_fork")),
    Target("kernel/sched/core.c", "cpu: attach callbacks",
           ("cpu_cgroup_can_attach", "cpu_cgroup_attach", "cpu_cgroup_cancel_attach")),
    Target("net/core/netclassid_cgroup.c", "net_cls (v1): attach callback", ("cgrp_attach",)),
    Target("net/core/netprio_cgroup.c", "net_prio (v1): attach callback", ("net_prio_attach",)),
    # perf_event's perf_cgroup_attach(): UML has no perf events; x86_64 builds it, but
    # coverage is UML's gcov only.
)

TARGETS: tuple[Target, ...] = (
    Target("kernel/ucount.c"),
    Target("kernel/cgroup/rstat.c"),
    Target("kernel/cgroup/cgroup.c"),
    Target("kernel/cgroup/cgroup.c", "cgroup.c: migration, attach, css_set", CGROUP_MIGRATION),
    Target("kernel/cgroup/cgroup-v1.c"),
    Target("kernel/cgroup/cgroup-v1.c", "cgroup-v1.c: attach", CGROUP_V1_ATTACH),
    Target("kernel/cgroup/pids.c"),
    Target("kernel/cgroup/freezer.c"),
    Target("kernel/signal.c", "signal.c: sigqueue alloc/free", SIGQUEUE),
    *CALLBACKS,
)


@dataclass(frozen=True)
class Line:
    """A line of a probed function: the first whose stripped text is `text`, `offset` below."""
    text: str
    offset: int = 0


@dataclass(frozen=True)
class Calls:
    """The entries into a function (FNDA): a wrapper that passes one value."""
    function: str


@dataclass(frozen=True)
class ArgValue:
    """One value of an argument: the executions of `runs`, less those of each of `less`."""
    value: str
    runs: Line | Calls
    less: tuple[Line, ...] = ()


@dataclass(frozen=True)
class ArgProbe:
    """An argument of an entry point and how each of its values shows in line counts."""
    path: str
    function: str                        # whose lines the anchors are searched in
    argument: str
    values: tuple[ArgValue, ...]

    @property
    def name(self) -> str:
        return f"{self.function}(): {self.argument}"


# gcov counts executions per line. A line that holds several blocks (a loop's condition,
# `} while_each_thread(...)`) or none (a lone `break;`) cannot stand for a value, and the
# order of the branches it records differs between an if and an if-break: each value below
# is a line of one statement, or the entries into a wrapper that passes it.
_LOCK_GLOBAL = Line("percpu_down_write(&cgroup_threadgroup_rwsem);")
_LOCK_GROUP = Line("down_write(&tsk->signal->cgroup_threadgroup_rwsem);")
_SIG_FORCED = Line("override_rlimit = (is_si_special(info) || info->si_code >= 0);")
# The flag arguments of the charge and migration entry points. Counts are executions of
# the lines: per call, or per thread or per namespace level where the line is in a loop.
ARGUMENTS: tuple[ArgProbe, ...] = (
    ArgProbe("kernel/ucount.c", "inc_rlimit_get_ucounts", "override_rlimit", (
        ArgValue("false (per level)", Line("if (!override_rlimit)", 1)),
        ArgValue("true (per level)", Line("if (!override_rlimit)"),
                 (Line("if (!override_rlimit)", 1),)))),
    ArgProbe("kernel/signal.c", "__send_signal_locked", "sig, override_rlimit", (
        ArgValue("below SIGRTMIN: forced unless si_code < 0", _SIG_FORCED),
        ArgValue("real-time: not forced", Line("if (sig < SIGRTMIN)"), (_SIG_FORCED,)))),
    ArgProbe("kernel/signal.c", "sig_get_ucounts", "charge refused", (
        ArgValue("refused, not forced", Line("print_dropped_signal(sig);")),)),
    ArgProbe("kernel/cgroup/cgroup.c", "cgroup_procs_write_start_task", "threadgroup, self", (
        ArgValue("threadgroup", Line("if (threadgroup)", 1)),
        ArgValue("one thread", Line("if (threadgroup)"), (Line("if (threadgroup)", 1),)),
        ArgValue("self, one thread (no attach lock)",
                 Line("*lock_mode = CGRP_ATTACH_LOCK_NONE;")))),
    ArgProbe("kernel/cgroup/cgroup.c", "cgroup_attach_lock", "lock_mode", (
        ArgValue("CGRP_ATTACH_LOCK_NONE", Line("cpus_read_lock();"),
                 (_LOCK_GLOBAL, _LOCK_GROUP)),
        ArgValue("CGRP_ATTACH_LOCK_GLOBAL", _LOCK_GLOBAL),
        ArgValue("CGRP_ATTACH_LOCK_PER_THREADGROUP", _LOCK_GROUP))),
    ArgProbe("kernel/cgroup/cgroup.c", "__cgroup_procs_write", "threadgroup", (
        ArgValue("true (cgroup.procs)", Calls("cgroup_procs_write")),
        ArgValue("false (cgroup.threads)", Calls("cgroup_threads_write")))),
    ArgProbe("kernel/cgroup/cgroup-v1.c", "__cgroup1_procs_write", "threadgroup", (
        ArgValue("true (cgroup.procs)", Calls("cgroup1_procs_write")),
        ArgValue("false (tasks)", Calls("cgroup1_tasks_write")))),
    ArgProbe("kernel/cgroup/cgroup.c", "cgroup_css_set_fork", "kargs->flags", (
        ArgValue("without CLONE_INTO_CGROUP", Line("kargs->cset = cset;")),
        ArgValue("CLONE_INTO_CGROUP", Line("if (kargs->flags & CLONE_INTO_CGROUP)", 1)))),
)


@dataclass
class FileData:
    """The coverage records of one source file (counts summed over records)."""
    path: str
    lines: dict[int, int] = field(default_factory=dict)          # line -> hits
    functions: dict[str, int] = field(default_factory=dict)      # name -> first line
    calls: dict[str, int] = field(default_factory=dict)          # name -> entries
    branches: dict[tuple[int, str, str], int] = field(default_factory=dict)  # -> taken


def _int(text: str, where: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise DriverError(f"{where}: not a number: {text!r}") from None


def parse_info(text: str, where: str = "coverage.info") -> dict[str, FileData]:
    """Read lcov tracefile text; files keyed by their SF path."""
    files: dict[str, FileData] = {}
    cur: FileData | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        at = f"{where}:{n}"
        key, _, value = line.partition(":")
        if line == "end_of_record":
            cur = None
        elif key == "SF":
            cur = files.setdefault(value, FileData(value))
        elif cur is None or not value:
            continue
        elif key == "DA":
            parts = value.split(",")
            ln, hits = _int(parts[0], at), _int(parts[1], at) if len(parts) > 1 else 0
            cur.lines[ln] = cur.lines.get(ln, 0) + hits
        elif key == "FN":
            ln_text, _, name = value.partition(",")
            cur.functions.setdefault(name, _int(ln_text, at))
        elif key == "FNDA":
            hits_text, _, name = value.partition(",")
            cur.calls[name] = cur.calls.get(name, 0) + _int(hits_text, at)
        elif key == "BRDA":
            parts = value.split(",")
            if len(parts) != 4:
                raise DriverError(f"{at}: bad BRDA record {value!r}")
            k = (_int(parts[0], at), parts[1], parts[2])
            taken = 0 if parts[3] == "-" else _int(parts[3], at)
            cur.branches[k] = cur.branches.get(k, 0) + taken
    return files


def find_file(files: dict[str, FileData], path: str) -> FileData | None:
    """The record of a tree-relative path (SF paths are absolute or ../-relative)."""
    want = "/" + path.lstrip("/")
    hits = [f for sf, f in files.items() if ("/" + sf.lstrip("./")).endswith(want)]
    return hits[0] if len(hits) == 1 else None


def function_lines(data: FileData) -> dict[str, range]:
    """Line span of each function: from its first line to the next function's."""
    starts = sorted((ln, name) for name, ln in data.functions.items())
    last = max([*data.lines, *(ln for ln, _ in starts), 0]) + 1
    spans: dict[str, range] = {}
    for i, (ln, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else last
        spans[name] = range(ln, max(end, ln + 1))
    return spans


@dataclass
class TargetCoverage:
    """Coverage of one target."""
    name: str
    path: str
    lines_hit: int = 0
    lines_total: int = 0
    branches_hit: int = 0
    branches_total: int = 0
    functions_total: int = 0
    never_entered: list[str] = field(default_factory=list)
    # listed but without a gcov record: static inlines with no out-of-line copy (their lines
    # count in the function that precedes them) or functions this kernel does not have
    missing_functions: list[str] = field(default_factory=list)
    found: bool = True

    @staticmethod
    def pct(hit: int, total: int) -> float | None:
        return round(100.0 * hit / total, 1) if total else None

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "path": self.path, "found": self.found,
                "lines": {"hit": self.lines_hit, "total": self.lines_total,
                          "percent": self.pct(self.lines_hit, self.lines_total)},
                "branches": {"hit": self.branches_hit, "total": self.branches_total,
                             "percent": self.pct(self.branches_hit, self.branches_total)},
                "functions": {"total": self.functions_total,
                              "never_entered": self.never_entered},
                "missing_functions": self.missing_functions}


def measure(target: Target, files: dict[str, FileData]) -> TargetCoverage:
    """Line, branch and function coverage of a target."""
    out = TargetCoverage(name=target.name, path=target.path)
    data = find_file(files, target.path)
    if data is None:
        out.found = False
        out.missing_functions = list(target.functions)
        return out
    if target.functions:
        spans = function_lines(data)
        out.missing_functions = [f for f in target.functions if f not in spans]
        names = [f for f in target.functions if f in spans]
        wanted = {ln for f in names for ln in spans[f]}
    else:
        names = sorted(data.functions, key=lambda f: data.functions[f])
        wanted = None
    lines = {ln: h for ln, h in data.lines.items() if wanted is None or ln in wanted}
    out.lines_total, out.lines_hit = len(lines), sum(1 for h in lines.values() if h)
    branches = [t for (ln, _, _), t in data.branches.items() if wanted is None or ln in wanted]
    out.branches_total, out.branches_hit = len(branches), sum(1 for t in branches if t)
    out.functions_total = len(names)
    out.never_entered = [f for f in names if not data.calls.get(f, 0)]
    return out


@dataclass
class ArgReach:
    """How often each value of a probed argument ran; None where an anchor was not found."""
    name: str
    path: str
    counts: dict[str, int | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "path": self.path, "values": self.counts,
                "missing": [v for v, n in self.counts.items() if n == 0],
                "problems": self.problems}


def _anchor_line(anchor: Line, source: list[str], span: range) -> int | None:
    """The line number of an anchor within a function's span (1-based), or None."""
    for ln in span:
        if 0 < ln <= len(source) and source[ln - 1].strip() == anchor.text:
            return ln + anchor.offset
    return None


def measure_argument(probe: ArgProbe, files: dict[str, FileData],
                     source: list[str] | None) -> ArgReach:
    """Count each value of probe from the line and entry counts of its file."""
    out = ArgReach(name=probe.name, path=probe.path)
    data = find_file(files, probe.path)
    span = function_lines(data).get(probe.function) if data else None
    if data is None or span is None or source is None:
        out.problems.append(f"{probe.function}() of {probe.path} not in the coverage data"
                            if source is not None else f"{probe.path}: source not readable")
        out.counts = {v.value: None for v in probe.values}
        return out

    def count(anchor: Line | Calls) -> int | None:
        if isinstance(anchor, Calls):
            return data.calls.get(anchor.function)
        ln = _anchor_line(anchor, source, span)
        if ln is None or ln not in data.lines:
            return None
        return data.lines[ln]

    for v in probe.values:
        anchors = (v.runs, *v.less)
        got = [count(a) for a in anchors]
        missing = [a for a, n in zip(anchors, got) if n is None]
        if missing:
            what = ", ".join(a.function + "()" if isinstance(a, Calls) else repr(a.text)
                             for a in missing)
            out.problems.append(f"{probe.name} = {v.value}: no counted line for {what}")
            out.counts[v.value] = None
        else:
            out.counts[v.value] = max((got[0] or 0) - sum(n or 0 for n in got[1:]), 0)
    return out


def format_arguments(results: list[ArgReach]) -> str:
    """A row per argument value: how often it ran; 'never' rows are the to-do list."""
    width = max([len(r.name) for r in results] + [8])
    lines = [f"{'argument':<{width}}  {'value':<40}  runs"]
    for r in results:
        for i, (value, n) in enumerate(r.counts.items()):
            shown = "?" if n is None else ("never" if n == 0 else str(n))
            lines.append(f"{r.name if i == 0 else '':<{width}}  {value:<40}  {shown}")
    for r in results:
        for p in r.problems:
            lines.append(f"  {p}")
    return "\n".join(lines) + "\n"


def read_source(data: FileData | None) -> list[str] | None:
    """The lines of a coverage record's source file (its SF path), None if unreadable."""
    if data is None:
        return None
    try:
        return Path(data.path).read_text(errors="replace").splitlines()
    except OSError:
        return None


def _cell(hit: int, total: int) -> str:
    pct = TargetCoverage.pct(hit, total)
    return "-" if pct is None else f"{pct:5.1f}% {hit}/{total}"


def format_table(results: list[TargetCoverage]) -> str:
    """One screen: a row per target, then the functions never entered."""
    width = max([len(r.name) for r in results] + [6])
    lines = [f"{'target':<{width}}  {'lines':<17}  {'branches':<17}  never entered"]
    for r in results:
        if not r.found:
            lines.append(f"{r.name:<{width}}  not in the coverage data")
            continue
        lines.append(f"{r.name:<{width}}  {_cell(r.lines_hit, r.lines_total):<17}  "
                     f"{_cell(r.branches_hit, r.branches_total):<17}  "
                     f"{len(r.never_entered)} of {r.functions_total} functions")
    for r in results:
        if r.never_entered:
            shown = ", ".join(r.never_entered[:NEVER_SHOWN])
            more = len(r.never_entered) - NEVER_SHOWN
            lines.append(f"  {r.name}: {shown}" + (f" (+{more} more)" if more > 0 else ""))
        if r.missing_functions and r.found:
            lines.append(f"  {r.name}: no gcov record (inlined into callers, or not in this "
                         f"kernel): {', '.join(r.missing_functions)}")
    return "\n".join(lines) + "\n"


def clear_counts(out: Path) -> int:
    """Remove the .gcda files of earlier boots (gcov adds to them); how many."""
    n = 0
    for gcda in out.rglob("*.gcda"):
        gcda.unlink()
        n += 1
    return n


def lcov_tools() -> tuple[str, str, str]:
    """Paths of lcov, genhtml and gcov; DriverError naming what is missing."""
    found = {t: shutil.which(t) for t in ("lcov", "genhtml", "gcov")}
    missing = [t for t, p in found.items() if p is None]
    if missing:
        raise DriverError(f"{', '.join(missing)} not found (Debian packages lcov and gcc; "
                          f"run make coverage as root to install them)")
    return found["lcov"] or "", found["genhtml"] or "", found["gcov"] or ""


def capture(out: Path, dest: Path) -> Path:
    """lcov the .gcda files of CAPTURE_DIRS into dest/coverage.info."""
    lcov, _, gcov = lcov_tools()
    dirs = [out / d for d in CAPTURE_DIRS if (out / d).is_dir()]
    if not any(next(d.rglob("*.gcda"), None) for d in dirs):
        raise DriverError(f"no .gcda files under {out}: the kernel did not exit normally "
                          f"(gcov writes them at exit)")
    info = dest / "coverage.info"
    args = [lcov, "--quiet", "--capture", "--rc", "lcov_branch_coverage=1",
            "--gcov-tool", gcov, "--base-directory", str(out), "--output-file", str(info)]
    for d in dirs:
        args += ["--directory", str(d)]
    say(f"lcov: capturing {', '.join(str(d.relative_to(out)) for d in dirs)}")
    run_cmd(args, cwd=out)
    return info


def html(info: Path, files: dict[str, FileData], dest: Path) -> Path | None:
    """genhtml of the targets' files into dest/html; None when it fails (reported)."""
    _, genhtml, _ = lcov_tools()
    wanted = {data.path for data in (find_file(files, t.path) for t in TARGETS) if data}
    if not wanted:
        return None
    focus = dest / "coverage-targets.info"
    text = info.read_text(errors="replace")
    records = [r for r in text.split("end_of_record\n")
               if any(f"SF:{sf}\n" in r for sf in wanted)]
    focus.write_text("".join(r + "end_of_record\n" for r in records))
    outdir = dest / "html"
    shutil.rmtree(outdir, ignore_errors=True)
    proc = run_cmd([genhtml, "--quiet", "--branch-coverage", "--output-directory", str(outdir),
                    str(focus)], check=False)
    if proc.returncode != 0:
        say(f"genhtml failed ({proc.stderr.strip().splitlines()[-1:]}); no HTML report")
        return None
    return outdir / "index.html"


def report(info: Path, dest: Path, run_status: str) -> list[TargetCoverage]:
    """Measure every target from info; coverage.json and coverage.txt in dest, table printed."""
    files = parse_info(info.read_text(errors="replace"), str(info))
    results = [measure(t, files) for t in TARGETS]
    args = [measure_argument(p, files, read_source(find_file(files, p.path)))
            for p in ARGUMENTS]
    table = format_table(results) + "\n" + format_arguments(args)
    page = html(info, files, dest)
    write_json(dest / "coverage.json", {
        "profile": PROFILE, "run_status": run_status,
        "html": str(page) if page else None,
        "targets": [r.to_json() for r in results],
        "arguments": [a.to_json() for a in args]})
    (dest / "coverage.txt").write_text(table)
    print(table, end="")
    print(f"  json: {dest / 'coverage.json'}")
    if page:
        print(f"  html: {page}")
    return results


def run_coverage(ctx: Context, opts: RunOptions) -> int:
    """Build um-coverage, boot the suite once, and report coverage; the run's exit code."""
    deps.ensure_deps(PACKAGES)
    lcov_tools()
    prof = profiles.load_profile(ctx.repo, PROFILE)
    out = profiles.out_dir(ctx.build, prof)
    if out.is_dir():
        cleared = clear_counts(out)
        if cleared:
            say(f"cleared {cleared} .gcda files of an earlier boot")
    opts.profile = PROFILE
    result = run_profile(ctx, opts)
    dest = profiles.results_dir(ctx.build, PROFILE)
    info = capture(out, dest)
    report(info, dest, result.status)
    if result.status != "pass":
        say(f"the suite did not pass ({result.status}): coverage is of what ran")
    raise_refused([result])  # a parameter the suite refused: bad input, exit status 2
    return exit_code(result.status)

