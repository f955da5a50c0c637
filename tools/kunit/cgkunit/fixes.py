"""Cases that fail before the patch of kernel/series that fixes what they catch.

tools/kunit/fixed-by.json maps a case ("suite.case") to the patch of kernel/series that
fixes the bug it catches. Before that patch the case fails, and must: it is how the case
shows it can see the bug. series-check counts such a failure as expected at the commits
before the patch (and says so), and as a failure from the patch on.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, Sequence

from .common import DriverError, read_json

FIXED_BY = Path("tools") / "kunit" / "fixed-by.json"
CASE = re.compile(r"[a-z0-9_]+\.[a-z0-9_]+")


def load_fixed_by(repo: Path, series: Sequence[str]) -> dict[str, str]:
    """case -> patch name, checked against kernel/series; {} when the file is absent."""
    path = repo / FIXED_BY
    if not path.is_file():
        return {}
    data = read_json(path)
    where = str(FIXED_BY)
    if data is None:
        raise DriverError(f"{where}: not readable as JSON")
    if not isinstance(data, dict):
        raise DriverError(f"{where}: want an object of \"suite.case\": \"patch of kernel/series\"")
    out: dict[str, str] = {}
    for case, patch in data.items():
        if not CASE.fullmatch(case):
            raise DriverError(f"{where}: {case!r} is not a case name (suite.case)")
        if not isinstance(patch, str) or patch not in series:
            raise DriverError(f"{where}: {case}: {patch!r} is not a patch of kernel/series")
        out[case] = patch
    return out


def pending_fixes(fixed_by: Mapping[str, str], series: Sequence[str],
                  applied: str) -> dict[str, str]:
    """The cases whose fixing patch comes after `applied` (base: none applied yet)."""
    done = series.index(applied) + 1 if applied in series else 0
    return {case: patch for case, patch in fixed_by.items() if series.index(patch) >= done}


def split_expected(failed: Sequence[str], pending: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(failures a pending fix explains, the others)."""
    return ([t for t in failed if t in pending], [t for t in failed if t not in pending])
