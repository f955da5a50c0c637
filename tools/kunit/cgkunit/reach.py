"""make reach: which lockdep usages of the target locks the suite reached, beside the ones
the kernel's own code reaches.

A lockdep report needs both usages of a lock in one boot (taken in softirq here, with
softirqs enabled there): covered lines do not show that. The suite's last suite,
cgroup_reach (lib/kunit-cgroup/reach_kunit.c), prints what lockdep recorded for each lock
class defined or taken in kernel/cgroup/*.c and kernel/ucount.c; the console reader
(console.parse_reach) reads those lines into each test's `reach` records. This module sets
them beside PRODUCTION, a table read from the kernel's code: for each class, the contexts
the kernel takes it in, each with a one-line reason. A context the kernel reaches and the
suite did not is a missing cell: the to-do list.

Contexts are lockdep's own usage bits, for writes (W) and reads (R):
  hardirq   taken in hardirq context               (LOCK_USED_IN_HARDIRQ[_READ])
  softirq   taken in softirq context               (LOCK_USED_IN_SOFTIRQ[_READ])
  irqs-on   taken with hardirqs enabled            (LOCK_ENABLED_HARDIRQ[_READ])
  bh-on     taken with hardirqs and softirqs on    (LOCK_ENABLED_SOFTIRQ[_READ])
/proc/lockdep prints them as one character per state and direction (HARDIRQ-W,
HARDIRQ-R, SOFTIRQ-W, SOFTIRQ-R): '.' neither, '-' used in, '+' enabled, '?' both.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from . import profile as profiles
from .common import Context, DriverError, say, write_json
from .console import parse_console
from .pipeline import RunOptions, run_profile
from .report import EXIT_ERROR, Report, exit_code, raise_refused

SUITE = "cgroup_reach"
CASE = "cgroup_reach.lockdep_usage"
PROFILES = ("um-lockdep", "x86_64-lockdep")  # lockdep with PROVE_LOCKING: usage bits
CONTEXTS = ("hardirq", "softirq", "irqs-on", "bh-on")
MODES = "WR"


@dataclass(frozen=True)
class Cell:
    """What the kernel's own code does with a lock in one context: the modes it takes it
    in there ("W", "R", "WR"; "" never) and why, in one line, from reading the code."""
    modes: str
    why: str


NEVER_SLEEPING = Cell("", "a sleeping lock: never taken in interrupt context")
PROCESS_W = Cell("W", "process context only, hardirqs and softirqs on")


@dataclass(frozen=True)
class Lock:
    """A row of the table: a lock class by the name lockdep gives it."""
    name: str
    where: str                       # the file that defines it, or what takes it
    cells: dict[str, Cell]           # context -> what the kernel does there
    needs: str = ""                  # a config the class exists only with

    def cell(self, context: str) -> Cell:
        return self.cells.get(context, Cell("", "not taken there"))


def _mutex(name: str, where: str, callers: str, needs: str = "") -> Lock:
    """A mutex: process context with irqs on, nowhere else."""
    on = Cell("W", f"{callers}: a mutex, process context, irqs and softirqs on")
    return Lock(name, where, {"hardirq": NEVER_SLEEPING, "softirq": NEVER_SLEEPING,
                              "irqs-on": on, "bh-on": on}, needs)


def _irq_off(name: str, where: str, softirq: Cell, hardirq: Cell, taken: str,
             needs: str = "") -> Lock:
    """A spinlock always taken with irqs off (spin_lock_irq/irqsave)."""
    off = Cell("", taken)
    return Lock(name, where, {"hardirq": hardirq, "softirq": softirq, "irqs-on": off,
                              "bh-on": off}, needs)


def _plain(name: str, where: str, callers: str, needs: str = "") -> Lock:
    """A spinlock taken with spin_lock() from process context only."""
    process = Cell("", f"{callers}: process context only")
    on = Cell("W", f"{callers}: spin_lock() with irqs and softirqs on")
    return Lock(name, where, {"hardirq": process, "softirq": process, "irqs-on": on,
                              "bh-on": on}, needs)


def _workqueue(wq: str, where: str) -> Lock:
    """A workqueue's lockdep map: process_one_work() and flushes, process context."""
    on = Cell("W", "process_one_work() holds the workqueue's map around each work item, "
                   "flush_workqueue() takes it: kworker, irqs and softirqs on")
    return Lock(f"(wq_completion){wq}", where,
                {"hardirq": NEVER_SLEEPING, "softirq": NEVER_SLEEPING, "irqs-on": on,
                 "bh-on": on})


def _rwsem(name: str, where: str, why: str, needs: str = "") -> Lock:
    on = Cell("WR", why)
    return Lock(name, where, {"hardirq": NEVER_SLEEPING, "softirq": NEVER_SLEEPING,
                              "irqs-on": on, "bh-on": on}, needs)


SIGNAL_HARDIRQ = ("it_real_fn() (hrtimer, hardirq) -> kill_pid_info(SIGALRM) -> "
                  "lock_task_sighand() -> send_signal_locked()")
SIGNAL_SOFTIRQ = ("kill_fasync() from a socket's wakeup in net softirq -> send_sigio() -> "
                  "do_send_sig_info() -> lock_task_sighand()")

# Read from the code of Linux 7.3 with kernel/series (the escrow's &esc->lock is the
# series'). reach_kunit.c's reach_classes[] lists the same names (tests/test_reach.py).
PRODUCTION: tuple[Lock, ...] = (
    _mutex("cgroup_mutex", "kernel/cgroup/cgroup.c",
           "cgroup_lock() in cgroup_mkdir(), cgroup_attach_task_all(), css_release_work_fn()"),
    _irq_off("css_set_lock", "kernel/cgroup/cgroup.c",
             softirq=Cell("W", "__put_task_struct_rcu_cb() (RCU callback, softirq) -> "
                               "cgroup_task_free(): spin_lock_irq(), then put_css_set()'s "
                               "irqsave on the last reference"),
             hardirq=Cell("", "put_task_struct() always defers __put_task_struct() to RCU "
                              "(sched/task.h); PREEMPT_RT's cgroup_task_dead() uses a lazy "
                              "irq_work, run by a kthread"),
             taken="always spin_lock_irq() or spin_lock_irqsave()"),
    Lock("cgroup_idr_lock", "kernel/cgroup/cgroup.c", {
        "hardirq": Cell("", "cgroup_idr_alloc/replace/remove(): mkdir, css online and "
                            "css_free_rwork_fn() (workqueue): process context"),
        "softirq": Cell("", "no softirq caller: css_free_rwork_fn() is a work item"),
        "irqs-on": Cell("W", "spin_lock_bh() in cgroup_idr_alloc/replace/remove(): hardirqs "
                             "on"),
        "bh-on": Cell("", "always spin_lock_bh()")}),
    _irq_off("trace_cgroup_path_lock", "kernel/cgroup/cgroup.c",
             softirq=Cell("", "TRACE_CGROUP_PATH() callers (mkdir, rmdir, attach, freeze, "
                              "notify_populated) run in process context"),
             hardirq=Cell("", "TRACE_CGROUP_PATH() callers run in process context"),
             taken="TRACE_CGROUP_PATH() takes it with spin_lock_irqsave(), and only while "
                   "a cgroup tracepoint is enabled"),
    _rwsem("cgroup_threadgroup_rwsem", "kernel/cgroup/cgroup.c",
           "R: cgroup_threadgroup_change_begin() in fork (cgroup_can_fork()), exit "
           "(exit_signals()) and exec (de_thread()); W: cgroup_attach_lock() and "
           "cgroup_favor_dynmods(): percpu rwsem, process context"),
    _mutex("&cgrp->pidlist_mutex", "kernel/cgroup/cgroup.c",
           "cgroup_pidlist_start() (a v1 tasks or cgroup.procs read) and "
           "cgroup_pidlist_destroy_work_fn()"),
    _irq_off("&cfile->lock", "kernel/cgroup/cgroup.c",
             softirq=Cell("W", "cgroup_file_notify_timer() (timer_list callback, softirq) "
                               "-> cgroup_file_notify() -> spin_lock_irqsave()"),
             hardirq=Cell("", "cgroup_file_notify() callers: memcg events, pids and the "
                              "notify timer; none in hardirq"),
             taken="spin_lock_irq() (kill_css()) or spin_lock_irqsave() "
                   "(cgroup_file_notify()) only"),
    _workqueue("cgroup_offline", "kernel/cgroup/cgroup.c"),
    _workqueue("cgroup_release", "kernel/cgroup/cgroup.c"),
    _workqueue("cgroup_free", "kernel/cgroup/cgroup.c"),
    _plain("release_agent_path_lock", "kernel/cgroup/cgroup-v1.c",
           "cgroup1_release_agent() (work item), cgroup1_reconfigure(), "
           "cgroup1_show_options()"),
    _workqueue("cgroup_pidlist_destroy", "kernel/cgroup/cgroup-v1.c"),
    _irq_off("ss_rstat_lock(ss)", "kernel/cgroup/rstat.c",
             softirq=Cell("", "flushers (cpu.stat and memory.stat reads, memcg's flush "
                              "work, rmdir) run in process context; css_rstat_updated() "
                              "does not take it"),
             hardirq=Cell("", "no hardirq flusher"),
             taken="__css_rstat_lock(): spin_trylock_irq(), then spin_lock_irq()"),
    Lock("rstat_base_lock", "kernel/cgroup/rstat.c", {
        c: Cell("", "ss_rstat_init(NULL) initializes it again: its class is "
                    "ss_rstat_lock(ss)'s, this name is never registered") for c in CONTEXTS}),
    _mutex("cpuset_top_mutex", "kernel/cgroup/cpuset.c",
           "cpuset partition and hotplug updates", "CONFIG_CPUSETS"),
    _mutex("cpuset_mutex", "kernel/cgroup/cpuset.c",
           "cpuset_lock(), cpuset_can_attach(), cpuset_attach(), cpuset writes",
           "CONFIG_CPUSETS"),
    _irq_off("callback_lock", "kernel/cgroup/cpuset.c",
             softirq=Cell("", "__cpuset_node_allowed() returns before taking it "
                              "in_interrupt(); the other callers are process context"),
             hardirq=Cell("", "as softirq: in_interrupt() callers never take it"),
             taken="spin_lock_irq() or spin_lock_irqsave() only", needs="CONFIG_CPUSETS"),
    _plain("&fmp->lock", "kernel/cgroup/cpuset-v1.c",
           "fmeter_markevent() (direct reclaim) and fmeter_getrate() (a v1 file read)",
           "CONFIG_CPUSETS_V1"),
    _mutex("freezer_mutex", "kernel/cgroup/legacy_freezer.c",
           "the v1 freezer's css_online/offline, attach, fork and state writes",
           "CONFIG_CGROUP_FREEZER"),
    _mutex("rdmacg_mutex", "kernel/cgroup/rdma.c",
           "rdmacg_register_device(), charges and limit writes", "CONFIG_CGROUP_RDMA"),
    _plain("dmemcg_lock", "kernel/cgroup/dmem.c",
           "region register/unregister, css free, the first charge or limit write of a "
           "cgroup (its pool created)", "CONFIG_CGROUP_DMEM"),
    _irq_off("ucounts_lock", "kernel/ucount.c",
             softirq=Cell("W", "put_cred_rcu() (RCU callback, softirq) -> put_ucounts() "
                               "of the cred's ucounts: the last put once a user's last "
                               "task and cred are gone"),
             hardirq=Cell("", "a signal charged from hardirq (it_real_fn()) is for a task "
                              "whose cred holds a reference: never the last put there"),
             taken="spin_lock_irq() in alloc_ucounts(), spin_lock_irqsave() in "
                   "put_ucounts()"),
    _irq_off("&esc->lock", "kernel/ucount.c (kernel/series)",
             softirq=Cell("W", "SIGIO from net softirq (kill_fasync() -> send_sigio()) -> "
                               "sig_get_ucounts() -> escrow_charge() -> "
                               "sigpending_charge_exact()"),
             hardirq=Cell("W", "it_real_fn() (hrtimer, hardirq) -> kill_pid_info() -> "
                               "sig_get_ucounts() -> escrow_charge() -> "
                               "sigpending_charge_exact(): spin_lock_irqsave()"),
             taken="spin_lock_irq() or spin_lock_irqsave() only"),
    _rwsem("&sig->cgroup_threadgroup_rwsem", "kernel/fork.c (taken in cgroup)",
           "with favordynmods: R in cgroup_threadgroup_change_begin(), W in "
           "cgroup_attach_lock(): rwsem, process context"),
    _rwsem("cpu_hotplug_lock", "kernel/cpu.c (taken in cgroup)",
           "R: cpus_read_lock() in cgroup_attach_lock() and cpuset; W: cpus_write_lock() "
           "by CPU hotplug: percpu rwsem, process context", "CONFIG_HOTPLUG_CPU"),
    _irq_off("&sighand->siglock", "kernel/fork.c (taken in cgroup)",
             softirq=Cell("W", SIGNAL_SOFTIRQ), hardirq=Cell("W", SIGNAL_HARDIRQ),
             taken="cgroup takes it with irqs off (freezer.c's lock_task_sighand(), "
                   "spin_lock() under css_set_lock in cgroup_post_fork()); signal.c the same"),
)


# --- what the boot reached ------------------------------------------------------------------

def usage_bits(usage: str) -> set[tuple[str, str]]:
    """The (context, mode) pairs of a /proc/lockdep usage string ('-.-.', in lockdep's
    order HARDIRQ-W, HARDIRQ-R, SOFTIRQ-W, SOFTIRQ-R); DriverError for one that is not."""
    if len(usage) != 4 or any(c not in ".+-?" for c in usage):
        raise DriverError(f"bad lockdep usage string {usage!r}: want 4 of '.', '+', '-', '?'")
    bits: set[tuple[str, str]] = set()
    for i, c in enumerate(usage):
        state, mode = ("hardirq", "softirq")[i // 2], MODES[i % 2]
        enabled = "irqs-on" if state == "hardirq" else "bh-on"
        if c in "-?":
            bits.add((state, mode))
        if c in "+?":
            bits.add((enabled, mode))
    return bits


def base_name(name: str) -> str:
    """A class name without lockdep's '#N' (another key of that name) and '/N' (subclass)."""
    for sep in ("/", "#"):
        head, _, tail = name.rpartition(sep)
        if head and tail.isdigit():
            name = head
    return name


@dataclass
class Reached:
    """What one boot's cgroup_reach printed."""
    classes: dict[str, set[tuple[str, str]]] = field(default_factory=dict)  # base -> bits
    variants: dict[str, list[str]] = field(default_factory=dict)  # base -> names printed
    registered: set[str] = field(default_factory=set)
    debug_locks: int | None = None
    lockdep_classes: int = 0
    matched: int | None = None
    printed: int = 0


def reached(records: Sequence[dict[str, Any]]) -> Reached:
    """Union of the usage of each class (over its '#N' and '/N' variants) in the records
    console.parse_reach made, over every report in them, each ending at its 'end' record:
    cgroup_reach's, and cgroup_migrate_dynmods_reach's from the boot with favordynmods on.
    debug_locks is the lowest of the reports'. DriverError when a report is not whole."""
    out = Reached()
    printed = 0          # classes read since the last report's end
    seen_lockdep = False  # its 'lockdep' line was read
    for r in records:
        kind = r.get("kind")
        if kind == "lockdep":
            seen_lockdep = True
            locks = int(r.get("debug_locks", 0))
            out.debug_locks = locks if out.debug_locks is None else min(out.debug_locks, locks)
            out.lockdep_classes = max(out.lockdep_classes, int(r.get("classes", 0)))
        elif kind == "end":
            matched = int(r.get("matched", -1))
            if not seen_lockdep:
                raise DriverError("the reach report is cut short: a 'reach: end' line without "
                                  "its 'reach: lockdep' line")
            if matched != printed:
                raise DriverError(f"the console lost reach lines: cgroup_reach printed "
                                  f"{matched} classes, {printed} were read")
            out.matched = (out.matched or 0) + matched
            printed, seen_lockdep = 0, False
        elif kind == "class":
            name, usage = str(r["name"]), str(r["usage"])
            base = base_name(name)
            out.classes.setdefault(base, set())
            if usage:
                out.printed += 1
                printed += 1
                out.registered.add(base)
                out.variants.setdefault(base, []).append(name)
                out.classes[base] |= usage_bits(usage)
    if out.debug_locks is None or out.matched is None or seen_lockdep or printed:
        raise DriverError("the reach report is cut short: no 'reach: lockdep' or 'reach: end' "
                          "line (did the kernel stop in cgroup_reach?)")
    return out


# --- the table ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Gap:
    """A cell that differs: the kernel reaches it and the suite did not (missing), or the
    suite reached what the table says the kernel never does (unexpected)."""
    lock: str
    context: str
    modes: str
    why: str
    kind: str  # "missing" or "unexpected"


def built_configs(config_text: str) -> set[str]:
    """The options a kernel .config sets (=y or =m)."""
    out: set[str] = set()
    for line in config_text.splitlines():
        name, eq, value = line.partition("=")
        if eq and name.startswith("CONFIG_") and value in ("y", "m"):
            out.add(name)
    return out


def not_built(lock: Lock, built: set[str] | None) -> bool:
    """Whether the kernel has no code for the lock (its config is off); None: not known."""
    return built is not None and bool(lock.needs) and lock.needs not in built


def compare(table: Sequence[Lock], got: Reached, built: set[str] | None = None
            ) -> tuple[list[list[str]], list[Gap], int, int]:
    """(rows of the table, gaps, production cells reached, production cells). built: the
    kernel's configs; a lock whose config is off is "not built", its cells not counted."""
    rows: list[list[str]] = []
    gaps: list[Gap] = []
    hit = total = 0
    for lock in table:
        bits = got.classes.get(lock.name, set())
        if not_built(lock, built) and not bits:
            rows.append([lock.name, "not built", *("n/a" for _ in CONTEXTS)])
            continue
        usage = "registered" if lock.name in got.registered else "never taken"
        row = [lock.name, usage]
        for ctx in CONTEXTS:
            cell = lock.cell(ctx)
            tokens = []
            for mode in MODES:
                want, have = mode in cell.modes, (ctx, mode) in bits
                if want:
                    total += 1
                    hit += have
                if want and have:
                    tokens.append(mode)
                elif want:
                    tokens.append(f"{mode}?")
                    gaps.append(Gap(lock.name, ctx, mode, cell.why, "missing"))
                elif have:
                    tokens.append(f"{mode}!")
                    gaps.append(Gap(lock.name, ctx, mode, cell.why, "unexpected"))
            row.append(" ".join(tokens) or "-")
        rows.append(row)
    return rows, gaps, hit, total


LEGEND = ("cells: W/R reached as the kernel does; W?/R? the kernel does, the suite did not "
          "(to do); W!/R! the suite did, the table says the kernel never does; - neither; "
          "n/a the lock's code is not in this kernel")


def format_table(table: Sequence[Lock], got: Reached, source: str, why: bool = False,
                 built: set[str] | None = None) -> str:
    """The table, then the to-do list (missing cells with their reasons), then anything
    unexpected; with why, every cell's reason. built: as compare()."""
    rows, gaps, hit, total = compare(table, got, built)
    head = ["lock class", "lockdep", *CONTEXTS]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = [f"reach of {source}: {hit} of {total} production cells reached, "
             f"{sum(g.kind == 'missing' for g in gaps)} missing, "
             f"{sum(g.kind == 'unexpected' for g in gaps)} unexpected"]
    if got.debug_locks == 0:
        lines.append("  lockdep turned itself off during the run (debug_locks=0): usage is "
                     "what it recorded until its report")
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    lines.append(LEGEND)
    absent = [lk for lk in table if not_built(lk, built) and not got.classes.get(lk.name)]
    if absent:
        lines.append("not in this kernel (reach them on a profile that builds them): "
                     + ", ".join(f"{lk.name} ({lk.needs} off)" for lk in absent))
    missing = [g for g in gaps if g.kind == "missing"]
    if missing:
        lines.append("to do (the kernel takes these, the suite did not):")
        for g in missing:
            need = next((lk.needs for lk in table if lk.name == g.lock and lk.needs), "")
            lines.append(f"  {g.lock} {g.context} {g.modes}: {g.why}"
                         + (f" [needs {need}]" if need else ""))
    for g in gaps:
        if g.kind == "unexpected":
            lines.append(f"  unexpected: {g.lock} {g.context} {g.modes} (table: {g.why})")
    if why:
        lines.append("why each cell is what it is:")
        for lock in table:
            for ctx in CONTEXTS:
                cell = lock.cell(ctx)
                lines.append(f"  {lock.name} {ctx} {cell.modes or '-'}: {cell.why}")
    return "\n".join(lines) + "\n"


def to_json(table: Sequence[Lock], got: Reached, source: str,
            built: set[str] | None = None) -> dict[str, Any]:
    rows, gaps, hit, total = compare(table, got, built)
    return {"source": source, "debug_locks": got.debug_locks,
            "lockdep_classes": got.lockdep_classes, "reached": hit, "production": total,
            "locks": [{"name": lk.name, "where": lk.where, "needs": lk.needs,
                       "built": None if built is None or not lk.needs
                       else lk.needs in built,
                       "registered": lk.name in got.registered,
                       "variants": got.variants.get(lk.name, []),
                       "usage": sorted(f"{c}:{m}" for c, m in got.classes.get(lk.name, ())),
                       "cells": {c: {"modes": lk.cell(c).modes, "why": lk.cell(c).why,
                                     "shown": row[2 + i]}
                                 for i, c in enumerate(CONTEXTS)}}
                      for lk, row in zip(table, rows)],
            "gaps": [g.__dict__ for g in gaps]}


# --- the command ----------------------------------------------------------------------------

def from_report(report: Report, source: str) -> Reached:
    """The reach of a run's report; DriverError naming why there is none."""
    records = report.reach()
    if not records:
        ran = report.test(CASE)
        why = (f"{CASE} {ran.status.lower()}" + (f" ({ran.skip_reason})" if ran.skip_reason
                                                 else "")
               if ran is not None else f"{SUITE} did not run (a FILTER that leaves it out?)")
        raise DriverError(f"no reach lines in {source}: {why}")
    return reached(records)


def read_console(path: Path) -> Report:
    """The report of a console log given by the user; DriverError when it cannot be read."""
    try:
        text = path.read_text(errors="backslashreplace")
    except OSError as e:
        raise DriverError(f"cannot read {path}: {e.strerror or e}") from None
    return parse_console(text)


def check_profile(name: str) -> None:
    if name not in PROFILES:
        raise DriverError(f"reach needs a lockdep profile ({', '.join(PROFILES)}), "
                          f"got {name!r}")


def kernel_configs(ctx: Context, profile_name: str) -> set[str] | None:
    """The configs of the profile's last build (its .config), or None where there is none."""
    path = profiles.out_dir(ctx.build, profiles.load_profile(ctx.repo, profile_name)) / ".config"
    try:
        return built_configs(path.read_text(errors="replace"))
    except OSError:
        return None


def print_reach(got: Reached, source: str, dest: Path | None, why: bool,
                built: set[str] | None = None) -> None:
    text = format_table(PRODUCTION, got, source, why, built)
    print(text, end="")
    if dest is not None:
        write_json(dest / "reach.json", to_json(PRODUCTION, got, source, built))
        (dest / "reach.txt").write_text(format_table(PRODUCTION, got, source, True, built))
        print(f"  json: {dest / 'reach.json'}")


def run_reach(ctx: Context, opts: RunOptions, console: Path | None = None, last: bool = False,
              why: bool = False) -> int:
    """The table of a console (console: a file; last: the profile's last run) or of a new
    run of the whole suite on the profile; the run's exit status (0 for a console read)."""
    if console is not None:
        print_reach(from_report(read_console(console), str(console)), str(console), None, why)
        return 0
    check_profile(opts.profile)
    dest = profiles.results_dir(ctx.build, opts.profile)
    if last:
        log = dest / "console.log"
        if not log.is_file():
            raise DriverError(f"no earlier run of {opts.profile} ({log} is missing): "
                              f"run make reach, or make run first")
        print_reach(from_report(read_console(log), str(log)), str(log), dest, why,
                    kernel_configs(ctx, opts.profile))
        return 0
    profiles.load_profile(ctx.repo, opts.profile)
    opts.filter_glob = ""
    report = run_profile(ctx, opts)
    source = f"{opts.profile} ({report.status})"
    try:
        got = from_report(report, source)
    except DriverError as e:
        say(str(e.reason))
        raise_refused([report])
        code = exit_code(report.status)
        return code if code else EXIT_ERROR
    print_reach(got, source, dest, why, kernel_configs(ctx, opts.profile))
    if report.status != "pass":
        say(f"the suite did not pass ({report.status}): the reach is of what ran")
    raise_refused([report])
    return exit_code(report.status)

