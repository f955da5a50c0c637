"""Failure signatures on recorded consoles: exact keys per kind, the same keys when
addresses, offsets, pids, CPUs, timestamps, seeds and counts change, different keys for
different bugs.

real_kasan_cset_free_without_rcu.log: x86_64-kasan, check cset-free-without-rcu (KASAN
use-after-free reports, then a general protection fault; the watchdog stopped the boot).
real_kcsan_rstat_base_flush_unlocked.log: x86_64-kcsan, check rstat-base-flush-unlocked.
real_kcsan_parent_add_outside_seqcount.log, real_kcsan_reader_skips_retry.log: two
different rstat breakages that fail the same case the same way (no report).
real_um_budget_not_revoked.log, real_um_sigpending_approximate.log: um-lockdep, two
ucount breakages that fail the same case with different messages (no report).
"""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from cgkunit import console as cr
from cgkunit import export
from cgkunit import report as rp
from cgkunit import signature as sg
from conftest import DATA

KASAN_STOP = {"rule": "crash", "at": 18.8, "boot": 1, "boots": 1, "line": 444,
              "reason": "crash (Oops: general protection fault, probably for non-canonical "
                        "address 0xe06b3c03a000001b: 0000 [#1] ...; no KUnit result within 15 s)",
              "report": "Oops: general protection fault, probably for non-canonical address "
                        "0xe06b3c03a000001b: 0000 [#1] SMP KASAN NOPTI"}
SILENCE_STOP = {"rule": "silence", "at": 44.0, "boot": 1, "boots": 1, "line": 17,
                "reason": "silent 30 s after lockdep report (WARNING: inconsistent lock state)",
                "report": "WARNING: inconsistent lock state"}
STORM_STOP = {"rule": "storm", "at": 43.2, "boot": 1, "boots": 1, "line": 16,
              "reason": "report storm (WARNING: kernel/cgroup/cgroup.c:2741 at "
                        "css_set_move_task+0x1e4/0x230 x61, no KUnit result for 30 s)",
              "report": "WARNING: kernel/cgroup/cgroup.c:2741 at css_set_move_task+0x1e4/0x230"}
STOPS = {"real_kasan_cset_free_without_rcu.log": KASAN_STOP,
         "deadlock_after_lockdep.log": SILENCE_STOP, "storm_warning_loop.log": STORM_STOP}
CHURN = "cgroup_css_set.cset_migrate_churn"

GOLDEN: dict[str, list[tuple[str, int]]] = {
    "real_um_provoke_lockdep.log": [("lockdep:circular:provoke_a|provoke_b", 1)],
    "02_lockdep_param_ok.log": [("lockdep:circular:&ns->lock|ucounts_lock", 1)],
    "deadlock_after_lockdep.log": [("lockdep:inconsistent:css_set_lock", 1),
                                   ("hang:cgroup_css_set.cset_shared_get_put", 1)],
    "real_kcsan_provoke_kcsan.log": [("kcsan:data-race:cgk_worker_fn|cgk_worker_fn", 10)],
    "real_kcsan_racy_update.log": [("warning:dec_ucount", 1),
                                   ("kcsan:data-race:dec_ucount|inc_ucount", 32),
                                   ("kcsan:data-race:inc_ucount|inc_ucount", 33)],
    "real_kcsan_rstat_base_flush_unlocked.log": [
        ("fail:cgroup_rstat.rstat_base_exact:worker N: nN: flushed user went backwards: "
         "N after N", 1),
        ("kcsan:data-race:css_rstat_flush|css_rstat_flush", 1),
        ("fail:cgroup_rstat.rstat_base_exact:worker N: nN: cpu.stat nice went backwards: "
         "N after N", 1)],
    "real_kasan_cset_free_without_rcu.log": [("kasan:slab-use-after-free:cs_step", 5),
                                             ("oops:gpf:cs_step", 2), (f"crash:{CHURN}", 1)],
    "real_um_provoke_warn.log": [("warning:kunit_try_run_case", 1)],
    "storm_warning_loop.log": [("warning:css_set_move_task", 120), (f"crash:{CHURN}", 1)],
    "04_refcount.log": [("refcount:underflow:put_ucounts", 1), ("refcount:saturated", 1),
                        ("warning:dec_ucount", 1)],
    "05_panic_mid_suite.log": [
        ("bug:kernel-null-pointer-dereference:dec_rlimit_ucounts", 1),
        ("panic:Kernel panic - not syncing: Fatal exception", 1),
        ("crash:cgroup_ucount.rlimit_add_sub", 1)],
    "06_boot_splat.log": [("warning:cgroup_init", 1)],
    "real_um_lost_decrement.log": [
        ("fail:cgroup_ucount.ucount_inc_dec:(init, uid N): ucount not back", 3),
        ("fail:cgroup_ucount.ucount_all_paths:(init, uid N): ucount not back", 3)],
    "real_um_leaked_reference.log": [
        (f"fail:cgroup_ucount.{case}:(init, uid N): reference count not back", 3)
        for case in ("rlimit_get_put", "rlimit_get_put_hardirq", "ucounts_alloc_put",
                     "ucount_all_paths")],
    "real_um_budget_not_revoked.log": [
        ("fail:cgroup_ucount.rlimit_reclaim_near_limit:CN: N charges admitted after CN's one, "
         "want the limit N less that one (fewer: CN's budget not taken back; more: budget "
         "granted past the limit)", 1)],
    "real_um_sigpending_approximate.log": [
        ("fail:cgroup_ucount.rlimit_reclaim_near_limit:CN: N charges admitted after CN's one, "
         "want the limit N less that one (fewer: charges that fit were refused; more: some "
         "past the limit were admitted)", 1)],
    "real_kcsan_parent_add_outside_seqcount.log": [
        ("fail:cgroup_rstat_reader.reader_torn_snapshot:worker N: top: torn snapshot: "
         "user N, system N, usage N (want N:N:N)", 3)],
    "10_seed_replay.log": [
        ("fail:cgroup_ucount.rlimit_add_sub:worker N of N: RLIMIT_NPROC count leaked", 1),
        ("fail:cgroup_ucount.ucounts_alloc_put:Expected refs == N, but", 1)],
    "real_um_all_pass.log": [], "real_kcsan_all_pass.log": [], "08_skipped.log": [],
}


def verdict_of(name: str) -> str:
    stop = STOPS.get(name)
    return rp.STOPPED + str(stop["reason"]) if stop else "completed"


def report_of(name: str, text: str | None = None) -> rp.Report:
    """The report of a recorded console (or of text in its place), stops attached."""
    r = cr.parse_console((DATA / name).read_text() if text is None else text, verdict_of(name))
    if name in STOPS:
        cr.attach_stops(r, [STOPS[name]])
    return r


def sigs(name: str, text: str | None = None) -> list[sg.Signature]:
    text = (DATA / name).read_text() if text is None else text
    return sg.signatures(report_of(name, text), [cr.strip_prefix(ln) for ln in text.splitlines()])


def keys(name: str, text: str | None = None) -> list[tuple[str, int]]:
    return [(s.key, s.count) for s in sigs(name, text)]


# --- golden keys ---------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_keys(name: str) -> None:
    assert keys(name) == GOLDEN[name]


def test_a_signature_names_its_kind_test_line_and_title() -> None:
    [lockdep] = sigs("real_um_provoke_lockdep.log")
    assert lockdep == sg.Signature(
        key="lockdep:circular:provoke_a|provoke_b", kind="lockdep",
        test="cgroup_kunit_oracle.provoke_lockdep", line_no=134,
        title="WARNING: possible circular locking dependency detected", count=1)
    kasan, gpf, crash = sigs("real_kasan_cset_free_without_rcu.log")
    assert (kasan.kind, kasan.line_no, kasan.count) == ("kasan", 174, 5)
    assert (gpf.kind, gpf.line_no) == ("oops", 444)  # its RIP line comes 185 lines later
    assert crash.kind == "crash" and crash.test.startswith(f"{CHURN}: running when")
    fail = sigs("real_um_lost_decrement.log")[0]
    assert fail.kind == "fail" and fail.test == "cgroup_ucount.ucount_inc_dec.8 threads"
    assert fail.title == ("cgroup_ucount.ucount_inc_dec[8 threads]: "
                          "(init, uid 3141000): ucount not back")
    with pytest.raises(dataclasses.FrozenInstanceError):
        fail.key = "x"  # type: ignore[misc]


def test_signatures_come_in_first_seen_order() -> None:
    lines = [s.line_no for s in sigs("real_kcsan_rstat_base_flush_unlocked.log")]
    assert lines == sorted(lines)
    [kcsan] = [s for s in sigs("real_kcsan_rstat_base_flush_unlocked.log") if s.kind == "kcsan"]
    assert kcsan.test == "cgroup_rstat.rstat_base_exact.4 threads" and kcsan.line_no == 181


# --- the same breakage: equal keys ---------------------------------------------------------

NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\b(?=[a-fA-F]*\d)[0-9a-fA-F]{8,}\b|(?<!\w)\d+(?!\w)")
KTAP_LINE = re.compile(r"^\s*(?:K?TAP version|1\.\.\d|(?:not )?ok \d|# Subtest)")


def _bump(m: re.Match[str]) -> str:
    text = m.group()
    if text.startswith("0x"):
        return hex(int(text, 16) + 0x1f0)
    if not text.isdigit() or len(text) >= 8:
        return format(int(text, 16) ^ 0x5a5a5a, "x").rjust(len(text), "0")
    return str(int(text) * 3 + 1)


def perturb(text: str) -> str:
    """Another run of the same breakage: every address, offset, pid, CPU, timestamp, seed
    and count changed, a printk timestamp on every kernel line; KTAP structure kept."""
    out = []
    for i, line in enumerate(text.splitlines()):
        bare = cr.strip_prefix(line)
        if KTAP_LINE.match(bare) or cr.boot_line(bare):
            out.append(line)
            continue
        out.append(f"[{i * 0.37 + 5:12.6f}] {NUMBERS.sub(_bump, bare)}")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", [
    "real_um_provoke_lockdep.log", "deadlock_after_lockdep.log", "real_kcsan_racy_update.log",
    "real_kcsan_rstat_base_flush_unlocked.log", "real_kasan_cset_free_without_rcu.log",
    "storm_warning_loop.log", "04_refcount.log", "05_panic_mid_suite.log",
    "real_um_lost_decrement.log", "real_um_budget_not_revoked.log", "10_seed_replay.log"])
def test_perturbed_numbers_give_the_same_keys(name: str) -> None:
    text = (DATA / name).read_text()
    other = perturb(text)
    assert other != text
    assert keys(name, other) == keys(name, text) == GOLDEN.get(name, keys(name, text))
    assert [s.line_no for s in sigs(name, other)] == [s.line_no for s in sigs(name, text)]


def test_runs_of_one_case_with_other_seeds_and_threads_share_a_key() -> None:
    [(key, count)] = keys("real_kcsan_parent_add_outside_seqcount.log")
    assert count == 3  # 8, 4 and 16 threads, each with its own seed and numbers
    # another breakage of the same reader lock (the reader skips its retry) fails the same
    # way: a signature tells failures apart, not the commits that cause them
    assert keys("real_kcsan_reader_skips_retry.log") == [(key, 1)]


# --- different bugs: different keys ---------------------------------------------------------

DIFFERENT = ["real_um_provoke_lockdep.log", "deadlock_after_lockdep.log",
             "real_kcsan_provoke_kcsan.log", "real_kcsan_racy_update.log",
             "real_kcsan_rstat_base_flush_unlocked.log", "real_kasan_cset_free_without_rcu.log",
             "real_um_provoke_warn.log", "storm_warning_loop.log", "05_panic_mid_suite.log",
             "real_um_lost_decrement.log", "real_um_leaked_reference.log",
             "real_um_budget_not_revoked.log",
             "real_um_sigpending_approximate.log", "real_kcsan_parent_add_outside_seqcount.log"]


def test_different_bugs_give_different_keys() -> None:
    seen: dict[str, str] = {}
    sets = []
    for name in DIFFERENT:
        found = {k for k, _ in keys(name)}
        sets.append(frozenset(found))
        for k in found - {f"crash:{CHURN}"}:  # two bugs crashed the same case
            assert k not in seen, f"{k} in {name} and {seen.get(k)}"
            seen[k] = name
    assert len(set(sets)) == len(DIFFERENT)
    # the same case failing with two messages: two breakages of the ucount budget
    assert keys("real_um_budget_not_revoked.log") != keys("real_um_sigpending_approximate.log")
    # a WARNING is keyed by its function, not file:line (lines move between commits):
    # two WARN_ONs of one function share a key
    assert ("warning:dec_ucount", 1) in keys("04_refcount.log")  # kernel/ucount.c:261
    assert ("warning:dec_ucount", 1) in keys("real_kcsan_racy_update.log")  # :248


# --- pieces ---------------------------------------------------------------------------

def test_normalize_replaces_every_number() -> None:
    assert sg.normalize("worker 3: n13: 489 after 978 (0x3d2) at ffff888001f0d820") == \
        "worker N: nN: N after N (N) at N"
    assert sg.normalize("  two\tblanks  ") == "two blanks"
    assert sg.normalize("cs_step deadbeef") == "cs_step deadbeef"  # words stay


def test_lock_classes_with_parentheses_in_their_names() -> None:
    assert sg._lock_classes("ffff (cgroup_mutex){+.+.}-{4:4}, at: cgroup_lock+0x1/0x2") == \
        ["cgroup_mutex"]
    assert sg._lock_classes(" -> #2 ((wq_completion)cgroup_destroy){+.+.}-{0:0}:") == \
        ["(wq_completion)cgroup_destroy"]
    assert sg._lock_classes(" (&cgrp->pidlist_mutex){+.+.}-{4:4} -> (cgroup_mutex){+.+.}") == \
        ["&cgrp->pidlist_mutex", "cgroup_mutex"]
    assert sg._lock_classes("lock(css_set_lock);") == []


def test_a_lockdep_key_sorts_its_classes() -> None:
    text = "\n".join([
        "WARNING: possible circular locking dependency detected",
        "kworker/1:2/77 is trying to acquire lock:",
        "ffff88800a1b2c30 (cgroup_mutex){+.+.}-{4:4}, at: cgroup_kn_lock_live+0x5e/0x120",
        "",
        "but task is already holding lock:",
        "ffff88800a1b2d40 (&cgrp->pidlist_mutex){+.+.}-{4:4}, at: cgroup_pidlist_start+0x3a/0x1f0",
        "",
        "the existing dependency chain (in reverse order) is:",
        "-> #1 (&cgrp->pidlist_mutex){+.+.}-{4:4}:"])
    s = rp.Splat(kind="lockdep", title="WARNING: possible circular locking dependency detected",
                 line_no=1)
    lines = text.splitlines()
    assert sg.splat_key(s, lines, len(lines), len(lines)) == \
        "lockdep:circular:&cgrp->pidlist_mutex|cgroup_mutex"


def test_other_titles_get_their_kind_and_function() -> None:
    def key(kind: str, title: str, *more: str) -> str:
        lines = [title, *more]
        return sg.splat_key(rp.Splat(kind=kind, title=title, line_no=1), lines,
                            len(lines), len(lines))
    assert key("warning", "WARNING: CPU: 2 PID: 140 at kernel/cgroup/cgroup.c:2741 "
                          "cgroup_migrate_add_task+0x1e4/0x230") == "warning:cgroup_migrate_add_task"
    assert key("lockdep", "WARNING: possible recursive locking detected",
               "cgk/3/12 is trying to acquire lock:", "ffff (css_set_lock){....}-{2:2}, at: f+0x1/0x2",
               "but task is already holding lock:", "ffff (css_set_lock){....}-{2:2}, at: g+0x1/0x2") \
        == "lockdep:recursive:css_set_lock|css_set_lock"
    assert key("lockdep", "WARNING: held lock freed!",
               "cgk/3/12 is freeing memory ffff-ffff, with a lock still held there!",
               "ffff (&cset->mg_lock){+.+.}-{3:3}, at: cs_step+0x1/0x2", "1 lock held by cgk/3/12:",
               " #0: ffff (&cset->mg_lock){+.+.}-{3:3}, at: cs_step+0x1/0x2") \
        == "lockdep:held-lock-freed:&cset->mg_lock"
    assert key("kcsan", "BUG: KCSAN: data-race in rs_step+0x10/0x20 / css_rstat_flush") == \
        "kcsan:data-race:css_rstat_flush|rs_step"
    assert key("oops", "Oops: general protection fault, probably for non-canonical address "
                       "0xdffffc0000000003: 0000 [#1] SMP KASAN NOPTI", "CPU: 0 UID: 0 PID: 5",
               "RIP: 0010:css_set_move_task.isra.0+0x15e3/0x2220") == "oops:gpf:css_set_move_task"
    assert key("lockup", "watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [cgk/1:123]",
               "RIP: 0010:cs_step+0x1/0x2") == "lockup:soft:cs_step"
    assert key("hung", "INFO: task cgk/3:188 blocked for more than 120 seconds.") == \
        "hung:INFO: task cgk/N:N blocked for more than N seconds."


def test_without_the_console_the_keys_keep_what_the_titles_say() -> None:
    r = report_of("real_kasan_cset_free_without_rcu.log")
    assert [s.key for s in sg.signatures(r, [])] == [
        "kasan:slab-use-after-free:cs_step", "oops:gpf", f"crash:{CHURN}"]
    assert sg.console_lines(r) == []  # parse_console alone knows no console file


def test_hang_and_crash_follow_the_verdict() -> None:
    text = (DATA / "deadlock_after_lockdep.log").read_text()
    lines = [cr.strip_prefix(ln) for ln in text.splitlines()]
    hung = cr.parse_console(text, "hang")
    assert [s.key for s in sg.signatures(hung, lines)][-1] == \
        "hang:cgroup_css_set.cset_shared_get_put"
    stopped = cr.parse_console(text, rp.STOPPED + str(SILENCE_STOP["reason"]))
    assert [s.key for s in sg.signatures(stopped, lines)][-1] == \
        "hang:cgroup_css_set.cset_shared_get_put"
    assert [s.key for s in sg.signatures(cr.parse_console(text), lines)][-1] == \
        "crash:cgroup_css_set.cset_shared_get_put"
    # no KTAP at all: the kernel never booted into KUnit
    assert [s.key for s in sg.signatures(cr.parse_console("Linux version 7.3\n", "boot-timeout"),
                                         [])] == ["hang:boot"]
    assert sg.signatures(cr.parse_console("Linux version 7.3\n"), []) == []  # no-tests


# --- summary.json ------------------------------------------------------------------------

def test_summary_json_gains_the_signatures_and_keeps_the_rest(tmp_path: Path) -> None:
    name = "real_kasan_cset_free_without_rcu.log"
    (tmp_path / "console.log").write_text((DATA / name).read_text())
    (tmp_path / "exec.json").write_text(json.dumps({"verdict": verdict_of(name),
                                                    "stops": [KASAN_STOP]}))
    r = cr.build_report(tmp_path / "console.log", verdict_of(name), profile="x86_64-kasan")
    before = export.report_json(r)
    js, txt = export.write_summary(r, tmp_path)
    data = json.loads(js.read_text())
    assert set(data) == set(export.report_json(r)) | {"signatures"}
    assert {k: v for k, v in data.items() if k != "signatures"} == \
        json.loads(json.dumps(export.report_json(r)))
    assert set(before) | {"signatures"} == set(data)
    assert [(s["key"], s["count"]) for s in data["signatures"]] == GOLDEN[name]
    assert data["signatures"][1] == {
        "key": "oops:gpf:cs_step", "kind": "oops", "line_no": 444, "count": 2,
        "test": f"{CHURN}: running when the kernel stopped (after start)",
        "title": "Oops: general protection fault, probably for non-canonical address "
                 "0xe06b3c03a000001b: 0000 [#1] SMP KASAN NOPTI"}
    assert "signature" not in txt.read_text()  # summary.txt unchanged
