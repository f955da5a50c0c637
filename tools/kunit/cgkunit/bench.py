"""Benchmarks: the base kernel against base + our series, side by side.

Pure steps (testable without a kernel): metric records -> samples -> series of
reps per point -> stats and ratios -> table / JSON / plot data. The I/O around
them (prepare, build, boot, write) is at the end of the module.
"""
from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
from dataclasses import dataclass, field, fields, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from . import pipeline, plot
from . import profile as profiles
from .common import DriverError, read_json, say, write_json
from .report import Report, exit_code, format_summary, raise_refused
from .run import build
from .tree import PreparedTree, ensure_base_worktree, kernel_commit, series_names

BENCH_FILE = Path("tools") / "kunit" / "bench.json"
VARIANTS = ("base", "series")
REPS = (1, 50)
VCPUS = (1, 64)
ROUNDS = (1, 10)
DURATION_MS = (100, 60000)
MAX_SEED = 2**64 - 1
MACHINE_RECORD = "bench_machine"
CPUINFO = Path("/proc/cpuinfo")
RESULTS = Path("results") / "bench"

Metric = Mapping[str, int | str]
Point = tuple[tuple[str, int | str], ...]


# --- what is measured ------------------------------------------------------------

class _Unusable(Exception):
    """A metric record lacks a field a value needs (the message says which)."""


def _int(m: Metric, key: str) -> int:
    value = m.get(key)
    if not isinstance(value, int):
        raise _Unusable(f"an integer {key}")
    return value


def _rate(m: Metric, key: str) -> float:
    """key per second of the record's ns."""
    ns = _int(m, "ns")
    if ns <= 0:
        raise _Unusable("a positive ns")
    return _int(m, key) * 1e9 / ns


def _rstat_values(m: Metric) -> dict[str, float]:
    out: dict[str, float] = {}
    if _int(m, "readers") > 0:
        out["reads_per_s"] = _rate(m, "reads")
    if _int(m, "updaters") > 0:
        out["updates_per_s"] = _rate(m, "updates")
    return out


def _ucount_values(m: Metric) -> dict[str, float]:
    threads = _int(m, "threads")
    if threads <= 0:
        raise _Unusable("a positive threads")
    return {"charges_per_s_per_thread": _rate(m, "charges") / threads}


LATENCIES = ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns")


def _migrate_values(m: Metric) -> dict[str, float]:
    out = {k: float(_int(m, k)) for k in LATENCIES}
    out["forks_per_s"] = _rate(m, "forks")
    return out


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: its --only name, metric record, KUnit suite and case glob."""
    key: str
    record: str
    suite: str
    case_glob: str
    point: tuple[str, ...]
    values: Callable[[Metric], dict[str, float]]
    compare: tuple[str, ...]
    title: str


BENCHMARKS = (
    Benchmark("rstat", "rstat_read", "cgroup_bench", "bench_rstat*", ("readers", "updaters"),
              _rstat_values, ("reads_per_s", "updates_per_s"),
              "cpu.stat readers against rstat updaters"),
    Benchmark("ucount", "ucount_charge", "cgroup_bench", "bench_ucount*",
              ("namespaces", "threads"), _ucount_values, ("charges_per_s_per_thread",),
              "ucount charges in sibling user namespaces"),
    Benchmark("migrate", "migrate_latency", "cgroup_bench_migrate", "bench_migrate*",
              ("mode", "churn"), _migrate_values, ("p99_ns", "forks_per_s"),
              "cgroup.procs migration latency under fork churn"),
)
BENCH_KEYS = tuple(b.key for b in BENCHMARKS)
BY_RECORD = {b.record: b for b in BENCHMARKS}


@dataclass(frozen=True)
class Value:
    """How a value is named and printed."""
    label: str
    unit: str

    def fmt(self, x: float) -> str:
        return fmt_ns(x) if self.unit == "ns" else fmt_rate(x)


VALUES = {
    "reads_per_s": Value("reads/s", "1/s"),
    "updates_per_s": Value("updates/s", "1/s"),
    "charges_per_s_per_thread": Value("charges/s per thread", "1/s"),
    "p50_ns": Value("p50", "ns"), "p90_ns": Value("p90", "ns"), "p99_ns": Value("p99", "ns"),
    "p999_ns": Value("p99.9", "ns"), "max_ns": Value("max", "ns"),
    "forks_per_s": Value("forks/s", "1/s"),
}


# --- input -------------------------------------------------------------------------

@dataclass(frozen=True)
class BenchConfig:
    """tools/kunit/bench.json."""
    profile: str
    base_before: str
    filters: dict[str, str]
    comment: str = ""


def parse_bench_config(data: Any, series: Sequence[str], where: str = str(BENCH_FILE)) -> BenchConfig:
    """Validate bench.json against the patch names of kernel/series."""
    if not isinstance(data, dict):
        raise DriverError(f"{where}: expected a JSON object")
    for key in ("profile", "base_before"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise DriverError(f"{where}: {key} must be a non-empty string")
    filters = data.get("filters")
    if not isinstance(filters, dict):
        raise DriverError(f"{where}: filters must be an object with base and series globs")
    for v in VARIANTS:
        glob = filters.get(v)
        if not isinstance(glob, str) or not glob or glob.startswith("-"):
            raise DriverError(f"{where}: filters.{v} must be a KUnit glob such as 'cgroup_bench*'")
    if data["base_before"] not in series:
        raise DriverError(f"{where}: base_before {data['base_before']} is not listed in kernel/series")
    return BenchConfig(profile=data["profile"], base_before=data["base_before"],
                       filters={v: filters[v] for v in VARIANTS},
                       comment=str(data.get("comment", "")))


def load_bench_config(repo: Path) -> tuple[BenchConfig, profiles.Profile]:
    """bench.json and its profile, validated (an x86_64 profile is needed for vCPUs)."""
    path = repo / BENCH_FILE
    try:
        data = json.loads(path.read_text())
    except OSError:
        raise DriverError(f"{path} is missing") from None
    except ValueError as e:
        raise DriverError(f"{path}: not valid JSON: {e}") from None
    cfg = parse_bench_config(data, series_names(repo), str(BENCH_FILE))
    prof = profiles.load_profile(repo, cfg.profile)
    if prof.arch != "x86_64" or not prof.qemu_smp:
        raise DriverError(f"{BENCH_FILE}: profile {prof.name} must be x86_64 with qemu_smp")
    return cfg, prof


@dataclass(frozen=True)
class BenchOptions:
    """What one `bench` asks for."""
    reps: int = 5
    duration_ms: int = 1000
    only: tuple[str, ...] = BENCH_KEYS
    seed: int | None = None
    no_build: bool = False
    jobs: int | None = None
    report_only: bool = False
    echo: bool = False
    kernel_src: str | None = None
    kernel_ref: str = "HEAD"
    vcpus: int | None = None
    rounds: int = 1


def parse_only(text: str | None) -> tuple[str, ...]:
    """--only rstat,ucount,migrate -> benchmark keys in their canonical order."""
    if text is None:
        return BENCH_KEYS
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCH_KEYS]
    if unknown or not names:
        raise DriverError(f"--only: unknown benchmark {', '.join(unknown) or repr(text)} "
                          f"(known: {','.join(BENCH_KEYS)})")
    return tuple(k for k in BENCH_KEYS if k in names)


def validate_options(opts: BenchOptions) -> None:
    """Ranges of the numeric options; DriverError naming the first bad one."""
    checks = (("--reps", opts.reps, REPS), ("--duration-ms", opts.duration_ms, DURATION_MS),
              ("--seed", opts.seed, (1, MAX_SEED)), ("--vcpus", opts.vcpus, VCPUS),
              ("--rounds", opts.rounds, ROUNDS))
    for name, value, (low, high) in checks:
        if value is not None and not low <= value <= high:
            raise DriverError(f"{name} must be in {low}..{high}, got {value}")
    if opts.jobs is not None and opts.jobs < 1:
        raise DriverError(f"--jobs must be at least 1, got {opts.jobs}")


def case_glob(globs: Sequence[str]) -> str:
    """One KUnit case glob matching each of globs ('x_a*', 'x_b*' -> 'x_[ab]*'), else '*'."""
    if len(globs) == 1:
        return globs[0]
    stems = [g.rstrip("*") for g in globs]
    prefix = os.path.commonprefix(stems)
    heads = [s[len(prefix):len(prefix) + 1] for s in stems]
    if all(heads) and len(set(heads)) == len(heads) and all(g.endswith("*") for g in globs):
        return f"{prefix}[{''.join(sorted(heads))}]*"
    return "*"


def runs_in(bench: Benchmark, glob: str) -> bool:
    """True when a boot with this KUnit filter runs the benchmark's suite."""
    return fnmatchcase(bench.suite, glob.partition(".")[0])


def variant_filter(glob: str, only: Sequence[str]) -> str | None:
    """The KUnit filter of one boot for the chosen benchmarks; None when it runs none of them."""
    if set(only) == set(BENCH_KEYS):
        return glob
    suite_glob, _, cases = glob.partition(".")
    chosen = [b for b in BENCHMARKS if b.key in only and runs_in(b, glob)]
    if not chosen:
        return None
    if cases not in ("", "*"):
        return glob
    return f"{suite_glob}.{case_glob([b.case_glob for b in chosen])}"


def kernel_args(seed: int, reps: int, duration_ms: int) -> list[str]:
    """Module parameters of a bench boot (the same for both variants)."""
    return [f"cgroup_kunit.seed={seed}", f"cgroup_kunit.bench_reps={reps}",
            f"cgroup_kunit.duration_ms={duration_ms}"]


# --- machine -------------------------------------------------------------------------

def cpu_model(cpuinfo: str) -> str:
    """The CPU model named in /proc/cpuinfo text (x86 'model name', else other arches' keys)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and value.strip():
            fields.setdefault(key.strip().lower(), value.strip())
    for key in ("model name", "hardware", "cpu model", "processor", "cpu"):
        if key in fields and not fields[key].isdigit():
            return fields[key]
    return "unknown"


def oversubscription_warning(vcpus: int, cores: int) -> str | None:
    """The warning printed when the guest has more vCPUs than the host has cores."""
    if vcpus > cores:
        return f"vCPUs ({vcpus}) exceed host cores ({cores}): contention ratios are compressed"
    return None


@dataclass
class Machine:
    """Where and how the benchmark ran: stated beside every ratio."""
    cpu_model: str
    host_cores: int
    vcpus: int
    accel: str
    profile: str = ""
    reps: int = 0
    rounds: int = 1
    duration_ms: int = 0
    seed: int = 0
    base_before: str = ""
    base_commit: str = ""
    series_commit: str = ""
    base_patches: int = 0
    series_patches: int = 0

    @property
    def warning(self) -> str | None:
        return oversubscription_warning(self.vcpus, self.host_cores)

    def to_json(self) -> dict[str, Any]:
        return {**vars(self), "warning": self.warning}


def machine_from_json(data: Any) -> Machine | None:
    """A Machine saved by an earlier run (machine.json), or None."""
    if not isinstance(data, dict):
        return None
    names = {f.name for f in fields(Machine)}
    try:
        return Machine(**{k: v for k, v in data.items() if k in names})
    except TypeError:
        return None


# --- aggregation -------------------------------------------------------------------------

@dataclass
class Sample:
    """One rep of one point of one benchmark in one variant."""
    benchmark: str
    variant: str
    point: Point
    rep: int
    values: dict[str, float]


def samples(metrics: Sequence[Metric], variant: str, only: Sequence[str] = BENCH_KEYS,
            notes: list[str] | None = None) -> list[Sample]:
    """The usable samples of a variant's metric records (unusable lines noted, not fatal)."""
    out: list[Sample] = []
    for m in metrics:
        bench = BY_RECORD.get(str(m.get("name")))
        if bench is None or bench.key not in only:
            continue
        try:
            point = tuple((f, _point_value(m, f)) for f in bench.point)
            out.append(Sample(bench.record, variant, point, _int(m, "rep"), bench.values(m)))
        except _Unusable as e:
            if notes is not None:
                notes.append(f"{variant}: a {bench.record} line without {e}: skipped")
    return out


def _point_value(m: Metric, key: str) -> int | str:
    if key not in m:
        raise _Unusable(f"a {key}")
    return m[key]


def vcpus_reported(metrics: Sequence[Metric]) -> int | None:
    """vCPUs the guest reported in its bench_machine record."""
    for m in metrics:
        if m.get("name") == MACHINE_RECORD and isinstance(m.get("vcpus"), int):
            return int(m["vcpus"])
    return None


@dataclass(frozen=True)
class Stats:
    """min / median / max over reps (median of an even count: mean of the middle two)."""
    n: int
    min: float
    median: float
    max: float

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "min": self.min, "median": self.median, "max": self.max}


def stats_of(values: Sequence[float]) -> Stats | None:
    """Stats of values, None when there are none."""
    if not values:
        return None
    return Stats(len(values), min(values), statistics.median(values), max(values))


@dataclass
class Series:
    """The reps of one value at one point of one benchmark in one variant."""
    benchmark: str
    variant: str
    point: Point
    value: str
    reps: dict[int, float] = field(default_factory=dict)

    @property
    def stats(self) -> Stats:
        s = stats_of([self.reps[r] for r in sorted(self.reps)])
        assert s is not None
        return s

    def to_json(self) -> dict[str, Any]:
        ordered = sorted(self.reps)
        return {"benchmark": self.benchmark, "variant": self.variant, "point": dict(self.point),
                "value": self.value, "unit": VALUES[self.value].unit, "rep_ids": ordered,
                "reps": [self.reps[r] for r in ordered], **self.stats.to_json()}


def group(all_samples: Sequence[Sample], notes: list[str] | None = None) -> list[Series]:
    """Samples -> one Series per (benchmark, variant, point, value), in console order."""
    out: dict[tuple[str, str, Point, str], Series] = {}
    seen: set[tuple[str, str, Point, int]] = set()
    for s in all_samples:
        if (s.benchmark, s.variant, s.point, s.rep) in seen:
            if notes is not None:
                notes.append(f"{s.variant}: {s.benchmark} {point_label(s.point)} rep {s.rep} "
                              f"printed twice: kept the first")
            continue
        seen.add((s.benchmark, s.variant, s.point, s.rep))
        for value, x in s.values.items():
            key = (s.benchmark, s.variant, s.point, value)
            out.setdefault(key, Series(*key)).reps[s.rep] = x
    return list(out.values())


def point_label(point: Point) -> str:
    return " ".join(f"{k}={v}" for k, v in point)


def find(groups: Sequence[Series], benchmark: str, variant: str, value: str,
         where: Callable[[dict[str, int | str]], bool] = lambda p: True) -> list[Series]:
    """The series of one benchmark, variant and value whose point satisfies where."""
    return [g for g in groups if (g.benchmark, g.variant, g.value) == (benchmark, variant, value)
            and where(dict(g.point))]


def ratio(a: float, b: float) -> float | None:
    return a / b if b else None


@dataclass
class PairRatio:
    """series / base at one point: paired by rep index, and of the medians."""
    base: Series
    series: Series
    paired: Stats | None
    of_medians: float | None

    def to_json(self) -> dict[str, Any]:
        return {"benchmark": self.base.benchmark, "point": dict(self.base.point),
                "value": self.base.value,
                "paired": self.paired.to_json() if self.paired else None,
                "of_medians": self.of_medians}


def pair(base: Series, series: Series) -> PairRatio:
    """Ratio of rep i of series over rep i of base for the reps both have."""
    both = sorted(set(base.reps) & set(series.reps))
    per_rep = [r for r in (ratio(series.reps[i], base.reps[i]) for i in both) if r is not None]
    return PairRatio(base, series, stats_of(per_rep), ratio(series.stats.median, base.stats.median))


def pair_ratios(groups: Sequence[Series]) -> list[PairRatio]:
    """Every point measured in both variants."""
    bases = {(g.benchmark, g.point, g.value): g for g in groups if g.variant == "base"}
    return [pair(bases[(g.benchmark, g.point, g.value)], g) for g in groups
            if g.variant == "series" and (g.benchmark, g.point, g.value) in bases]


@dataclass
class Retention:
    """Per-thread ucount charges/s kept when going from 1 namespace to the most."""
    variant: str
    label: str
    low: Point
    high: Point
    ratio: float | None

    def to_json(self) -> dict[str, Any]:
        return {"variant": self.variant, "series": self.label, "from": dict(self.low),
                "to": dict(self.high), "retention": self.ratio}


PER_THREAD = "charges_per_s_per_thread"


def _retention(groups: Sequence[Series], variant: str, label: str,
               where: Callable[[dict[str, int | str]], bool]) -> Retention | None:
    found = [g for g in find(groups, "ucount_charge", variant, PER_THREAD, where)
             if isinstance(dict(g.point)["namespaces"], int)]
    low = [g for g in found if dict(g.point)["namespaces"] == 1]
    if not low or len(found) < 2:
        return None
    high = max(found, key=lambda g: int(dict(g.point)["namespaces"]))
    if high is low[0]:
        return None
    return Retention(variant, label, low[0].point, high.point,
                     ratio(high.stats.median, low[0].stats.median))


def retention(groups: Sequence[Series], vcpus: Mapping[str, int]) -> list[Retention]:
    """Per variant: one thread per namespace, and threads = vCPUs."""
    out: list[Retention] = []
    for variant in VARIANTS:
        one = _retention(groups, variant, "one thread per namespace",
                         lambda p: p["threads"] == p["namespaces"])
        n = vcpus.get(variant)
        full = _retention(groups, variant, f"threads = vCPUs = {n}",
                          lambda p: p["threads"] == n) if n else None
        out += [r for r in (one, full) if r is not None]
    return out


@dataclass
class ModeRatio:
    """Global attach lock against per-threadgroup (favordynmods) at one churn."""
    variant: str
    churn: int | str
    p99_global_over_dynmods: float | None
    forks_dynmods_over_global: float | None

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


def median_at(groups: Sequence[Series], benchmark: str, variant: str, value: str,
              point: Point) -> float | None:
    """The median over reps at one point, None when it was not measured."""
    found = find(groups, benchmark, variant, value, lambda p: tuple(p.items()) == point)
    return found[0].stats.median if found else None


def _maybe_ratio(a: float | None, b: float | None) -> float | None:
    return ratio(a, b) if a is not None and b is not None else None


def mode_ratios(groups: Sequence[Series]) -> list[ModeRatio]:
    """Per variant and churn, from the medians over reps."""
    out: list[ModeRatio] = []
    for variant in VARIANTS:
        for g in find(groups, "migrate_latency", variant, "p99_ns", lambda p: p["mode"] == "global"):
            churn = dict(g.point)["churn"]
            med = {(value, mode): median_at(groups, "migrate_latency", variant, value,
                                            (("mode", mode), ("churn", churn)))
                   for value in ("p99_ns", "forks_per_s") for mode in ("global", "dynmods")}
            if med[("p99_ns", "dynmods")] is None and med[("forks_per_s", "dynmods")] is None:
                continue
            out.append(ModeRatio(variant, churn,
                                 _maybe_ratio(med[("p99_ns", "global")], med[("p99_ns", "dynmods")]),
                                 _maybe_ratio(med[("forks_per_s", "dynmods")],
                                              med[("forks_per_s", "global")])))
    return out


@dataclass
class Aggregate:
    """Everything the table, the JSON and the plots show."""
    machine: Machine
    only: tuple[str, ...]
    groups: list[Series]
    pairs: list[PairRatio]
    retention: list[Retention]
    modes: list[ModeRatio]
    vcpus: dict[str, int]
    statuses: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def aggregate(metrics: Mapping[str, Sequence[Metric]], machine: Machine,
              only: Sequence[str] = BENCH_KEYS, statuses: Mapping[str, str] | None = None,
              filters: Mapping[str, str] | None = None) -> Aggregate:
    """Per-variant metric records -> stats, series/base ratios, retention, mode ratios.

    filters (variant -> KUnit glob) say which boot should have printed what.
    """
    notes: list[str] = []
    all_samples = [s for v in VARIANTS for s in samples(metrics.get(v, []), v, only, notes)]
    groups = group(all_samples, notes)
    vcpus = {v: vcpus_reported(metrics[v]) or machine.vcpus for v in VARIANTS if v in metrics}
    for v, n in vcpus.items():
        if n != machine.vcpus:
            notes.append(f"{v}: the guest reported {n} vCPUs, QEMU was given {machine.vcpus}")
    for bench in BENCHMARKS:
        for v in metrics:
            expected = bench.key in only and runs_in(bench, (filters or {}).get(v, "*"))
            if expected and not any(g.benchmark == bench.record and g.variant == v for g in groups):
                notes.append(f"{v}: no {bench.record} metric lines")
    return Aggregate(machine=machine, only=tuple(only), groups=groups, pairs=pair_ratios(groups),
                     retention=retention(groups, vcpus), modes=mode_ratios(groups), vcpus=vcpus,
                     statuses=dict(statuses or {}), notes=notes)


# --- text -------------------------------------------------------------------------------

def _scaled(x: float, steps: Sequence[tuple[float, str]]) -> str:
    """x to 3 significant digits in the largest unit it reaches (the last one at least)."""
    x = float(f"{x:.3g}")
    div, unit = next(((d, u) for d, u in steps if abs(x) >= d), steps[-1])
    v = x / div
    digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
    return f"{v:.{digits}f}{unit}"


def fmt_rate(x: float) -> str:
    """A rate with k/M/G: 1.23M."""
    return _scaled(x, ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")))


def fmt_ns(x: float) -> str:
    """A duration in ns as ns/us/ms/s: 12.3us."""
    return _scaled(x, ((1e9, "s"), (1e6, "ms"), (1e3, "us"), (1.0, "ns")))


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def fmt_stats(s: Stats | None, f: Callable[[float], str]) -> str:
    """'median [min-max]'."""
    if s is None:
        return "-"
    return f"{f(s.median)} [{f(s.min)}-{f(s.max)}]"


def columns(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Rows aligned in left-justified columns."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths))).rstrip() for r in rows]


def machine_lines(m: Machine, statuses: Mapping[str, str]) -> list[str]:
    """The header: machine, accel, vCPUs, warning, commits."""
    def status(v: str) -> str:
        return f"  [{statuses[v].upper()}]" if v in statuses else ""
    per_boot = f"{m.reps} reps of {m.duration_ms} ms per point"
    boots = f"{m.rounds} boots of each kernel, alternating, x {per_boot}" if m.rounds > 1 else per_boot
    lines = [f"cgkunit bench: {m.profile}, {boots}, seed {m.seed}",
             f"machine: {m.cpu_model}; {m.host_cores} host cores; {m.vcpus} vCPUs; accel {m.accel}"]
    if m.warning:
        lines.append(f"WARNING: {m.warning}")
    lines.append(f"base:   {m.base_commit[:12] or '?'} ({m.base_patches} patches, before "
                 f"{m.base_before}){status('base')}")
    lines.append(f"series: {m.series_commit[:12] or '?'} ({m.series_patches} patches){status('series')}")
    return lines


def compare_lines(agg: Aggregate, bench: Benchmark, value: str) -> list[str]:
    """base / series / ratio columns for one value of one benchmark."""
    v = VALUES[value]
    pairs = {p.base.point: p for p in agg.pairs
             if (p.base.benchmark, p.base.value) == (bench.record, value)}
    points: list[Point] = []
    sides: dict[tuple[str, Point], Series] = {}
    for g in agg.groups:
        if (g.benchmark, g.value) == (bench.record, value):
            sides[(g.variant, g.point)] = g
            if g.point not in points:
                points.append(g.point)
    if not points:
        return []
    rows = [["point", "base", "series", "ratio series/base"]]
    for pt in points:
        b, s, p = sides.get(("base", pt)), sides.get(("series", pt)), pairs.get(pt)
        rows.append([point_label(pt), fmt_stats(b.stats if b else None, v.fmt),
                     fmt_stats(s.stats if s else None, v.fmt),
                     fmt_stats(p.paired if p else None, fmt_ratio)])
    return [f"{bench.record}: {v.label}  (median [min-max] over reps; ratio paired by rep)",
            *columns(rows)]


def retention_lines(agg: Aggregate) -> list[str]:
    if not agg.retention:
        return []
    rows: dict[str, dict[str, Retention]] = {}
    for r in agg.retention:
        rows.setdefault(r.label, {})[r.variant] = r
    out = ["ucount_charge: retention = per-thread charges/s at the most namespaces / at namespaces=1"]
    table = [["series", "points", "base", "series", "series/base"]]
    for label, by in rows.items():
        any_r = next(iter(by.values()))
        b, s = by.get("base"), by.get("series")
        both = ratio(s.ratio, b.ratio) if b and s and s.ratio is not None and b.ratio else None
        table.append([label, f"{point_label(any_r.low)} -> {point_label(any_r.high)}",
                      fmt_ratio(b.ratio) if b else "-", fmt_ratio(s.ratio) if s else "-",
                      fmt_ratio(both)])
    return out + columns(table)


def migrate_lines(agg: Aggregate) -> list[str]:
    """Latency percentiles per variant and point, then the mode ratios."""
    out: list[str] = []
    for variant in VARIANTS:
        p99 = find(agg.groups, "migrate_latency", variant, "p99_ns")
        if not p99:
            continue
        rows = [["point", "p50", "p90", "p99 [min-max]", "p99.9", "max", "forks/s"]]
        for g in p99:
            med = {value: median_at(agg.groups, "migrate_latency", variant, value, g.point)
                   for value in ("p50_ns", "p90_ns", "p999_ns", "max_ns", "forks_per_s")}
            cells = {k: "-" if x is None else VALUES[k].fmt(x) for k, x in med.items()}
            rows.append([point_label(g.point), cells["p50_ns"], cells["p90_ns"],
                         fmt_stats(g.stats, fmt_ns), cells["p999_ns"], cells["max_ns"],
                         cells["forks_per_s"]])
        out += [f"migrate_latency ({variant}): one migration (median over reps)", *columns(rows)]
    for variant in VARIANTS:
        modes = [m for m in agg.modes if m.variant == variant]
        if modes:
            p99 = ", ".join(f"churn={m.churn} {fmt_ratio(m.p99_global_over_dynmods)}" for m in modes)
            forks = ", ".join(f"churn={m.churn} {fmt_ratio(m.forks_dynmods_over_global)}"
                              for m in modes)
            out.append(f"  {variant}: p99 global/dynmods: {p99}; forks/s dynmods/global: {forks}")
    return out


def format_table(agg: Aggregate) -> str:
    """The whole text report: header, then one block (one screen) per benchmark."""
    out = machine_lines(agg.machine, agg.statuses)
    for bench in BENCHMARKS:
        if bench.key not in agg.only:
            continue
        block: list[str] = []
        both = {g.variant for g in agg.groups if g.benchmark == bench.record} == set(VARIANTS)
        if both or bench.record != "migrate_latency":  # migrate: usually the series boot only
            for value in bench.compare:
                block += compare_lines(agg, bench, value)
        if bench.record == "ucount_charge":
            block += retention_lines(agg)
        if bench.record == "migrate_latency":
            block += migrate_lines(agg)
        out += ["", f"== {bench.key}: {bench.title}"] + (block or ["  no metric lines"])
    if agg.notes:
        out += [""] + [f"note: {n}" for n in agg.notes]
    return "\n".join(out) + "\n"


def to_json(agg: Aggregate) -> dict[str, Any]:
    """bench.json: a machine record, one record per point, variant and value, the ratios."""
    return {"machine": agg.machine.to_json(), "statuses": agg.statuses, "benchmarks": list(agg.only),
            "vcpus_reported": agg.vcpus, "records": [g.to_json() for g in agg.groups],
            "ratios": {"series_over_base": [p.to_json() for p in agg.pairs],
                       "retention": [r.to_json() for r in agg.retention],
                       "migrate_modes": [m.to_json() for m in agg.modes]},
            "notes": agg.notes}


# --- plots ----------------------------------------------------------------------------

Curve = list[tuple[float, float]]


@dataclass
class Plot:
    """One PNG: curves of medians against a numeric point field."""
    title: str
    xlabel: str
    ylabel: str
    curves: dict[str, Curve]
    logy: bool = False


def curve(groups: Sequence[Series], benchmark: str, variant: str, value: str, x: str,
          where: Callable[[dict[str, int | str]], bool] = lambda p: True) -> Curve:
    """(x, median) points sorted by x."""
    pts = [(float(dict(g.point)[x]), g.stats.median)
           for g in find(groups, benchmark, variant, value, where)
           if isinstance(dict(g.point)[x], int)]
    return sorted(pts)


def _values_of(groups: Sequence[Series], benchmark: str, key: str) -> list[int | str]:
    seen: list[int | str] = []
    for g in groups:
        v = dict(g.point)[key] if g.benchmark == benchmark else None
        if v is not None and v not in seen:
            seen.append(v)
    return seen


def plots(agg: Aggregate) -> dict[str, Plot]:
    """rstat.png, ucount.png, migrate.png (those with data)."""
    g, m = agg.groups, agg.machine
    where = f"{m.vcpus} vCPUs, {m.accel}, {m.host_cores} host cores"
    out: dict[str, Plot] = {}
    rstat = {f"{v}, {u} updaters": curve(g, "rstat_read", v, "reads_per_s", "readers",
                                         lambda p, u=u: p["updaters"] == u)
             for v in VARIANTS for u in _values_of(g, "rstat_read", "updaters")}
    out["rstat.png"] = Plot(f"rstat: cpu.stat reads/s ({where})", "readers", "reads/s", rstat)
    ucount: dict[str, Curve] = {}
    for v in VARIANTS:
        ucount[f"{v}, one thread per namespace"] = curve(
            g, "ucount_charge", v, PER_THREAD, "namespaces", lambda p: p["threads"] == p["namespaces"])
        n = agg.vcpus.get(v)
        if n:
            ucount[f"{v}, {n} threads"] = curve(g, "ucount_charge", v, PER_THREAD, "namespaces",
                                                lambda p, n=n: p["threads"] == n)
    out["ucount.png"] = Plot(f"ucount: charges/s per thread ({where})", "namespaces",
                             "charges/s per thread", ucount)
    migrate = {f"{v}, {mode}": curve(g, "migrate_latency", v, "p99_ns", "churn",
                                     lambda p, mode=mode: p["mode"] == mode)
               for v in VARIANTS for mode in _values_of(g, "migrate_latency", "mode")}
    out["migrate.png"] = Plot(f"migration p99 latency ({where})", "churn", "p99 latency (ns)",
                              migrate, logy=True)
    for name, plot in list(out.items()):
        plot.curves = {k: c for k, c in plot.curves.items() if c}
        if not plot.curves:
            del out[name]
    return out


SYSTEM_PYTHON = Path("/usr/bin/python3")


def plot_specs(specs: Mapping[str, Plot]) -> dict[str, dict[str, Any]]:
    """The plots as plot.py reads them."""
    return {name: {"title": p.title, "xlabel": p.xlabel, "ylabel": p.ylabel, "logy": p.logy,
                   "curves": {label: [list(xy) for xy in pts] for label, pts in p.curves.items()}}
            for name, p in specs.items()}


def write_plots(specs: Mapping[str, Plot], dest: Path,
                system_python: Path = SYSTEM_PYTHON) -> list[Path]:
    """Draw the plots with matplotlib, here or with the system's python3 (python3-matplotlib
    from Debian is installed for that one); the files written, none without matplotlib."""
    data = plot_specs(specs)
    if plot.have_matplotlib():
        return plot.draw(data, dest)
    script = Path(plot.__file__).resolve()
    if system_python.is_file() and Path(sys.executable).resolve() != system_python.resolve():
        try:
            proc = subprocess.run([str(system_python), str(script), str(dest)], input=json.dumps(data),
                                  capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as e:
            say(f"plotting with {system_python} failed ({e}): no plots")
            return []
        if proc.returncode == 0:
            return [Path(line) for line in proc.stdout.splitlines() if line.strip()]
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        say(f"{system_python} could not draw the plots ({last}): no plots")
        return []
    say("matplotlib not installed: no plots")
    return []


# --- I/O --------------------------------------------------------------------------------

def host_cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """This host's CPU model ("unknown" when /proc/cpuinfo cannot be read)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        text = ""
    return cpu_model(text)


def host_machine(vcpus: int, accel: str, cpuinfo: Path = CPUINFO, **context: Any) -> Machine:
    """This host's CPU model and cores, with the run's context (Machine fields)."""
    return Machine(cpu_model=host_cpu_model(cpuinfo), host_cores=os.cpu_count() or 1, vcpus=vcpus,
                   accel=accel, **context)


def wanted_variants(cfg: BenchConfig, only: Sequence[str]) -> dict[str, str]:
    """variant -> KUnit filter, for the variants that run a chosen benchmark (at least one)."""
    filters = {v: variant_filter(cfg.filters[v], only) for v in VARIANTS}
    wanted = {v: f for v, f in filters.items() if f is not None}
    if not wanted:
        raise DriverError(f"no boot runs {','.join(only)} with the filters of {BENCH_FILE}")
    return wanted


def round_metrics(reports: Sequence[Report], reps: int) -> list[Metric]:
    """The metric records of a variant's boots, round r's reps numbered from r * reps."""
    out: list[Metric] = []
    for r, report in enumerate(reports):
        for m in report.metrics():
            rep_id = m.get("rep")
            out.append({**m, "rep": rep_id + r * reps} if isinstance(rep_id, int) else m)
    return out


def worst_status(reports: Sequence[Report]) -> str:
    """The status of the boot with the highest exit code."""
    return max(reports, key=lambda r: exit_code(r.status)).status


def finish(build_root: Path, reports: Mapping[str, Sequence[Report]], machine: Machine,
           only: Sequence[str], filters: Mapping[str, str], reps: int) -> int:
    """Aggregate, print the table, write bench.json/.txt and the plots; the exit status."""
    for variant, boots in reports.items():
        for r, report in enumerate(boots):
            if report.status != "pass" or report.bad_parameters:
                print(f"-- {variant} boot" + (f" (round {r + 1})" if len(boots) > 1 else "") + ":")
                print(format_summary(report), end="")
    agg = aggregate({v: round_metrics(b, reps) for v, b in reports.items()}, machine, only,
                    {v: worst_status(b) for v, b in reports.items()}, filters)
    text = format_table(agg)
    print(text, end="", flush=True)
    dest = build_root / RESULTS
    dest.mkdir(parents=True, exist_ok=True)
    write_json(dest / "bench.json", to_json(agg))
    (dest / "bench.txt").write_text(text)
    pngs = write_plots(plots(agg), dest)
    say(f"results: {dest / 'bench.json'}, {dest / 'bench.txt'}"
        + "".join(f", {p.name}" for p in pngs))
    every = [r for boots in reports.values() for r in boots]
    raise_refused(every, "bench kernel args (--seed, --reps, --duration-ms)")
    return max(exit_code(r.status) for r in every)


def round_dir(build_root: Path, prof: profiles.Profile, variant: str, r: int) -> Path:
    """Results of a variant's boot in round r (0: the variant's own directory)."""
    return profiles.results_dir(build_root, prof.name, variant if r == 0 else f"{variant}-r{r + 1}")


def report_bench(repo: Path, build_root: Path, cfg: BenchConfig, prof: profiles.Profile,
                 only: Sequence[str]) -> int:
    """--report: aggregate the console logs of the last run again (no build, no boot)."""
    filters = wanted_variants(cfg, only)
    saved = read_json(build_root / RESULTS / "machine.json")
    machine = machine_from_json(saved) or \
        host_machine(prof.qemu_smp or 1, "unknown", profile=prof.name, base_before=cfg.base_before)
    rounds = saved.get("rounds", 1) if isinstance(saved, dict) else 1
    reps = saved.get("reps", 0) if isinstance(saved, dict) else 0
    rounds = rounds if isinstance(rounds, int) and rounds > 0 else 1
    reps = reps if isinstance(reps, int) and reps > 0 else 1
    reports = {v: [pipeline.rereport(repo, build_root, prof.name, round_dir(build_root, prof, v, r),
                                     hint="run make bench first")
                   for r in range(rounds)]
               for v in filters}
    return finish(build_root, reports, machine, only, filters, reps)


def run_bench(repo: Path, build_root: Path, opts: BenchOptions) -> int:
    """Validate, prepare both trees, build, boot each variant once, report; the exit status."""
    validate_options(opts)
    cfg, prof = load_bench_config(repo)
    if opts.vcpus:
        prof = replace(prof, qemu_smp=opts.vcpus)
    if opts.report_only:
        return report_bench(repo, build_root, cfg, prof, opts.only)
    point_s = opts.reps * opts.duration_ms / 1000  # per boot: rounds are boots of their own
    if point_s >= prof.timeout:
        raise DriverError(f"--reps {opts.reps} x --duration-ms {opts.duration_ms} is {point_s:.0f}s "
                          f"for each point, over the {prof.timeout}s limit of a {prof.name} boot")
    filters = wanted_variants(cfg, opts.only)
    tree, base_label = pipeline.prepare(repo, build_root, opts.kernel_src, opts.kernel_ref)
    trees: dict[str, PreparedTree] = {"series": tree}
    if "base" in filters:
        trees["base"] = ensure_base_worktree(repo, tree, cfg.base_before)
    outs = {v: profiles.out_dir(build_root, prof, v) for v in filters}
    if not opts.no_build:
        for i, v in enumerate(filters, 1):
            say(f"building {v} ({i}/{len(filters)})")
            build(trees[v].path, prof, repo, build_root, opts.jobs, out=outs[v])
    images = {v: pipeline.require_image(build_root, prof, outs[v]) for v in filters}
    shim, accel = pipeline.choose_qemu(prof, images[list(filters)[-1]], build_root)
    seed = opts.seed or random.randrange(1, MAX_SEED + 1)
    base = trees.get("base")
    machine = host_machine(prof.qemu_smp or 1, accel, profile=prof.name, reps=opts.reps,
                           rounds=opts.rounds,
                           duration_ms=opts.duration_ms, seed=seed, base_before=cfg.base_before,
                           base_commit=kernel_commit(base) if base else "",
                           base_patches=len(base.patches) if base else 0,
                           series_commit=kernel_commit(tree), series_patches=len(tree.patches))
    if machine.warning:
        say(f"WARNING: {machine.warning}")
    write_json(build_root / RESULTS / "machine.json", machine.to_json())
    args = kernel_args(seed, opts.reps, opts.duration_ms)
    reports: dict[str, list[Report]] = {v: [] for v in filters}
    boots = [(r, v, glob) for r in range(opts.rounds) for v, glob in filters.items()]
    for i, (r, v, glob) in enumerate(boots, 1):
        say(f"booting {v} ({i}/{len(boots)}): {glob}")
        report = pipeline.boot_and_report(
            repo, build_root, prof, trees[v], base_label, round_dir(build_root, prof, v, r),
            args, glob, shim=shim, out=outs[v], echo=opts.echo)
        reports[v].append(report)
        say(f"{v}: {report.status.upper()} in {report.elapsed:.0f}s")
    return finish(build_root, reports, machine, opts.only, filters, opts.reps)
