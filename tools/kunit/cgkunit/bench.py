"""Benchmarks: the base kernel against base + kernel/series, side by side, judged against
the base kernel booted once more (an A/A control).

The default profile, um-bench, is UML SMP with one vCPU per host core and no debugging:
UML runs every vCPU as a host thread, so the benchmark gangs run natively and in parallel,
with real atomics and cache-line transfers. Each round boots base, series and control
(the base image again), alternating the order; every point is measured REPS times per
boot, and reps are paired by index across the three boots of a round.

The judge, per point and value:
- reps in which the gang did not run in parallel are dropped (busy < BUSY_MIN: its least
  busy worker made steps for less of the rep than that; see cgk_gang_busy_permille());
- series/base ratios (paired) against the A/A band, the smallest to the largest of the
  rounds' median control/base ratios (with one round, of the reps' ratios): a verdict only
  outside the band and when the Mann-Whitney U test tells the two sets of ratios apart
  (p < ALPHA);
- under emulation (x86_64 QEMU with TCG) no verdict at all.
Beside them: mechanism counts, which do not depend on the core count (rstat lock
acquisitions and hold time per read), and projections to many CPUs, labelled as such.

Pure steps first (testable without a kernel): metric records -> samples -> series of reps
-> comparisons, counts, scaling, projections -> table / JSON / plots. The I/O around them
(prepare, build, boot, write) is at the end of the module.
"""
from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from dataclasses import dataclass, field, fields
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from . import machine as host
from . import carry, pipeline, plot, procs, stats
from . import profile as profiles
from .common import Context, DriverError, read_json, say, write_json
from .params import MAX_SEED
from .report import Report, exit_code, raise_refused
from .run import build
from .summary import format_summary
from .tree import PreparedTree, ensure_base_worktree, kernel_commit, series_names

BENCH_FILE = Path("tools") / "kunit" / "bench.json"
BASE, SERIES, CONTROL = "base", "series", "control"
VARIANTS = (BASE, SERIES, CONTROL)
KERNEL_OF = {BASE: BASE, SERIES: SERIES, CONTROL: BASE}  # the build each variant boots
REPS = (1, 50)
VCPUS = (1, 64)
ROUNDS = (1, 10)
DEPTH = (2, 16)             # bench_rstat_depth's range in the suite
DEFAULT_DEPTH = 2
DURATION_MS = (100, 60000)
MACHINE_RECORD = "bench_machine"
LOCKS_RECORD = "rstat_locks"
RESULTS = Path("results") / "bench"

# The judge.
BUSY_MIN = 900          # permille: a rep whose least busy worker ran less did not run in parallel
ALPHA = 0.01            # Mann-Whitney, series/base ratios against the A/A ratios
MIN_PAIRS = 6           # fewer paired reps (after drops) on either side: no verdict
OTHER_MAX = 0.10        # cores: a boot while the rest of the host used more is dropped
PROJECT_AT = (16, 64, 144, 384)
# What was measured on many CPUs, printed beside the projection for scale.
ANCHOR = ("the rwlock RFC for rstat (2026-05-19) measured 1.8x on 144 CPUs "
          "(241 s -> 134 s, its reporter's benchmark)")
# A cache-line transfer between two cores of one socket: a typical published figure for
# current x86 servers (60-100 ns), not measured here (this host has no PMU to measure it).
C2C_NS = 80.0
# Writes to cache lines that every sibling namespace's charges write, per charge and
# uncharge, in the base ucount code (kernel/ucount.c): inc_rlimit_get_ucounts() and
# dec_rlimit_put_ucounts() add to and subtract from every level's counter, and the levels
# above a namespace's own (its owner's ucounts in the parent namespace, and the parent's
# owner's in init_user_ns) are the same objects for all siblings: 2 levels x 2 writes.
BASE_SHARED_WRITES = 4

Metric = Mapping[str, int | str]
Point = tuple[tuple[str, int | str], ...]
RULES = (f"a rep is dropped when its least busy worker made steps for less than "
         f"{BUSY_MIN / 10:g}% of it (a gang that did not run in parallel; points with more "
         f"workers than vCPUs are kept whole); a verdict only when the median series/base "
         f"ratio lies outside the A/A band (the smallest to the largest of the rounds' median "
         f"control/base ratios; with one round, of its reps' ratios) and the "
         f"Mann-Whitney U test tells series/base from control/base ratios apart at "
         f"p < {ALPHA:g}, with at least {MIN_PAIRS} pairs each; a boot during which the rest "
         f"of the host kept more than {OTHER_MAX:g} of a core busy (/proc/stat less this "
         f"run's own processes) is dropped with all its reps, unless every boot of its "
         f"variant would be")


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


def _per_thread(m: Metric) -> dict[str, float]:
    threads = _int(m, "threads")
    if threads <= 0:
        raise _Unusable("a positive threads")
    return {"charges_per_s_per_thread": _rate(m, "charges") / threads}


def _charges(m: Metric) -> dict[str, float]:
    out = {"charges_per_s": _rate(m, "charges")}
    if "refused" in m:
        out["refused_per_s"] = _rate(m, "refused")
    return out


LATENCIES = ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns")


def _migrate_values(m: Metric) -> dict[str, float]:
    out = {k: float(_int(m, k)) for k in LATENCIES}
    out["forks_per_s"] = _rate(m, "forks")
    if "migrations" in m:
        out["migrations_per_s"] = _rate(m, "migrations")
    return out


def _rstat_threads(m: Metric) -> int:
    return _int(m, "readers") + _int(m, "updaters")


def _threads(m: Metric) -> int:
    return _int(m, "threads")


@dataclass(frozen=True)
class Record:
    """One kind of metric line that a benchmark prints per rep: its point fields, values,
    the values judged series/base, and its workers (None: not a gang: no parallel rule)."""
    name: str
    point: tuple[str, ...]
    values: Callable[[Metric], dict[str, float]]
    compare: tuple[str, ...]
    threads: Callable[[Metric], int] | None


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: its --only name, KUnit suite and case glob, records, title."""
    key: str
    suite: str
    case_glob: str
    records: tuple[Record, ...]
    title: str


RSTAT = Record("rstat_read", ("readers", "updaters", "cgroups"), _rstat_values,
               ("reads_per_s", "updates_per_s"), _rstat_threads)
UCOUNT = Record("ucount_charge", ("namespaces", "threads"), _per_thread,
                ("charges_per_s_per_thread",), _threads)
UCOUNT_CROSS = Record("ucount_cross", ("namespaces", "threads"), _charges, ("charges_per_s",),
                      _threads)
UCOUNT_LIMIT = Record("ucount_limit", ("namespaces", "threads"), _charges, ("charges_per_s",),
                      _threads)
MIGRATE = Record("migrate_latency", ("mode", "churn"), _migrate_values,
                 ("p99_ns", "migrations_per_s", "forks_per_s"), None)
BENCHMARKS = (
    Benchmark("rstat", "cgroup_bench", "bench_rstat*", (RSTAT,),
              "cpu.stat readers against rstat updaters"),
    Benchmark("ucount", "cgroup_bench", "bench_ucount*", (UCOUNT, UCOUNT_CROSS, UCOUNT_LIMIT),
              "pending-signal charges in sibling user namespaces"),
    Benchmark("migrate", "cgroup_bench_migrate", "bench_migrate*", (MIGRATE,),
              "cgroup.procs migrations under fork churn: global vs per-threadgroup lock"),
)
BENCH_KEYS = tuple(b.key for b in BENCHMARKS)
BY_RECORD = {r.name: (b, r) for b in BENCHMARKS for r in b.records}


@dataclass(frozen=True)
class Value:
    """How a value is named and printed, and which way is better."""
    label: str
    unit: str
    higher_is_better: bool = True

    def fmt(self, x: float) -> str:
        return fmt_ns(x) if self.unit == "ns" else fmt_rate(x)


VALUES = {
    "reads_per_s": Value("reads/s", "1/s"),
    "updates_per_s": Value("updates/s", "1/s"),
    "charges_per_s_per_thread": Value("charges/s per thread", "1/s"),
    "charges_per_s": Value("charges/s", "1/s"),
    "refused_per_s": Value("refused/s", "1/s"),
    "p50_ns": Value("p50", "ns", False), "p90_ns": Value("p90", "ns", False),
    "p99_ns": Value("p99", "ns", False), "p999_ns": Value("p99.9", "ns", False),
    "max_ns": Value("max", "ns", False),
    "forks_per_s": Value("forks/s", "1/s"),
    "migrations_per_s": Value("migrations/s", "1/s"),
}


# --- input -------------------------------------------------------------------------

@dataclass(frozen=True)
class BenchConfig:
    """tools/kunit/bench.json."""
    profile: str
    base_before: str
    filter: str
    comment: str = ""


def parse_bench_config(data: Any, series: Sequence[str], where: str = str(BENCH_FILE)) -> BenchConfig:
    """Validate bench.json against the patch names of kernel/series."""
    if not isinstance(data, dict):
        raise DriverError(f"{where}: expected a JSON object")
    for key in ("profile", "base_before", "filter"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise DriverError(f"{where}: {key} must be a non-empty string")
    if data["filter"].startswith("-"):
        raise DriverError(f"{where}: filter must be a KUnit glob such as 'cgroup_bench*'")
    if data["base_before"] not in series:
        raise DriverError(f"{where}: base_before {data['base_before']} is not listed in kernel/series")
    return BenchConfig(profile=data["profile"], base_before=data["base_before"],
                       filter=data["filter"], comment=str(data.get("comment", "")))


def load_bench_config(repo: Path) -> BenchConfig:
    """bench.json, validated."""
    path = repo / BENCH_FILE
    try:
        data = json.loads(path.read_text())
    except OSError:
        raise DriverError(f"{path} is missing") from None
    except ValueError as e:
        raise DriverError(f"{path}: not valid JSON: {e}") from None
    return parse_bench_config(data, series_names(repo), str(BENCH_FILE))


def bench_profile(repo: Path, name: str, vcpus: int | None = None) -> profiles.Profile:
    """The bench profile by name, with vcpus if given; it must give its kernel vCPUs."""
    prof = profiles.load_profile(repo, name)
    if prof.arch == "x86_64" and not prof.qemu_smp or prof.arch == "um" and not prof.ncpus:
        raise DriverError(f"profile {name} is not a bench profile: it sets no vCPU count "
                          f"(#@ ncpus: host for UML, #@ qemu_smp: for x86_64)")
    return profiles.with_cpus(prof, vcpus) if vcpus else prof


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
    rounds: int = 3
    profile: str | None = None
    depth: int = DEFAULT_DEPTH


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
              ("--rounds", opts.rounds, ROUNDS), ("--depth", opts.depth, DEPTH))
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


def boot_filter(glob: str, only: Sequence[str]) -> str:
    """The KUnit filter of a boot for the chosen benchmarks; DriverError when it runs none."""
    chosen = [b for b in BENCHMARKS if b.key in only and runs_in(b, glob)]
    if not chosen:
        raise DriverError(f"no boot runs {','.join(only)} with the filter of {BENCH_FILE}")
    if set(only) == set(BENCH_KEYS):
        return glob
    suites = sorted({b.suite for b in chosen})
    if len(suites) > 1:
        return glob
    return f"{suites[0]}.{case_glob([b.case_glob for b in chosen if b.suite == suites[0]])}"


def kernel_args(seed: int, reps: int, duration_ms: int,
                depth: int = DEFAULT_DEPTH) -> list[str]:
    """Module parameters of a bench boot (the same for every variant); the rstat leaves'
    depth only when it is not the suite's default."""
    args = [f"cgroup_kunit.seed={seed}", f"cgroup_kunit.bench_reps={reps}",
            f"cgroup_kunit.duration_ms={duration_ms}"]
    if depth != DEFAULT_DEPTH:
        args.append(f"cgroup_kunit.bench_rstat_depth={depth}")
    return args


# --- machine -------------------------------------------------------------------------

def oversubscription_warning(vcpus: int, cores: int) -> str | None:
    """What is said beside every number when the guest has more vCPUs than the host has cores."""
    if vcpus > cores:
        return (f"oversubscribed: {vcpus} vCPUs on {cores} host cores: contention ratios are "
                f"compressed and lock holders get preempted")
    return None


@dataclass
class Machine:
    """Where and how the benchmark ran: stated beside every ratio."""
    cpu_model: str
    host_cores: int
    vcpus: int
    accel: str                 # "uml" (native), "kvm" or "tcg" (emulated)
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
    load_before: float | None = None
    depth: int = DEFAULT_DEPTH  # where bench_rstat_read's leaves are (the root's children: 1)
    # per variant, per round: cores the rest of the host kept busy during that boot
    other_cores: dict[str, list[float | None]] = field(default_factory=dict)

    @property
    def warning(self) -> str | None:
        return oversubscription_warning(self.vcpus, self.host_cores)

    @property
    def emulated(self) -> bool:
        return self.accel == "tcg"

    def to_json(self) -> dict[str, Any]:
        return {**vars(self), "warning": self.warning, "emulated": self.emulated}


def machine_from_json(data: Any) -> Machine | None:
    """A Machine saved by an earlier run (machine.json), or None."""
    if not isinstance(data, dict):
        return None
    names = {f.name for f in fields(Machine)}
    try:
        return Machine(**{k: v for k, v in data.items() if k in names})
    except TypeError:
        return None


# --- samples and series ---------------------------------------------------------------

@dataclass
class Sample:
    """One rep of one point of one record in one variant."""
    record: str
    variant: str
    point: Point
    rep: int
    values: dict[str, float]
    busy: int | None = None
    parallel: bool = True


def _point(m: Metric, keys: Sequence[str]) -> Point:
    for k in keys:
        if k not in m:
            raise _Unusable(f"a {k}")
    return tuple((k, m[k]) for k in keys)


def samples(metrics: Sequence[Metric], variant: str, vcpus: int,
            only: Sequence[str] = BENCH_KEYS, notes: list[str] | None = None) -> list[Sample]:
    """The usable samples of a variant's metric records, each marked whether its gang ran
    in parallel (unusable lines noted, not fatal)."""
    out: list[Sample] = []
    for m in metrics:
        found = BY_RECORD.get(str(m.get("name")))
        if found is None or found[0].key not in only:
            continue
        rec = found[1]
        try:
            s = Sample(rec.name, variant, _point(m, rec.point), _int(m, "rep"), rec.values(m))
            busy = m.get("busy")
            if isinstance(busy, int) and rec.threads is not None:
                s.busy = busy
                s.parallel = busy >= BUSY_MIN or rec.threads(m) > vcpus
            out.append(s)
        except _Unusable as e:
            if notes is not None:
                notes.append(f"{variant}: a {rec.name} line without {e}: skipped")
    return out


@dataclass
class Series:
    """The kept reps of one value at one point of one record in one variant."""
    record: str
    variant: str
    point: Point
    value: str
    reps: dict[int, float] = field(default_factory=dict)
    dropped: int = 0
    unfiltered: bool = False   # every rep would have been dropped: all kept, and said so

    @property
    def median(self) -> float:
        return stats.median(list(self.reps.values()))

    @property
    def low(self) -> float:
        return min(self.reps.values())

    @property
    def high(self) -> float:
        return max(self.reps.values())

    def to_json(self) -> dict[str, Any]:
        ordered = sorted(self.reps)
        return {"record": self.record, "variant": self.variant, "point": dict(self.point),
                "value": self.value, "unit": VALUES[self.value].unit, "rep_ids": ordered,
                "reps": [self.reps[r] for r in ordered], "dropped": self.dropped,
                "unfiltered": self.unfiltered, "median": self.median if self.reps else None}


def group(all_samples: Sequence[Sample], notes: list[str] | None = None) -> list[Series]:
    """Samples -> one Series per (record, variant, point, value), in console order; reps that
    did not run in parallel counted as dropped, not kept. Where that would drop every rep of
    a series (a worker whose steps themselves take a millisecond or more looks the same as
    one that was descheduled), all are kept and the series is marked unfiltered."""
    out: dict[tuple[str, str, Point, str], Series] = {}
    dropped: dict[tuple[str, str, Point, str], dict[int, float]] = {}
    seen: set[tuple[str, str, Point, int]] = set()
    for s in all_samples:
        if (s.record, s.variant, s.point, s.rep) in seen:
            if notes is not None:
                notes.append(f"{s.variant}: {s.record} {point_label(s.point)} rep {s.rep} "
                              f"printed twice: kept the first")
            continue
        seen.add((s.record, s.variant, s.point, s.rep))
        for value, x in s.values.items():
            key = (s.record, s.variant, s.point, value)
            g = out.setdefault(key, Series(*key))
            if s.parallel:
                g.reps[s.rep] = x
            else:
                g.dropped += 1
                dropped.setdefault(key, {})[s.rep] = x
    noted: set[tuple[str, str, Point]] = set()
    for key, g in out.items():
        if not g.reps and g.dropped:
            g.reps, g.dropped, g.unfiltered = dropped[key], 0, True
            if notes is not None and key[:3] not in noted:  # once per point
                noted.add(key[:3])
                notes.append(f"{key[1]}: {key[0]} {point_label(key[2])}: every rep had a worker "
                             f"that made no step for 1 ms or more; kept unfiltered")
    return list(out.values())


def point_label(point: Point) -> str:
    return " ".join(f"{k}={v}" for k, v in point)


def find(groups: Sequence[Series], record: str, variant: str, value: str,
         where: Callable[[dict[str, int | str]], bool] = lambda p: True) -> list[Series]:
    """The series of one record, variant and value whose point satisfies where."""
    return [g for g in groups if (g.record, g.variant, g.value) == (record, variant, value)
            and where(dict(g.point))]


def one(groups: Sequence[Series], record: str, variant: str, value: str,
        **point: int | str) -> Series | None:
    """The series at exactly this point, None when it was not measured (or all dropped)."""
    found = find(groups, record, variant, value, lambda p: p == point)
    return found[0] if found and found[0].reps else None


def paired_by_rep(a: Series, b: Series) -> dict[int, float]:
    """a/b for each rep both kept, by rep id, in rep order."""
    return {i: a.reps[i] / b.reps[i] for i in sorted(set(a.reps) & set(b.reps)) if b.reps[i]}


def paired(a: Series, b: Series) -> list[float]:
    """a/b for each rep both kept, in rep order."""
    return list(paired_by_rep(a, b).values())


def round_medians(ratios: Mapping[int, float], reps: int) -> list[float]:
    """The median ratio of each round (rep ids r * reps ... r * reps + reps - 1), in round
    order; none when reps is not known (0)."""
    if reps <= 0:
        return []
    rounds: dict[int, list[float]] = {}
    for i, r in ratios.items():
        rounds.setdefault(i // reps, []).append(r)
    return [stats.median(rounds[k]) for k in sorted(rounds)]


# --- the judge ----------------------------------------------------------------------------

@dataclass
class Comparison:
    """series/base at one point, against the A/A band (control/base)."""
    record: str
    point: Point
    value: str
    ratios: list[float]
    aa: list[float]
    verdict: str
    aa_rounds: list[float] = field(default_factory=list)
    ratio: float | None = None
    interval: tuple[float, float] | None = None
    band: tuple[float, float] | None = None
    p: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"record": self.record, "point": dict(self.point), "value": self.value,
                "ratio": self.ratio, "interval95": self.interval, "aa_band": self.band,
                "p": self.p, "verdict": self.verdict, "pairs": len(self.ratios),
                "aa_pairs": len(self.aa), "ratios": self.ratios, "aa": self.aa,
                "aa_rounds": self.aa_rounds}


def judge(record: str, point: Point, value: str, ratios: list[float], aa: list[float],
          emulated: bool = False, aa_rounds: Sequence[float] = ()) -> Comparison:
    """The verdict on series/base ratios given the A/A ratios of the same point. The band
    is the range of the rounds' median A/A ratios (aa_rounds) where there are two rounds
    or more: the median is what is judged, so the band is how far the same kernel booted
    twice moved a median, not how far one rep strayed; with one round, the reps' range."""
    c = Comparison(record, point, value, ratios, aa, "no data", list(aa_rounds))
    if ratios:
        c.ratio = stats.median(ratios)
        c.interval = stats.bootstrap_median(ratios, seed=stats.seed_of(f"{record} {point} {value}"))
    if len(aa_rounds) >= 2:
        c.band = (min(aa_rounds), max(aa_rounds))
    elif len(aa) >= 2:
        c.band = (min(aa), max(aa))
    if emulated:
        c.verdict = "emulated"
        return c
    if len(ratios) < MIN_PAIRS or len(aa) < MIN_PAIRS or c.ratio is None or c.band is None:
        c.verdict = "too few reps" if ratios else "no data"
        return c
    c.p = stats.mann_whitney([math.log(r) for r in ratios if r > 0],
                             [math.log(r) for r in aa if r > 0])
    better = VALUES[value].higher_is_better
    if c.p < ALPHA and c.ratio > c.band[1]:
        c.verdict = "faster" if better else "slower"
    elif c.p < ALPHA and c.ratio < c.band[0]:
        c.verdict = "slower" if better else "faster"
    else:
        c.verdict = "no difference"
    return c


def comparisons(groups: Sequence[Series], emulated: bool = False,
                reps: int = 0) -> list[Comparison]:
    """One per compared value of every point measured in base and series (reps: per round,
    for the rounds' A/A medians; 0: the band from the reps alone)."""
    by = {(g.record, g.variant, g.point, g.value): g for g in groups}
    out: list[Comparison] = []
    for g in groups:
        if g.variant != SERIES or g.value not in BY_RECORD[g.record][1].compare:
            continue
        base = by.get((g.record, BASE, g.point, g.value))
        if base is None:
            continue
        control = by.get((g.record, CONTROL, g.point, g.value))
        aa = paired_by_rep(control, base) if control else {}
        out.append(judge(g.record, g.point, g.value, paired(g, base), list(aa.values()),
                         emulated, round_medians(aa, reps)))
    return out


# --- mechanism counts and projections ----------------------------------------------------

@dataclass
class LockCount:
    """rstat lock use of the readers at one point of one variant, summed over its boots."""
    variant: str
    point: Point
    ns: int = 0
    reads: int = 0
    locks: int = 0
    contended: int = 0
    hold_ns: int = 0
    other_locks: int = 0
    boots: int = 0

    def per_read(self, what: int) -> float | None:
        return what / self.reads if self.reads else None

    def to_json(self) -> dict[str, Any]:
        return {"variant": self.variant, "point": dict(self.point), "boots": self.boots,
                "reads": self.reads, "locks": self.locks, "contended": self.contended,
                "hold_ns": self.hold_ns, "other_locks": self.other_locks,
                "locks_per_read": self.per_read(self.locks),
                "hold_ns_per_read": self.per_read(self.hold_ns),
                "contended_per_read": self.per_read(self.contended)}


def lock_counts(metrics: Mapping[str, Sequence[Metric]], notes: list[str] | None = None) -> list[LockCount]:
    """The rstat_locks records of every variant, summed per point."""
    out: dict[tuple[str, Point], LockCount] = {}
    for variant, ms in metrics.items():
        for m in ms:
            if m.get("name") != LOCKS_RECORD:
                continue
            try:
                point = _point(m, RSTAT.point)
                c = out.setdefault((variant, point), LockCount(variant, point))
                c.ns += _int(m, "ns")
                c.reads += _int(m, "reads")
                c.locks += _int(m, "locks")
                c.contended += _int(m, "contended")
                c.hold_ns += _int(m, "hold_ns")
                c.other_locks += _int(m, "other_locks")
                c.boots += 1
            except _Unusable as e:
                if notes is not None:
                    notes.append(f"{variant}: a {LOCKS_RECORD} line without {e}: skipped")
    return list(out.values())


def amdahl(sigma: float, n: int) -> float:
    """The Amdahl bound on speedup over one reader with n readers, sigma serialized."""
    return 1.0 / (sigma + (1.0 - sigma) / n)


@dataclass
class Projection:
    """Projected, not measured: reads/s with N readers from the serialized part of one read."""
    variant: str
    updaters: int | str
    single: float           # reads/s of one reader, measured
    sigma: float            # rstat lock hold time per read / time per read, one reader
    at: dict[int, float]    # N -> projected reads/s; empty when a read holds no rstat lock

    @property
    def lock_bound(self) -> bool:
        """False when reads hold no rstat lock: Amdahl on the lock bounds nothing then."""
        return self.sigma > 0

    def to_json(self) -> dict[str, Any]:
        return {"variant": self.variant, "updaters": self.updaters, "single_reads_per_s": self.single,
                "serial_fraction": self.sigma, "lock_bound": self.lock_bound,
                "projected_reads_per_s": {str(n): x for n, x in self.at.items()}}


def projections(groups: Sequence[Series], counts: Sequence[LockCount]) -> list[Projection]:
    """Per variant and updater count: Amdahl from one reader's serialized fraction."""
    out: list[Projection] = []
    for c in counts:
        p = dict(c.point)
        if c.variant == CONTROL or p["readers"] != 1 or p["cgroups"] != 1 or not c.reads:
            continue
        single = one(groups, RSTAT.name, c.variant, "reads_per_s", **p)
        if single is None:
            continue
        sigma = min(1.0, (c.hold_ns / c.reads) * single.median / 1e9)
        at = {n: single.median * amdahl(sigma, n) for n in PROJECT_AT} if sigma > 0 else {}
        out.append(Projection(c.variant, p["updaters"], single.median, sigma, at))
    return out


@dataclass
class Scaling:
    """One rate at a high point over the same rate at a low point, paired within each boot."""
    label: str
    variant: str
    low: Point
    high: Point
    ratios: list[float]

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "variant": self.variant, "from": dict(self.low),
                "to": dict(self.high), "ratios": self.ratios,
                "median": stats.median(self.ratios) if self.ratios else None,
                "min": min(self.ratios, default=None), "max": max(self.ratios, default=None)}


def scalings(groups: Sequence[Series], vcpus: int) -> list[Scaling]:
    """The base's (and every variant's) read scaling from 1 reader to vCPUs readers and
    ucount per-thread retention from 1 thread to vCPUs threads in as many namespaces."""
    out: list[Scaling] = []
    specs = (
        ("reads/s, readers 1 -> {n}, no updaters, one cgroup", RSTAT.name, "reads_per_s",
         {"readers": 1, "updaters": 0, "cgroups": 1}, {"readers": vcpus, "updaters": 0, "cgroups": 1}),
        ("reads/s, readers 1 -> {n}, no updaters, a cgroup each", RSTAT.name, "reads_per_s",
         {"readers": 1, "updaters": 0, "cgroups": 1}, {"readers": vcpus, "updaters": 0, "cgroups": vcpus}),
        ("charges/s per thread, 1 -> {n} threads in as many namespaces", UCOUNT.name,
         "charges_per_s_per_thread", {"namespaces": 1, "threads": 1},
         {"namespaces": vcpus, "threads": vcpus}),
    )
    for label, record, value, low, high in specs:
        if vcpus < 2:
            break
        for v in VARIANTS:
            lo, hi = one(groups, record, v, value, **low), one(groups, record, v, value, **high)
            if lo is not None and hi is not None:
                out.append(Scaling(label.format(n=vcpus), v, lo.point, hi.point, paired(hi, lo)))
    return out


@dataclass
class SharedWrites:
    """Writes to cache lines that every sibling namespace writes, per charge and uncharge."""
    variant: str
    writes: float
    source: str             # "from the code" or "counted"
    single: float           # charges/s per thread, one thread, measured
    at: dict[int, float]    # N containers -> projected charges/s per container

    def to_json(self) -> dict[str, Any]:
        return {"variant": self.variant, "shared_writes_per_charge": self.writes,
                "source": self.source, "single_per_thread": self.single, "c2c_ns": C2C_NS,
                "projected_per_container": {str(n): x for n, x in self.at.items()}}


def ucount_projection(groups: Sequence[Series], metrics: Mapping[str, Sequence[Metric]]) -> list[SharedWrites]:
    """Projected, not measured: with w shared-line writes per charge, N containers charging
    at once share one line that moves between cores at C2C_NS a transfer, so each gets at
    most min(one thread's rate, 1 / (N * w * C2C_NS))."""
    out: list[SharedWrites] = []
    for v in (BASE, SERIES):
        single = one(groups, UCOUNT.name, v, "charges_per_s_per_thread", namespaces=1, threads=1)
        if single is None:
            continue
        counted = [m for m in metrics.get(v, []) if m.get("name") == UCOUNT.name
                   and isinstance(m.get("shared"), int) and isinstance(m.get("charges"), int)]
        charges = sum(int(m["charges"]) for m in counted)
        if counted and charges:
            w, source = sum(int(m["shared"]) for m in counted) / charges, "counted"
        elif v == BASE:
            w, source = float(BASE_SHARED_WRITES), "from the code"
        else:
            continue
        cap = (lambda n: 1e9 / (n * w * C2C_NS)) if w > 0 else (lambda n: math.inf)
        out.append(SharedWrites(v, w, source, single.median,
                                {n: min(single.median, cap(n)) for n in PROJECT_AT}))
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


def mode_ratios(groups: Sequence[Series]) -> list[ModeRatio]:
    """Per variant and churn, from the medians over reps."""
    out: list[ModeRatio] = []
    for variant in VARIANTS:
        for g in find(groups, MIGRATE.name, variant, "p99_ns", lambda p: p["mode"] == "global"):
            churn = dict(g.point)["churn"]
            med = {}
            for value in ("p99_ns", "forks_per_s"):
                for mode in ("global", "dynmods"):
                    s = one(groups, MIGRATE.name, variant, value, mode=mode, churn=churn)
                    med[(value, mode)] = s.median if s else None
            if med[("p99_ns", "dynmods")] is None:
                continue
            out.append(ModeRatio(variant, churn,
                                 _ratio(med[("p99_ns", "global")], med[("p99_ns", "dynmods")]),
                                 _ratio(med[("forks_per_s", "dynmods")],
                                        med[("forks_per_s", "global")])))
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


@dataclass
class Aggregate:
    """Everything the table, the JSON and the plots show."""
    machine: Machine
    only: tuple[str, ...]
    groups: list[Series]
    comparisons: list[Comparison]
    locks: list[LockCount]
    projections: list[Projection]
    shared: list[SharedWrites]
    scalings: list[Scaling]
    modes: list[ModeRatio]
    vcpus: dict[str, int]
    statuses: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def vcpus_reported(metrics: Sequence[Metric]) -> int | None:
    """vCPUs the guest reported in its bench_machine record."""
    for m in metrics:
        if m.get("name") == MACHINE_RECORD and isinstance(m.get("vcpus"), int):
            return int(m["vcpus"])
    return None


def aggregate(metrics: Mapping[str, Sequence[Metric]], machine: Machine,
              only: Sequence[str] = BENCH_KEYS, statuses: Mapping[str, str] | None = None,
              filter_glob: str = "*") -> Aggregate:
    """Per-variant metric records -> series, comparisons, counts, projections, scaling."""
    notes: list[str] = []
    vcpus = {v: vcpus_reported(metrics[v]) or machine.vcpus for v in VARIANTS if v in metrics}
    for v, n in vcpus.items():
        if n != machine.vcpus:
            notes.append(f"{v}: the guest reported {n} vCPUs, it was given {machine.vcpus}")
    all_samples = [s for v in VARIANTS if v in metrics
                   for s in samples(metrics[v], v, vcpus[v], only, notes)]
    groups = group(all_samples, notes)
    for bench in BENCHMARKS:
        for v in metrics:
            expected = bench.key in only and runs_in(bench, filter_glob)
            if expected and not any(BY_RECORD[g.record][0] is bench and g.variant == v
                                    for g in groups):
                notes.append(f"{v}: no {bench.key} metric lines")
    counts = lock_counts(metrics, notes) if "rstat" in only else []
    return Aggregate(machine=machine, only=tuple(only), groups=groups,
                     comparisons=comparisons(groups, machine.emulated, machine.reps), locks=counts,
                     projections=projections(groups, counts),
                     shared=ucount_projection(groups, metrics) if "ucount" in only else [],
                     scalings=scalings(groups, machine.vcpus), modes=mode_ratios(groups),
                     vcpus=vcpus, statuses=dict(statuses or {}), notes=notes)


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


def fmt_range(lo: float, hi: float, f: Callable[[float], str] = fmt_ratio) -> str:
    return f"[{f(lo)}-{f(hi)}]"


def columns(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Rows aligned in left-justified columns."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths))).rstrip() for r in rows]


def machine_lines(m: Machine, statuses: Mapping[str, str]) -> list[str]:
    """The header: machine, vCPUs, warnings, commits, the rules."""
    def status(v: str) -> str:
        return f"  [{statuses[v].upper()}]" if v in statuses else ""
    per_boot = f"{m.reps} reps of {m.duration_ms} ms per point"
    lines = [f"cgkunit bench: {m.profile}, {m.rounds} round(s) of base, series and control "
             f"(the base booted again), alternating, x {per_boot}, seed {m.seed}",
             f"machine: {m.cpu_model}; {m.host_cores} host cores; {m.vcpus} vCPUs; "
             + ("UML, native" if m.accel == "uml" else f"QEMU accel {m.accel}")
             + (f"; load average {m.load_before:.2f} before the first boot"
                if m.load_before is not None else "")]
    if m.emulated:
        lines.append("EMULATED: QEMU/TCG is not a contention measurement; no verdicts")
    if m.warning:
        lines.append(f"WARNING: {m.warning}")
    lines.append(f"base:    {m.base_commit[:12] or '?'} ({m.base_patches} patches, before "
                 f"{m.base_before}){status(BASE)}")
    lines.append(f"series:  {m.series_commit[:12] or '?'} ({m.series_patches} patches)"
                 f"{status(SERIES)}")
    lines.append(f"control: the base kernel again{status(CONTROL)}")
    lines.append(f"rules: {RULES}")
    return lines


def compare_lines(agg: Aggregate, rec: Record, value: str) -> list[str]:
    """base / series / ratio / A/A band / verdict rows for one value of one record."""
    v = VALUES[value]
    cmp = {c.point: c for c in agg.comparisons if (c.record, c.value) == (rec.name, value)}
    sides: dict[tuple[str, Point], Series] = {}
    points: list[Point] = []
    for g in agg.groups:
        if (g.record, g.value) == (rec.name, value):
            sides[(g.variant, g.point)] = g
            if g.point not in points:
                points.append(g.point)
    if not points:
        return []
    rows = [["point", "base", "series", "series/base [95%]", "A/A band", "p", "verdict", "dropped"]]
    for pt in points:
        b, s, c = sides.get((BASE, pt)), sides.get((SERIES, pt)), cmp.get(pt)
        drops = "/".join(("all*" if sides[(x, pt)].unfiltered else str(sides[(x, pt)].dropped))
                         if (x, pt) in sides else "-" for x in VARIANTS)
        rows.append([
            point_label(pt), v.fmt(b.median) if b and b.reps else "-",
            v.fmt(s.median) if s and s.reps else "-",
            (fmt_ratio(c.ratio) + (" " + fmt_range(*c.interval) if c.interval else ""))
            if c and c.ratio is not None else "-",
            fmt_range(*c.band) if c and c.band else "-",
            f"{c.p:.3f}" if c and c.p is not None else "-",
            c.verdict if c else "-", drops])
    return [f"{rec.name}: {v.label} (median over kept reps; dropped base/series/control, "
            f"all*: none would be left, all kept)", *columns(rows)]


def lock_lines(agg: Aggregate) -> list[str]:
    """rstat lock acquisitions and hold time per read, and the projections."""
    if not agg.locks:
        return []
    rows = [["point", "variant", "locks/read", "contended/read", "held/read", "other locks"]]
    for c in sorted(agg.locks, key=lambda c: (c.point, VARIANTS.index(c.variant))):
        if c.variant == CONTROL:
            continue
        lr, cr, hr = c.per_read(c.locks), c.per_read(c.contended), c.per_read(c.hold_ns)
        rows.append([point_label(c.point), c.variant,
                     f"{lr:.2f}" if lr is not None else "-", f"{cr:.3f}" if cr is not None else "-",
                     fmt_ns(hr) if hr is not None else "-", str(c.other_locks)])
    out = ["rstat_locks: rstat lock acquisitions by the readers, per read "
           "(one counting rep per boot, tracepoints cgroup_rstat_locked/unlock)", *columns(rows)]
    if agg.projections:
        out.append("projected, not measured: Amdahl bound on reads/s with N readers, from one "
                   "reader's rate and the part of its read spent holding the lock; for scale, "
                   f"{ANCHOR}")
        rows = [["variant", "updaters", "1 reader", "serial", *(f"N={n}" for n in PROJECT_AT)]]
        for p in agg.projections:
            rows.append([p.variant, str(p.updaters), fmt_rate(p.single), f"{p.sigma:.3f}",
                         *(fmt_rate(p.at[n]) if n in p.at else "-" for n in PROJECT_AT)])
        out += columns(rows)
        if any(not p.lock_bound for p in agg.projections):
            out.append("  -: reads hold no rstat lock, so there is no lock-based bound to "
                       "project; what limits them is each read's sum over the possible CPUs "
                       "and the lines the updaters write (not projected)")
    return out


def ucount_lines(agg: Aggregate) -> list[str]:
    if not agg.shared:
        return []
    out = [f"projected, not measured: charges/s per container with N containers at once, "
           f"min(one thread's rate, 1 / (N x shared writes per charge x {C2C_NS:g} ns a "
           f"cache-line transfer, a published intra-socket figure))"]
    rows = [["variant", "shared writes/charge", "1 thread", *(f"N={n}" for n in PROJECT_AT)]]
    for s in agg.shared:
        rows.append([s.variant, f"{s.writes:.3g} ({s.source})", fmt_rate(s.single),
                     *(fmt_rate(s.at[n]) for n in PROJECT_AT)])
    return out + columns(rows)


def scaling_lines(agg: Aggregate, record: str) -> list[str]:
    mine = [s for s in agg.scalings if s.high and dict(s.high) and
            (record == RSTAT.name) == ("readers" in dict(s.high))]
    if not mine:
        return []
    rows = [["scaling (paired within each boot)", "variant", "median [min-max]"]]
    for s in mine:
        rows.append([s.label, s.variant, (fmt_ratio(stats.median(s.ratios)) + " "
                                          + fmt_range(min(s.ratios), max(s.ratios)))
                     if s.ratios else "-"])
    return columns(rows)


def migrate_lines(agg: Aggregate) -> list[str]:
    """Latency percentiles per variant and point, then the mode ratios."""
    out: list[str] = []
    for variant in (BASE, SERIES):
        p99 = find(agg.groups, MIGRATE.name, variant, "p99_ns")
        if not p99:
            continue
        rows = [["point", "p50", "p90", "p99", "p99.9", "max", "migrations/s", "forks/s"]]
        for g in p99:
            cells = []
            for value in ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "migrations_per_s",
                          "forks_per_s"):
                s = one(agg.groups, MIGRATE.name, variant, value, **dict(g.point))
                cells.append(VALUES[value].fmt(s.median) if s else "-")
            rows.append([point_label(g.point), *cells])
        out += [f"migrate_latency ({variant}): one migration (median over reps)", *columns(rows)]
    for variant in (BASE, SERIES):
        modes = [m for m in agg.modes if m.variant == variant]
        if modes:
            p99 = ", ".join(f"churn={m.churn} {fmt_ratio(m.p99_global_over_dynmods)}" for m in modes)
            forks = ", ".join(f"churn={m.churn} {fmt_ratio(m.forks_dynmods_over_global)}"
                              for m in modes)
            out.append(f"  {variant}: p99 global/dynmods: {p99}; forks/s dynmods/global: {forks}")
    return out


def format_table(agg: Aggregate) -> str:
    """The whole text report: header, then one block per benchmark."""
    out = machine_lines(agg.machine, agg.statuses)
    for bench in BENCHMARKS:
        if bench.key not in agg.only:
            continue
        block: list[str] = []
        if RSTAT in bench.records:
            block.append(f"  updaters charge leaves at depth {agg.machine.depth} "
                         f"(the root's children at 1)")
        for rec in bench.records:
            for value in rec.compare:
                block += compare_lines(agg, rec, value)
            if rec is RSTAT:
                block += scaling_lines(agg, RSTAT.name) + lock_lines(agg)
            if rec is UCOUNT:
                block += scaling_lines(agg, UCOUNT.name) + ucount_lines(agg)
            if rec is MIGRATE:
                block += migrate_lines(agg)
        out += ["", f"== {bench.key}: {bench.title}"] + (block or ["  no metric lines"])
    if agg.notes:
        out += [""] + [f"note: {n}" for n in agg.notes]
    return "\n".join(out) + "\n"


def to_json(agg: Aggregate) -> dict[str, Any]:
    """bench.json: the machine, the rules, every series, the verdicts, counts, projections."""
    return {"machine": agg.machine.to_json(), "statuses": agg.statuses,
            "benchmarks": list(agg.only), "vcpus_reported": agg.vcpus,
            "rules": {"text": RULES, "busy_min_permille": BUSY_MIN, "alpha": ALPHA,
                      "min_pairs": MIN_PAIRS},
            "records": [g.to_json() for g in agg.groups],
            "comparisons": [c.to_json() for c in agg.comparisons],
            "rstat_locks": [c.to_json() for c in agg.locks],
            "projections": {"note": "projected, not measured",
                            "rstat_amdahl": [p.to_json() for p in agg.projections],
                            "ucount_shared_line": [s.to_json() for s in agg.shared]},
            "scaling": [s.to_json() for s in agg.scalings],
            "migrate_modes": [m.to_json() for m in agg.modes],
            "notes": agg.notes}


# --- plots ----------------------------------------------------------------------------

Curve = list[tuple[float, float]]


@dataclass
class Plot:
    """One PNG: curves of medians against a numeric point field, or (kind "ratios") one
    row per comparison: the series/base ratio, its interval and the A/A band."""
    title: str
    xlabel: str
    ylabel: str
    curves: dict[str, Curve] = field(default_factory=dict)
    logy: bool = False
    kind: str = "curves"
    rows: list[dict[str, Any]] = field(default_factory=list)


def curve(groups: Sequence[Series], record: str, variant: str, value: str, x: str,
          where: Callable[[dict[str, int | str]], bool] = lambda p: True) -> Curve:
    """(x, median) points sorted by x."""
    pts = [(float(dict(g.point)[x]), g.median)
           for g in find(groups, record, variant, value, where)
           if isinstance(dict(g.point)[x], int) and g.reps]
    return sorted(pts)


def plots(agg: Aggregate) -> dict[str, Plot]:
    """rstat.png, ucount.png, migrate.png, ratios.png (those with data)."""
    g, m = agg.groups, agg.machine
    where = f"{m.vcpus} vCPUs, {'UML' if m.accel == 'uml' else m.accel}, {m.host_cores} host cores"
    out: dict[str, Plot] = {}
    rstat: dict[str, Curve] = {}
    for v in (BASE, SERIES):
        for u in sorted({int(dict(s.point)["updaters"]) for s in g if s.record == RSTAT.name}):
            rstat[f"{v}, {u} updaters"] = curve(g, RSTAT.name, v, "reads_per_s", "readers",
                                               lambda p, u=u: p["updaters"] == u and p["cgroups"] == 1)
    out["rstat.png"] = Plot(f"cpu.stat reads/s, one cgroup ({where})", "readers", "reads/s", rstat)
    ucount = {f"{v}, one thread per namespace": curve(
        g, UCOUNT.name, v, "charges_per_s_per_thread", "namespaces",
        lambda p: p["threads"] == p["namespaces"]) for v in (BASE, SERIES)}
    out["ucount.png"] = Plot(f"charges/s per thread ({where})", "namespaces",
                             "charges/s per thread", ucount)
    migrate = {f"{v}, {mode}": curve(g, MIGRATE.name, v, "p99_ns", "churn",
                                     lambda p, mode=mode: p["mode"] == mode)
               for v in (BASE, SERIES) for mode in ("global", "dynmods")}
    out["migrate.png"] = Plot(f"migration p99 latency ({where})", "churn threads",
                              "p99 latency (ns)", migrate, logy=True)
    rows = [{"label": f"{c.record} {c.value} {point_label(c.point)}", "ratio": c.ratio,
             "interval": list(c.interval) if c.interval else None,
             "band": list(c.band) if c.band else None, "verdict": c.verdict}
            for c in agg.comparisons if c.ratio is not None]
    out["ratios.png"] = Plot(f"series/base, 95% interval, A/A band ({where})", "series/base", "",
                             kind="ratios", rows=rows)
    for name, p in list(out.items()):
        p.curves = {k: c for k, c in p.curves.items() if c}
        if not p.curves and not p.rows:
            del out[name]
    return out


SYSTEM_PYTHON = Path("/usr/bin/python3")


def plot_specs(specs: Mapping[str, Plot]) -> dict[str, dict[str, Any]]:
    """The plots as plot.py reads them."""
    return {name: {"title": p.title, "xlabel": p.xlabel, "ylabel": p.ylabel, "logy": p.logy,
                   "kind": p.kind, "rows": p.rows,
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

def round_metrics(reports: Sequence[tuple[int, Report]], reps: int) -> list[Metric]:
    """The metric records of a variant's boots (round, report), round r's reps numbered
    from r * reps, so that a dropped boot leaves the other rounds' reps paired as before."""
    out: list[Metric] = []
    for r, report in reports:
        for m in report.metrics():
            rep_id = m.get("rep")
            out.append({**m, "rep": rep_id + r * reps} if isinstance(rep_id, int) else m)
    return out


def disturbed_boots(machine: Machine, reports: Mapping[str, Sequence[Report]],
                    notes: list[str]) -> dict[str, set[int]]:
    """Per variant, the rounds whose boot ran while the rest of the host kept more than
    OTHER_MAX of a core busy; a variant all of whose boots did keeps them all (noted)."""
    out: dict[str, set[int]] = {}
    for v, boots in reports.items():
        loads = machine.other_cores.get(v, [])
        seen = {r: x for r, x in enumerate(loads[:len(boots)]) if x is not None}
        bad = {r for r, x in seen.items() if x > OTHER_MAX}
        for r in sorted(bad):
            notes.append(f"{v} boot of round {r + 1}: the rest of the host kept "
                         f"{seen[r]:.2f} of a core busy"
                         + ("; kept, as every boot of it was disturbed" if len(bad) == len(boots)
                            else "; dropped with its reps"))
        out[v] = set() if len(bad) == len(boots) else bad
    return out


def worst_status(reports: Sequence[Report]) -> str:
    """The status of the boot with the highest exit code."""
    return max(reports, key=lambda r: exit_code(r.status)).status


def finish(build_root: Path, reports: Mapping[str, Sequence[Report]], machine: Machine,
           only: Sequence[str], filter_glob: str, reps: int) -> int:
    """Aggregate, print the table, write bench.json/.txt and the plots; the exit status."""
    for variant, boots in reports.items():
        for r, report in enumerate(boots):
            if report.status != "pass" or report.bad_parameters:
                print(f"-- {variant} boot" + (f" (round {r + 1})" if len(boots) > 1 else "") + ":")
                print(format_summary(report), end="")
    dropped_notes: list[str] = []
    drop = disturbed_boots(machine, reports, dropped_notes)
    agg = aggregate({v: round_metrics([(r, rep) for r, rep in enumerate(b)
                                       if r not in drop.get(v, set())], reps)
                     for v, b in reports.items()}, machine, only,
                    {v: worst_status(b) for v, b in reports.items()}, filter_glob)
    agg.notes[:0] = dropped_notes
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


def boot_order(rounds: int) -> list[tuple[int, str]]:
    """(round, variant) in boot order: base, series, control, then control, series, base, ...
    so that a drift of the host over the run weighs on base and control alike."""
    out: list[tuple[int, str]] = []
    for r in range(rounds):
        out += [(r, v) for v in (VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS)))]
    return out


def report_bench(ctx: Context, cfg: BenchConfig, prof: profiles.Profile,
                 only: Sequence[str]) -> int:
    """--report: aggregate the console logs of the last run again (no build, no boot)."""
    glob = boot_filter(cfg.filter, only)
    saved = read_json(ctx.build / RESULTS / "machine.json")
    machine = machine_from_json(saved) or Machine(host.host_cpu_model(), host.host_cores(),
                                                  profiles.vcpus(prof), "unknown",
                                                  profile=prof.name, base_before=cfg.base_before)
    rounds = machine.rounds if machine.rounds > 0 else 1
    reps = machine.reps if machine.reps > 0 else 1
    reports = {v: [pipeline.rereport(ctx, prof.name, round_dir(ctx.build, prof, v, r),
                                     hint="run make bench first")
                   for r in range(rounds)]
               for v in VARIANTS}
    return finish(ctx.build, reports, machine, only, glob, reps)


def end_leftovers(build_root: Path) -> None:
    """Kill kernels of this build root that earlier runs left running (they would take cores
    from the measurement); say so."""
    for pid, image in host.leftover_kernels(build_root).items():
        say(f"a kernel left running by an earlier run: pid {pid} ({image}); killing it")
        procs.kill_below(pid, procs.children_of_self(), include_root=True)


def run_bench(ctx: Context, opts: BenchOptions) -> int:
    """Validate, prepare both trees, build, boot base/series/control per round, report."""
    validate_options(opts)
    cfg = load_bench_config(ctx.repo)
    prof = bench_profile(ctx.repo, opts.profile or cfg.profile, opts.vcpus)
    if opts.report_only:
        return report_bench(ctx, cfg, prof, opts.only)
    point_s = opts.reps * opts.duration_ms / 1000
    if point_s >= prof.timeout:
        raise DriverError(f"--reps {opts.reps} x --duration-ms {opts.duration_ms} is {point_s:.0f}s "
                          f"for each point, over the {prof.timeout}s limit of a {prof.name} boot")
    glob = boot_filter(cfg.filter, opts.only)
    tree, base_label = pipeline.prepare(ctx, opts.kernel_src, opts.kernel_ref)
    trees: dict[str, PreparedTree] = {SERIES: tree,
                                      BASE: ensure_base_worktree(ctx.repo, tree, cfg.base_before)}
    outs = {v: profiles.out_dir(ctx.build, prof, v) for v in (BASE, SERIES)}
    if not opts.no_build:
        # the base is older than the suite: carried onto it (carry.py), as bisect does
        carried = carry.plan(trees[BASE].path, ctx.repo)
        if carried.describe():
            say(f"carrying the suite onto the base: {carried.describe()}")
        for i, v in enumerate((BASE, SERIES), 1):
            say(f"building {v} ({i}/2)")
            build(trees[v].path, prof, ctx.repo, ctx.build, opts.jobs, out=outs[v],
                  kconfig_add=carried.kconfig if v == BASE else ())
    images = {v: pipeline.require_image(ctx.build, prof, outs[v]) for v in (BASE, SERIES)}
    shim, accel = pipeline.choose_qemu(prof, images[SERIES], ctx.build)
    seed = opts.seed or random.randrange(1, MAX_SEED + 1)
    base = trees[BASE]
    end_leftovers(ctx.build)
    machine = Machine(cpu_model=host.host_cpu_model(), host_cores=host.host_cores(),
                      vcpus=profiles.vcpus(prof), accel=accel or "uml", profile=prof.name,
                      reps=opts.reps, rounds=opts.rounds, duration_ms=opts.duration_ms, seed=seed,
                      base_before=cfg.base_before, base_commit=kernel_commit(base),
                      base_patches=len(base.patches), series_commit=kernel_commit(tree),
                      series_patches=len(tree.patches), load_before=host.load_average(),
                      depth=opts.depth)
    if machine.warning:
        say(f"WARNING: {machine.warning}")
    if machine.emulated:
        say("EMULATED: QEMU/TCG is not a contention measurement; the table gives no verdicts")
    write_json(ctx.build / RESULTS / "machine.json", machine.to_json())
    args = kernel_args(seed, opts.reps, opts.duration_ms, opts.depth)
    reports: dict[str, list[Report]] = {v: [] for v in VARIANTS}
    order = boot_order(opts.rounds)
    for i, (r, v) in enumerate(order, 1):
        load = host.load_average()
        say(f"booting {v} ({i}/{len(order)}, round {r + 1}): {glob}"
            + (f"; load average {load:.2f}" if load is not None else ""))
        probe = host.OtherLoad.start()
        report = pipeline.boot_and_report(
            ctx, prof, trees[KERNEL_OF[v]], base_label, round_dir(ctx.build, prof, v, r), args,
            glob, shim=shim, out=outs[KERNEL_OF[v]], echo=opts.echo)
        reports[v].append(report)
        other = probe.cores()
        machine.other_cores.setdefault(v, []).append(other)
        say(f"{v}: {report.status.upper()} in {report.elapsed:.0f}s"
            + (f"; the rest of the host kept {other:.2f} of a core busy meanwhile"
               if other is not None else ""))
    write_json(ctx.build / RESULTS / "machine.json", machine.to_json())
    return finish(ctx.build, reports, machine, opts.only, glob, opts.reps)
