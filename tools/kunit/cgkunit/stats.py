"""Small statistics (stdlib only): medians, a bootstrap interval of a median and the
Mann-Whitney U test for benchmark verdicts; the Wilson score interval of a failure rate
(stress, bisect)."""
from __future__ import annotations

import math
import random
import statistics
import zlib
from typing import Sequence

Z95 = 1.959963984540054  # two-sided 95% quantile of the normal distribution


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def seed_of(label: str) -> int:
    """A fixed seed from a label: the same data always gives the same interval."""
    return zlib.crc32(label.encode())


def bootstrap_median(xs: Sequence[float], level: float = 0.95, resamples: int = 2000,
                     seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of xs (a fixed seed: reproducible)."""
    if not xs:
        raise ValueError("no values")
    if len(xs) == 1:
        return xs[0], xs[0]
    rng = random.Random(seed)
    n = len(xs)
    meds = sorted(statistics.median(rng.choices(xs, k=n)) for _ in range(resamples))
    lo = meds[int((1 - level) / 2 * (resamples - 1))]
    hi = meds[int((1 + level) / 2 * (resamples - 1))]
    return float(lo), float(hi)


def _ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """Mid-ranks (1-based) of values, and the sizes of the groups of ties."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    ties: list[int] = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test that a and b come from one distribution
    (normal approximation with tie and continuity corrections: fine from about 8 each);
    1.0 when there is nothing to tell apart."""
    n1, n2 = len(a), len(b)
    if not n1 or not n2:
        return 1.0
    ranks, ties = _ranks([*a, *b])
    u1 = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    mu = n1 * n2 / 2
    n = n1 + n2
    tie_term = sum(t ** 3 - t for t in ties) / (n * (n - 1)) if n > 1 else 0.0
    var = n1 * n2 / 12 * ((n + 1) - tie_term)
    if var <= 0:
        return 1.0
    z = (abs(u1 - mu) - 0.5) / math.sqrt(var)
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a rate of k in n (95% by default); (0, 1) for n = 0."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"{k} of {n}")
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # the bounds are exactly 0 and 1 at k = 0 and k = n; keep rounding from saying otherwise
    return (0.0 if k == 0 else max(0.0, center - half), 1.0 if k == n else min(1.0, center + half))
