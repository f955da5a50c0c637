"""Console log -> report: KTAP walk, splats, attribution, summary, exit status."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .common import write_json

# --- exit status -------------------------------------------------------------

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_ERROR = 2
BISECT_SKIP = 125
STATUS_EXIT = {"pass": EXIT_PASS, "fail": EXIT_FAIL, "crash": EXIT_FAIL, "hang": EXIT_FAIL,
               "timeout": EXIT_FAIL, "boot-timeout": EXIT_FAIL, "no-tests": EXIT_ERROR}
EXIT_HELP = """exit status:
  0  pass: every test passed or skipped, no splat anywhere
  1  the kernel under test failed: a test failed, a splat (lockdep, KCSAN,
     KASAN, refcount, WARNING, BUG, oops, panic, ...) was reported, the kernel
     crashed, hung, timed out, or did not boot (boot-timeout)
  2  bad input or infrastructure error: bad KERNEL_SRC, checksum mismatch,
     a patch does not apply, the build failed, no tests ran, bad arguments
  (bisect maps 2 to 125, "skip this commit")"""


def exit_code(status: str, bisect: bool = False) -> int:
    """The single status -> exit code mapping (status 'error' = DriverError)."""
    code = STATUS_EXIT.get(status, EXIT_ERROR)
    return BISECT_SKIP if bisect and code == EXIT_ERROR else code


# --- data --------------------------------------------------------------------

@dataclass
class Splat:
    """One kernel report (lockdep, KCSAN, WARNING, ...)."""
    kind: str
    title: str
    line_no: int
    test: str = ""
    message: str = ""
    related: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "title": self.title, "test": self.test,
                "line_no": self.line_no, "message": self.message, "related": self.related}


@dataclass
class TestResult:
    """One KTAP test (suite, case or parameter instance)."""
    id: str
    name: str
    path: list[str]
    level: str
    kunit_status: str
    status: str
    line_no: int | None
    skip_reason: str = ""
    splats: list[Splat] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    param_prefix: str = "cgroup_kunit"
    diagnostics: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    parent: str | None = None
    children: list[str] = field(default_factory=list)

    @property
    def display(self) -> str:
        """suite.case[param] form."""
        return ".".join(self.path[:2]) + "".join(f"[{p}]" for p in self.path[2:])

    @property
    def is_leaf(self) -> bool:
        return not self.children and self.line_no is not None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "level": self.level, "status": self.status,
                "kunit_status": self.kunit_status, "skip_reason": self.skip_reason,
                "line_no": self.line_no, "params": self.params, "notes": self.notes,
                "diagnostics": self.diagnostics,
                "splats": [{"kind": s.kind, "title": s.title, "line_no": s.line_no}
                           for s in self.splats]}


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    crashed: int = 0


@dataclass
class Report:
    """Everything the summary needs."""
    status: str
    verdict: str
    tests: list[TestResult]
    splats: list[Splat]
    counts: Counts
    notes: list[str] = field(default_factory=list)
    profile: str = ""
    tree: str = ""
    base: str = ""
    elapsed: float = 0.0
    console_log: str = ""
    files: dict[str, str] = field(default_factory=dict)
    ktap_started: bool = False
    ktap_complete: bool = False
    replay_target: str = "make run"

    def test(self, test_id: str) -> TestResult | None:
        return next((t for t in self.tests if t.id == test_id), None)

    def failed_tests(self) -> list[TestResult]:
        return [t for t in self.tests if t.status in ("FAIL", "CRASH")]

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "tree": self.tree, "base": self.base,
                "status": self.status, "verdict": self.verdict,
                "counts": vars(self.counts).copy(), "elapsed": round(self.elapsed, 3),
                "tests": [t.to_json() for t in self.tests],
                "splats": [s.to_json() for s in self.splats], "notes": self.notes,
                "console_log": self.console_log, "files": self.files,
                "replay": replay_hints(self)}


# --- line classification ---------------------------------------------------

PREFIX = re.compile(r"^(?:\[\s*\d+\.\d+\])?(?:\[\s*[TC]\d+\])?")
KTAP_HEADER = re.compile(r"^(\s*)K?TAP version \d+\s*$")
SUBTEST = re.compile(r"^(\s*)# Subtest: (.*?)\s*$")
PLAN = re.compile(r"^(\s*)1\.\.(\d+)\b")
RESULT = re.compile(r"^(\s*)(ok|not ok) (\d+)\b(?: -)? ?(.*)$")
DIRECTIVE = re.compile(r"^(.*?)\s*#\s*(SKIP|TODO)\b\s*(.*)$", re.IGNORECASE)
DIAG = re.compile(r"^(\s*)#(?: (.*))?$")
STATS = re.compile(r"(?:^|: )pass:\d+ fail:\d+ skip:\d+ total:\d+$|^Totals: ")
KV = re.compile(r"([A-Za-z_][\w.]*)=(\S+)")
KUNIT_TIMEOUT = re.compile(r"^Command .* timed out after \d+")
CUT_HERE = "------------[ cut here ]------------"
WINDOW = 8

LOCKDEP = re.compile(
    r"^(?:WARNING|INFO): (?:possible |inconsistent lock state|bad unlock balance|held lock freed"
    r"|lock held when returning|suspicious RCU usage|.*-safe -> .*-unsafe lock order"
    r"|Nested lock was not taken|bad contention detected|chain_key collision"
    r"|\S+/\d+ still has locks held|trying to register non-static key)"
    r"|^DEBUG_LOCKS_WARN_ON\(")
TITLES: list[tuple[str, re.Pattern[str]]] = [
    ("kcsan", re.compile(r"^BUG: KCSAN: ")),
    ("kasan", re.compile(r"^BUG: KASAN: ")),
    ("refcount", re.compile(r"^refcount_t: ")),
    ("lockdep", LOCKDEP),
    ("panic", re.compile(r"^Kernel panic - not syncing")),
    ("lockup", re.compile(r"^(?:watchdog: BUG: soft lockup|(?:NMI watchdog: )?Watchdog detected hard LOCKUP)")),
    ("bug", re.compile(r"^(?:BUG: |kernel BUG at )")),
    ("warning", re.compile(r"^WARNING: (?:CPU: \d+ PID: \d+ at |at |\S+:\d+ at )")),
    ("oops", re.compile(r"^(?:Oops: |Oops\b|general protection fault|Internal error: Oops)")),
    ("hung", re.compile(r"^INFO: task .* blocked for more than")),
    ("rcu-stall", re.compile(r"^(?:rcu: )?INFO: \S+ (?:self-)?detected stall")),
    ("ubsan", re.compile(r"^UBSAN: ")),
]
SECONDARY = ("warning", "oops")
UPGRADES = ("refcount", "lockdep")
TRACE_LINES = ("Modules linked in", "CPU:", "Hardware name", "Call Trace", "RIP:", "Stack:",
               "---[", "Tainted", "pc :", "Workqueue:")


def classify(text: str) -> str | None:
    """Splat kind when text (prefix stripped) is a report title line."""
    if not text or text[0].isspace():
        return None
    for kind, pattern in TITLES:
        if pattern.match(text):
            return kind
    return None


def strip_prefix(line: str) -> str:
    """Drop a printk '[ time]' / '[ T1]' prefix and trailing whitespace."""
    line = line.rstrip("\r\n\x00 \t")
    m = PREFIX.match(line)
    if m and m.end():
        line = line[m.end():]
        if line.startswith(" "):
            line = line[1:]
    return line


def _indent(ws: str) -> int:
    return len(ws.expandtabs(4))


# --- the walk ---------------------------------------------------------------

@dataclass
class _Rec:
    name: str | None
    parent: "_Rec | None"
    start_line: int
    children: list["_Rec"] = field(default_factory=list)
    kunit_status: str = "NONE"
    skip_reason: str = ""
    line_no: int | None = None
    splats: list[Splat] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    prefix: str = "cgroup_kunit"
    diags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def path(self) -> list[str]:
        out: list[str] = []
        r: _Rec | None = self
        while r is not None:
            out.append(r.name if r.name is not None else "?")
            r = r.parent
        return out[::-1]


@dataclass
class _Frame:
    indent: int
    rec: _Rec | None
    plan: int | None = None
    results: int = 0

    @property
    def fresh(self) -> bool:
        """Pushed by a KTAP header and not named or used yet."""
        return self.results == 0 and self.rec is not None and self.rec.name is None


class _Walker:
    """Single pass over the console lines."""

    def __init__(self) -> None:
        self.started = False
        self.frames: list[_Frame] = []
        self.roots: list[_Rec] = []
        self.sections: list[_Frame] = []
        self.splats: list[Splat] = []
        self.pending: list[Splat] = []
        self.pending_params: dict[str, str] = {}
        self.pending_prefix = ""
        self.pending_diags: list[str] = []
        self.last: _Rec | None = None
        self.open: Splat | None = None
        self.open_line = -1
        self.closed = True
        self.cut_line = -10
        self.cut_msg = ""
        self.notes: list[str] = []
        self.kunit_timeout = False
        self.ktap_prefix = ""
        self.prev = ""
        self.in_failure = False
        self.continuation = 0

    # frames
    def _push(self, indent: int, name: str | None, line: int) -> _Frame:
        parent = self.frames[-1].rec if self.frames else None
        rec = _Rec(name=name, parent=parent, start_line=line)
        (parent.children if parent else self.roots).append(rec)
        frame = _Frame(indent=indent, rec=rec)
        self.frames.append(frame)
        return frame

    def _pop_from(self, indent: int) -> None:
        while len(self.frames) > 1 and self.frames[-1].indent >= indent:
            self.frames.pop()

    def _start(self, indent: int, line: int) -> None:
        self.started = True
        root = _Frame(indent=indent, rec=None)
        self.frames = [root]
        self.sections.append(root)

    def ktap(self, text: str, i: int) -> bool:
        """Handle a KTAP line; False when text is not KTAP."""
        m = KTAP_HEADER.match(text)
        if m:
            w = _indent(m.group(1))
            if not self.started or w <= self.frames[0].indent:
                self._start(w, i)
            elif not (self.frames[-1].indent == w and self.frames[-1].fresh):
                self._pop_from(w)
                self._push(w, None, i)
            return True
        if not self.started:
            return False
        m = SUBTEST.match(text)
        if m:
            w, name = _indent(m.group(1)), m.group(2)
            top = self.frames[-1]
            if w <= self.frames[0].indent:
                return True
            if top.indent == w and top.fresh and top.rec is not None:
                top.rec.name = name
            else:
                self._pop_from(w)
                self._push(w, name, i)
            return True
        m = PLAN.match(text)
        if m:
            w, n = _indent(m.group(1)), int(m.group(2))
            if self.frames[-1].indent < w:
                self._push(w, None, i)
            if self.frames[-1].indent == w and self.frames[-1].plan is None:
                self.frames[-1].plan = n
            return True
        m = RESULT.match(text)
        if m:
            self._result(_indent(m.group(1)), m.group(2), m.group(4), i)
            return True
        m = DIAG.match(text)
        if m:
            self._diag((m.group(2) or "").strip())
            return True
        return False

    def _result(self, w: int, ok: str, rest: str, i: int) -> None:
        w = max(w, self.frames[0].indent)
        popped: list[_Frame] = []
        while len(self.frames) > 1 and self.frames[-1].indent > w:
            popped.append(self.frames.pop())
        if not popped and self.frames[-1].indent < w:
            top = self.frames[-1]
            if len(self.frames) > 1 and top.results == 0 and top.rec is not None \
                    and top.rec.name is None:
                top.indent = w  # results indented deeper than their unnamed header: adopt
            else:
                self._push(w, None, i)
        parent = self.frames[-1]
        d = DIRECTIVE.match(rest)
        name, directive, reason = (d.group(1), d.group(2).upper(), d.group(3)) if d else (rest, "", "")
        name = name.strip()
        if popped:
            closing = popped[-1]
            rec = closing.rec
            assert rec is not None
            if rec.name is None:
                rec.name = name
            if closing.plan is not None and closing.results < closing.plan:
                rec.notes.append(f"planned {closing.plan} subtests, got {closing.results}")
        else:
            rec = _Rec(name=name, parent=parent.rec, start_line=i)
            (parent.rec.children if parent.rec else self.roots).append(rec)
        rec.line_no = i + 1
        rec.kunit_status = "SKIP" if directive == "SKIP" else ("PASS" if ok == "ok" else "FAIL")
        rec.skip_reason = reason.strip() if directive == "SKIP" else ""
        parent.results += 1
        for s in self.pending:
            s.test = ".".join(rec.path())
            rec.splats.append(s)
        rec.params.update(self.pending_params)
        if self.pending_prefix:
            rec.prefix = self.pending_prefix
        rec.diags.extend(self.pending_diags[:8])
        self.pending, self.pending_params, self.pending_prefix, self.pending_diags = [], {}, "", []
        self.last = rec

    def _diag(self, text: str) -> None:
        if STATS.search(text) or text.startswith(("module:", "speed:", "Subtest:")):
            return
        if "seed=" in text:
            kv_start = KV.search(text)
            head = text[:kv_start.start()] if kv_start else text
            segments = [s.strip() for s in head.split(":") if s.strip()]
            if len(segments) >= 2:
                self.pending_prefix = segments[-1]
            self.pending_params.update(dict(KV.findall(text)))
        self.pending_diags.append(text)

    # splats
    def _close(self) -> None:
        self.closed = True

    def splat_line(self, text: str, i: int) -> None:
        """Track report windows and titles on a non-KTAP line."""
        if CUT_HERE in text:
            self._close()
            self.cut_line, self.cut_msg = i, ""
            return
        if text.startswith("---[ end "):
            self._close()
            return
        if re.fullmatch(r"={20,}", text.strip()) and self.open is not None and i > self.open_line:
            self._close()
            return
        kind = classify(text)
        if kind is None:
            if i == self.cut_line + 1:
                self.cut_msg = text.strip()
            elif (self.open is not None and not self.closed and self.open.kind == "warning"
                  and i == self.open_line + 1 and not self.open.message
                  and not text.strip().startswith(TRACE_LINES)):
                self.open.message = text.strip()
            return
        in_window = self.open is not None and not self.closed and i - self.open_line <= WINDOW
        if in_window and self.open is not None and self.open.kind != "panic":
            if kind in SECONDARY:
                self.open.related.append(text)
                return
            if self.open.kind == "warning" and kind in UPGRADES and i - self.open_line <= 2:
                self.open.related.append(self.open.title)
                self.open.kind, self.open.title = kind, text
                return
        splat = Splat(kind=kind, title=text, line_no=i + 1)
        if kind == "warning" and self.cut_msg and i - self.cut_line <= 3:
            splat.message = self.cut_msg
        self.splats.append(splat)
        if self.started:
            self.pending.append(splat)
        else:
            splat.test = "boot"
        self.open, self.open_line, self.closed = splat, i, False

    def feed(self, raw: str, i: int) -> None:
        text = strip_prefix(raw)
        if self.ktap_prefix and text.startswith(self.ktap_prefix):
            text = text[len(self.ktap_prefix):]
        if KUNIT_TIMEOUT.match(text):
            self.kunit_timeout = True
        if not self.started:
            m = re.search(r"K?TAP version \d+\s*$", text)
            if m and m.start() > 0 and text[:m.start()].strip():
                # a non-timestamp prefix on the header line: strip it from the lines after
                self.ktap_prefix = text[:m.start()]
                text = text[m.start():]
        prev, self.prev = self.prev, text
        if self.ktap(text, i):
            self._close()
            self.in_failure = "FAILED at" in text and bool(DIAG.match(text))
            self.continuation = 0
            return
        if self.started and self.in_failure and self.continuation < 6 and text.strip():
            # continuation of a KUnit failure message (printed without the '# case:' prefix)
            self.continuation += 1
            if "oracle" in prev and prev.rstrip().endswith(":") and classify(text):
                self.pending_diags.append(text.strip())
                return  # the oracle quoting a title on its own line: not a new splat
            if classify(text) or CUT_HERE in text or text.startswith(("===", "---")):
                self.in_failure = False
            else:
                self.pending_diags.append(text.strip())
        self.splat_line(text, i)


def _level(depth: int) -> str:
    return ("suite", "case", "param")[depth] if depth < 3 else "subtest"


def _flatten(roots: list[_Rec]) -> list[_Rec]:
    out: list[_Rec] = []

    def walk(r: _Rec) -> None:
        out.append(r)
        for c in r.children:
            walk(c)
    for r in roots:
        walk(r)
    return out


def parse_console(text: str, verdict: str = "completed") -> Report:
    """Build a Report from console text and the exec verdict."""
    w = _Walker()
    lines = text.splitlines()
    for i, raw in enumerate(lines):
        w.feed(raw, i)
    notes = list(w.notes)
    open_frames = [f for f in w.frames[1:] if f.rec is not None]
    short_sections = [s for s in w.sections if s.plan is not None and s.results < s.plan]
    incomplete = w.started and bool(open_frames or short_sections)
    complete = w.started and not incomplete
    recs = _flatten(w.roots)
    tests: list[TestResult] = []
    by_rec: dict[int, TestResult] = {}
    for r in recs:
        path = r.path()
        depth = len(path) - 1
        t = TestResult(id=".".join(path), name=path[-1], path=path, level=_level(depth),
                       kunit_status=r.kunit_status,
                       status=r.kunit_status if r.line_no is not None else "CRASH",
                       line_no=r.line_no, skip_reason=r.skip_reason, splats=r.splats,
                       params=r.params, param_prefix=r.prefix, diagnostics=r.diags,
                       notes=r.notes, parent=".".join(path[:-1]) or None)
        if r.line_no is None:
            t.notes.append("no result: no KTAP result line for this test")
        if any(n.startswith("planned ") for n in r.notes) and t.status != "FAIL":
            t.status = "FAIL"
        by_rec[id(r)] = t
        tests.append(t)
    for r in recs:
        by_rec[id(r)].children = [by_rec[id(c)].id for c in r.children]
    running = next((".".join(f.rec.path()) for f in reversed(open_frames)
                    if f.rec is not None and f.rec.name is not None), "")
    after = ".".join(w.last.path()) if w.last is not None else "start"
    crash_id = f"{running or 'kunit'}: running when the kernel stopped (after {after})"
    for s in w.pending:
        s.test = crash_id if incomplete else f"shutdown (after {after})"
    crashed = 0
    if incomplete:
        crash = TestResult(id=crash_id, name=crash_id, path=[crash_id], level="crash",
                           kunit_status="NONE", status="CRASH", line_no=None,
                           splats=list(w.pending), params=w.pending_params,
                           param_prefix=w.pending_prefix or "cgroup_kunit",
                           diagnostics=w.pending_diags[:8], parent=running or None)
        tests.append(crash)
        crashed = 1
        for sec in short_sections:
            notes.append(f"KTAP incomplete: planned {sec.plan} suites, got {sec.results}")
        if open_frames:
            notes.append(f"KTAP incomplete: {running or 'a suite'} never reported a result")
    _apply_splat_verdicts(tests)
    leaves = [t for t in tests if t.line_no is not None and not t.children]
    counts = Counts(passed=sum(t.status == "PASS" for t in leaves),
                    failed=sum(t.status == "FAIL" for t in leaves),
                    skipped=sum(t.status == "SKIP" for t in leaves), crashed=crashed)
    panic = any(s.kind == "panic" for s in w.splats)
    if verdict == "completed" and w.kunit_timeout:
        verdict = "timeout"
        notes.append("kunit.py reported its own timeout")
    status = _overall(verdict, panic, incomplete, leaves, tests, w.splats)
    if not w.started:
        tail = next((strip_prefix(ln).strip() for ln in reversed(lines) if ln.strip()), "")
        notes.append("no KTAP output found" + (f"; last console line: {tail[:200]}" if tail else ""))
    boot = [s for s in w.splats if s.test == "boot"]
    if boot:
        notes.append(f"{len(boot)} splat(s) during boot, before any test")
    return Report(status=status, verdict=verdict, tests=tests, splats=w.splats, counts=counts,
                  notes=notes, ktap_started=w.started, ktap_complete=complete)


def _apply_splat_verdicts(tests: list[TestResult]) -> None:
    index = {t.id: t for t in tests}
    for t in tests:
        if t.splats and t.status in ("PASS", "SKIP"):
            said = "ok" if t.kunit_status == "PASS" else "skip"
            t.notes.append(f"failed: splat even though KUnit said {said}")
            t.status = "FAIL"
    for t in tests:
        if t.status not in ("FAIL", "CRASH"):
            continue
        p = index.get(t.parent) if t.parent else None
        while p is not None:
            if p.status in ("PASS", "SKIP"):
                p.status = "FAIL"
                p.notes.append(f"failed: subtest {t.id} failed")
            p = index.get(p.parent) if p.parent else None


def _overall(verdict: str, panic: bool, incomplete: bool, leaves: list[TestResult],
             tests: list[TestResult], splats: list[Splat]) -> str:
    if panic:
        return "crash"
    if verdict != "completed":
        return verdict
    if incomplete:
        return "crash"
    if not leaves:
        return "fail" if splats else "no-tests"
    if splats or any(t.status in ("FAIL", "CRASH") for t in tests):
        return "fail"
    return "pass"


# --- summary -------------------------------------------------------------------

def replay_hints(report: Report) -> list[str]:
    """One `make run` line per failed case, with the seed when the suite printed one."""
    index = {t.id: t for t in report.tests}
    hints: list[str] = []
    seen: set[str] = set()
    for t in report.tests:
        if t.level in ("case", "param") and t.status == "FAIL":
            target = ".".join(t.path[:2])
        elif t.level == "crash" and t.parent:
            target = ".".join(t.parent.split(".")[:2])
        else:
            continue
        if target in seen:
            continue
        seen.add(target)
        params, prefix = _params_for(t, index)
        args = " ".join(f"{prefix}.{k}={params[k]}" for k in ("seed", "threads") if k in params)
        hints.append(replay_command(report.replay_target, args, target))
    return hints


def replay_command(target: str, kernel_args: str, filter_glob: str) -> str:
    """`make X KERNEL_ARGS=.. FILTER=..`, or the variables before a plain command."""
    assigns = (f"KERNEL_ARGS=\"{kernel_args}\" " if kernel_args else "") + f"FILTER='{filter_glob}'"
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


def _splat_line(s: Splat, count: int = 1) -> str:
    extra = f"  [{s.message}]" if s.message else ""
    times = f"x{count}, first at " if count > 1 else ""
    return f"{s.kind}: {s.title}{extra}  ({times}console.log:{s.line_no})"


WHERE_SUFFIX = re.compile(r",? CPU#\d+: \S+$|CPU: \d+ PID: \d+ ")


def _title_key(title: str) -> str:
    """A title without the CPU and task it happened on, which vary per report."""
    return WHERE_SUFFIX.sub("", title)


def _grouped(splats: list[Splat]) -> list[tuple[Splat, int]]:
    """Identical reports (same kind and title) once, with how often they came."""
    first: dict[tuple[str, str], Splat] = {}
    counts: Counter[tuple[str, str]] = Counter()
    for s in splats:
        key = (s.kind, _title_key(s.title))
        first.setdefault(key, s)
        counts[key] += 1
    return [(first[k], counts[k]) for k in first]


SCREEN = 48


def _test_lines(t: TestResult) -> list[str]:
    reason = f"  ({t.skip_reason})" if t.status == "SKIP" and t.skip_reason else ""
    kids = f"  [{len(t.children)} params]" if t.level == "case" and t.children else ""
    lines = [f"  {t.status:<5} {t.display if t.level != 'crash' else t.id}{kids}{reason}"]
    lines += [f"          {_splat_line(s, n)}" for s, n in _grouped(t.splats)]
    for n in t.notes:
        if n.startswith("failed: splat") or n.startswith("planned") or n.startswith("no result"):
            lines.append(f"          note: {n}")
    if t.status == "FAIL" and not t.children:
        lines += [f"          # {d}" for d in _first_failure(t.diagnostics)]
    return lines


def _first_failure(diags: list[str]) -> list[str]:
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


def format_summary(report: Report) -> str:
    """One screen: cases always, parameters only when they failed or had a report."""
    out: list[str] = []
    head = f"cgkunit: {report.profile or '?'}: {report.status.upper()}"
    if report.verdict != "completed":
        head += f" (run {report.verdict})"
    out.append(head + (f" in {report.elapsed:.0f}s" if report.elapsed else ""))
    if report.tree or report.base:
        out.append(f"  tree {report.tree}  base {report.base}")
    body: list[str] = []
    for t in report.tests:
        if t.line_no is None and t.level != "crash":
            continue
        if t.level == "suite" and t.children and not t.splats:
            continue
        if t.level == "param" and t.status not in ("FAIL", "CRASH") and not t.splats:
            continue
        body += _test_lines(t)
    for s, n in _grouped([s for s in report.splats
                          if s.test == "boot" or s.test.startswith("shutdown")]):
        body.append(f"  {s.test}: {_splat_line(s, n)}")
    hints = replay_hints(report)
    tail: list[str] = []
    c = report.counts
    kinds = Counter(s.kind for s in report.splats)
    tail.append(f"  {c.passed} passed, {c.failed} failed, {c.skipped} skipped, {c.crashed} crashed; "
                f"{len(report.splats)} splat(s)"
                + (" (" + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + ")" if kinds else ""))
    tail += [f"  note: {n}" for n in report.notes]
    tail += [f"  {name}: {path}" for name, path in report.files.items()]
    if hints:
        tail.append("  replay:")
        tail += [f"    {h}" for h in hints[:4]]
        if len(hints) > 4:
            tail.append(f"    ({len(hints) - 4} more in summary.json)")
    room = max(SCREEN - len(out) - len(tail) - 1, 8)
    if len(body) > room:
        body = body[:room] + [f"  ... {len(body) - room} more lines: see summary.json"]
    return "\n".join(out + body + tail) + "\n"


def write_summary(report: Report, results: Path) -> tuple[Path, Path]:
    """Write summary.json and summary.txt into the results dir."""
    results.mkdir(parents=True, exist_ok=True)
    js, txt = results / "summary.json", results / "summary.txt"
    report.files["summary"] = str(js)
    write_json(js, report.to_json())
    txt.write_text(format_summary(report))
    return js, txt


def build_report(console_log: Path, verdict: str, *, profile: str = "", tree: str = "",
                 base: str = "", elapsed: float = 0.0) -> Report:
    """Read console.log and build the report with its context."""
    text = console_log.read_text(errors="backslashreplace") if console_log.exists() else ""
    report = parse_console(text, verdict)
    report.profile, report.tree, report.base, report.elapsed = profile, tree, base, elapsed
    report.console_log = str(console_log)
    results = console_log.parent
    report.files = {"console": str(console_log)}
    for name, fname in (("ktap", "results.ktap"), ("json", "results.json"), ("junit", "results.xml")):
        if (results / fname).exists():
            report.files[name] = str(results / fname)
    return report
