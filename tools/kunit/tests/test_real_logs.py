"""Console logs of real runs of the suite on this project's kernels.

Each log comes from a boot of the pinned base plus kernel/series, either as
is, with cgroup_kunit.provoke=..., or with a patch of tools/kunit/breakage/
on top. They pin down what the report makes of real lockdep, KCSAN and
WARNING output and of real KUnit failures.
"""
from __future__ import annotations

from cgkunit import check, checklist
from cgkunit import console as cr
from cgkunit import summary as sm
from cgkunit import report as rp
from conftest import DATA, KUNIT_DIR

REPO = KUNIT_DIR.parent.parent


def parse(name: str) -> rp.Report:
    return cr.parse_console((DATA / name).read_text(), "completed")


def failed_ids(r: rp.Report) -> set[str]:
    return {t.id for t in r.tests if t.status == "FAIL"}


def test_kcsan_clean_run_passes() -> None:
    r = parse("real_kcsan_all_pass.log")
    assert r.status == "pass"
    assert r.splats == []
    assert r.counts.failed == 0 and r.counts.passed >= 18
    t = r.test("cgroup_ucount.ucount_all_paths.16 threads")
    assert t is not None and t.params["threads"] == "16" and t.params["seed"]


def test_provoked_lockdep_fails_only_its_case() -> None:
    r = parse("real_um_provoke_lockdep.log")
    assert r.status == "fail"
    assert failed_ids(r) == {"cgroup_kunit_oracle", "cgroup_kunit_oracle.provoke_lockdep"}
    [s] = [s for s in r.splats if s.kind == "lockdep"]
    assert s.title == "WARNING: possible circular locking dependency detected"
    assert s.test == "cgroup_kunit_oracle.provoke_lockdep"


def test_provoked_warn_uses_the_7_3_warning_format() -> None:
    r = parse("real_um_provoke_warn.log")
    [s] = r.splats
    assert s.kind == "warning"
    assert s.title.startswith("WARNING: lib/kunit-cgroup/oracle_kunit.c:")
    assert s.test == "cgroup_kunit_oracle.provoke_warn"
    assert failed_ids(r) == {"cgroup_kunit_oracle", "cgroup_kunit_oracle.provoke_warn"}


def test_provoked_kcsan_race_fails_its_case() -> None:
    r = parse("real_kcsan_provoke_kcsan.log")
    assert r.status == "fail"
    kcsan = [s for s in r.splats if s.kind == "kcsan"]
    assert kcsan and all(s.test == "cgroup_kunit_oracle.provoke_kcsan" for s in kcsan)
    assert kcsan[0].title.startswith("BUG: KCSAN: data-race in ")
    assert failed_ids(r) == {"cgroup_kunit_oracle", "cgroup_kunit_oracle.provoke_kcsan"}


def test_lost_decrement_fails_the_dec_ucount_cases_without_a_splat() -> None:
    r = parse("real_um_lost_decrement.log")
    assert r.splats == []
    assert {i for i in failed_ids(r) if i.count(".") == 1} == {
        "cgroup_ucount.ucount_inc_dec", "cgroup_ucount.ucount_all_paths"}
    assert r.status == "fail"
    assert any("seed=" in h for h in sm.replay_hints(r))


def test_racy_update_is_a_kcsan_race_in_inc_ucount() -> None:
    r = parse("real_kcsan_racy_update.log")
    kinds = {s.kind for s in r.splats}
    assert {"kcsan", "warning"} <= kinds
    # Only the cases that call inc_ucount() race; the rlimit-only ones stay clean.
    assert {s.test.rsplit(".", 1)[0] for s in r.splats} == {
        "cgroup_ucount.ucount_inc_dec", "cgroup_ucount.ucount_all_paths"}
    assert any("inc_ucount" in s.title for s in r.splats if s.kind == "kcsan")
    assert "cgroup_ucount.ucount_inc_dec" in failed_ids(r)


def test_a_printk_replay_is_not_a_test_of_its_own() -> None:
    """make check's racy-update (x86_64-kcsan, 2026-11-26): a WARN on another CPU cut the
    console line '# Subtest: ucount_inc_dec' short; printk then said it was replaying the
    message and printed it whole. The cut-short copy is not a test named 'ucou'."""
    text = (DATA / "real_kcsan_printk_replay.log").read_text()
    lines = text.splitlines()
    mark = next(i for i, ln in enumerate(lines) if cr.REPLAY_MARK in ln)
    assert lines[mark - 1].strip() == "# Subtest: ucou"
    assert lines[mark + 1].strip() == "# Subtest: ucount_inc_dec"
    undone = cr.unreplayed(lines)
    assert len(undone) == len(lines) and undone[mark - 1] == undone[mark] == ""
    assert undone[:mark - 1] + undone[mark + 1:] == lines[:mark - 1] + lines[mark + 1:]
    r = parse("real_kcsan_printk_replay.log")
    assert not any(t.id.endswith(".ucou") for t in r.tests)
    assert failed_ids(r) == {"cgroup_ucount", "cgroup_ucount.ucount_inc_dec",
                             "cgroup_ucount.ucount_inc_dec.4 threads",
                             "cgroup_ucount.ucount_inc_dec.8 threads",
                             "cgroup_ucount.ucount_inc_dec.16 threads"}
    assert r.counts.crashed == 0 and {s.kind for s in r.splats} == {"kcsan", "warning"}
    racy = next(c for c in checklist.load_checks(REPO) if c.name == "racy-update")
    assert check.evaluate(racy, r).problems == []  # it said "unexpected crash: ...ucou"
    # a marker with nothing cut short before it is dropped alone
    assert cr.unreplayed(["a", cr.REPLAY_MARK, "b"]) == ["a", "", "b"]
    assert cr.unreplayed([cr.REPLAY_MARK]) == [""]


def test_leaked_reference_fails_the_get_put_cases() -> None:
    r = parse("real_um_leaked_reference.log")
    cases = {i for i in failed_ids(r) if i.count(".") == 1}
    assert cases == {"cgroup_ucount.rlimit_get_put", "cgroup_ucount.rlimit_get_put_hardirq",
                     "cgroup_ucount.ucounts_alloc_put", "cgroup_ucount.ucount_all_paths"}
    assert r.test("cgroup_ucount.ucount_inc_dec") is not None
    assert r.test("cgroup_ucount.ucount_inc_dec").status == "PASS"  # type: ignore[union-attr]
