"""Make the cgkunit package importable and keep git hermetic in tests."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

KUNIT_DIR = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
sys.path.insert(0, str(KUNIT_DIR))


@pytest.fixture(autouse=True)
def hermetic_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """No system/global git config, no stray CGKUNIT_* settings, none of the Makefile's
    variables (make pytest exports those it was given, and the driver's options read them)."""
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    for var in ("CGKUNIT_BUILD", "CGKUNIT_APT_MIRROR", "CGKUNIT_ACCEL", "CGKUNIT_ISOLATE",
                "CGKUNIT_UNPINNED", "CGKUNIT_WAIT_LOCK", "CGKUNIT_LOCK_HOLDER",
                "CGKUNIT_MAKE_GOALS", "KERNEL_SRC", "KERNEL_REF", "KERNEL_ARGS", "FILTER",
                "PROFILE", "RUNS", "SEED", "UNTIL_FAIL", "FROM", "GOOD", "BAD", "SIGNATURE",
                "REPS", "DURATION_MS", "ROUNDS", "VCPUS", "DEPTH", "ONLY", "CYCLES", "MODULE_ARGS", "KDIR"):
        monkeypatch.delenv(var, raising=False)
