"""Failure signatures: one normalized key per way a run failed.

Two runs that fail the same way get equal keys, whatever the addresses, offsets,
pids, CPUs, timestamps, seeds and counts (the base of stress and bisect):

  lockdep:circular:&cgrp->pidlist_mutex|cgroup_mutex   report kind, lock classes sorted
  kcsan:data-race:css_rstat_flush|css_rstat_flush      function pair sorted, no offsets
  kasan:slab-use-after-free:cs_step                    kind, function
  warning:css_set_move_task                            WARNING: the function, not file:line
  refcount:underflow:put_ucounts                       what, the caller of the refcount helper
  bug:kernel-null-pointer-dereference:dec_rlimit_ucounts   what, the function of RIP
  oops:gpf:cs_step                                     Oops (gpf or oops), the function of RIP
  fail:cgroup_rstat.rstat_base_exact:worker N: ...     a KUnit failure with no report: the first
                                                       failure message, numbers as N
  crash:cgroup_css_set.cset_migrate_churn              the case running when the kernel stopped
  hang:...                                             ... when it hung (hang, timeout, silence)

Everything comes from the Report (its splats and tests); the few fields a Report does
not keep (lock classes, RIP, the caller in a call trace) are read from the console
lines a splat points at.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from . import report as rp
from .console import strip_prefix
from .titles import title_key

HEX = re.compile(r"0x[0-9a-fA-F]+|\b(?=[a-fA-F]*\d)[0-9a-fA-F]{8,}\b")
NUMBER = re.compile(r"\d+")
FUNC = re.compile(r"([A-Za-z_][\w.]*)\+0x[0-9a-fA-F]+(?:/0x[0-9a-fA-F]+)?")
RIP = re.compile(r"^(?:RIP|pc)\s*:\s*(?:\w+:)?(?:\[<[0-9a-fA-F]+>\]\s*)?([A-Za-z_][\w.]*)\+0x")
FRAME = re.compile(r"^\s*(?:\[<[0-9a-fA-F]+>\]\s*)?(\?\s*)?([A-Za-z_][\w.]*)\+0x[0-9a-fA-F]+/0x")
LOCK_USAGE = re.compile(r"\)\{[-+.?]+\}")
SOURCE_LINE = re.compile(r"^(\S+\.[chS]):\d+")
KCSAN = re.compile(r"^BUG: KCSAN: (.+?) in (.+)$")
KASAN = re.compile(r"^BUG: KASAN: (.+) in (\S+)")
LOCKDEP_KINDS = {"possible circular locking dependency detected": "circular",
                 "inconsistent lock state": "inconsistent",
                 "possible recursive locking detected": "recursive",
                 "possible irq lock inversion dependency detected": "irq-inversion"}
# where lockdep's header (the locks the report is about) ends
LOCKDEP_END = ("the existing dependency chain", "other info that might help", "stack backtrace",
               "lock held by", "locks held by", "no locks held", "Call Trace")
# reporting machinery on top of a call trace: the caller below it is the location
HELPERS = ("dump_stack", "show_stack", "__warn", "warn_slowpath", "report_bug", "handle_bug",
           "exc_invalid_op", "asm_exc_invalid_op", "refcount_warn_saturate", "__refcount_",
           "__might_", "kasan_report", "print_report", "lockdep_rcu_suspicious")
SPLAT_WINDOW = 80   # lines after a title that can belong to its report
CRASH_WINDOW = 300  # how far an Oops may be from its RIP line when reports interleave
HANG_VERDICTS = ("hang", "timeout", "boot-timeout")
INTERLEAVED = ("kasan", "kcsan")  # reports other CPUs print between an Oops and its RIP line


@dataclass(frozen=True)
class Signature:
    """One way the run failed, with how often and where it was first seen."""
    key: str      # equal across runs that fail the same way
    kind: str     # the key's first part: lockdep, kcsan, kasan, warning, fail, crash, ...
    test: str     # id of the test of the first occurrence (a splat's test: may be "boot")
    line_no: int  # console line of the first occurrence (a result line for fail; 0: unknown)
    title: str    # short human text
    count: int = 1

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "kind": self.kind, "test": self.test,
                "line_no": self.line_no, "title": self.title, "count": self.count}


def normalize(text: str) -> str:
    """text with every number (decimal, 0x hex, bare address) as N, blanks collapsed."""
    return " ".join(NUMBER.sub("N", HEX.sub("N", text)).split())


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "-", normalize(text).lower()).strip("-")


def _join(*parts: str) -> str:
    return ":".join(p for p in parts if p)


def _func(text: str) -> str:
    """A function name without +0x offsets and compiler suffixes (.cold, .part.0, ...)."""
    m = re.match(r"\s*([A-Za-z_]\w*)", text)
    return m.group(1) if m else normalize(text.strip())


def _helper(name: str) -> bool:
    return name.startswith(HELPERS)


def _location(lines: Sequence[str], start: int, stop: int, rip_stop: int) -> str:
    """The function a report happened in: RIP's (searched up to rip_stop), else the first
    reliable call-trace frame below the reporting helpers (up to stop); "" if none."""
    for text in lines[start:rip_stop]:
        m = RIP.match(text)
        if m and not _helper(m.group(1)):
            return _func(m.group(1))
        if m:
            break  # RIP in a helper (refcount_warn_saturate, ...): its caller is the location
    trace = False
    for text in lines[start:stop]:
        if text.startswith("Call Trace"):
            trace = True
            continue
        m = FRAME.match(text) if trace else None
        if m and not m.group(1) and not _helper(m.group(2)):
            return _func(m.group(2))
    return ""


def _lock_classes(text: str) -> list[str]:
    """Lock class names of a lockdep line ("... (&cgrp->pidlist_mutex){+.+.}-{4:4}, at: ...");
    names may hold parentheses themselves ("(wq_completion)events")."""
    out: list[str] = []
    for m in LOCK_USAGE.finditer(text):
        depth, i = 0, m.start()
        while i >= 0:
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                break
            i -= 1
        if i >= 0:
            out.append(text[i + 1:m.start()])
    return out


def _lockdep(s: rp.Splat, lines: Sequence[str], start: int, stop: int) -> str:
    head = re.sub(r"^(?:WARNING|INFO): ", "", s.title).strip()
    what = LOCKDEP_KINDS.get(head) or _slug(re.sub(r"\S+/\d+", "", head))
    classes: list[str] = []
    for text in lines[start + 1:stop]:
        if len(classes) >= 2 or any(end in text for end in LOCKDEP_END):
            break
        classes += _lock_classes(text)
    if classes:
        return _join("lockdep", what, "|".join(sorted(classes[:2])))
    where = _location(lines, start, stop, stop)
    if not where:  # suspicious RCU usage and the like: the source file lockdep names
        m = next((m for m in (SOURCE_LINE.match(t) for t in lines[start + 1:start + 6]) if m), None)
        where = m.group(1) if m else ""
    return _join("lockdep", what, where)


def splat_key(s: rp.Splat, lines: Sequence[str], stop: int, rip_stop: int) -> str:
    """The key of one report; lines: the console (prefixes stripped), stop/rip_stop: where
    its own lines (call trace) / an Oops' RIP line can be looked for at the latest."""
    start = s.line_no - 1
    if s.kind == "lockdep":
        return _lockdep(s, lines, start, stop)
    if s.kind == "kcsan":
        m = KCSAN.match(s.title)
        if m:
            funcs = sorted(_func(f) for f in m.group(2).split(" / "))
            return _join("kcsan", _slug(m.group(1)), "|".join(funcs))
    if s.kind == "kasan":
        m = KASAN.match(s.title)
        if m:
            return _join("kasan", _slug(m.group(1)), _func(m.group(2)))
    if s.kind == "warning":
        m = FUNC.search(s.title)
        where = _func(m.group(1)) if m else _location(lines, start, stop, stop)
        if not where:
            src = re.search(r"(\S+\.[chS]):\d+", s.title)
            where = src.group(1) if src else ""
        return _join("warning", where)
    if s.kind == "refcount":
        what = _slug(s.title.split(":", 1)[-1].split(";")[0])
        return _join("refcount", what, _location(lines, start, stop, stop))
    if s.kind in ("bug", "oops", "lockup"):
        if s.kind == "oops":
            what = "gpf" if "general protection fault" in s.title else "oops"
        elif s.kind == "lockup":
            what = "soft" if "soft lockup" in s.title else "hard"
        else:
            what = _slug(re.split(r"[,:!]| at | - ", re.sub(r"^BUG: ", "", s.title))[0])
        return _join(s.kind, what, _location(lines, start, stop, rip_stop))
    return _join(s.kind, normalize(title_key(s.title)))


def _fail_message(t: rp.TestResult) -> str:
    """The first failure message of a failed test: the message of its first 'FAILED at'
    block, else that block's assertion, else the 'FAILED at' line, else the first diagnostic."""
    case = t.path[1] if len(t.path) > 1 else t.name
    diags = t.diagnostics
    k = next((i for i, d in enumerate(diags) if "FAILED at" in d), None)
    if k is None:
        return next((d for d in diags if "seed=" not in d), "no failure message")
    block: list[str] = []
    for d in diags[k + 1:]:
        if d.startswith(f"{case}: "):
            break  # the next '# case: ...' diagnostic ends the message
        block.append(d)
    message = next((d for d in block if not d.startswith("Expected ") and " == " not in d), "")
    if message:
        return message
    if block:
        return block[0]
    m = re.search(r"(\w+ FAILED at) (\S+)", diags[k])
    return f"{m.group(1)} {Path(m.group(2)).name}" if m else diags[k]


def _where(test_id: str) -> str:
    """suite.case of a test id (parameters dropped)."""
    return ".".join(test_id.split(".")[:2])


def _stopped(report: rp.Report, t: rp.TestResult, last: bool) -> str:
    """'hang' or 'crash' for a crash point: by the watchdog stop of its boot, else by the
    run's verdict (which belongs to the last one)."""
    stops = [s for s in report.stops if s.get("boot", 0) == t.boot] or \
        (report.stops if len(report.stops) == 1 else [])
    if stops:
        return "hang" if stops[-1].get("rule") == "silence" else "crash"
    verdict = report.verdict
    hung = rp.short_verdict(verdict) in HANG_VERDICTS or verdict.startswith(rp.STOPPED + "silent")
    return "hang" if last and hung else "crash"


def console_lines(report: rp.Report) -> list[str]:
    """The report's console.log as the report read it, printk prefixes stripped."""
    path = Path(report.console_log) if report.console_log else None
    if path is None or not path.is_file():
        return []
    return [strip_prefix(ln) for ln in path.read_text(errors="backslashreplace").splitlines()]


def occurrences(report: rp.Report, lines: Sequence[str] | None = None) -> list[Signature]:
    """Every failure of the run as a Signature (count 1), in console order."""
    lines = console_lines(report) if lines is None else lines
    out: list[Signature] = []
    splats = sorted(report.splats, key=lambda s: s.line_no)
    bounds: list[tuple[int, int]] = []  # per splat: where the next report / non-KASAN one starts
    nxt = nxt_other = len(lines) + CRASH_WINDOW
    for s in reversed(splats):
        bounds.append((nxt, nxt_other))
        nxt = s.line_no - 1
        nxt_other = nxt if s.kind not in INTERLEAVED else nxt_other
    for s, (nxt, nxt_other) in zip(splats, reversed(bounds)):
        start = s.line_no - 1
        key = splat_key(s, lines, min(nxt, start + SPLAT_WINDOW),
                        min(nxt_other, start + CRASH_WINDOW))
        out.append(Signature(key=key, kind=key.split(":", 1)[0], test=s.test,
                             line_no=s.line_no, title=title_key(s.title)[:160]))
    for t in report.tests:
        if t.status == "FAIL" and t.kunit_status == "FAIL" and not t.children \
                and t.line_no is not None and not t.splats:
            message = _fail_message(t)
            out.append(Signature(key=f"fail:{_where(t.id)}:{normalize(message)}", kind="fail",
                                 test=t.id, line_no=t.line_no,
                                 title=f"{t.display}: {message}"[:160]))
    crashes = [t for t in report.tests if t.level == "crash"]
    end = len(lines)
    for n, t in enumerate(crashes):
        how = _stopped(report, t, n == len(crashes) - 1)
        where = _where(t.parent) if t.parent else "kunit"
        line = max((s.line_no for s in t.splats), default=end)
        out.append(Signature(key=f"{how}:{where}", kind=how, test=t.id, line_no=line,
                             title=f"the kernel {'hung' if how == 'hang' else 'crashed'} "
                                   f"while {t.parent or 'KUnit'} ran"))
    if not crashes and report.status in ("crash",) + HANG_VERDICTS:
        how = "hang" if report.status in HANG_VERDICTS else "crash"
        where = "kunit" if report.ktap_started else "boot"
        out.append(Signature(key=f"{how}:{where}", kind=how, test=where, line_no=end,
                             title=f"the kernel {'hung' if how == 'hang' else 'crashed'} "
                                   f"({rp.short_verdict(report.verdict)})"))
    out.sort(key=lambda sig: (sig.line_no == 0, sig.line_no))  # 0 (unknown): last
    return out


def signatures(report: rp.Report, lines: Sequence[str] | None = None) -> list[Signature]:
    """The run's failure signatures, one per key with its count, in first-seen order.

    lines: the console, printk prefixes stripped (default: read report.console_log);
    without it, keys lack what only the console has (lock classes, RIP function)."""
    first: dict[str, Signature] = {}
    counts: dict[str, int] = {}
    for sig in occurrences(report, lines):
        first.setdefault(sig.key, sig)
        counts[sig.key] = counts.get(sig.key, 0) + 1
    return [Signature(key=k, kind=s.kind, test=s.test, line_no=s.line_no, title=s.title,
                      count=counts[k]) for k, s in first.items()]
