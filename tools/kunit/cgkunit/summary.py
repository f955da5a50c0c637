"""What a run's report says to a person: the one-screen summary, and the commands that
replay its failures (the tree it ran on, the seed and threads the suite printed, the run's
other kernel arguments, the failing case as the filter) or run what a stopped boot never
reached."""
from __future__ import annotations

import shlex
from collections import Counter
from typing import Any, Sequence

from .params import param_name
from .report import POINT_LEVELS, Report, Splat, TestResult, short_verdict, stop_where
from .titles import title_key

REPLAY_PARAMS = ("seed", "threads")


def replay_case(report: Report, t: TestResult,
                index: dict[str, TestResult] | None = None) -> tuple[str, list[str]] | None:
    """(suite.case, ["cgroup_kunit.seed=..", "cgroup_kunit.threads=.."]) that replay the
    failed case, parameter or crash point t (the parameters the suite printed for it; none
    when it printed none); None for any other test."""
    if t.level in ("case", "param") and t.status == "FAIL":
        target = ".".join(t.path[:2])
    elif t.level == "crash" and t.parent:
        target = ".".join(t.parent.split(".")[:2])
    else:
        return None
    params, prefix = _params_for(t, index if index is not None else {u.id: u for u in report.tests})
    return target, [f"{prefix}.{k}={params[k]}" for k in REPLAY_PARAMS if k in params]


def replay_hints(report: Report) -> list[str]:
    """One `make run` line per failed case: the tree the run was on (KERNEL_SRC, KERNEL_REF),
    the seed and threads the suite printed for it, the run's other kernel arguments."""
    index = {t.id: t for t in report.tests}
    hints: list[str] = []
    seen: set[str] = set()
    for t in report.tests:
        found = replay_case(report, t, index)
        if found is None or found[0] in seen:
            continue
        target, args = found
        seen.add(target)
        hints.append(replay_line(report.replay_target, args, report.kernel_args, target,
                                 report.replay_env))
    return hints


def replay_line(target: str, printed: Sequence[str], run_args: Sequence[str],
                filter_glob: str, env: Sequence[str] = ()) -> str:
    """The command that replays a failure: env (replay_env) before target, the parameters
    the suite printed for it, then the run's kernel arguments that set anything else, each
    shell-quoted, and the filter."""
    names = {param_name(w) for w in printed}
    words = [*printed, *(w for w in run_args if param_name(w) not in names)]
    cmd = replay_command(target, " ".join(shlex.quote(w) for w in words), filter_glob)
    return " ".join([*env, cmd])


def replay_env(kernel_src: str | None, kernel_ref: str = "HEAD") -> tuple[str, ...]:
    """KERNEL_SRC/KERNEL_REF assignments a replay needs (none for the pinned base)."""
    if not kernel_src:
        return ()
    out = [f"KERNEL_SRC={shlex.quote(kernel_src)}"]
    if kernel_ref and kernel_ref != "HEAD":
        out.append(f"KERNEL_REF={shlex.quote(kernel_ref)}")
    return tuple(out)


ISOLATE_ENV = "CGKUNIT_ISOLATE"


def not_run_hints(report: Report) -> list[str]:
    """Commands that run what a stopped boot never reached, each part in a boot of its own."""
    hints: list[str] = []
    for suite in dict.fromkeys(n.suite for n in report.not_run if n.what == "case" and n.suite):
        glob = report.filter_glob if report.filter_glob.startswith(f"{suite}.") else f"{suite}.*"
        hints.append(f"{ISOLATE_ENV}=test {replay_command(report.replay_target, '', glob)}"
                     "   (one boot per case)")
    if any(n.what in ("suite", "boot") for n in report.not_run):
        cmd = (replay_command(report.replay_target, "", report.filter_glob) if report.filter_glob
               else report.replay_target)
        hints.append(f"{ISOLATE_ENV}=suite {cmd}   (one boot per suite)")
    return hints


def stop_line(stop: dict[str, Any]) -> str:
    """'stopped the kernel at 41s: <reason>' for one watchdog stop of exec.json."""
    return f"stopped the kernel {stop_where(stop)}: {stop.get('reason', '?')}"


def replay_command(target: str, kernel_args: str, filter_glob: str) -> str:
    """`make X KERNEL_ARGS=.. FILTER=..`, or the variables before a plain command (each
    only when set: no FILTER runs the whole suite)."""
    assigns = " ".join(([f"KERNEL_ARGS=\"{kernel_args}\""] if kernel_args else [])
                       + ([f"FILTER='{filter_glob}'"] if filter_glob else []))
    if not assigns:
        return target
    return f"{target} {assigns}" if target.startswith("make ") else f"{assigns} {target}"


def _params_for(t: TestResult, index: dict[str, TestResult]) -> tuple[dict[str, str], str]:
    """Seed parameters for a replay of t (own, then a subtest's, then an earlier sibling's)."""
    if "seed" in t.params:
        return t.params, t.param_prefix
    kids = [index[c] for c in t.children if c in index]
    for k in sorted(kids, key=lambda k: k.status != "FAIL"):
        if "seed" in k.params:
            return k.params, k.param_prefix
    parent = index.get(t.parent) if t.parent else None
    if t.level == "param" and parent is not None:
        siblings = [index[c] for c in parent.children if c in index]
        for s in reversed(siblings[:siblings.index(t)] if t in siblings else []):
            if "seed" in s.params:
                return s.params, s.param_prefix
        if "seed" in parent.params:
            return parent.params, parent.param_prefix
    return {}, t.param_prefix


def splat_line(s: Splat, count: int = 1) -> str:
    """'kind: title  [message]  (console.log:L)' of one report (count: of identical ones)."""
    extra = f"  [{s.message}]" if s.message else ""
    times = f"x{count}, first at " if count > 1 else ""
    return f"{s.kind}: {s.title}{extra}  ({times}console.log:{s.line_no})"


def grouped(splats: list[Splat]) -> list[tuple[Splat, int]]:
    """Identical reports (same kind and title) once, with how often they came."""
    first: dict[tuple[str, str], Splat] = {}
    counts: Counter[tuple[str, str]] = Counter()
    for s in splats:
        key = (s.kind, title_key(s.title))
        first.setdefault(key, s)
        counts[key] += 1
    return [(first[k], counts[k]) for k in first]


SCREEN = 48


def _test_lines(t: TestResult) -> list[str]:
    reason = f"  ({t.skip_reason})" if t.status == "SKIP" and t.skip_reason else ""
    kids = f"  [{len(t.children)} params]" if t.level == "case" and t.children else ""
    lines = [f"  {t.status:<5} {t.display if t.level not in POINT_LEVELS else t.id}{kids}{reason}"]
    lines += [f"          {splat_line(s, n)}" for s, n in grouped(t.splats)]
    for n in t.notes:
        if n.startswith(("failed: splat", "planned", "no result", "stopped")):
            lines.append(f"          note: {n}")
    if t.status == "FAIL" and not t.children:
        lines += [f"          # {d}" for d in first_failure(t.diagnostics)]
    return lines


def first_failure(diags: list[str]) -> list[str]:
    """The first 'FAILED at' line and the message that ends its block."""
    starts = [i for i, d in enumerate(diags) if "FAILED at" in d]
    if not starts:
        return [d for d in diags if "seed=" not in d][:2]
    k = starts[0]
    end = starts[1] if len(starts) > 1 else len(diags)
    block = diags[k + 1:end]
    out = [diags[k]] + ([block[-1]] if block else [])
    if len(starts) > 1:
        out.append(f"(and {len(starts) - 1} more failure(s) in console.log)")
    return out


def _fit(entries: list[tuple[bool, list[str]]], rest: list[str], room: int) -> list[str]:
    """The tests' lines within room, in their order. A test that failed or had a report
    keeps its first line whatever room is left, and its details while they fit; the
    others come as they fit; one last line says how many were left out."""
    if sum(len(lines) for _, lines in entries) + len(rest) <= room:
        return [line for _, lines in entries for line in lines] + rest
    shown: dict[int, int] = {i: 1 for i, (bad, _) in enumerate(entries) if bad}
    used = len(shown) + len(rest) + 1
    for i in shown:
        more = len(entries[i][1]) - 1
        if used + more <= room:
            shown[i] += more
            used += more
    for i, (bad, lines) in enumerate(entries):
        if not bad and used + len(lines) <= room:
            shown[i] = len(lines)
            used += len(lines)
    body = [line for i, (_, lines) in enumerate(entries) for line in lines[:shown.get(i, 0)]]
    left = sum(len(lines) - shown.get(i, 0) for i, (_, lines) in enumerate(entries))
    if left:
        body.append(f"  ... {left} more lines (details, passed and skipped tests): "
                    "see summary.json")
    return body + rest


def format_summary(report: Report) -> str:
    """One screen: cases always, parameters only when they failed or had a report."""
    out: list[str] = []
    head = f"cgkunit: {report.profile or '?'}: {report.status.upper()}"
    if report.verdict != "completed":
        head += f" (run {short_verdict(report.verdict)})"
    head += f" in {report.elapsed:.0f}s" if report.elapsed else ""
    if report.bad_parameters:
        n = len(report.bad_parameters)
        head += f"; BAD INPUT: the suite refused {n} parameter{'' if n == 1 else 's'}"
    out.append(head)
    if report.tree or report.base:
        out.append(f"  tree {report.tree}  base {report.base}")
    out += [f"  watchdog: {stop_line(stop)}" for stop in report.stops]
    entries: list[tuple[bool, list[str]]] = []
    for t in report.tests:
        if t.line_no is None and t.level not in POINT_LEVELS:
            continue
        if t.level == "suite" and t.children and not t.splats:
            continue
        if t.level == "param" and t.status not in ("FAIL", "CRASH") and not t.splats:
            continue
        entries.append((t.status in ("FAIL", "CRASH") or bool(t.splats), _test_lines(t)))
    rest = [f"  {s.test}: {splat_line(s, n)}"
            for s, n in grouped([s for s in report.splats
                                 if s.test == "boot" or s.test.startswith("shutdown")])]
    rest += [f"  NOT RUN {n.describe()}" for n in report.not_run]
    hints = replay_hints(report)
    tail: list[str] = []
    c = report.counts
    kinds = Counter(s.kind for s in report.splats)
    tail.append(f"  {c.passed} passed, {c.failed} failed, {c.skipped} skipped, {c.crashed} crashed; "
                f"{len(report.splats)} splat(s)"
                + (" (" + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + ")" if kinds else "")
                + (f"; oracle self-checks: {len(report.expected)} provoked report(s) seen"
                   if report.expected else ""))
    tail += [f"  refused: {p.describe()}  (console.log:{p.line_no}; the default was used)"
             for p in report.bad_parameters]
    tail += [f"  note: {n}" for n in report.notes]
    tail += [f"  {name}: {path}" for name, path in report.files.items()]
    if hints:
        tail.append("  replay:")
        tail += [f"    {h}" for h in hints[:4]]
        if len(hints) > 4:
            tail.append(f"    ({len(hints) - 4} more in summary.json)")
    later = not_run_hints(report)
    if later:
        tail.append("  run what was never reached:")
        tail += [f"    {h}" for h in later[:3]]
    room = max(SCREEN - len(out) - len(tail) - 1, 8)
    body = _fit(entries, rest, room)
    return "\n".join(out + body + tail) + "\n"
