"""bench: metric records, samples and the parallel rule, paired ratios and the judge, the
statistics, lock counts and projections, scaling, the table, JSON and plots, input and the
bench profile, the machine, and the whole command with a fake kunit.py (no kernel is built
or booted).

Recorded real output (data/bench_um/, see its README): the consoles of a native run on
this machine (2026-11-25, UML SMP with 2 vCPUs on a 2-core Intel Xeon, 3 rounds of base,
series and control x 5 reps of 1 s), its machine.json and the table it printed
(bench.txt), and the bench.json and bench.txt of a 1-vCPU run (--only rstat).
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import types
import zlib
from pathlib import Path
from typing import Any

import pytest

from cgkunit import bench as bb
from cgkunit import machine as mc
from cgkunit import plot, procs, stats
from cgkunit import profile as pf
from cgkunit import console as cr
from cgkunit import report as rp
from cgkunit import run
from cgkunit import tree as tr
from cgkunit.common import Context, DriverError
from conftest import DATA, KUNIT_DIR
from test_tree import env, git, prepare, subjects, tree_mtimes, write_files  # noqa: F401

REPO = KUNIT_DIR.parent.parent
ENTRY = KUNIT_DIR / "cgkunit.py"
UM = DATA / "bench_um"
ROUND_SUFFIX = ("", "-r2", "-r3")
SEED = 1707144070401054419  # the recorded run's
REPS = 5


def console(variant: str, r: int = 0) -> str:
    return (UM / f"{variant}{ROUND_SUFFIX[r]}.console.log").read_text()


def real_machine(**kw: Any) -> bb.Machine:
    m = bb.machine_from_json(json.loads((UM / "machine.json").read_text()))
    assert m is not None
    for k, v in kw.items():
        setattr(m, k, v)
    return m


@pytest.fixture(scope="module")
def reports() -> dict[str, list[rp.Report]]:
    return {v: [cr.parse_console(console(v, r)) for r in range(3)] for v in bb.VARIANTS}


@pytest.fixture(scope="module")
def metrics(reports: dict[str, list[rp.Report]]) -> dict[str, list[bb.Metric]]:
    return {v: bb.round_metrics(list(enumerate(boots)), REPS) for v, boots in reports.items()}


@pytest.fixture(scope="module")
def real(metrics: dict[str, list[bb.Metric]], reports: dict[str, list[rp.Report]]) -> bb.Aggregate:
    """The recorded run aggregated as `make bench` does it (do not modify)."""
    return bb.aggregate(metrics, real_machine(), bb.BENCH_KEYS,
                        {v: bb.worst_status(b) for v, b in reports.items()}, "cgroup_bench*")


def series_of(agg: bb.Aggregate, record: str, variant: str, value: str, **point: int | str) -> bb.Series:
    found = bb.find(agg.groups, record, variant, value, lambda p: p == point)
    assert len(found) == 1, (record, variant, value, point)
    return found[0]


def comparison(agg: bb.Aggregate, record: str, value: str, **point: int | str) -> bb.Comparison:
    found = [c for c in agg.comparisons
             if (c.record, c.value) == (record, value) and dict(c.point) == point]
    assert len(found) == 1, (record, value, point)
    return found[0]


def rate(count: int, ns: int) -> float:
    return count * 1e9 / ns


# --- metric lines ---------------------------------------------------------------------------

@pytest.mark.parametrize("line,want", [
    ("    # bench_rstat_read: metric: rstat_read readers=2 updaters=1 cgroups=2 rep=4 "
     "ns=1021192704 reads=438109 updates=9318923 busy=406",
     {"name": "rstat_read", "readers": 2, "updaters": 1, "cgroups": 2, "rep": 4, "ns": 1021192704,
      "reads": 438109, "updates": 9318923, "busy": 406}),
    ("    # bench_rstat_read: metric: rstat_locks readers=2 updaters=0 cgroups=1 ns=1018949888 "
     "reads=816178 updates=0 locks=2448534 contended=1072080 hold_ns=240151296 other_locks=0",
     {"name": "rstat_locks", "readers": 2, "updaters": 0, "cgroups": 1, "ns": 1018949888,
      "reads": 816178, "updates": 0, "locks": 2448534, "contended": 1072080,
      "hold_ns": 240151296, "other_locks": 0}),
    ("    # bench_ucount_charge: metric: ucount_limit namespaces=2 threads=2 rep=4 ns=1034567936 "
     "charges=12115497 refused=5287909 busy=580",
     {"name": "ucount_limit", "namespaces": 2, "threads": 2, "rep": 4, "ns": 1034567936,
      "charges": 12115497, "refused": 5287909, "busy": 580}),
    ("    # bench_ucount_charge: metric: ucount_cross namespaces=1 threads=2 rep=1 ns=1017758208 "
     "charges=1814843 refused=0 busy=880",
     {"name": "ucount_cross", "namespaces": 1, "threads": 2, "rep": 1, "ns": 1017758208,
      "charges": 1814843, "refused": 0, "busy": 880}),
    ("    # bench_migrate_latency: metric: migrate_latency mode=dynmods churn=4 rep=0 "
     "ns=1000001280 migrations=340000 forks=549 p50_ns=2304 p90_ns=2816 p99_ns=8448 "
     "p999_ns=39424 max_ns=3790848",
     {"name": "migrate_latency", "mode": "dynmods", "churn": 4, "rep": 0, "ns": 1000001280,
      "migrations": 340000, "forks": 549, "p50_ns": 2304, "p90_ns": 2816, "p99_ns": 8448,
      "p999_ns": 39424, "max_ns": 3790848}),
    ("    # bench_ucount_charge: metric: bench_machine vcpus=2", {"name": "bench_machine", "vcpus": 2}),
])
def test_parse_metric(line: str, want: dict[str, int | str]) -> None:
    text = cr.DIAG.match(cr.strip_prefix(line).strip())
    assert text is not None
    assert cr.parse_metric(text.group(2)) == want


def test_real_console_metrics(reports: dict[str, list[rp.Report]]) -> None:
    for v, boots in reports.items():
        for r in boots:
            assert r.status == "pass" and r.splats == [] and r.bad_parameters == [], v
            names = [m["name"] for m in r.metrics()]
            assert {n: names.count(n) for n in set(names)} == {
                "bench_machine": 3, "rstat_read": 35, "rstat_locks": 6, "ucount_charge": 15,
                "ucount_cross": 5, "ucount_limit": 10, "migrate_latency": 30}, v
    r = reports["base"][0]
    case = r.test("cgroup_bench.bench_rstat_read")
    assert case is not None and case.params["seed"] == str(SEED)
    assert case.metrics[0] == {"name": "bench_machine", "vcpus": 2}
    assert case.metrics[1] == {"name": "rstat_read", "readers": 1, "updaters": 0, "cgroups": 1,
                               "rep": 0, "ns": 1021173248, "reads": 1095870, "updates": 0,
                               "busy": 1000}
    assert not any("metric:" in d for d in case.diagnostics)
    assert bb.vcpus_reported(r.metrics()) == 2


def test_round_metrics_number_reps_by_round(reports: dict[str, list[rp.Report]]) -> None:
    got = bb.round_metrics(list(enumerate(reports["series"])), REPS)
    reps = [m["rep"] for m in got if m["name"] == "rstat_read" and m["readers"] == 1
            and m["updaters"] == 0]
    assert reps == list(range(15))
    assert not any("rep" in m for m in got if m["name"] in ("rstat_locks", "bench_machine"))
    one = types.SimpleNamespace(metrics=lambda: [{"name": "rstat_read", "rep": 0}], status="pass")
    two = types.SimpleNamespace(metrics=lambda: [{"name": "rstat_read", "rep": 1}], status="fail")
    assert [m["rep"] for m in bb.round_metrics([(0, one), (1, two)], reps=5)] == [0, 6]  # type: ignore[list-item]
    # a dropped round leaves the later rounds' reps where they were, still paired
    assert [m["rep"] for m in bb.round_metrics([(1, two)], reps=5)] == [6]  # type: ignore[list-item]
    assert bb.worst_status([one, two]) == "fail"  # type: ignore[list-item]


# --- samples, the parallel rule, series -----------------------------------------------------

def rstat(rep: int, busy: int | None, readers: int = 2, updaters: int = 0, cgroups: int = 1,
          reads: int = 1000, updates: int = 0) -> dict[str, int | str]:
    m: dict[str, int | str] = {"name": "rstat_read", "readers": readers, "updaters": updaters,
                               "cgroups": cgroups, "rep": rep, "ns": 10**9, "reads": reads,
                               "updates": updates}
    if busy is not None:
        m["busy"] = busy
    return m


def test_samples_values_of_each_record(metrics: dict[str, list[bb.Metric]]) -> None:
    got = bb.samples(metrics["base"], "base", 2)
    by = {(s.record, s.point, s.rep): s for s in got}
    s = by[("rstat_read", (("readers", 2), ("updaters", 1), ("cgroups", 2)), 4)]
    assert s.values == {"reads_per_s": pytest.approx(rate(438109, 1021192704)),
                        "updates_per_s": pytest.approx(rate(9318923, 1021192704))}
    only_updates = by[("rstat_read", (("readers", 0), ("updaters", 1), ("cgroups", 0)), 0)]
    assert set(only_updates.values) == {"updates_per_s"}  # no readers, no reads/s
    limit = by[("ucount_limit", (("namespaces", 2), ("threads", 2)), 4)]
    assert limit.values == {"charges_per_s": pytest.approx(rate(12115497, 1034567936)),
                            "refused_per_s": pytest.approx(rate(5287909, 1034567936))}
    charge = by[("ucount_charge", (("namespaces", 1), ("threads", 2)), 0)]
    assert charge.values == {"charges_per_s_per_thread": pytest.approx(rate(3287892, 1017998592) / 2)}
    migrate = next(s for s in got if s.record == "migrate_latency")
    assert set(migrate.values) == {"p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "forks_per_s",
                                   "migrations_per_s"}
    assert migrate.busy is None and migrate.parallel  # not a gang: no parallel rule
    assert not any(s.record in ("rstat_locks", "bench_machine") for s in got)


def test_the_parallel_rule_on_real_reps(metrics: dict[str, list[bb.Metric]]) -> None:
    got = {(s.point, s.rep): s for s in bb.samples(metrics["base"], "base", 2)
           if s.record == "rstat_read"}
    # base-r2 rep 4: 2 readers on 2 vCPUs, the least busy made steps in 85.8% of it: dropped
    s = got[((("readers", 2), ("updaters", 0), ("cgroups", 2)), 9)]
    assert (s.busy, s.parallel) == (858, False)
    # 2 readers and an updater on 2 vCPUs cannot all run at once: kept whatever busy says
    s = got[((("readers", 2), ("updaters", 1), ("cgroups", 1)), 0)]
    assert (s.busy, s.parallel) == (382, True)
    s = got[((("readers", 1), ("updaters", 0), ("cgroups", 1)), 0)]
    assert (s.busy, s.parallel) == (1000, True)
    # with one vCPU the 2-reader gang is oversubscribed by design: kept
    one_cpu = {(s.point, s.rep): s for s in bb.samples(metrics["base"], "base", 1)}
    assert one_cpu[((("readers", 2), ("updaters", 0), ("cgroups", 2)), 9)].parallel


def test_group_drops_reps_that_did_not_run_in_parallel(real: bb.Aggregate) -> None:
    g = series_of(real, "rstat_read", "base", "reads_per_s", readers=2, updaters=0, cgroups=2)
    assert (len(g.reps), g.dropped, g.unfiltered) == (14, 1, False)
    assert 9 not in g.reps and sorted(g.reps) == [i for i in range(15) if i != 9]
    kept = series_of(real, "rstat_read", "base", "reads_per_s", readers=2, updaters=1, cgroups=1)
    assert (len(kept.reps), kept.dropped) == (15, 0)  # busy 335..406, but 3 workers > 2 vCPUs
    assert kept.reps[0] == pytest.approx(rate(450946, 1017868288))


def test_group_keeps_all_reps_unfiltered_when_none_would_be_left(real: bb.Aggregate) -> None:
    # 1 reader + 1 updater on 2 vCPUs: the base reader waits on the lock the updater holds,
    # every rep's busy is 28..117 permille
    base = series_of(real, "rstat_read", "base", "reads_per_s", readers=1, updaters=1, cgroups=1)
    assert (len(base.reps), base.dropped, base.unfiltered) == (15, 0, True)
    series = series_of(real, "rstat_read", "series", "reads_per_s", readers=1, updaters=1, cgroups=1)
    assert (len(series.reps), series.dropped, series.unfiltered) == (14, 1, False)
    assert real.notes == [
        f"{v}: rstat_read readers=1 updaters=1 cgroups=1: every rep had a worker that made no "
        f"step for 1 ms or more; kept unfiltered" for v in ("base", "control")]  # once a point


def test_group_rules_on_hand_made_samples() -> None:
    metrics = [rstat(0, 1000), rstat(1, 899), rstat(2, 900), rstat(3, None),
               rstat(0, 100, readers=2, updaters=1), rstat(1, 100, readers=2, updaters=1),
               rstat(0, 10, readers=0, updaters=1, cgroups=0, updates=5),
               rstat(1, 20, readers=0, updaters=1, cgroups=0, updates=7)]
    notes: list[str] = []
    groups = bb.group(bb.samples(metrics, "series", 2), notes)
    by = {(g.point, g.value): g for g in groups}
    two = by[((("readers", 2), ("updaters", 0), ("cgroups", 1)), "reads_per_s")]
    assert (sorted(two.reps), two.dropped, two.unfiltered) == ([0, 2, 3], 1, False)  # 899 < 900
    three = by[((("readers", 2), ("updaters", 1), ("cgroups", 1)), "updates_per_s")]
    assert (sorted(three.reps), three.dropped) == ([0, 1], 0)  # 3 workers on 2 vCPUs
    upd = by[((("readers", 0), ("updaters", 1), ("cgroups", 0)), "updates_per_s")]
    assert (upd.reps, upd.dropped, upd.unfiltered) == ({0: 5.0, 1: 7.0}, 0, True)
    # a point without the record's first compared value (no readers: no reads/s) is noted too
    assert notes == ["series: rstat_read readers=0 updaters=1 cgroups=0: every rep had a worker "
                     "that made no step for 1 ms or more; kept unfiltered"]
    assert [g.to_json() for g in groups][-1] == {
        "record": "rstat_read", "variant": "series",
        "point": {"readers": 0, "updaters": 1, "cgroups": 0}, "value": "updates_per_s",
        "unit": "1/s", "rep_ids": [0, 1], "reps": [5.0, 7.0], "dropped": 0, "unfiltered": True,
        "median": 6.0}


def test_unusable_and_repeated_lines_are_noted_not_fatal() -> None:
    metrics = [rstat(0, 1000) | {"ns": 0}, rstat(0, 1000) | {"reads": "many"},
               {"name": "ucount_charge", "threads": 1, "rep": 0, "ns": 10**9, "charges": 1},
               {"name": "ucount_charge", "namespaces": 1, "threads": 0, "rep": 0, "ns": 10**9,
                "charges": 1},
               rstat(1, 1000, reads=7), rstat(1, 1000, reads=9), {"name": "something_else"},
               {"name": "rstat_locks", "readers": 1, "updaters": 0, "cgroups": 1, "ns": 1}]
    a = bb.aggregate({"base": metrics}, real_machine(), only=("rstat", "ucount"))
    [s] = a.groups
    assert s.reps == {1: 7.0}
    assert a.notes == ["base: a rstat_read line without a positive ns: skipped",
                       "base: a rstat_read line without an integer reads: skipped",
                       "base: a ucount_charge line without a namespaces: skipped",
                       "base: a ucount_charge line without a positive threads: skipped",
                       "base: rstat_read readers=2 updaters=0 cgroups=1 rep 1 printed twice: "
                       "kept the first",
                       "base: no ucount metric lines",
                       "base: a rstat_locks line without an integer reads: skipped"]


def test_the_guest_reports_its_vcpus() -> None:
    metrics = [{"name": "bench_machine", "vcpus": 1}, rstat(0, 500), rstat(1, 500)]
    a = bb.aggregate({"base": metrics}, real_machine(vcpus=2), only=("rstat",))
    assert a.vcpus == {"base": 1}
    assert a.notes == ["base: the guest reported 1 vCPUs, it was given 2"]
    [g] = a.groups
    assert len(g.reps) == 2 and not g.dropped  # judged by the guest's count: 2 readers > 1 vCPU


# --- paired ratios and the judge ------------------------------------------------------------

def test_paired_by_rep_id() -> None:
    a = bb.Series("rstat_read", "series", (("readers", 1),), "reads_per_s",
                  {3: 30.0, 0: 300.0, 1: 200.0, 2: 5.0})
    b = bb.Series("rstat_read", "base", (("readers", 1),), "reads_per_s",
                  {0: 100.0, 1: 200.0, 2: 0.0, 4: 50.0})
    assert bb.paired(a, b) == [3.0, 1.0]  # rep 3 and 4 unpaired, rep 2 divides by zero


def test_paired_ratios_of_the_real_run(real: bb.Aggregate) -> None:
    c = comparison(real, "rstat_read", "reads_per_s", readers=1, updaters=0, cgroups=1)
    assert len(c.ratios) == len(c.aa) == 15
    # rep 0 of round 1: series 2525542 reads in 1007598592 ns, base 1095870 in 1021173248 ns
    assert c.ratios[0] == pytest.approx(rate(2525542, 1007598592) / rate(1095870, 1021173248))
    assert c.aa[0] == pytest.approx(rate(1045024, 1014026496) / rate(1095870, 1021173248))
    s = series_of(real, "rstat_read", "series", "reads_per_s", readers=2, updaters=0, cgroups=1)
    b = series_of(real, "rstat_read", "base", "reads_per_s", readers=2, updaters=0, cgroups=1)
    c2 = comparison(real, "rstat_read", "reads_per_s", readers=2, updaters=0, cgroups=1)
    assert c2.ratios == bb.paired(s, b) and len(c2.ratios) == 13  # series dropped 2 reps


FAST = [1.50, 1.52, 1.48, 1.55, 1.51, 1.49, 1.53, 1.47]
AA = [0.97, 1.00, 1.02, 0.99, 1.03, 0.98, 1.01, 1.00]
SLOW = [1 / r for r in FAST]
PT: bb.Point = (("readers", 1), ("updaters", 0), ("cgroups", 1))
LAT: bb.Point = (("mode", "global"), ("churn", 4))


@pytest.mark.parametrize("record,point,value,ratios,verdict", [
    ("rstat_read", PT, "reads_per_s", FAST, "faster"),
    ("rstat_read", PT, "reads_per_s", SLOW, "slower"),
    ("migrate_latency", LAT, "p99_ns", FAST, "slower"),   # a latency: higher is slower
    ("migrate_latency", LAT, "p99_ns", SLOW, "faster"),
    ("migrate_latency", LAT, "forks_per_s", FAST, "faster"),
    ("rstat_read", PT, "reads_per_s", [0.98, 1.01, 1.0, 1.02, 0.99, 1.03, 0.97, 1.0], "no difference"),
])
def test_judge_verdicts(record: str, point: bb.Point, value: str, ratios: list[float],
                        verdict: str) -> None:
    c = bb.judge(record, point, value, ratios, AA)
    assert c.verdict == verdict
    assert c.ratio == pytest.approx(stats.median(ratios)) and c.band == (0.97, 1.03)
    assert c.p == pytest.approx(stats.mann_whitney([math.log(r) for r in ratios],
                                                   [math.log(r) for r in AA]))
    assert (c.p < bb.ALPHA) == (verdict != "no difference")
    assert c.interval is not None and c.interval[0] <= c.ratio <= c.interval[1]


def test_judge_wants_both_the_p_value_and_the_band() -> None:
    # outside the A/A band, but the two sets overlap: p 0.38 -> no verdict
    c = bb.judge("rstat_read", PT, "reads_per_s", [0.5, 0.6, 1.3, 1.4, 1.5, 1.6],
                 [0.9, 0.95, 1.0, 1.0, 1.05, 1.1])
    assert c.ratio == pytest.approx(1.35) and c.band == (0.9, 1.1)
    assert c.p is not None and c.p > bb.ALPHA and c.verdict == "no difference"
    # the sets are told apart (p < 0.01) but one wild control rep makes the band hold the ratio
    aa = [0.9, 0.92, 0.95, 0.97, 1.0, 1.0, 1.03, 1.05, 1.1, 2.0]
    c = bb.judge("rstat_read", PT, "reads_per_s", [1.5 + i / 100 for i in range(10)], aa)
    assert c.p is not None and c.p < bb.ALPHA
    assert c.band == (0.9, 2.0) and c.verdict == "no difference"


def test_judge_without_enough_data() -> None:
    few = bb.judge("rstat_read", PT, "reads_per_s", FAST[:5], AA)
    assert (few.verdict, few.p, few.ratio) == ("too few reps", None, pytest.approx(1.51))
    assert bb.judge("rstat_read", PT, "reads_per_s", FAST, AA[:5]).verdict == "too few reps"
    assert bb.judge("rstat_read", PT, "reads_per_s", FAST, []).band is None
    none = bb.judge("rstat_read", PT, "reads_per_s", [], AA)
    assert (none.verdict, none.ratio, none.interval) == ("no data", None, None)
    assert bb.MIN_PAIRS == 6


def test_judge_under_emulation_gives_no_verdict() -> None:
    c = bb.judge("rstat_read", PT, "reads_per_s", FAST, AA, emulated=True)
    assert c.verdict == "emulated" and c.p is None
    assert c.ratio == pytest.approx(1.505) and c.band == (0.97, 1.03) and c.interval is not None


def test_the_interval_is_reproducible() -> None:
    one = bb.judge("rstat_read", PT, "reads_per_s", FAST, AA)
    two = bb.judge("rstat_read", PT, "reads_per_s", list(FAST), list(AA))
    assert one.interval == two.interval == stats.bootstrap_median(
        FAST, seed=stats.seed_of(f"rstat_read {PT} reads_per_s"))


def test_judge_reproduces_the_recorded_1cpu_verdicts() -> None:
    """The 1-vCPU run's bench.json keeps each comparison's ratios: judged again, the same."""
    data = json.loads((UM / "1cpu.bench.json").read_text())
    assert data["machine"]["vcpus"] == 1 and len(data["comparisons"]) == 4
    for rec in data["comparisons"]:
        point = tuple((k, rec["point"][k]) for k in bb.BY_RECORD[rec["record"]][1].point)
        c = bb.judge(rec["record"], point, rec["value"], rec["ratios"], rec["aa"]).to_json()
        assert c.pop("aa_rounds") == []  # not recorded then; without rounds, the reps' band
        assert {k: list(v) if isinstance(v, tuple) else v for k, v in c.items()} == rec
    verdicts = {(c["value"], c["point"]["readers"]): c["verdict"] for c in data["comparisons"]}
    assert verdicts == {("reads_per_s", 1): "faster", ("updates_per_s", 0): "slower",
                        ("updates_per_s", 1): "slower"}


def test_comparisons_need_base_and_series() -> None:
    s = bb.Series("rstat_read", "series", PT, "reads_per_s", dict(enumerate(FAST)))
    b = bb.Series("rstat_read", "base", PT, "reads_per_s", dict.fromkeys(range(8), 1.0))
    c = bb.Series("rstat_read", "control", PT, "reads_per_s", dict(enumerate(AA)))
    [cmp] = bb.comparisons([s, b, c])
    assert (cmp.ratios, cmp.aa, cmp.verdict) == (FAST, AA, "faster")
    [no_control] = bb.comparisons([s, b])
    assert no_control.verdict == "too few reps" and no_control.aa == []
    assert bb.comparisons([s, c]) == []  # no base: nothing to compare
    other = bb.Series("migrate_latency", "series", LAT, "p50_ns", {0: 1.0})  # shown, not judged
    assert bb.comparisons([other, bb.Series("migrate_latency", "base", LAT, "p50_ns", {0: 1.0})]) == []


# --- stats.py ---------------------------------------------------------------------------------

@pytest.mark.parametrize("values,median", [([3.0], 3.0), ([5.0, 1.0, 3.0], 3.0),
                                           ([4.0, 1.0, 3.0, 2.0], 2.5), ([2, 8], 5.0)])
def test_median(values: list[float], median: float) -> None:
    assert stats.median(values) == median and isinstance(stats.median(values), float)


def test_bootstrap_median() -> None:
    xs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    lo, hi = stats.bootstrap_median(xs, seed=42)
    assert (lo, hi) == stats.bootstrap_median(xs, seed=42)  # a fixed seed, the same interval
    assert 1.0 <= lo <= stats.median(xs) <= hi <= 10.0 and lo < hi
    assert all(2 * v == int(2 * v) for v in (lo, hi))  # medians of 10 values: halves
    others = {stats.bootstrap_median(xs, seed=s) for s in range(20)}
    assert len(others) > 1  # the seed is what fixes it
    narrow = stats.bootstrap_median(xs, level=0.5, seed=42)
    assert lo <= narrow[0] <= narrow[1] <= hi
    assert stats.bootstrap_median([2.5]) == (2.5, 2.5)
    assert stats.bootstrap_median([4.0, 4.0, 4.0]) == (4.0, 4.0)
    with pytest.raises(ValueError):
        stats.bootstrap_median([])
    assert stats.seed_of("x") == zlib.crc32(b"x") == stats.seed_of("x")


def test_mann_whitney_hand_computed() -> None:
    # [1,2,3] vs [4,5,6]: U = 0, mean 4.5, variance 3*3/12*7 = 5.25, z = (4.5-0.5)/sqrt(5.25)
    p = stats.mann_whitney([1, 2, 3], [4, 5, 6])
    assert p == pytest.approx(math.erfc(4 / math.sqrt(5.25) / math.sqrt(2)))
    assert p == pytest.approx(0.0809, abs=1e-4)
    assert stats.mann_whitney([4, 5, 6], [1, 2, 3]) == p  # two-sided
    # ties: [1,2,2] vs [2,3,4]: ranks 1 | 3 3 3 | 5 6, U = 7 - 6 = 1; the tie group of 3
    # takes (27 - 3) / (6 * 5) = 0.8 off: variance 9/12 * (7 - 0.8) = 4.65, z = 3 / sqrt(4.65)
    assert stats.mann_whitney([1, 2, 2], [2, 3, 4]) == pytest.approx(
        math.erfc(3 / math.sqrt(4.65) / math.sqrt(2)))
    # 8 against 8 with no overlap: U = 0, mean 32, variance 64/12 * 17, p about 0.00094
    assert stats.mann_whitney(range(8), range(10, 18)) == pytest.approx(
        math.erfc(31.5 / math.sqrt(64 / 12 * 17) / math.sqrt(2)))
    assert stats.mann_whitney(range(8), range(10, 18)) < bb.ALPHA


@pytest.mark.parametrize("a,b", [([5, 5, 5], [5, 5, 5]), ([1, 2, 3], [1, 2, 3]), ([1.0], [1.0]),
                                 ([], [1, 2]), ([1, 2], []), ([1, 3], [2])])
def test_mann_whitney_nothing_to_tell_apart(a: list[float], b: list[float]) -> None:
    assert stats.mann_whitney(a, b) == 1.0


# --- lock counts and projections ------------------------------------------------------------

def test_lock_counts_of_the_real_run(real: bb.Aggregate) -> None:
    counts = {(c.variant, tuple(dict(c.point).values())): c for c in real.locks}
    assert len(counts) == 3 * 6  # every variant, every point with readers
    c = counts[("base", (1, 0, 1))]
    # the three base boots: reads 728877 + 700052 + 795286, three lock round trips each
    assert (c.boots, c.reads, c.locks, c.contended) == (3, 2224215, 6672645, 0)
    assert c.hold_ns == 175250432 + 175073792 + 173817600
    assert c.per_read(c.locks) == 3.0
    s = counts[("series", (1, 0, 1))]
    assert (s.locks, s.hold_ns, s.other_locks, s.per_read(s.locks)) == (0, 0, 2, 0.0)
    assert counts[("base", (2, 0, 1))].per_read(counts[("base", (2, 0, 1))].contended) == \
        pytest.approx(1.356, abs=5e-4)
    assert bb.LockCount("base", PT).per_read(1) is None
    assert c.to_json()["locks_per_read"] == 3.0 and c.to_json()["point"] == {
        "readers": 1, "updaters": 0, "cgroups": 1}


@pytest.mark.parametrize("sigma,n,want", [(0.0, 16, 16.0), (1.0, 64, 1.0), (0.5, 2, 4 / 3),
                                          (0.25, 4, 1 / (0.25 + 0.75 / 4))])
def test_amdahl(sigma: float, n: int, want: float) -> None:
    assert bb.amdahl(sigma, n) == pytest.approx(want)


def test_projections_of_the_real_run(real: bb.Aggregate) -> None:
    got = {(p.variant, p.updaters): p for p in real.projections}
    assert set(got) == {("base", 0), ("base", 1), ("series", 0), ("series", 1)}  # no control
    base = got[("base", 0)]
    single = series_of(real, "rstat_read", "base", "reads_per_s", readers=1, updaters=0, cgroups=1)
    assert base.single == single.median
    sigma = (524141824 / 2224215) * single.median / 1e9  # hold time per read x reads per s
    assert base.sigma == pytest.approx(sigma) and round(sigma, 3) == 0.228
    assert base.at == {n: pytest.approx(single.median / (sigma + (1 - sigma) / n))
                       for n in bb.PROJECT_AT}
    assert bb.fmt_rate(base.at[16]) == "3.50M"
    series = got[("series", 0)]
    # no lock held per read: nothing for Amdahl to bound, so no number, and the table says so
    assert series.sigma == 0.0 and series.at == {} and not series.lock_bound
    text = "\n".join(bb.lock_lines(real))
    assert "no lock-based bound" in text
    assert [ln.split()[-1] for ln in text.splitlines() if ln.split()[:2] == ["series", "0"]] == \
        ["-"]
    assert got[("base", 1)].sigma == 1.0  # held longer than a read takes: capped, no scaling
    assert got[("base", 1)].at[384] == pytest.approx(got[("base", 1)].single)


def test_projections_skip_what_they_cannot_project() -> None:
    def count(variant: str, point: bb.Point, reads: int = 100) -> bb.LockCount:
        return bb.LockCount(variant, point, ns=10**9, reads=reads, hold_ns=10 * reads, boots=1)
    one = (("readers", 1), ("updaters", 0), ("cgroups", 1))
    groups = [bb.Series("rstat_read", v, one, "reads_per_s", {0: 1e6}) for v in bb.VARIANTS]
    counts = [count("control", one), count("base", (("readers", 2), ("updaters", 0), ("cgroups", 1))),
              count("base", (("readers", 1), ("updaters", 0), ("cgroups", 2))),
              count("series", one, reads=0), count("base", one)]
    [p] = bb.projections(groups, counts)
    assert (p.variant, p.updaters, p.sigma) == ("base", 0, pytest.approx(0.01))  # 10 ns of 1 us
    assert bb.projections(groups[1:], [count("base", one)]) == []  # no base series: no rate


def test_ucount_projection_from_the_code(real: bb.Aggregate) -> None:
    [s] = real.shared  # the consoles count no shared writes: the base's come from the code
    assert (s.variant, s.writes, s.source) == ("base", 4.0, "from the code")
    assert s.single == series_of(real, "ucount_charge", "base", "charges_per_s_per_thread",
                                 namespaces=1, threads=1).median
    assert s.at == {n: pytest.approx(1e9 / (n * 4 * bb.C2C_NS)) for n in bb.PROJECT_AT}
    assert s.at[16] == pytest.approx(195312.5)
    assert s.to_json()["projected_per_container"]["16"] == pytest.approx(195312.5)


def test_ucount_projection_counted() -> None:
    one = (("namespaces", 1), ("threads", 1))
    groups = [bb.Series("ucount_charge", v, one, "charges_per_s_per_thread", {0: 1e6})
              for v in ("base", "series")]
    metrics = {"base": [{"name": "ucount_charge", "charges": 100, "shared": 300},
                        {"name": "ucount_charge", "charges": 100, "shared": 100}],
               "series": [{"name": "ucount_charge", "charges": 50, "shared": 0}]}
    got = {s.variant: s for s in bb.ucount_projection(groups, metrics)}
    assert (got["base"].writes, got["base"].source) == (2.0, "counted")
    assert got["base"].at[64] == pytest.approx(min(1e6, 1e9 / (64 * 2 * bb.C2C_NS)))
    assert (got["series"].writes, got["series"].source) == (0.0, "counted")
    assert got["series"].at == dict.fromkeys(bb.PROJECT_AT, 1e6)  # no shared line: no cap
    assert [s.variant for s in bb.ucount_projection(groups, {})] == ["base"]  # series: not counted
    assert bb.ucount_projection([], metrics) == []


def test_scalings_of_the_real_run(real: bb.Aggregate) -> None:
    got = {(s.label, s.variant): s for s in real.scalings}
    assert len(got) == 9
    s = got[("reads/s, readers 1 -> 2, no updaters, one cgroup", "base")]
    lo = series_of(real, "rstat_read", "base", "reads_per_s", readers=1, updaters=0, cgroups=1)
    hi = series_of(real, "rstat_read", "base", "reads_per_s", readers=2, updaters=0, cgroups=1)
    assert s.ratios == [hi.reps[i] / lo.reps[i] for i in range(15)]  # paired within each boot
    assert round(stats.median(s.ratios), 2) == 1.11
    each = got[("reads/s, readers 1 -> 2, no updaters, a cgroup each", "series")]
    assert dict(each.high) == {"readers": 2, "updaters": 0, "cgroups": 2}
    assert round(stats.median(each.ratios), 2) == 1.44
    uc = got[("charges/s per thread, 1 -> 2 threads in as many namespaces", "control")]
    assert len(uc.ratios) == 9  # control dropped 6 reps of namespaces=2 threads=2
    assert uc.to_json()["from"] == {"namespaces": 1, "threads": 1}
    assert bb.scalings(real.groups, 1) == []  # one vCPU: nothing to scale to


def test_mode_ratios_of_the_real_run(real: bb.Aggregate) -> None:
    got = {(m.variant, m.churn): m for m in real.modes}
    assert set(got) == {(v, c) for v in bb.VARIANTS for c in (0, 1, 4)}
    base0 = got[("base", 0)]
    assert base0.p99_global_over_dynmods == pytest.approx(8704 / 7936)
    assert base0.forks_dynmods_over_global is None  # no forks without churn
    assert bb.fmt_ratio(got[("series", 4)].forks_dynmods_over_global) == "0.63x"
    assert bb.mode_ratios([bb.Series("migrate_latency", "base", (("mode", "global"), ("churn", 0)),
                                     "p99_ns", {0: 1.0})]) == []  # no dynmods side


# --- the whole real run ----------------------------------------------------------------------

# what the rules line says since the recorded runs
RULES_SINCE = ("; a boot during which the rest of the host kept more than 0.1 of a core busy "
               "(/proc/stat less this run's own processes) is dropped with all its reps, unless "
               "every boot of its variant would be")


# what the rules line said of the band then
RULES_BAND_THEN = "A/A band (smallest to largest control/base ratio)"
RULES_BAND_NOW = ("A/A band (the smallest to the largest of the rounds' median control/base ratios; "
                  "with one round, of its reps' ratios)")


def squash(line: str) -> str:
    return " ".join(line.split())


def without_band(line: str) -> str:
    """A comparison row without its A/A band, the second [a-b] of the row (since the
    recorded runs the band is the range of the rounds' medians, not of the reps)."""
    return re.sub(r"(\[[^]]*\] +)\[[^]]*\]", r"\1", squash(line))


def test_aggregate_reproduces_the_recorded_table(real: bb.Aggregate) -> None:
    """bench.txt as the run printed it, save what changed since: the point where every base
    and control rep would be dropped is now kept unfiltered (all*) instead of shown empty,
    the column headers say what all* means, the projection names its anchor, and the rules
    name the drop of boots the rest of the host disturbed."""
    text = bb.format_table(real)
    now = {without_band(line) for line in text.splitlines()}
    recorded = (UM / "bench.txt").read_text().splitlines()
    changed = [line for line in recorded if "readers=1 updaters=1 cgroups=1" in line
               and "no data" in line or "(median over kept reps" in line
               or line.startswith("projected, not measured: Amdahl") or line.startswith("rules:")
               or line.startswith("  series   0 ") and " 0.000 " in line]  # no lock: no Amdahl
    assert len(changed) == 2 + 8 + 1 + 1 + 1
    assert "  series   0         2.37M     0.000   -      -      -      -" in text
    missing = [line for line in recorded if line not in changed and without_band(line) not in now]
    assert missing == []
    # the band: the range of the three rounds' median control/base ratios
    one = comparison(real, "ucount_charge", "charges_per_s_per_thread", namespaces=1, threads=1)
    assert len(one.aa_rounds) == 3 and one.band == (min(one.aa_rounds), max(one.aa_rounds))
    assert one.aa_rounds[0] == pytest.approx(stats.median(one.aa[:5]))
    assert bb.fmt_range(*one.band) == "[0.96x-1.09x]" and (min(one.aa), max(one.aa)) != one.band
    c = comparison(real, "rstat_read", "reads_per_s", readers=1, updaters=0, cgroups=1)
    assert (bb.fmt_ratio(c.ratio), c.verdict) == ("2.37x", "faster") and c.p is not None and c.p < 1e-3
    u = comparison(real, "ucount_charge", "charges_per_s_per_thread", namespaces=1, threads=1)
    assert (u.verdict, round(u.p or 0, 3)) == ("no difference", 0.836)
    d = comparison(real, "rstat_read", "updates_per_s", readers=0, updaters=1, cgroups=0)
    assert (bb.fmt_ratio(d.ratio), d.verdict) == ("0.46x", "slower")
    # forks/s without churn: 0 against 0, no ratio at all
    assert comparison(real, "migrate_latency", "forks_per_s", mode="global", churn=0).verdict == "no data"
    # now judged with every rep: the reps' range of A/A ratios held the ratio (0.16x-18.3x,
    # no verdict then); the rounds' medians do not (0.58x-1.35x)
    w = comparison(real, "rstat_read", "reads_per_s", readers=1, updaters=1, cgroups=1)
    assert w.verdict == "faster" and w.p is not None and w.p < bb.ALPHA
    assert min(w.aa) < w.ratio < max(w.aa)
    assert w.band is not None and w.ratio is not None and w.band[1] < w.ratio
    assert re.search(r"^  readers=1 updaters=1 cgroups=1 +29\.7k +77\.1k +3\.01x .* faster "
                     r"+all\*/1/all\*$", text, re.M)
    verdicts = [c.verdict for c in real.comparisons]
    assert verdicts.count("faster") == 6 and verdicts.count("slower") == 4
    assert real.vcpus == {"base": 2, "series": 2, "control": 2}


RSTAT_TITLE = "== rstat: cpu.stat readers against rstat updaters\n"
NO_LOCK_NOTE = ("  -: reads hold no rstat lock, so there is no lock-based bound to project; what "
                "limits them is each read's sum over the possible CPUs and the lines the updaters "
                "write (not projected)\n")
DEPTH_LINE = "  updaters charge leaves at depth 2 (the root's children at 1)\n"

def since_lock_bound(recorded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Projections as recorded before lock_bound: those with no lock held lose their numbers."""
    return [{**p, "lock_bound": p["serial_fraction"] > 0,
             "projected_reads_per_s": p["projected_reads_per_s"] if p["serial_fraction"] > 0 else {}}
            for p in recorded]


def test_the_1cpu_run_tabled_again() -> None:
    """The 1-vCPU run's bench.json (series, lock counts) judged, projected and printed again:
    its bench.txt, save the header that now says what all* means and the projection's anchor. One vCPU: 2 workers are
    more than vCPUs, so nothing is dropped, and there is nothing to scale to."""
    data = json.loads((UM / "1cpu.bench.json").read_text())
    m = bb.machine_from_json(data["machine"])
    assert m is not None and m.vcpus == 1

    def point(rec: dict[str, Any], keys: tuple[str, ...]) -> bb.Point:
        return tuple((k, rec["point"][k]) for k in keys)
    groups = [bb.Series(r["record"], r["variant"], point(r, bb.BY_RECORD[r["record"]][1].point),
                        r["value"], dict(zip(r["rep_ids"], r["reps"])), r["dropped"])
              for r in data["records"]]
    assert all(g.dropped == 0 for g in groups)
    locks = [bb.LockCount(c["variant"], point(c, bb.RSTAT.point), reads=c["reads"], locks=c["locks"],
                          contended=c["contended"], hold_ns=c["hold_ns"],
                          other_locks=c["other_locks"], boots=c["boots"]) for c in data["rstat_locks"]]
    agg = bb.Aggregate(machine=m, only=tuple(data["benchmarks"]), groups=groups,
                       comparisons=bb.comparisons(groups, m.emulated), locks=locks,
                       projections=bb.projections(groups, locks), shared=[],
                       scalings=bb.scalings(groups, m.vcpus), modes=bb.mode_ratios(groups),
                       vcpus=data["vcpus_reported"], statuses=data["statuses"], notes=data["notes"])
    assert agg.scalings == [] and data["scaling"] == []
    recorded = (UM / "1cpu.bench.txt").read_text()
    assert bb.format_table(agg) == recorded.replace(
        "dropped base/series/control)", "dropped base/series/control, all*: none would be left, all kept)"
    ).replace("spent holding the lock\n", f"spent holding the lock; for scale, {bb.ANCHOR}\n"
    ).replace("with at least 6 pairs each\n", f"with at least 6 pairs each{RULES_SINCE}\n"
    ).replace(RULES_BAND_THEN, RULES_BAND_NOW
    ).replace(RSTAT_TITLE, RSTAT_TITLE + DEPTH_LINE  # recorded before DEPTH=, at depth 2
    ).replace("  series   0         2.69M     0.000   43.0M  172M   387M   1.03G\n"
              "  series   1         1.31M     0.000   20.9M  83.1M  185M   480M\n",
              # no lock held per read: no Amdahl numbers, said so (with one updater, rarely)
              "  series   0         2.69M     0.000   -      -      -      -\n"
              "  series   1         1.31M     0.000   20.9M  83.1M  185M   480M\n"
              + NO_LOCK_NOTE)
    again = json.loads(json.dumps(bb.to_json(agg)))
    assert [c.pop("aa_rounds") for c in again["comparisons"]] == [[]] * 4  # no rounds given
    assert again["comparisons"] == data["comparisons"]
    assert again["projections"]["rstat_amdahl"] == since_lock_bound(data["projections"]["rstat_amdahl"])


def test_table_structure(real: bb.Aggregate) -> None:
    text = bb.format_table(real)
    lines = text.splitlines()
    assert lines[0] == (f"cgkunit bench: um-bench, 3 round(s) of base, series and control (the base "
                        f"booted again), alternating, x 5 reps of 1000 ms per point, seed {SEED}")
    assert lines[1] == ("machine: Intel(R) Xeon(R) Processor; 2 host cores; 2 vCPUs; UML, native; "
                        "load average 1.93 before the first boot")
    assert lines[2].startswith("base:    45d6e665fde7 (19 patches, before 0020-") and \
        lines[2].endswith("  [PASS]")
    assert lines[3] == "series:  71802875c6b2 (24 patches)  [PASS]"
    assert lines[4] == "control: the base kernel again  [PASS]"
    assert lines[5] == f"rules: {bb.RULES}"
    assert "90%" in bb.RULES and "p < 0.01" in bb.RULES and "at least 6 pairs" in bb.RULES
    assert "WARNING" not in text and "EMULATED" not in text
    blocks = text.split("\n\n== ")[1:]
    assert [b.split(":")[0] for b in blocks] == ["rstat", "ucount", "migrate"]
    rstat_block, ucount_block, migrate_block = blocks
    assert rstat_block.splitlines()[1] == "  updaters charge leaves at depth 2 (the root's children at 1)"
    assert "rstat_locks: rstat lock acquisitions by the readers" in rstat_block
    assert "projected, not measured: Amdahl bound" in rstat_block
    assert "  scaling (paired within each boot)" in rstat_block
    assert "projected, not measured: charges/s per container" in ucount_block
    for record in ("ucount_charge", "ucount_cross", "ucount_limit"):
        assert f"\n{record}: charges/s" in "\n" + ucount_block
    assert "migrate_latency (series): one migration (median over reps)" in migrate_block
    assert re.search(r"^  point +base +series +series/base \[95%\] +A/A band +p +verdict +dropped$",
                     text, re.M)
    assert text.endswith("kept unfiltered\n") and text.count("\nnote: ") == 2


def test_table_under_emulation_and_oversubscription(metrics: dict[str, list[bb.Metric]]) -> None:
    m = real_machine(accel="tcg", vcpus=4, host_cores=2, profile="x86_64-bench", load_before=None)
    a = bb.aggregate(metrics, m, ("rstat",))
    text = bb.format_table(a)
    lines = text.splitlines()
    assert lines[1] == "machine: Intel(R) Xeon(R) Processor; 2 host cores; 4 vCPUs; QEMU accel tcg"
    assert lines[2] == "EMULATED: QEMU/TCG is not a contention measurement; no verdicts"
    assert lines[3] == ("WARNING: oversubscribed: 4 vCPUs on 2 host cores: contention ratios are "
                        "compressed and lock holders get preempted")
    assert {c.verdict for c in a.comparisons} == {"emulated"}
    assert all(c.p is None for c in a.comparisons)
    assert [b.split(":")[0] for b in text.split("\n\n== ")[1:]] == ["rstat"]
    assert "note: base: the guest reported 2 vCPUs, it was given 4" in text


@pytest.mark.parametrize("vcpus,cores,warn", [(4, 2, True), (2, 2, False), (1, 2, False),
                                               (64, 16, True)])
def test_oversubscription_warning(vcpus: int, cores: int, warn: bool) -> None:
    got = bb.oversubscription_warning(vcpus, cores)
    assert got == (f"oversubscribed: {vcpus} vCPUs on {cores} host cores: contention ratios are "
                   f"compressed and lock holders get preempted" if warn else None)
    assert bb.Machine("x", cores, vcpus, "uml").warning == got


def test_table_of_a_missing_side() -> None:
    a = bb.aggregate({"base": [rstat(0, 1000, readers=1)]}, real_machine(),
                     statuses={"base": "fail"}, filter_glob="cgroup_bench*")
    text = bb.format_table(a)
    assert text.splitlines()[2].endswith("[FAIL]") and "series:  71802875c6b2 (24 patches)\n" in text
    assert re.search(r"^  readers=1 updaters=0 cgroups=1 +1\.00k +- +- +- +- +- +0/-/-$", text, re.M)
    assert "== ucount: pending-signal charges in sibling user namespaces\n  no metric lines" in text
    assert a.notes == ["base: no ucount metric lines", "base: no migrate metric lines"]


def test_format_numbers() -> None:
    assert [bb.fmt_rate(x) for x in (0, 99.94, 965430.2, 2.37e6, 1.5e10)] == \
        ["0.00", "99.9", "965k", "2.37M", "15.0G"]
    assert [bb.fmt_ns(x) for x in (0, 236.4, 8704, 35900.0, 2.25e6, 3e9)] == \
        ["0.00ns", "236ns", "8.70us", "35.9us", "2.25ms", "3.00s"]
    assert (bb.fmt_ratio(None), bb.fmt_ratio(2.3688), bb.fmt_range(0.946, 1.083)) == \
        ("-", "2.37x", "[0.95x-1.08x]")


def test_json_shape(real: bb.Aggregate) -> None:
    data = json.loads(json.dumps(bb.to_json(real)))
    assert set(data) == {"machine", "statuses", "benchmarks", "vcpus_reported", "rules", "records",
                         "comparisons", "rstat_locks", "projections", "scaling", "migrate_modes",
                         "notes"}
    # as saved, with what the run did not record yet: no boot disturbed, the default depth
    assert data["machine"] == {**json.loads((UM / "machine.json").read_text()), "other_cores": {},
                               "depth": 2}
    assert bb.machine_from_json(data["machine"]) == real.machine
    assert bb.machine_from_json([]) is None and bb.machine_from_json({"cpu_model": "x"}) is None
    assert data["statuses"] == dict.fromkeys(bb.VARIANTS, "pass")
    assert data["benchmarks"] == ["rstat", "ucount", "migrate"]
    assert data["rules"] == {"text": bb.RULES, "busy_min_permille": 900, "alpha": 0.01, "min_pairs": 6}
    rec = next(r for r in data["records"] if r["record"] == "rstat_read" and r["variant"] == "base"
               and r["point"] == {"readers": 2, "updaters": 0, "cgroups": 2}
               and r["value"] == "reads_per_s")
    assert rec["rep_ids"] == [i for i in range(15) if i != 9] and rec["dropped"] == 1
    assert rec["unit"] == "1/s" and rec["unfiltered"] is False and len(rec["reps"]) == 14
    cmp = data["comparisons"][0]
    assert set(cmp) == {"record", "point", "value", "ratio", "interval95", "aa_band", "p",
                        "verdict", "pairs", "aa_pairs", "ratios", "aa", "aa_rounds"}
    assert cmp["aa_band"] == [min(cmp["aa_rounds"]), max(cmp["aa_rounds"])]
    assert (cmp["record"], cmp["value"], cmp["verdict"], cmp["pairs"]) == \
        ("rstat_read", "reads_per_s", "faster", 15)
    assert data["projections"]["note"] == "projected, not measured"
    assert {p["variant"] for p in data["projections"]["rstat_amdahl"]} == {"base", "series"}
    assert data["projections"]["ucount_shared_line"][0]["source"] == "from the code"
    assert len(data["rstat_locks"]) == 18 and len(data["scaling"]) == 9
    assert len(data["migrate_modes"]) == 9 and len(data["notes"]) == 2


# --- plots ------------------------------------------------------------------------------------

def test_plot_specs(real: bb.Aggregate) -> None:
    specs = bb.plots(real)
    assert list(specs) == ["rstat.png", "ucount.png", "migrate.png", "ratios.png"]
    r = specs["rstat.png"]
    assert r.title == "cpu.stat reads/s, one cgroup (2 vCPUs, UML, 2 host cores)"
    assert set(r.curves) == {"base, 0 updaters", "base, 1 updaters", "series, 0 updaters",
                             "series, 1 updaters"}
    one = series_of(real, "rstat_read", "series", "reads_per_s", readers=1, updaters=0, cgroups=1)
    two = series_of(real, "rstat_read", "series", "reads_per_s", readers=2, updaters=0, cgroups=1)
    assert r.curves["series, 0 updaters"] == [(1.0, one.median), (2.0, two.median)]
    assert list(specs["ucount.png"].curves) == ["base, one thread per namespace",
                                                "series, one thread per namespace"]
    m = specs["migrate.png"]
    assert m.logy and m.curves["base, global"] == [(0.0, 8704.0), (1.0, 9472.0), (4.0, 9728.0)]
    ratios = specs["ratios.png"]
    assert ratios.kind == "ratios" and ratios.curves == {}
    assert len(ratios.rows) == sum(c.ratio is not None for c in real.comparisons) == 32
    first = real.comparisons[0]
    assert ratios.rows[0] == {"label": "rstat_read reads_per_s readers=1 updaters=0 cgroups=1",
                              "ratio": first.ratio, "interval": list(first.interval or ()),
                              "band": list(first.band or ()), "verdict": "faster"}
    data = json.loads(json.dumps(bb.plot_specs(specs)))
    assert data["ratios.png"]["kind"] == "ratios" and data["rstat.png"]["rows"] == []
    assert data["migrate.png"]["curves"]["base, global"][0] == [0.0, 8704.0]
    empty = bb.aggregate({"base": []}, real_machine())
    assert bb.plots(empty) == {}


class FakeAxes:
    def __init__(self, calls: list[tuple[str, Any]]) -> None:
        self.calls = calls

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **kw: self.calls.append((name, a))


def stand_in_matplotlib(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    calls: list[tuple[str, Any]] = []
    ax = FakeAxes(calls)
    fig = types.SimpleNamespace(tight_layout=lambda: None,
                                savefig=lambda path, dpi: Path(path).write_text("png"))
    mpl = types.ModuleType("matplotlib")
    mpl.use = lambda backend: calls.append(("use", (backend,)))  # type: ignore[attr-defined]
    pyplot = types.ModuleType("matplotlib.pyplot")
    pyplot.subplots = lambda figsize: (fig, ax)  # type: ignore[attr-defined]
    pyplot.close = lambda f: None  # type: ignore[attr-defined]
    mpl.pyplot = pyplot  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "matplotlib", mpl)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", pyplot)
    return calls


def test_write_plots_with_a_stand_in_matplotlib(real: bb.Aggregate, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    calls = stand_in_matplotlib(monkeypatch)
    specs = bb.plots(real)
    written = bb.write_plots(specs, tmp_path)
    assert [p.name for p in written] == ["rstat.png", "ucount.png", "migrate.png", "ratios.png"]
    assert all(p.read_text() == "png" for p in written)
    assert ("use", ("Agg",)) in calls and ("set_yscale", ("log",)) in calls
    rows = specs["ratios.png"].rows
    per_row = len(rows) + sum(bool(r["band"]) for r in rows) + sum(bool(r["interval"]) for r in rows)
    assert sum(name == "plot" for name, _ in calls) == 4 + 2 + 4 + per_row
    assert ("set_xscale", ("log",)) in calls and ("axvline", (1.0,)) in calls
    [(_, (labels,))] = [c for c in calls if c[0] == "set_yticklabels"]
    assert labels[0] == "rstat_read reads_per_s readers=1 updaters=0 cgroups=1: faster"
    [(_, (ticks,))] = [c for c in calls if c[0] == "set_xticks"]
    assert 1.0 in ticks and 2.0 in ticks  # the ratio axis marks 1x and the ratios' range


def test_write_plots_without_matplotlib(real: bb.Aggregate, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import raises ImportError
    assert not plot.have_matplotlib()
    assert bb.write_plots(bb.plots(real), tmp_path, system_python=tmp_path / "none") == []
    assert "matplotlib not installed: no plots" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_write_plots_with_a_system_python_that_cannot(real: bb.Aggregate, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(plot, "have_matplotlib", lambda: False)
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\ncat >/dev/null\necho \"ModuleNotFoundError: No module named "
                    "'matplotlib'\" >&2\nexit 1\n")
    fake.chmod(0o755)
    dest = tmp_path / "out"
    dest.mkdir()
    assert bb.write_plots(bb.plots(real), dest, system_python=fake) == []
    assert (f"{fake} could not draw the plots (ModuleNotFoundError: No module named "
            f"'matplotlib'): no plots") in capsys.readouterr().err


def test_write_plots_with_the_real_matplotlib(real: bb.Aggregate, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """In this interpreter, and as a script under another python3 (Debian's, for a driver
    run by pyenv's or a venv's): here a shell wrapper around this one."""
    pytest.importorskip("matplotlib")
    specs = bb.plots(real)
    written = bb.write_plots(specs, tmp_path)
    assert [p.name for p in written] == ["rstat.png", "ucount.png", "migrate.png", "ratios.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)
    monkeypatch.setattr(plot, "have_matplotlib", lambda: False)
    wrapper = tmp_path / "python3"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    dest = tmp_path / "system"
    dest.mkdir()
    small = {"ratios.png": specs["ratios.png"]}
    assert bb.write_plots(small, dest, system_python=wrapper) == [dest / "ratios.png"]
    assert (dest / "ratios.png").read_bytes().startswith(b"\x89PNG")


# --- input ------------------------------------------------------------------------------------

SERIES = ["0001-a.patch", "0002-b.patch"]
GOOD = {"profile": "um-bench", "base_before": "0002-b.patch", "filter": "cgroup_bench*", "comment": "c"}


def test_parse_bench_config() -> None:
    assert bb.parse_bench_config(GOOD, SERIES) == bb.BenchConfig("um-bench", "0002-b.patch",
                                                                 "cgroup_bench*", "c")
    assert bb.parse_bench_config({k: v for k, v in GOOD.items() if k != "comment"}, SERIES).comment == ""


@pytest.mark.parametrize("bad,message", [
    ([], "expected a JSON object"),
    ({**GOOD, "profile": ""}, "profile must be a non-empty string"),
    ({**GOOD, "base_before": 12}, "base_before must be a non-empty string"),
    ({k: v for k, v in GOOD.items() if k != "filter"}, "filter must be a non-empty string"),
    ({**GOOD, "filter": "-x"}, "filter must be a KUnit glob such as 'cgroup_bench*'"),
    ({**GOOD, "base_before": "0012-gone.patch"},
     "base_before 0012-gone.patch is not listed in kernel/series"),
])
def test_parse_bench_config_bad(bad: Any, message: str) -> None:
    with pytest.raises(DriverError) as exc:
        bb.parse_bench_config(bad, SERIES)
    assert str(exc.value) == f"tools/kunit/bench.json: {message}"


def test_the_repo_bench_json() -> None:
    cfg = bb.load_bench_config(REPO)  # base_before must name a patch of kernel/series
    assert (cfg.profile, cfg.filter) == ("um-bench", "cgroup_bench*")
    assert cfg.base_before in tr.series_names(REPO)
    assert "control = the base kernel booted again" in cfg.comment
    assert all(bb.runs_in(b, cfg.filter) for b in bb.BENCHMARKS)


def test_load_bench_config_missing_or_not_json(tmp_path: Path) -> None:
    with pytest.raises(DriverError, match=r"bench\.json is missing$"):
        bb.load_bench_config(tmp_path)
    write_files(tmp_path, {str(bb.BENCH_FILE): "{"})
    with pytest.raises(DriverError, match=r"tools/kunit/bench\.json: not valid JSON: "):
        bb.load_bench_config(tmp_path)


def test_the_bench_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    um = bb.bench_profile(REPO, "um-bench")
    assert (um.arch, um.ncpus, pf.vcpus(um), um.timeout) == ("um", 2, 2, 3600)
    assert um.kernel_args == ["seccomp=on", "ncpus=2"]
    three = bb.bench_profile(REPO, "um-bench", 3)
    assert (three.ncpus, pf.vcpus(three), three.kernel_args) == (3, 3, ["seccomp=on", "ncpus=3"])
    text = um.fragment.read_text().splitlines()
    for line in ("CONFIG_SMP=y", "CONFIG_NR_CPUS=64", "CONFIG_CGROUP_KUNIT_BENCH=y",
                 "# CONFIG_PROVE_LOCKING is not set"):
        assert line in text
    x86 = bb.bench_profile(REPO, "x86_64-bench", 8)
    assert (x86.qemu_smp, pf.vcpus(x86)) == (8, 8)
    with pytest.raises(DriverError) as exc:
        bb.bench_profile(REPO, "um-lockdep")  # ncpus=4 in kernel_args, but no #@ ncpus
    assert str(exc.value) == ("profile um-lockdep is not a bench profile: it sets no vCPU count "
                              "(#@ ncpus: host for UML, #@ qemu_smp: for x86_64)")
    with pytest.raises(DriverError, match="^unknown profile 'nope'"):
        bb.bench_profile(REPO, "nope")


@pytest.mark.parametrize("kw,message", [
    ({"reps": 0}, "--reps must be in 1..50, got 0"),
    ({"reps": 51}, "--reps must be in 1..50, got 51"),
    ({"duration_ms": 99}, "--duration-ms must be in 100..60000, got 99"),
    ({"duration_ms": 60001}, "--duration-ms must be in 100..60000, got 60001"),
    ({"seed": 0}, f"--seed must be in 1..{2**64 - 1}, got 0"),
    ({"seed": 2**64}, f"--seed must be in 1..{2**64 - 1}, got {2**64}"),
    ({"vcpus": 0}, "--vcpus must be in 1..64, got 0"),
    ({"vcpus": 65}, "--vcpus must be in 1..64, got 65"),
    ({"rounds": 0}, "--rounds must be in 1..10, got 0"),
    ({"rounds": 11}, "--rounds must be in 1..10, got 11"),
    ({"depth": 1}, "--depth must be in 2..16, got 1"),
    ({"depth": 17}, "--depth must be in 2..16, got 17"),
    ({"jobs": 0}, "--jobs must be at least 1, got 0"),
])
def test_validate_options(kw: dict[str, int], message: str) -> None:
    with pytest.raises(DriverError) as exc:
        bb.validate_options(bb.BenchOptions(**kw))  # type: ignore[arg-type]
    assert str(exc.value) == message


def test_validate_options_good() -> None:
    bb.validate_options(bb.BenchOptions())
    bb.validate_options(bb.BenchOptions(reps=50, duration_ms=100, seed=2**64 - 1, vcpus=64,
                                        rounds=10, jobs=1))


def test_parse_only() -> None:
    assert bb.parse_only(None) == ("rstat", "ucount", "migrate")
    assert bb.parse_only(" migrate, rstat ") == ("rstat", "migrate")
    for text, shown in (("rstat,bogus", "bogus"), (",", "','"), ("x", "x")):
        with pytest.raises(DriverError) as exc:
            bb.parse_only(text)
        assert str(exc.value) == f"--only: unknown benchmark {shown} (known: rstat,ucount,migrate)"


@pytest.mark.parametrize("glob,only,want", [
    ("cgroup_bench*", ("rstat", "ucount", "migrate"), "cgroup_bench*"),
    ("cgroup_bench*", ("rstat",), "cgroup_bench.bench_rstat*"),
    ("cgroup_bench*", ("ucount",), "cgroup_bench.bench_ucount*"),
    ("cgroup_bench*", ("rstat", "ucount"), "cgroup_bench.bench_[ru]*"),
    ("cgroup_bench*", ("migrate",), "cgroup_bench_migrate.bench_migrate*"),
    ("cgroup_bench*", ("rstat", "migrate"), "cgroup_bench*"),  # two suites: the whole filter
    ("cgroup_bench.*", ("rstat", "ucount", "migrate"), "cgroup_bench.*"),
    ("cgroup_bench.*", ("rstat",), "cgroup_bench.bench_rstat*"),
])
def test_boot_filter(glob: str, only: tuple[str, ...], want: str) -> None:
    assert bb.boot_filter(glob, only) == want


def test_boot_filter_that_runs_nothing() -> None:
    with pytest.raises(DriverError) as exc:
        bb.boot_filter("cgroup_bench.*", ("migrate",))
    assert str(exc.value) == "no boot runs migrate with the filter of tools/kunit/bench.json"


def test_case_glob() -> None:
    assert bb.case_glob(["bench_rstat*"]) == "bench_rstat*"
    assert bb.case_glob(["bench_ab*", "bench_ac*"]) == "bench_a[bc]*"
    assert bb.case_glob(["bench_a*", "bench_ab*"]) == "*"
    assert bb.case_glob(["bench_x", "bench_y"]) == "*"


def test_boot_order() -> None:
    assert bb.boot_order(1) == [(0, "base"), (0, "series"), (0, "control")]
    assert bb.boot_order(3) == [(0, "base"), (0, "series"), (0, "control"),
                                (1, "control"), (1, "series"), (1, "base"),
                                (2, "base"), (2, "series"), (2, "control")]
    assert bb.KERNEL_OF == {"base": "base", "series": "series", "control": "base"}


def test_kernel_args_and_dirs() -> None:
    assert bb.kernel_args(7, 5, 1000) == ["cgroup_kunit.seed=7", "cgroup_kunit.bench_reps=5",
                                          "cgroup_kunit.duration_ms=1000"]
    # the default depth is the suite's own: not passed, so boots without it stay the same
    assert bb.kernel_args(7, 5, 1000, 2) == bb.kernel_args(7, 5, 1000)
    assert bb.kernel_args(7, 5, 1000, 5)[-1] == "cgroup_kunit.bench_rstat_depth=5"
    p = pf.Profile(name="um-bench", arch="um", fragment=Path("/r/p.config"), ncpus=2)
    assert bb.round_dir(Path("/b"), p, "control", 0) == Path("/b/results/um-bench+control")
    assert bb.round_dir(Path("/b"), p, "control", 2) == Path("/b/results/um-bench+control-r3")
    assert pf.out_dir(Path("/b"), p, "base") == Path("/b/out/um-bench+base")
    assert run.kernel_image(Path("/b"), p, Path("/b/out/um-bench+base")) == \
        Path("/b/out/um-bench+base/linux")


# --- profile.py: ncpus, with_cpus(), vcpus() -----------------------------------------------

def write_profile(root: Path, name: str, text: str) -> None:
    write_files(root, {f"{pf.PROFILES_DIR}/{name}.config": text})


@pytest.mark.parametrize("value,cores,ncpus", [("host", 2, 2), ("host", 1, 1), ("host", 64, 64),
                                               ("3", 2, 3)])
def test_ncpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, cores: int,
               ncpus: int) -> None:
    write_profile(tmp_path, "um-b", f"#@ arch: um\n#@ ncpus: {value}\n#@ kernel_args: seccomp=on ncpus=9\n")
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    p = pf.load_profile(tmp_path, "um-b")
    assert (p.ncpus, pf.vcpus(p)) == (ncpus, ncpus)  # `host` is the cores, not at least 4
    assert p.kernel_args == ["seccomp=on", f"ncpus={ncpus}"]  # #@ ncpus wins over the args'
    cmd = run.exec_command(Path("/t"), p, tmp_path, Path("/b"), [], "")
    assert f"--kernel_args=ncpus={ncpus}" in cmd and not any(a.startswith("--qemu_args") for a in cmd)


@pytest.mark.parametrize("text,message", [
    ("#@ arch: um\n#@ ncpus: hosts\n", ":2: ncpus must be a positive integer or 'host', got 'hosts'"),
    ("#@ arch: um\n#@ ncpus: 0\n", ":2: ncpus must be a positive integer or 'host', got '0'"),
    ("#@ arch: x86_64\n#@ ncpus: 2\n", ":2: ncpus is for arch um (x86_64: qemu_smp)"),
])
def test_ncpus_bad(tmp_path: Path, text: str, message: str) -> None:
    write_profile(tmp_path, "b", text)
    with pytest.raises(DriverError) as exc:
        pf.load_profile(tmp_path, "b")
    assert str(exc.value).endswith(message)


def test_with_cpus_and_vcpus() -> None:
    um = pf.Profile(name="u", arch="um", fragment=Path("/p"), kernel_args=["seccomp=on", "ncpus=4"])
    assert pf.vcpus(um) == 4 and um.ncpus is None
    two = pf.with_cpus(um, 2)
    assert (two.ncpus, two.kernel_args, pf.vcpus(two)) == (2, ["seccomp=on", "ncpus=2"], 2)
    assert um.kernel_args == ["seccomp=on", "ncpus=4"]  # a copy, the profile unchanged
    assert pf.vcpus(pf.Profile(name="u", arch="um", fragment=Path("/p"))) == 1
    assert pf.vcpus(pf.Profile(name="u", arch="um", fragment=Path("/p"),
                               kernel_args=["ncpus=x"])) == 1
    x86 = pf.Profile(name="x", arch="x86_64", fragment=Path("/p"), qemu_smp=4)
    assert pf.vcpus(x86) == 4 and pf.vcpus(pf.with_cpus(x86, 16)) == 16
    assert pf.with_cpus(x86, 16).kernel_args == [] and pf.with_cpus(x86, 16).ncpus is None
    assert pf.vcpus(pf.Profile(name="x", arch="x86_64", fragment=Path("/p"))) == 1


@pytest.mark.parametrize("cores,smp", [(1, 4), (2, 4), (6, 6), (64, 64)])
def test_qemu_smp_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cores: int, smp: int) -> None:
    write_profile(tmp_path, "x86_64-b", "#@ arch: x86_64\n#@ qemu_smp: host\n")
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    p = pf.load_profile(tmp_path, "x86_64-b")
    assert p.qemu_smp == smp == pf.host_smp(cores)
    assert f"--qemu_args=-smp {smp}" in run.exec_command(Path("/t"), p, tmp_path, Path("/b"), [], "")


# --- machine.py ----------------------------------------------------------------------------

@pytest.mark.parametrize("text,model", [
    ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
     "model name\t: Intel(R) Xeon(R) Processor\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) "
     "Processor\n", "Intel(R) Xeon(R) Processor"),
    ("processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nHardware\t: BCM2835\n", "BCM2835"),
    ("processor\t: 0\ncpu\t\t: POWER9 (architected), altivec supported\n",
     "POWER9 (architected), altivec supported"),
    ("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\n", "unknown"),
    ("model name\t:\nprocessor\t: 0\n", "unknown"),
    ("", "unknown"),
])
def test_cpu_model(text: str, model: str) -> None:
    assert mc.cpu_model(text) == model


def test_host_cpu_model_and_load_average(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC 7B13\n")
    assert mc.host_cpu_model(info) == "AMD EPYC 7B13"
    assert mc.host_cpu_model(tmp_path / "none") == "unknown"
    load = tmp_path / "loadavg"
    load.write_text("1.93 1.40 0.88 3/215 4242\n")
    assert mc.load_average(load) == 1.93
    for text in ("", "busy"):
        load.write_text(text)
        assert mc.load_average(load) is None
    assert mc.load_average(tmp_path / "none") is None
    assert isinstance(mc.load_average(), float) and mc.host_cores() >= 1


def wait_for(cond: Any, seconds: float = 5.0) -> None:
    end = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


@pytest.fixture
def sleepers(tmp_path: Path) -> Any:
    """Start copies of /bin/sleep; kill whatever is left at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start(path: Path) -> subprocess.Popen[bytes]:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            shutil.copy(shutil.which("sleep") or "/bin/sleep", path)
        proc = subprocess.Popen([str(path), "60"])
        started.append(proc)
        wait_for(lambda: Path(f"/proc/{proc.pid}/exe").resolve() == path.resolve())
        return proc
    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_leftover_kernels(tmp_path: Path, sleepers: Any) -> None:
    build = tmp_path / "build"
    assert mc.leftover_kernels(build) == {}  # no out/ at all
    image = build / "out" / "um-bench+base" / "linux"
    write_files(build, {"out/um-bench+series/linux": "not running", "out/stray": "x"})
    kernel = sleepers(image)
    other = sleepers(tmp_path / "elsewhere" / "linux")  # another build root's
    assert mc.leftover_kernels(build) == {kernel.pid: image}
    # rebuilt since it started (the linker writes a new file): its exe is '<image> (deleted)'
    fresh = image.with_name("linux.new")
    shutil.copy(image, fresh)
    os.replace(fresh, image)
    assert os.readlink(f"/proc/{kernel.pid}/exe") == f"{image} (deleted)"
    assert mc.leftover_kernels(build) == {kernel.pid: image}
    kernel.kill()
    kernel.wait()
    assert mc.leftover_kernels(build) == {}
    assert other.poll() is None


def test_end_leftovers_kills_only_the_leftover(tmp_path: Path, sleepers: Any,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    build = tmp_path / "build"
    image = build / "out" / "um-bench+series" / "linux"
    kernel = sleepers(image)
    bystander = sleepers(tmp_path / "tool" / "sleep")  # a child of ours that is no kernel
    bb.end_leftovers(build)
    assert kernel.wait(timeout=5) == -9
    assert bystander.poll() is None and procs.alive(bystander.pid)
    assert f"a kernel left running by an earlier run: pid {kernel.pid} ({image}); killing it" in \
        capsys.readouterr().err
    bb.end_leftovers(build)  # nothing left: nothing said
    assert capsys.readouterr().err == ""


# --- the whole command, with a fake kunit.py ------------------------------------------------

FAKE_KUNIT = '''#!/usr/bin/env python3
"""Stands in for kunit.py exec: prints the recorded console of the next boot of a kernel."""
import os, sys
args = sys.argv[1:]
if args[0] == "exec":
    fake = os.environ["FAKE_DIR"]
    out = next(a for a in args if a.startswith("--build_dir="))
    kernel = out.rsplit("+", 1)[1]
    record = os.path.join(fake, kernel + ".args")
    n = open(record).read().count("\\n\\n") if os.path.exists(record) else 0
    with open(record, "a") as f:
        f.write("\\n".join(args) + "\\n\\n")
    log = os.path.join(fake, "%s.%d.log" % (kernel, n))
    with open(log if os.path.exists(log) else os.path.join(fake, kernel + ".log")) as f:
        print(f.read(), end="")
'''
# The consoles each kernel prints, boot by boot, in the order bench boots them
# (base, series, control, then control, series, base, then base, series, control).
BOOTS_OF = {"base": ["base", "control", "control-r2", "base-r2", "base-r3", "control-r3"],
            "series": ["series", "series-r2", "series-r3"]}


@pytest.fixture
def bench_env(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:  # noqa: F811
    """A tiny kernel with a fake kunit.py, a repo with bench.json and um-bench, built images,
    the recorded consoles to print."""
    write_files(env["kernel"], {"tools/testing/kunit/kunit.py": FAKE_KUNIT})
    git(env["kernel"], "commit", "-q", "-am", "fake kunit.py")
    write_files(env["repo"], {
        f"{pf.PROFILES_DIR}/um-bench.config": (REPO / pf.PROFILES_DIR / "um-bench.config").read_text(),
        ".kunitconfig": "CONFIG_KUNIT=y\n",
        str(bb.BENCH_FILE): json.dumps({"profile": "um-bench", "base_before": env["p2"].name,
                                        "filter": "cgroup_bench*"})})
    for k in ("base", "series"):
        write_files(env["build"], {f"out/um-bench+{k}/linux": "kernel"})
    fake = env["tmp"] / "fake"
    fake.mkdir()
    for kernel, logs in BOOTS_OF.items():
        for n, name in enumerate(logs):
            shutil.copy(UM / f"{name}.console.log", fake / f"{kernel}.{n}.log")
    # test_kernel_params edits the series kernel's first console under its old name
    (fake / "bench_synthetic_series.log").symlink_to("series.0.log")
    monkeypatch.setenv("FAKE_DIR", str(fake))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    # a quiet host, whatever else runs beside the tests (test_disturbed_boots_* covers drops)
    monkeypatch.setattr(mc.OtherLoad, "cores", lambda self: 0.0)
    drawn: list[str] = []
    monkeypatch.setattr(bb, "write_plots", lambda specs, dest: drawn.extend(specs) or [])
    env["fake"] = fake
    env["drawn"] = drawn  # type: ignore[assignment]
    return env


def bench_run(env: dict[str, Path], **kw: Any) -> int:
    """One round unless asked (test_kernel_params runs it too)."""
    opts = bb.BenchOptions(**dict(dict(reps=REPS, seed=SEED, no_build=True, rounds=1,
                                       kernel_src=str(env["kernel"])), **kw))
    return bb.run_bench(Context(env["repo"], env["build"]), opts)


def boots(env: dict[str, Path], kernel: str) -> list[list[str]]:
    path = env["fake"] / f"{kernel}.args"
    return [b.splitlines() for b in path.read_text().split("\n\n") if b] if path.exists() else []


def booting_lines(err: str) -> list[str]:
    return [re.sub(r"; load average [\d.]+$", "", line) for line in err.splitlines()
            if line.startswith("[cgkunit] booting ")]


def test_bench_end_to_end(bench_env: dict[str, Path], real: bb.Aggregate,
                          capsys: pytest.CaptureFixture[str]) -> None:
    env = bench_env
    assert bench_run(env, rounds=3) == 0
    out, err = capsys.readouterr()
    assert booting_lines(err) == [
        f"[cgkunit] booting {v} ({i}/9, round {r + 1}): cgroup_bench*"
        for i, (r, v) in enumerate(bb.boot_order(3), 1)]
    assert "[cgkunit] control: PASS in " in err and "WARNING" not in err
    results = env["build"] / "results"
    assert (results / "bench" / "bench.txt").read_text() == out
    assert out.startswith(f"cgkunit bench: um-bench, 3 round(s) of base, series and control (the "
                          f"base booted again), alternating, x 5 reps of 1000 ms per point, seed {SEED}\n")
    assert "; 2 host cores; 2 vCPUs; UML, native" in out.splitlines()[1]
    # the same consoles, the same numbers as aggregating the recorded run directly
    assert out.split("\n\n== ", 1)[1] == bb.format_table(real).split("\n\n== ", 1)[1]
    # six boots of the base kernel (base and control), three of the series
    assert len(boots(env, "base")) == 6 and len(boots(env, "series")) == 3
    for kernel in ("base", "series"):
        for args in boots(env, kernel):
            assert f"--build_dir={env['build'] / 'out' / f'um-bench+{kernel}'}" in args
            assert "--arch=um" in args and args[-1] == "cgroup_bench*"
            assert [a for a in args if a.startswith("--kernel_args=")] == [
                "--kernel_args=seccomp=on", "--kernel_args=ncpus=2",
                f"--kernel_args=cgroup_kunit.seed={SEED}", "--kernel_args=cgroup_kunit.bench_reps=5",
                "--kernel_args=cgroup_kunit.duration_ms=1000",
                "--kernel_args=cgroup_kunit.selfcheck=1"]
    for v in bb.VARIANTS:
        for r in range(3):
            d = results / f"um-bench+{v}{ROUND_SUFFIX[r]}"
            assert json.loads((d / "summary.json").read_text())["status"] == "pass"
            assert cr.parse_console((d / "console.log").read_text()).metrics() == \
                cr.parse_console(console(v, r)).metrics()
    data = json.loads((results / "bench" / "bench.json").read_text())
    m = data["machine"]
    assert (m["vcpus"], m["host_cores"], m["accel"], m["reps"], m["rounds"], m["seed"]) == \
        (2, 2, "uml", 5, 3, SEED)
    assert (m["base_patches"], m["series_patches"], m["base_before"]) == (1, 2, env["p2"].name)
    [base_tree_path] = (env["build"] / "trees").glob("*+base")
    assert m["base_commit"] == git(base_tree_path, "rev-parse", "HEAD^") != m["series_commit"]
    assert m["emulated"] is False and m["warning"] is None and m["profile"] == "um-bench"
    assert data["statuses"] == dict.fromkeys(bb.VARIANTS, "pass")
    assert data["comparisons"] == json.loads(json.dumps([c.to_json() for c in real.comparisons]))
    assert json.loads((results / "bench" / "machine.json").read_text()) == m
    assert env["drawn"] == ["rstat.png", "ucount.png", "migrate.png", "ratios.png"]  # type: ignore[comparison-overlap]
    assert f"[cgkunit] results: {results / 'bench' / 'bench.json'}, " in err
    # --report: the saved consoles aggregated again, no boot
    assert bench_run(env, report_only=True, no_build=False) == 0
    again, err = capsys.readouterr()
    assert again == out and booting_lines(err) == []
    assert len(boots(env, "base")) == 6


def test_bench_one_round_of_one_benchmark(bench_env: dict[str, Path],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    env = bench_env
    assert bench_run(env, only=("ucount",), vcpus=2) == 0
    out, err = capsys.readouterr()
    assert booting_lines(err) == ["[cgkunit] booting base (1/3, round 1): cgroup_bench.bench_ucount*",
                                  "[cgkunit] booting series (2/3, round 1): cgroup_bench.bench_ucount*",
                                  "[cgkunit] booting control (3/3, round 1): cgroup_bench.bench_ucount*"]
    assert [b[-1] for b in boots(env, "base")] == ["cgroup_bench.bench_ucount*"] * 2
    assert [b.split(":")[0] for b in out.split("\n\n== ")[1:]] == ["ucount"]
    data = json.loads((env["build"] / "results" / "bench" / "bench.json").read_text())
    assert data["benchmarks"] == ["ucount"] and data["machine"]["rounds"] == 1
    assert {c["verdict"] for c in data["comparisons"]} == {"too few reps"}  # 5 pairs < 6
    assert {r["record"] for r in data["records"]} == {"ucount_charge", "ucount_cross", "ucount_limit"}


def test_bench_oversubscribed(bench_env: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    env = bench_env
    assert bench_run(env, only=("rstat",), vcpus=4) == 0
    out, err = capsys.readouterr()
    warning = ("oversubscribed: 4 vCPUs on 2 host cores: contention ratios are compressed and lock "
               "holders get preempted")
    assert f"[cgkunit] WARNING: {warning}" in err and f"\nWARNING: {warning}\n" in out
    assert "--kernel_args=ncpus=4" in boots(env, "series")[0]
    assert "note: base: the guest reported 2 vCPUs, it was given 4" in out


def test_a_failed_boot_prints_what_it_has_and_exits_1(bench_env: dict[str, Path],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    env = bench_env
    log = env["fake"] / "series.1.log"  # round 2
    log.write_text(log.read_text().replace("    ok 2 bench_ucount_charge",
                                           "    not ok 2 bench_ucount_charge"))
    assert bench_run(env, rounds=3) == 1
    out = capsys.readouterr().out
    assert out.startswith("-- series boot (round 2):\ncgkunit: um-bench: FAIL")
    assert "series:  " in out and "(2 patches)  [FAIL]" in out and "== ucount" in out
    data = json.loads((env["build"] / "results" / "bench" / "bench.json").read_text())
    assert data["statuses"] == {"base": "pass", "series": "fail", "control": "pass"}


def test_bench_report_without_logs(bench_env: dict[str, Path]) -> None:
    with pytest.raises(DriverError, match=r"^no console log at .*/results/um-bench\+base/console\.log; "
                                          r"run make bench first$"):
        bench_run(bench_env, report_only=True)


def test_bench_input_is_checked_before_the_tree(bench_env: dict[str, Path]) -> None:
    env = bench_env
    with pytest.raises(DriverError, match="^--duration-ms must be in 100..60000, got 5$"):
        bench_run(env, duration_ms=5)
    profile = env["repo"] / pf.PROFILES_DIR / "um-bench.config"
    profile.write_text(profile.read_text().replace("#@ timeout: 3600", "#@ timeout: 600"))
    with pytest.raises(DriverError, match=r"^--reps 20 x --duration-ms 30000 is 600s for each point, "
                                          r"over the 600s limit of a um-bench boot$"):
        bench_run(env, reps=20, duration_ms=30000)
    with pytest.raises(DriverError, match="^profile um-x is not a bench profile"):
        write_files(env["repo"], {f"{pf.PROFILES_DIR}/um-x.config": "#@ arch: um\n"})
        bench_run(env, profile="um-x")
    (env["repo"] / bb.BENCH_FILE).write_text(json.dumps(
        {"profile": "um-bench", "base_before": "0012-gone.patch", "filter": "cgroup_bench*"}))
    with pytest.raises(DriverError, match="base_before 0012-gone.patch is not listed in kernel/series"):
        bench_run(env)
    assert not (env["build"] / "trees").exists() and boots(env, "base") == []


def test_bench_without_built_kernels(bench_env: dict[str, Path]) -> None:
    shutil.rmtree(bench_env["build"] / "out" / "um-bench+base")
    with pytest.raises(DriverError, match=r"^no kernel built for um-bench \(.*/um-bench\+base/linux "
                                          r"missing\); run without --no-build$"):
        bench_run(bench_env)


# --- bad input on the command line: one line, exit 2 --------------------------------------------

def run_entry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ENTRY), *args], capture_output=True, text=True,
                          cwd="/", timeout=60)


@pytest.mark.parametrize("args,message", [
    (["--reps", "0"], "--reps must be in 1..50, got 0"),
    (["--only", "x"], "--only: unknown benchmark x (known: rstat,ucount,migrate)"),
    (["--vcpus", "99"], "--vcpus must be in 1..64, got 99"),
    (["--rounds", "11"], "--rounds must be in 1..10, got 11"),
    (["--depth", "1"], "--depth must be in 2..16, got 1"),
    (["--duration-ms", "99"], "--duration-ms must be in 100..60000, got 99"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    proc = run_entry("--build-dir", str(tmp_path), "bench", *args)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines() == [f"cgkunit: error: {message}"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text,message", [
    ("{", "{path}: not valid JSON: Expecting property name enclosed in double quotes: line 1 "
          "column 2 (char 1)"),
    (json.dumps({"profile": "um-bench", "base_before": "0099-gone.patch", "filter": "cgroup_bench*"}),
     "tools/kunit/bench.json: base_before 0099-gone.patch is not listed in kernel/series"),
    (json.dumps({"profile": "um-lockdep", "base_before": "{first}", "filter": "cgroup_bench*"}),
     "profile um-lockdep is not a bench profile: it sets no vCPU count (#@ ncpus: host for UML, "
     "#@ qemu_smp: for x86_64)"),
])
def test_a_bad_bench_json_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str], text: str,
                                                 message: str) -> None:
    from cgkunit import cli
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "kernel", repo / "kernel")
    shutil.copytree(REPO / pf.PROFILES_DIR, repo / pf.PROFILES_DIR)
    path = repo / bb.BENCH_FILE
    path.write_text(text.replace("{first}", tr.series_names(repo)[0]))
    monkeypatch.setattr(cli, "find_repo_root", lambda: repo)
    code = cli.main(["--build-dir", str(tmp_path / "build"), "bench", "--no-build"])
    captured = capsys.readouterr()
    assert (code, captured.out) == (2, "")
    assert captured.err.splitlines() == [f"cgkunit: error: {message.replace('{path}', str(path))}"]
    assert not (tmp_path / "build" / "trees").exists()


# --- Makefile --------------------------------------------------------------------------------

def test_makefile_bench_target() -> None:
    text = (REPO / "Makefile").read_text()
    # PROFILE, REPS, DURATION_MS, ROUNDS, VCPUS, ONLY and SEED reach it through the
    # environment (test_makefile), with the driver's defaults
    assert re.search(r"^bench: deps\n\t\$\(CGKUNIT\) bench$", text, re.M)
    from cgkunit import cli, deps
    args = cli.make_parser().parse_args(["bench"])
    assert (args.reps, args.duration_ms, args.rounds, args.profile, args.vcpus, args.only) == \
        (5, 1000, 3, None, None, None)
    assert re.search(r"^\.PHONY:.* bench\b", text, re.M)
    assert re.search(r'^\t@echo "make bench ', text, re.M)
    test_recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", text, re.M)
    assert test_recipe is not None and "bench" not in test_recipe.group(0)
    assert "python3-matplotlib" in deps.PACKAGES


# --- the base worktree -----------------------------------------------------------------------

def base_tree(env: dict[str, Path], t: tr.PreparedTree | None = None,  # noqa: F811
              before: str | None = None) -> tr.PreparedTree:
    return tr.ensure_base_worktree(env["repo"], t or prepare(env), before or env["p2"].name)


def test_base_worktree(env: dict[str, Path]) -> None:  # noqa: F811
    t = prepare(env)
    b = base_tree(env, t)
    assert b.path == t.path.with_name(t.path.name + "+base")
    assert b.variant == "base" and b.patches == t.patches[:1]
    assert subjects(b.path) == ["kunit-cgroup: hook in the test suite", "ucount: fix line 240", "linux"]
    assert git(b.path, "rev-parse", "HEAD^") == t.patches[0][1] == tr.kernel_commit(b)
    assert b.head_commit == git(b.path, "rev-parse", "HEAD") == \
        git(b.path, "rev-parse", tr.BASE_SUITE_TAG)
    assert git(t.path, "rev-parse", "cgkunit-suite") == t.head_commit  # the series tag is untouched
    assert (b.path / ".git").is_file()  # a worktree: objects shared with the prepared tree
    assert str(b.path) in git(t.path, "worktree", "list")
    assert "return 0" in (b.path / "kernel" / "cgroup" / "cgroup.c").read_text()  # no patch 2
    suite = sorted(p.name for p in (b.path / "lib" / "kunit-cgroup").iterdir())
    assert suite == ["Kconfig", "Makefile", "x.c"]
    assert (b.path / "lib" / "Makefile").read_text().endswith(tr.MAKEFILE_LINE + "\n")
    assert git(b.path, "status", "--porcelain") == ""
    assert git(t.path, "rev-parse", "HEAD") == t.head_commit  # the prepared tree did not move


def test_base_before_the_first_patch_is_the_base_commit(env: dict[str, Path]) -> None:  # noqa: F811
    t = prepare(env)
    b = base_tree(env, t, env["p1"].name)
    assert git(b.path, "rev-parse", "HEAD^") == t.base_commit and b.patches == []
    assert "ucount line 240\n" in (b.path / "kernel" / "ucount.c").read_text()


def test_base_worktree_rerun_is_a_noop(env: dict[str, Path]) -> None:  # noqa: F811
    b1 = base_tree(env)
    mtimes = tree_mtimes(b1.path)
    b2 = base_tree(env)
    assert b2 == b1 and tree_mtimes(b2.path) == mtimes


def test_base_worktree_follows_the_suite_and_the_series(env: dict[str, Path]) -> None:  # noqa: F811
    b1 = base_tree(env)
    (env["repo"] / "lib" / "kunit-cgroup" / "x.c").write_text("int x = 3;\n")
    b2 = base_tree(env)
    assert b2.head_commit != b1.head_commit
    assert git(b2.path, "rev-parse", "HEAD^") == git(b1.path, "rev-parse", f"{b1.head_commit}^")
    assert (b2.path / "lib" / "kunit-cgroup" / "x.c").read_text() == "int x = 3;\n"
    assert git(b2.path, "status", "--porcelain") == ""
    b3 = base_tree(env, before=env["p1"].name)  # another base_before: moved, hooked again
    assert subjects(b3.path) == ["kunit-cgroup: hook in the test suite", "linux"]


def test_base_worktree_after_an_interrupted_attempt(env: dict[str, Path]) -> None:  # noqa: F811
    t = prepare(env)
    b = base_tree(env, t)
    shutil.rmtree(b.path)  # stale registration: the worktree is gone, git still lists it
    again = base_tree(env, t)
    assert again.head_commit == b.head_commit and git(again.path, "status", "--porcelain") == ""
    (again.path / "kernel" / "ucount.c").unlink()  # a half-done checkout, hand edits, strays
    (again.path / "lib" / "kunit-cgroup" / "x.c").write_text("scribble\n")
    (again.path / "stray.o").write_text("x")
    fixed = base_tree(env, t)
    assert fixed.head_commit == b.head_commit and git(fixed.path, "status", "--porcelain") == ""
    assert (fixed.path / "kernel" / "ucount.c").is_file() and not (fixed.path / "stray.o").exists()
    shutil.rmtree(fixed.path)
    write_files(fixed.path, {"junk.txt": "not a worktree"})  # a plain directory in the way
    assert base_tree(env, t).head_commit == b.head_commit
    assert not (fixed.path / "junk.txt").exists()


def test_base_worktree_of_a_recreated_prepared_tree(env: dict[str, Path]) -> None:  # noqa: F811
    b = base_tree(env)
    shutil.rmtree(env["build"] / "trees" / b.path.name.removesuffix("+base"))
    again = base_tree(env)  # its old git dir went with the prepared tree
    assert again.path == b.path and git(again.path, "status", "--porcelain") == ""
    assert tr.is_worktree_of(again.path, again.path.with_name(again.path.name.removesuffix("+base")))


def test_base_before_not_in_the_tree(env: dict[str, Path]) -> None:  # noqa: F811
    with pytest.raises(DriverError, match=r"^patch 0099-nope.patch is not in kernel/series$"):
        base_tree(env, before="0099-nope.patch")


# --- what else ran on the host during a boot -------------------------------------------------

HOST = Path(__file__).parent / "data" / "host"


def test_cpu_busy_seconds_reads_recorded_proc_stat() -> None:
    """Two /proc/stat samples of this 2-core Intel host, 2 s apart, 2026-11-26: busy is
    user + nice + system + irq + softirq + steal, idle and iowait left out."""
    one = (HOST / "proc-stat-1.txt").read_text()
    two = (HOST / "proc-stat-2.txt").read_text()
    a, b = mc.cpu_busy_seconds(one, 100), mc.cpu_busy_seconds(two, 100)
    assert a is not None and b is not None
    fields = [int(x) for x in one.split()[1:9]]
    assert a == pytest.approx((sum(fields) - fields[3] - fields[4]) / 100)
    assert 0 <= b - a <= 2 * 2.5   # 2 cores for about 2 s
    assert mc.cpu_busy_seconds("intr 1 2 3\n", 100) is None
    assert mc.cpu_busy_seconds("cpu 1 2 x 4 5 6 7 8\n", 100) is None
    assert mc.cpu_busy_seconds(one, 0) is None


def test_other_cores_is_host_busy_less_our_own() -> None:
    assert mc.other_cores(busy=250.0, own=240.0, wall=100.0) == pytest.approx(0.1)
    assert mc.other_cores(busy=10.0, own=12.0, wall=5.0) == 0.0   # tick rounding
    assert mc.other_cores(busy=1.0, own=0.0, wall=0.0) is None


def test_other_load_probe_sees_nothing_much_when_idle() -> None:
    probe = mc.OtherLoad.start()
    got = probe.cores()
    assert got is None or got >= 0.0


def test_disturbed_boots_are_dropped_unless_all_were() -> None:
    m = bb.Machine("cpu", 2, 2, "uml", other_cores={"base": [0.02, 0.4, None],
                                                    "control": [0.5, 0.3, 0.2],
                                                    "series": [0.0, 0.1, 0.05]})
    boots = {v: [object(), object(), object()] for v in ("base", "control", "series")}
    notes: list[str] = []
    drop = bb.disturbed_boots(m, boots, notes)  # type: ignore[arg-type]
    assert drop == {"base": {1}, "control": set(), "series": set()}
    assert notes[0] == ("base boot of round 2: the rest of the host kept 0.40 of a core "
                        "busy; dropped with its reps")
    assert notes[1].endswith("kept, as every boot of it was disturbed")
    assert len(notes) == 4
