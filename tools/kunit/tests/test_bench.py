"""bench: metric lines, aggregation and ratios, the table and JSON, input, the base worktree,
and the whole command with a fake kunit.py (no kernel is built or booted)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from cgkunit import bench as bb
from cgkunit import deps, pipeline
from cgkunit import profile as pf
from cgkunit import report as rp
from cgkunit import run
from cgkunit import tree as tr
from cgkunit.common import DriverError
from conftest import DATA, KUNIT_DIR
from test_tree import env, git, prepare, subjects, tree_mtimes, write_files  # noqa: F401

REPO = KUNIT_DIR.parent.parent
ENTRY = KUNIT_DIR / "cgkunit.py"
FILTERS = {"base": "cgroup_bench.*", "series": "cgroup_bench*"}
SEED = 8620138417093461227


def parse(variant: str) -> rp.Report:
    return rp.parse_console((DATA / f"bench_synthetic_{variant}.log").read_text())


def machine(**kw: Any) -> bb.Machine:
    fields: dict[str, Any] = dict(cpu_model="AMD EPYC 7B13", host_cores=2, vcpus=4, accel="tcg",
                                  profile="x86_64-bench", reps=3, duration_ms=1000, seed=SEED,
                                  base_before="0012-x.patch", base_commit="a" * 40,
                                  series_commit="b" * 40, base_patches=11, series_patches=14)
    fields.update(kw)
    return bb.Machine(**fields)


@pytest.fixture(scope="module")
def agg() -> bb.Aggregate:
    reports = {v: parse(v) for v in bb.VARIANTS}
    return bb.aggregate({v: r.metrics() for v, r in reports.items()}, machine(),
                        statuses={v: r.status for v, r in reports.items()}, filters=FILTERS)


def one(groups: list[bb.Series], benchmark: str, variant: str, value: str,
        **point: int | str) -> bb.Series:
    found = bb.find(groups, benchmark, variant, value, lambda p: p == point)
    assert len(found) == 1, (benchmark, variant, value, point)
    return found[0]


# --- metric lines ---------------------------------------------------------------------

@pytest.mark.parametrize("line,want", [
    ("[   12.345678]     # bench_rstat_read: metric: rstat_read readers=4 updaters=2 rep=0 "
     "ns=1000234567 reads=123456 updates=7890123",
     {"name": "rstat_read", "readers": 4, "updaters": 2, "rep": 0, "ns": 1000234567,
      "reads": 123456, "updates": 7890123}),
    ("[    3.000001][  T123]         # bench_migrate_latency: metric: migrate_latency mode=global "
     "churn=4 rep=0 ns=3000000000 migrations=500 forks=12345 p50_ns=1234 p90_ns=2345 "
     "p99_ns=34567 p999_ns=45678 max_ns=56789",
     {"name": "migrate_latency", "mode": "global", "churn": 4, "rep": 0, "ns": 3000000000,
      "migrations": 500, "forks": 12345, "p50_ns": 1234, "p90_ns": 2345, "p99_ns": 34567,
      "p999_ns": 45678, "max_ns": 56789}),
    ("\t# bench_rstat_read: metric: bench_machine vcpus=4  ", {"name": "bench_machine", "vcpus": 4}),
    ("# metric: x delta=-3 mode=dynmods stray", {"name": "x", "delta": -3, "mode": "dynmods"}),
])
def test_parse_metric(line: str, want: dict[str, int | str]) -> None:
    text = rp.DIAG.match(rp.strip_prefix(line).strip())
    assert text is not None
    assert rp.parse_metric(text.group(2)) == want


@pytest.mark.parametrize("text", [
    "bench_rstat_read: cgroup_kunit: seed=1 threads=4 duration_ms=1000",
    "bench_rstat_read: metrics are printed below",
    "bench_rstat_read: metric:",
    "rstat readers: 4 readers, 2 updaters: 123 reads/s",
])
def test_not_a_metric(text: str) -> None:
    assert rp.parse_metric(text) is None


def test_metrics_attach_to_the_case_that_printed_them() -> None:
    r = parse("series")
    assert r.status == "pass" and r.splats == []
    t = r.test("cgroup_bench.bench_rstat_read.4 readers, 0 updaters")
    assert t is not None
    assert [m["rep"] for m in t.metrics] == [0, 1, 2]  # the clocksource lines in between are not
    assert t.metrics[2] == {"name": "rstat_read", "readers": 4, "updaters": 0, "rep": 2,
                            "ns": 1000000000, "reads": 3600000, "updates": 0}
    assert not any("metric:" in d for d in t.diagnostics)
    assert t.params["seed"] == str(SEED)
    first = r.test("cgroup_bench.bench_rstat_read.1 readers, 0 updaters")
    assert first is not None and first.metrics[0] == {"name": "bench_machine", "vcpus": 4}
    names = [m["name"] for m in r.metrics()]
    assert names.count("rstat_read") == 12 and names.count("ucount_charge") == 15
    assert names.count("migrate_latency") == 12 and names.count("bench_machine") == 2
    assert len(parse("base").metrics()) == 1 + 12 + 15


def test_metrics_in_summary_json_and_of_a_crash(tmp_path: Path) -> None:
    text = (DATA / "bench_synthetic_base.log").read_text()
    cut = text.index("        ok 3 1 readers, 2 updaters")
    r = rp.parse_console(text[:cut], "hang")
    assert r.status == "hang"
    crash = [t for t in r.tests if t.level == "crash"]
    assert len(crash) == 1 and [m["readers"] for m in crash[0].metrics] == [1, 1, 1]
    assert len(r.metrics()) == 1 + 3 + 3 + 3  # the finished cases' metrics are kept
    r.console_log = str(tmp_path / "console.log")
    js, _ = rp.write_summary(r, tmp_path)
    data = json.loads(js.read_text())
    leaf = next(t for t in data["tests"]
                if t["id"] == "cgroup_bench.bench_rstat_read.4 readers, 0 updaters")
    assert leaf["metrics"][0]["reads"] == 3600000


# --- aggregation ---------------------------------------------------------------------------

@pytest.mark.parametrize("values,median", [([3.0], 3.0), ([5.0, 1.0, 3.0], 3.0),
                                           ([4.0, 1.0, 3.0, 2.0], 2.5), ([2.0, 8.0], 5.0)])
def test_median_of_odd_and_even_counts(values: list[float], median: float) -> None:
    s = bb.stats_of(values)
    assert s == bb.Stats(len(values), min(values), median, max(values))


def test_stats_of_nothing() -> None:
    assert bb.stats_of([]) is None


def test_ratios_are_paired_by_rep_index() -> None:
    base = bb.Series("rstat_read", "base", (("readers", 1),), "reads_per_s",
                     {0: 100.0, 1: 200.0, 2: 400.0, 3: 50.0})
    series = bb.Series("rstat_read", "series", (("readers", 1),), "reads_per_s",
                       {2: 400.0, 0: 300.0, 1: 200.0})  # rep 3 is missing: not paired
    p = bb.pair(base, series)
    assert p.paired == bb.Stats(3, 1.0, 1.0, 3.0)  # 300/100, 200/200, 400/400
    assert p.of_medians == pytest.approx(300.0 / 150.0)  # medians 300 and (100+200)/2 = 150
    assert base.stats == bb.Stats(4, 50.0, 150.0, 400.0)


def test_rates_from_the_fixture(agg: bb.Aggregate) -> None:
    s = one(agg.groups, "rstat_read", "base", "reads_per_s", readers=1, updaters=2)
    assert s.reps == {0: pytest.approx(400000 * 1e9 / 1000012345),
                      1: pytest.approx(420000 * 1e9 / 1000020000),
                      2: pytest.approx(380000 * 1e9 / 999990000)}
    assert s.stats.median == pytest.approx(400000 * 1e9 / 1000012345)
    assert not bb.find(agg.groups, "rstat_read", "base", "updates_per_s",
                       lambda p: p["updaters"] == 0)  # no updaters, no updates/s
    u = one(agg.groups, "ucount_charge", "series", "charges_per_s_per_thread", namespaces=4, threads=4)
    assert u.stats == bb.Stats(3, 3.6e6, 3.7e6, 3.8e6)  # charges/s over 4 threads
    f = one(agg.groups, "migrate_latency", "series", "forks_per_s", mode="dynmods", churn=4)
    assert f.stats.median == pytest.approx(15000.0)  # 45000 forks in 3 s
    assert not bb.find(agg.groups, "migrate_latency", "base", "p99_ns")


def test_series_over_base(agg: bb.Aggregate) -> None:
    pairs = {(p.base.value, bb.point_label(p.base.point)): p for p in agg.pairs}
    p = pairs[("reads_per_s", "readers=4 updaters=2")]
    assert p.paired == bb.Stats(3, pytest.approx(3.0), pytest.approx(3.0), pytest.approx(3.0))
    assert p.of_medians == pytest.approx(2.55e6 / 0.85e6)
    u = pairs[("charges_per_s_per_thread", "namespaces=2 threads=2")]
    assert u.paired is not None
    assert (u.paired.min, u.paired.median, u.paired.max) == pytest.approx(
        (8.0 / 4.6, 7.8 / 4.4, 8.2 / 4.5))  # rep 1, rep 0, rep 2
    assert not any(p.base.benchmark == "migrate_latency" for p in agg.pairs)


def test_retention(agg: bb.Aggregate) -> None:
    got = {(r.variant, r.label): r for r in agg.retention}
    assert set(got) == {("base", "one thread per namespace"), ("series", "one thread per namespace"),
                        ("base", "threads = vCPUs = 4"), ("series", "threads = vCPUs = 4")}
    one_ns = got[("base", "one thread per namespace")]
    assert (dict(one_ns.low), dict(one_ns.high)) == ({"namespaces": 1, "threads": 1},
                                                     {"namespaces": 4, "threads": 4})
    assert one_ns.ratio == pytest.approx((5.0e6 / 4) / 4.0e6)
    assert got[("series", "one thread per namespace")].ratio == pytest.approx((14.8e6 / 4) / 4.1e6)
    full = got[("base", "threads = vCPUs = 4")]
    assert dict(full.low) == {"namespaces": 1, "threads": 4}
    assert full.ratio == pytest.approx((5.0e6 / 4) / (6.2e6 / 4))


def test_retention_uses_the_vcpus_the_guest_reported() -> None:
    metrics = [{"name": "bench_machine", "vcpus": 2}] + [
        {"name": "ucount_charge", "namespaces": ns, "threads": t, "rep": 0, "ns": 10**9,
         "charges": c} for ns, t, c in ((1, 2, 200), (8, 2, 100), (1, 4, 400), (8, 4, 100))]
    a = bb.aggregate({"series": metrics}, machine(vcpus=4))
    [r] = [r for r in a.retention if "vCPUs" in r.label]
    assert r.label == "threads = vCPUs = 2" and r.ratio == pytest.approx(0.5)
    assert "series: the guest reported 2 vCPUs, QEMU was given 4" in a.notes


def test_mode_ratios(agg: bb.Aggregate) -> None:
    got = {m.churn: m for m in agg.modes}
    assert [m.variant for m in agg.modes] == ["series", "series"]
    assert got[4].p99_global_over_dynmods == pytest.approx(3.4e6 / 0.9e6)
    assert got[4].forks_dynmods_over_global == pytest.approx(15000.0 / 10000.0)
    assert got[0].p99_global_over_dynmods == pytest.approx(410000 / 380000)


def test_unusable_lines_are_noted_not_fatal() -> None:
    metrics = [{"name": "rstat_read", "readers": 1, "updaters": 0, "rep": 0, "ns": 0, "reads": 5,
                "updates": 0},
               {"name": "rstat_read", "readers": 1, "updaters": 0, "rep": 0, "ns": 10**9,
                "reads": "many", "updates": 0},
               {"name": "ucount_charge", "threads": 1, "rep": 0, "ns": 10**9, "charges": 1},
               {"name": "rstat_read", "readers": 1, "updaters": 0, "rep": 1, "ns": 10**9,
                "reads": 7, "updates": 0},
               {"name": "rstat_read", "readers": 1, "updaters": 0, "rep": 1, "ns": 10**9,
                "reads": 9, "updates": 0},
               {"name": "something_else", "rep": 0}]
    a = bb.aggregate({"base": metrics}, machine(), only=("rstat", "ucount"))
    [s] = a.groups
    assert s.reps == {1: 7.0}
    assert a.notes == ["base: a rstat_read line without a positive ns: skipped",
                       "base: a rstat_read line without an integer reads: skipped",
                       "base: a ucount_charge line without a namespaces: skipped",
                       "base: rstat_read readers=1 updaters=0 rep 1 printed twice: kept the first",
                       "base: no ucount_charge metric lines"]


def test_a_rep_printed_twice_is_noted_once() -> None:
    line = {"name": "rstat_read", "readers": 2, "updaters": 1, "rep": 0, "ns": 10**9, "reads": 4,
            "updates": 6}
    a = bb.aggregate({"base": [line, dict(line, reads=8)]}, machine(), only=("rstat",))
    assert sorted((g.value, g.reps[0]) for g in a.groups) == [("reads_per_s", 4.0),
                                                              ("updates_per_s", 6.0)]
    assert a.notes == ["base: rstat_read readers=2 updaters=1 rep 0 printed twice: kept the first"]


def test_only_drops_the_other_benchmarks(agg: bb.Aggregate) -> None:
    metrics = {v: parse(v).metrics() for v in bb.VARIANTS}
    a = bb.aggregate(metrics, machine(), only=("migrate",), filters=FILTERS)
    assert {g.benchmark for g in a.groups} == {"migrate_latency"}
    assert a.notes == []  # the base boot is not expected to print migrate lines


# --- table, JSON, plots ----------------------------------------------------------------

def test_table(agg: bb.Aggregate) -> None:
    text = bb.format_table(agg)
    lines = text.splitlines()
    assert lines[:5] == [
        f"cgkunit bench: x86_64-bench, 3 reps of 1000 ms per point, seed {SEED}",
        "machine: AMD EPYC 7B13; 2 host cores; 4 vCPUs; accel tcg",
        "WARNING: vCPUs (4) exceed host cores (2): contention ratios are compressed",
        "base:   aaaaaaaaaaaa (11 patches, before 0012-x.patch)  [PASS]",
        "series: bbbbbbbbbbbb (14 patches)  [PASS]"]
    assert re.search(r"^  point +base +series +ratio series/base$", text, re.M)
    assert re.search(r"^  readers=4 updaters=2 +850k \[800k-900k\] +2\.55M \[2\.40M-2\.70M\] "
                     r"+3\.00x \[3\.00x-3\.00x\]$", text, re.M)
    assert re.search(r"^  one thread per namespace +namespaces=1 threads=1 -> namespaces=4 threads=4 "
                     r"+0\.31x +0\.90x +2\.89x$", text, re.M)
    assert re.search(r"^  mode=global churn=4 +150us +900us +3\.40ms \[3\.30ms-3\.60ms\] +6\.10ms "
                     r"+8\.20ms +10\.0k$", text, re.M)
    assert "  series: p99 global/dynmods: churn=0 1.08x, churn=4 3.78x; " \
           "forks/s dynmods/global: churn=0 1.02x, churn=4 1.50x" in lines
    blocks = text.split("\n== ")[1:]
    assert [b.split(":")[0] for b in blocks] == ["rstat", "ucount", "migrate"]
    assert all(len(b.splitlines()) <= rp.SCREEN for b in blocks)  # one screen per benchmark
    assert "note:" not in text


def test_table_without_oversubscription_and_with_a_missing_side() -> None:
    metrics = {"base": parse("base").metrics()}
    a = bb.aggregate(metrics, machine(host_cores=8, vcpus=8), statuses={"base": "fail"},
                     filters=FILTERS)
    text = bb.format_table(a)
    assert "WARNING" not in text
    assert text.splitlines()[2].endswith("before 0012-x.patch)  [FAIL]")
    assert re.search(r"^  readers=1 updaters=0 +1\.20M \[1\.19M-1\.21M\] +- +-$", text, re.M)
    assert "  no metric lines" in text.split("== migrate")[1]


@pytest.mark.parametrize("vcpus,cores,warn", [(4, 2, True), (4, 4, False), (16, 16, False),
                                               (4, 64, False)])
def test_oversubscription_warning(vcpus: int, cores: int, warn: bool) -> None:
    got = bb.oversubscription_warning(vcpus, cores)
    assert got == (f"vCPUs ({vcpus}) exceed host cores ({cores}): contention ratios are compressed"
                   if warn else None)


def test_json_shape(agg: bb.Aggregate, tmp_path: Path) -> None:
    data = json.loads(json.dumps(bb.to_json(agg)))
    assert set(data) == {"machine", "statuses", "benchmarks", "vcpus_reported", "records",
                         "ratios", "notes"}
    assert data["machine"]["accel"] == "tcg" and data["machine"]["host_cores"] == 2
    assert data["machine"]["warning"].startswith("vCPUs (4) exceed host cores (2)")
    assert bb.machine_from_json(data["machine"]) == agg.machine
    rec = next(r for r in data["records"] if r["benchmark"] == "ucount_charge"
               and r["variant"] == "base" and r["point"] == {"namespaces": 1, "threads": 1})
    assert rec == {"benchmark": "ucount_charge", "variant": "base",
                   "point": {"namespaces": 1, "threads": 1}, "value": "charges_per_s_per_thread",
                   "unit": "1/s", "rep_ids": [0, 1, 2], "reps": [4.0e6, 4.1e6, 3.9e6], "n": 3,
                   "min": 3.9e6, "median": 4.0e6, "max": 4.1e6}
    keys = {(r["benchmark"], r["variant"]) for r in data["records"]}
    assert keys == {("rstat_read", "base"), ("rstat_read", "series"), ("ucount_charge", "base"),
                    ("ucount_charge", "series"), ("migrate_latency", "series")}
    assert set(data["ratios"]) == {"series_over_base", "retention", "migrate_modes"}
    p = data["ratios"]["series_over_base"][0]
    assert set(p) == {"benchmark", "point", "value", "paired", "of_medians"}
    assert set(p["paired"]) == {"n", "min", "median", "max"}
    assert data["ratios"]["migrate_modes"][1] == {
        "variant": "series", "churn": 4, "p99_global_over_dynmods": pytest.approx(3.4 / 0.9),
        "forks_dynmods_over_global": pytest.approx(1.5)}


def test_plot_data(agg: bb.Aggregate) -> None:
    specs = bb.plots(agg)
    assert set(specs) == {"rstat.png", "ucount.png", "migrate.png"}
    assert specs["rstat.png"].curves["series, 2 updaters"] == [(1.0, pytest.approx(999999.0, rel=1e-6)),
                                                                (4.0, 2.55e6)]
    assert set(specs["ucount.png"].curves) == {"base, one thread per namespace", "base, 4 threads",
                                               "series, one thread per namespace", "series, 4 threads"}
    assert specs["ucount.png"].curves["base, one thread per namespace"] == [
        (1.0, 4.0e6), (2.0, 2.25e6), (4.0, 1.25e6)]
    m = specs["migrate.png"]
    assert m.logy and set(m.curves) == {"series, global", "series, dynmods"}
    assert m.curves["series, global"] == [(0.0, 410000.0), (4.0, 3.4e6)]
    empty = bb.aggregate({"base": []}, machine())
    assert bb.plots(empty) == {}


class FakeAxes:
    def __init__(self, calls: list[tuple[str, Any]]) -> None:
        self.calls = calls

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **kw: self.calls.append((name, a))


def test_write_plots_with_a_stand_in_matplotlib(agg: bb.Aggregate, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
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
    written = bb.write_plots(bb.plots(agg), tmp_path)
    assert [p.name for p in written] == ["rstat.png", "ucount.png", "migrate.png"]
    assert all(p.read_text() == "png" for p in written)
    assert ("use", ("Agg",)) in calls and ("set_yscale", ("log",)) in calls
    assert sum(name == "plot" for name, _ in calls) == 4 + 4 + 2


def test_write_plots_without_matplotlib(agg: bb.Aggregate, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import raises ImportError
    assert bb.write_plots(bb.plots(agg), tmp_path, system_python=tmp_path / "none") == []
    assert "matplotlib not installed: no plots" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_write_plots_with_the_real_matplotlib(agg: bb.Aggregate, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    written = bb.write_plots(bb.plots(agg), tmp_path)
    assert [p.name for p in written] == ["rstat.png", "ucount.png", "migrate.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)


def test_write_plots_with_the_system_python(agg: bb.Aggregate, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian's python3-matplotlib serves a driver run by another python3 (pyenv, venv)."""
    system = bb.SYSTEM_PYTHON
    if not system.is_file() or subprocess.run([str(system), "-c", "import matplotlib"],
                                              capture_output=True).returncode:
        pytest.skip(f"no matplotlib for {system}")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    written = bb.write_plots(bb.plots(agg), tmp_path)
    if Path(sys.executable).resolve() == system.resolve():
        assert written == []
    else:
        assert [p.name for p in written] == ["rstat.png", "ucount.png", "migrate.png"]
        assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)


@pytest.mark.parametrize("text,model", [
    ("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\n"
     "model name\t: AMD EPYC 7B13\n", "AMD EPYC 7B13"),
    ("processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nHardware\t: BCM2835\n", "BCM2835"),
    ("processor\t: 0\n", "unknown"),
    ("", "unknown"),
])
def test_cpu_model(text: str, model: str) -> None:
    assert bb.cpu_model(text) == model


# --- input -----------------------------------------------------------------------------------

def run_entry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ENTRY), *args], capture_output=True, text=True,
                          cwd="/", timeout=60)


@pytest.mark.parametrize("args,message", [
    (["--reps", "0"], "--reps must be in 1..50, got 0"),
    (["--reps", "51"], "--reps must be in 1..50, got 51"),
    (["--vcpus", "0"], "--vcpus must be in 1..64, got 0"),
    (["--vcpus", "65"], "--vcpus must be in 1..64, got 65"),
    (["--rounds", "0"], "--rounds must be in 1..10, got 0"),
    (["--rounds", "11"], "--rounds must be in 1..10, got 11"),
    (["--duration-ms", "99"], "--duration-ms must be in 100..60000, got 99"),
    (["--duration-ms", "60001"], "--duration-ms must be in 100..60000, got 60001"),
    (["--seed", "0"], f"--seed must be in 1..{2**64 - 1}, got 0"),
    (["--jobs", "0"], "argument --jobs: must be at least 1, got 0"),
    (["--only", "rstat,bogus"], "--only: unknown benchmark bogus (known: rstat,ucount,migrate)"),
    (["--only", ","], "--only: unknown benchmark ',' (known: rstat,ucount,migrate)"),
    (["--reps", "many"], "argument --reps: invalid int value: 'many'"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    proc = run_entry("--build-dir", str(tmp_path), "bench", *args)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"cgkunit: error: {message}"]
    assert proc.stdout == "" and not (tmp_path / "trees").exists()


def test_parse_only() -> None:
    assert bb.parse_only(None) == ("rstat", "ucount", "migrate")
    assert bb.parse_only(" migrate, rstat ") == ("rstat", "migrate")


def test_parse_bench_config() -> None:
    series = ["0001-a.patch", "0002-b.patch"]
    good = {"profile": "x86_64-bench", "base_before": "0002-b.patch", "filters": FILTERS, "comment": "c"}
    cfg = bb.parse_bench_config(good, series)
    assert cfg == bb.BenchConfig("x86_64-bench", "0002-b.patch", FILTERS, "c")
    with pytest.raises(DriverError) as exc:
        bb.parse_bench_config(dict(good, base_before="0012-gone.patch"), series)
    assert str(exc.value) == \
        "tools/kunit/bench.json: base_before 0012-gone.patch is not listed in kernel/series"
    for bad, needle in ((dict(good, filters={"base": "x"}), "filters.series must be a KUnit glob"),
                        (dict(good, filters={"base": "-x", "series": "y"}), "filters.base"),
                        (dict(good, profile=""), "profile must be a non-empty string"),
                        ([], "expected a JSON object")):
        with pytest.raises(DriverError, match=re.escape(needle)):
            bb.parse_bench_config(bad, series)


def test_the_repo_bench_json_and_profile() -> None:
    cfg, prof = bb.load_bench_config(REPO)  # base_before must name a patch of kernel/series
    assert cfg.filters == FILTERS
    assert prof.arch == "x86_64" and prof.qemu_smp is not None and prof.qemu_smp >= 4
    assert (prof.boot_timeout, prof.timeout) == (240, 3600)
    text = prof.fragment.read_text()
    for line in ("CONFIG_SMP=y", "CONFIG_CGROUP_KUNIT_BENCH=y", "CONFIG_MEMCG=y",
                 "# CONFIG_PROVE_LOCKING is not set", "# CONFIG_KCSAN is not set",
                 "# CONFIG_KASAN is not set"):
        assert line in text.splitlines()
    assert "DEBUG_KERNEL" not in text


@pytest.mark.parametrize("cores,smp", [(1, 4), (2, 4), (4, 4), (6, 6), (64, 64)])
def test_qemu_smp_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cores: int, smp: int) -> None:
    d = tmp_path / pf.PROFILES_DIR
    d.mkdir(parents=True)
    (d / "x86_64-b.config").write_text("#@ arch: x86_64\n#@ qemu_smp: host\n")
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert pf.load_profile(tmp_path, "x86_64-b").qemu_smp == smp
    assert pf.host_smp(cores) == smp
    cmd = run.exec_command(Path("/t"), pf.load_profile(tmp_path, "x86_64-b"), tmp_path,
                           Path("/b"), [], "")
    assert f"--qemu_args=-smp {smp}" in cmd


@pytest.mark.parametrize("value", ["hosts", "0", "-2", "4.5"])
def test_qemu_smp_bad(tmp_path: Path, value: str) -> None:
    d = tmp_path / pf.PROFILES_DIR
    d.mkdir(parents=True)
    (d / "x86_64-b.config").write_text(f"#@ arch: x86_64\n#@ qemu_smp: {value}\n")
    with pytest.raises(DriverError) as exc:
        pf.load_profile(tmp_path, "x86_64-b")
    assert str(exc.value).endswith(f":2: qemu_smp must be a positive integer or 'host', got '{value}'")


@pytest.mark.parametrize("only,base,series", [
    (("rstat", "ucount", "migrate"), "cgroup_bench.*", "cgroup_bench*"),
    (("migrate",), None, "cgroup_bench*.bench_migrate*"),
    (("rstat",), "cgroup_bench.bench_rstat*", "cgroup_bench*.bench_rstat*"),
    (("rstat", "ucount"), "cgroup_bench.bench_[ru]*", "cgroup_bench*.bench_[ru]*"),
    (("rstat", "migrate"), "cgroup_bench.bench_rstat*", "cgroup_bench*.bench_[mr]*"),
])
def test_variant_filter(only: tuple[str, ...], base: str | None, series: str) -> None:
    assert bb.variant_filter(FILTERS["base"], only) == base
    assert bb.variant_filter(FILTERS["series"], only) == series


def test_case_glob_falls_back_to_everything() -> None:
    assert bb.case_glob(["bench_ab*", "bench_ac*"]) == "bench_a[bc]*"
    assert bb.case_glob(["bench_a*", "bench_ab*"]) == "*"
    assert bb.case_glob(["bench_x", "bench_y"]) == "*"
    hand_made = "cgroup_bench.bench_rstat_read"  # a case glob of its own is kept
    assert bb.variant_filter(hand_made, ("rstat",)) == hand_made


def test_kernel_args() -> None:
    assert bb.kernel_args(7, 5, 1000) == ["cgroup_kunit.seed=7", "cgroup_kunit.bench_reps=5",
                                          "cgroup_kunit.duration_ms=1000"]


def test_variant_build_and_boot_dirs() -> None:
    p = pf.Profile(name="x86_64-bench", arch="x86_64", fragment=Path("/r/p.config"), qemu_smp=4)
    assert pf.out_dir(Path("/b"), p, "base") == Path("/b/out/x86_64-bench+base")
    assert pf.out_dir(Path("/b"), p) == Path("/b/out/x86_64-bench")
    out = Path("/b/out/x86_64-bench+series")
    assert run.kernel_image(Path("/b"), p, out) == out / "arch" / "x86" / "boot" / "bzImage"
    cmd = run.exec_command(Path("/t"), p, Path("/r"), Path("/b"), [], "cgroup_bench*", out)
    assert f"--build_dir={out}" in cmd


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


# --- the whole command, with a fake kunit.py ------------------------------------------------

FAKE_KUNIT = '''#!/usr/bin/env python3
import os, sys
args = sys.argv[1:]
if args[0] == "exec":
    out = next(a for a in args if a.startswith("--build_dir="))
    variant = out.rsplit("+", 1)[1]
    with open(os.path.join(os.environ["FAKE_DIR"], variant + ".args"), "w") as f:
        f.write("\\n".join(args))
    with open(os.path.join(os.environ["FAKE_DIR"], "bench_synthetic_" + variant + ".log")) as f:
        print(f.read(), end="")
'''
PROFILE = "#@ arch: x86_64\n#@ qemu_smp: host\n#@ timeout: 600\nCONFIG_CGROUP_KUNIT_BENCH=y\n"


@pytest.fixture
def bench_env(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:  # noqa: F811
    """A tiny kernel with a fake kunit.py, a repo with bench.json, built images, logs to replay."""
    write_files(env["kernel"], {"tools/testing/kunit/kunit.py": FAKE_KUNIT})
    git(env["kernel"], "commit", "-q", "-am", "fake kunit.py")
    write_files(env["repo"], {
        "tools/kunit/profiles/x86_64-b.config": PROFILE, ".kunitconfig": "CONFIG_KUNIT=y\n",
        "tools/kunit/bench.json": json.dumps({"profile": "x86_64-b", "base_before": env["p2"].name,
                                              "filters": FILTERS})})
    for v in bb.VARIANTS:
        write_files(env["build"], {f"out/x86_64-b+{v}/arch/x86/boot/bzImage": "kernel"})
    fake = env["tmp"] / "fake"
    fake.mkdir()
    for v in bb.VARIANTS:
        shutil.copy(DATA / f"bench_synthetic_{v}.log", fake)
    monkeypatch.setenv("FAKE_DIR", str(fake))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(pipeline, "choose_qemu", lambda prof, image, build: (None, "tcg"))
    env["fake"] = fake
    return env


def bench_run(env: dict[str, Path], **kw: Any) -> int:
    opts = bb.BenchOptions(**dict(dict(reps=3, seed=SEED, no_build=True,
                                       kernel_src=str(env["kernel"])), **kw))
    return bb.run_bench(env["repo"], env["build"], opts)


def test_bench_end_to_end(bench_env: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    env = bench_env
    assert bench_run(env) == 0
    out, err = capsys.readouterr()
    results = env["build"] / "results" / "bench"
    assert out.startswith("cgkunit bench: x86_64-b, 3 reps of 1000 ms per point, seed ")
    assert (results / "bench.txt").read_text() == out
    assert "WARNING: vCPUs (4) exceed host cores (2): contention ratios are compressed" in out
    assert "[cgkunit] WARNING: vCPUs (4) exceed host cores (2)" in err
    assert "[cgkunit] booting base (1/2): cgroup_bench.*" in err
    assert "[cgkunit] booting series (2/2): cgroup_bench*" in err
    data = json.loads((results / "bench.json").read_text())
    base_tree_path = env["build"] / "trees" / (next(
        p.name for p in (env["build"] / "trees").iterdir() if p.name.endswith("+base")))
    assert data["machine"]["base_commit"] == git(base_tree_path, "rev-parse", "HEAD^")
    assert data["machine"]["series_patches"] == 2 and data["machine"]["base_patches"] == 1
    assert data["machine"]["vcpus"] == 4 and data["machine"]["accel"] == "tcg"
    assert data["statuses"] == {"base": "pass", "series": "pass"}
    for v in bb.VARIANTS:
        args = (env["fake"] / f"{v}.args").read_text().splitlines()
        assert f"--build_dir={env['build'] / 'out' / f'x86_64-b+{v}'}" in args
        assert "--qemu_args=-smp 4" in args
        assert [a for a in args if a.startswith("--kernel_args=cgroup_kunit.")] == [
            f"--kernel_args=cgroup_kunit.seed={SEED}", "--kernel_args=cgroup_kunit.bench_reps=3",
            "--kernel_args=cgroup_kunit.duration_ms=1000"]
        assert args[-1] == FILTERS[v]
        summary = json.loads((env["build"] / "results" / f"x86_64-b+{v}" / "summary.json").read_text())
        assert summary["status"] == "pass"
    assert bench_run(env, report_only=True, no_build=False) == 0  # --report: same table, no boot
    again, _ = capsys.readouterr()
    assert again == out


def test_bench_rounds_alternate_boots_and_pool_reps(bench_env: dict[str, Path],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    env = bench_env
    assert bench_run(env, rounds=2) == 0
    out, err = capsys.readouterr()
    assert out.startswith("cgkunit bench: x86_64-b, 2 boots of each kernel, alternating, "
                          "x 3 reps of 1000 ms per point, seed ")
    assert [line for line in err.splitlines() if line.startswith("[cgkunit] booting ")] == [
            "[cgkunit] booting base (1/4): cgroup_bench.*",
            "[cgkunit] booting series (2/4): cgroup_bench*",
            "[cgkunit] booting base (3/4): cgroup_bench.*",
            "[cgkunit] booting series (4/4): cgroup_bench*"]
    for v in bb.VARIANTS:
        assert (env["build"] / "results" / f"x86_64-b+{v}-r2" / "summary.json").is_file()
    data = json.loads((env["build"] / "results" / "bench" / "bench.json").read_text())
    assert data["machine"]["rounds"] == 2
    reps = {tuple(r["rep_ids"]) for r in data["records"] if "rep_ids" in r}
    assert (0, 1, 2, 3, 4, 5) in reps
    assert bench_run(env, report_only=True, no_build=False) == 0  # --report reads both rounds
    again, _ = capsys.readouterr()
    assert again == out


def test_round_metrics_number_reps_by_round() -> None:
    one = types.SimpleNamespace(metrics=lambda: [{"name": "rstat_read", "rep": 0, "ns": 1},
                                                 {"name": "bench_machine", "vcpus": 4}],
                                status="pass")
    two = types.SimpleNamespace(metrics=lambda: [{"name": "rstat_read", "rep": 1, "ns": 2}],
                                status="fail")
    got = bb.round_metrics([one, two], reps=5)  # type: ignore[list-item]
    assert [m.get("rep") for m in got] == [0, None, 6]
    assert bb.worst_status([one, two]) == "fail"  # type: ignore[list-item]


def test_bench_only_migrate_boots_only_the_series(bench_env: dict[str, Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    env = bench_env
    assert bench_run(env, only=("migrate",)) == 0
    assert not (env["fake"] / "base.args").exists()
    assert (env["fake"] / "series.args").read_text().splitlines()[-1] == "cgroup_bench*.bench_migrate*"
    assert not any(p.name.endswith("+base") for p in (env["build"] / "trees").iterdir())
    out = capsys.readouterr().out
    assert "== migrate" in out and "== rstat" not in out


def test_a_failed_boot_prints_what_it_has_and_exits_1(bench_env: dict[str, Path],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    env = bench_env
    log = env["fake"] / "bench_synthetic_series.log"
    log.write_text(log.read_text().replace("        ok 4 4 readers, 2 updaters",
                                           "        not ok 4 4 readers, 2 updaters"))
    assert bench_run(env) == 1
    out = capsys.readouterr().out
    assert out.startswith("-- series boot:\ncgkunit: x86_64-b: FAIL")
    assert "series: " in out and "[FAIL]" in out and "== ucount" in out
    assert json.loads((env["build"] / "results" / "bench" / "bench.json").read_text())["statuses"] == \
        {"base": "pass", "series": "fail"}


def test_bench_report_without_logs(bench_env: dict[str, Path]) -> None:
    with pytest.raises(DriverError, match=r"no console log at .*x86_64-b\+base/console.log; "
                                          r"run make bench first"):
        bench_run(bench_env, report_only=True)


def test_bench_input_is_checked_before_the_tree(bench_env: dict[str, Path]) -> None:
    env = bench_env
    with pytest.raises(DriverError, match="--duration-ms must be in 100..60000, got 5"):
        bench_run(env, duration_ms=5)
    with pytest.raises(DriverError, match=r"^--reps 20 x --duration-ms 30000 is 600s for each point, "
                                          r"over the 600s limit of a x86_64-b boot$"):
        bench_run(env, reps=20, duration_ms=30000)
    (env["repo"] / "tools" / "kunit" / "bench.json").write_text(json.dumps(
        {"profile": "x86_64-b", "base_before": "0012-gone.patch", "filters": FILTERS}))
    with pytest.raises(DriverError, match="base_before 0012-gone.patch is not listed in kernel/series"):
        bench_run(env)
    assert not (env["build"] / "trees").exists()


def test_bench_without_built_kernels(bench_env: dict[str, Path]) -> None:
    shutil.rmtree(bench_env["build"] / "out" / "x86_64-b+base")
    with pytest.raises(DriverError, match=r"no kernel built for x86_64-b \(.*x86_64-b\+base/arch"):
        bench_run(bench_env)


# --- Makefile --------------------------------------------------------------------------------

def test_makefile_bench_target() -> None:
    text = (REPO / "Makefile").read_text()
    assert re.search(r"^bench: deps\n\t\$\(CGKUNIT\) bench --reps \$\(REPS\) "
                     r"--duration-ms \$\(DURATION_MS\) \\\n\t\t--rounds \$\(ROUNDS\) \$\(if \$\(VCPUS\),--vcpus \$\(VCPUS\)\) "
                     r"\$\(if \$\(ONLY\),--only \$\(ONLY\)\)$", text, re.M)
    assert re.search(r"^REPS \?= \d+$", text, re.M) and re.search(r"^DURATION_MS \?= \d+$", text, re.M)
    assert re.search(r"^ROUNDS \?= \d+$", text, re.M)
    assert re.search(r"^\.PHONY:.* bench\b", text, re.M)
    assert re.search(r'^\t@echo "make bench ', text, re.M)
    test_recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", text, re.M)
    assert test_recipe is not None and "bench" not in test_recipe.group(0)
    assert "python3-matplotlib" in deps.PACKAGES


# --- recorded from a real run (make bench, round 1 of 3, 2026-11-23) -------------------------

def test_real_bench_consoles_aggregate() -> None:
    reports = {v: rp.parse_console((DATA / f"bench_real_{v}.log").read_text(errors="replace"))
               for v in bb.VARIANTS}
    assert all(r.status == "pass" for r in reports.values())
    machine = bb.Machine(cpu_model="AMD EPYC", host_cores=2, vcpus=4, accel="tcg",
                         profile="x86_64-bench", reps=5, duration_ms=1000)
    agg = bb.aggregate({v: r.metrics() for v, r in reports.items()}, machine)
    points = {(g.benchmark, g.variant, g.value, tuple(g.point)) for g in agg.groups}
    # the rstat grid: readers 1, 2, 4 (and 0 with updaters), updaters 0, 1, 2
    assert ("rstat_read", "series", "reads_per_s", (("readers", 4), ("updaters", 2))) in points
    assert ("rstat_read", "base", "updates_per_s", (("readers", 0), ("updaters", 1))) in points
    assert ("ucount_charge", "base", "charges_per_s_per_thread",
            (("namespaces", 4), ("threads", 4))) in points
    # the migration benchmark runs in the series boot only, in both lock modes
    modes = {dict(p)["mode"] for b, v, _, p in points if b == "migrate_latency"}
    assert modes == {"global", "dynmods"}
    assert not any(b == "migrate_latency" and v == "base" for b, v, _, _ in points)
    assert all(len(g.reps) == 5 for g in agg.groups)
    assert agg.vcpus == {"base": 4, "series": 4}
    text = bb.format_table(agg)
    assert "ratio series/base" in text and "p99 global/dynmods: churn=0" in text
