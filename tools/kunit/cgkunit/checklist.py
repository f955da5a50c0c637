"""checks.json: the runs that must fail in exactly the expected way, read and checked
before any build (the check command runs them; bisect-selftest takes its culprit, a
breakage patch, from one)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .common import DriverError
from .params import check_filter, check_kernel_args
from .profile import PROFILES_DIR, isolate_mode
from .report import INTERRUPTED, STATUS_EXIT

CHECKS_FILE = Path("tools") / "kunit" / "checks.json"
RUN_STATUSES = ("pass", "fail", *sorted(set(STATUS_EXIT) - {"pass", "fail", INTERRUPTED}))


@dataclass(frozen=True)
class ExpectedSplat:
    kind: str
    test: str
    title: str


@dataclass(frozen=True)
class Check:
    """One oracle check from checks.json."""
    name: str
    profile: str
    kernel_args: list[str] = field(default_factory=list)
    extra_patches: list[str] = field(default_factory=list)
    filter: str = ""
    expect_fail: list[str] = field(default_factory=list)
    expect_splat: list[ExpectedSplat] = field(default_factory=list)
    expect_pass_others: bool = True
    expect_status: str = ""
    expect_console: list[str] = field(default_factory=list)
    # "suite"/"test": boot once per suite/test (kunit.py --run_isolated), "none": one boot;
    # "" (not set): $CGKUNIT_ISOLATE or check --isolate, else the profile's isolate
    isolate: str = ""
    # a race that a boot catches or misses as a whole (see docs/driver.md#checks): boot
    # again, up to this many boots, while the only problem is expected evidence not seen
    boots: int = 1

    @property
    def wanted_status(self) -> str:
        if self.expect_status:
            return self.expect_status
        return "fail" if self.expect_fail or self.expect_splat else "pass"


MAX_BOOTS = 5


def _strings(where: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DriverError(f"{where}: expected a list of strings")
    return list(value)


def _isolate(where: str, value: Any) -> str:
    """A check's isolate key: "suite", "test" or "none" ("" when absent)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DriverError(f"{where}: isolate must be a string")
    return isolate_mode(value, f"{where}: isolate") or "none"


def parse_checks(data: Any, where: str = str(CHECKS_FILE)) -> list[Check]:
    """Validate the checks.json document."""
    items = data.get("checks") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise DriverError(f"{where}: expected a list of checks")
    checks: list[Check] = []
    for n, item in enumerate(items):
        at = f"{where}[{n}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) \
                or not isinstance(item.get("profile"), str):
            raise DriverError(f"{at}: each check needs string 'name' and 'profile'")
        at = f"{where}: {item['name']}"
        unknown = set(item) - {"name", "profile", "kernel_args", "extra_patches", "filter",
                               "expect_fail", "expect_splat", "expect_pass_others",
                               "expect_status", "expect_console", "isolate", "boots", "comment"}
        if unknown:
            raise DriverError(f"{at}: unknown keys {', '.join(sorted(unknown))}")
        boots = item.get("boots", 1)
        if not isinstance(boots, int) or isinstance(boots, bool) or not 1 <= boots <= MAX_BOOTS:
            raise DriverError(f"{at}: boots must be a whole number from 1 to {MAX_BOOTS}")
        splats = []
        for s in item.get("expect_splat", []):
            if not isinstance(s, dict) or not all(isinstance(s.get(k), str) for k in ("kind", "test")):
                raise DriverError(f"{at}: expect_splat entries need string 'kind' and 'test'")
            splats.append(ExpectedSplat(kind=s["kind"], test=s["test"], title=str(s.get("title", ""))))
        checks.append(Check(
            name=item["name"], profile=item["profile"],
            kernel_args=_strings(f"{at}: kernel_args", item.get("kernel_args", [])),
            extra_patches=_strings(f"{at}: extra_patches", item.get("extra_patches", [])),
            filter=check_filter(str(item.get("filter", "")), f"{at}: filter"),
            expect_fail=_strings(f"{at}: expect_fail", item.get("expect_fail", [])),
            expect_splat=splats, expect_pass_others=bool(item.get("expect_pass_others", True)),
            expect_status=str(item.get("expect_status", "")),
            expect_console=_strings(f"{at}: expect_console", item.get("expect_console", [])),
            isolate=_isolate(at, item.get("isolate")), boots=boots))
    names = [c.name for c in checks]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise DriverError(f"{where}: duplicate check names {', '.join(dupes)}")
    return checks


def check_isolate(check: Check, default: str | None) -> str | None:
    """The isolate mode of a check's run: its own key, else default (None: the profile's)."""
    if check.isolate:
        return "" if check.isolate == "none" else check.isolate
    return default


def load_checks(repo: Path) -> list[Check]:
    path = repo / CHECKS_FILE
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise DriverError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise DriverError(f"{path}: invalid JSON: {e}") from None
    checks = parse_checks(data, str(path))
    for c in checks:
        validate_check(repo, c, f"{path}: {c.name}")
    return checks


def validate_check(repo: Path, c: Check, at: str) -> None:
    """Every value of one check that the build and boot would find bad, found before them:
    its profile, extra patches, filter (a suite of the suite's), kernel_args (names, and
    values the suite takes unless expect_console names the refusal, as bad-parameters does)
    and expect_status (statuses a run can have); DriverError naming the first bad one."""
    if not (repo / PROFILES_DIR / f"{c.profile}.config").is_file() or "/" in c.profile:
        raise DriverError(f"{at}: unknown profile {c.profile!r}")
    for patch in c.extra_patches:
        if not (repo / patch).is_file():
            raise DriverError(f"{at}: extra patch {patch} does not exist")
    check_filter(c.filter, f"{at}: filter", repo)
    check_kernel_args(c.kernel_args, repo, f"{at}: kernel_args", refusals=c.expect_console)
    unknown = [s for s in c.expect_status.split("|") if s and s not in RUN_STATUSES]
    if unknown or (c.expect_status and not c.expect_status.strip("|")):
        raise DriverError(f"{at}: expect_status {c.expect_status!r}: want one or more of "
                          f"{', '.join(RUN_STATUSES)} joined by '|'")
