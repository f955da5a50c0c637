"""deps: which packages are missing, and what happens about it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cgkunit import deps
from cgkunit.common import DriverError


def test_missing_packages() -> None:
    have = {"flex", "git"}
    assert deps.missing_packages(["flex", "bison", "git", "bc"], lambda p: p in have) == ["bison", "bc"]


def test_nothing_to_do() -> None:
    assert deps.ensure_deps(["flex"], lambda p: True, is_root=False) == []


def test_not_root_names_the_packages() -> None:
    with pytest.raises(DriverError) as exc:
        deps.ensure_deps(["flex", "bison", "ccache"], lambda p: p == "flex", is_root=False)
    assert "missing Debian packages: bison ccache" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_root_installs_noninteractively(monkeypatch: pytest.MonkeyPatch) -> None:
    installed = {"flex"}
    calls: list[tuple[list[str], str]] = []

    def fake_run(args: list[str], **kw: Any) -> None:
        calls.append((list(args), kw["env"]["DEBIAN_FRONTEND"]))
        if args[:2] == ["apt-get", "install"]:
            installed.update(args[3:])

    monkeypatch.setattr(deps, "run_cmd", fake_run)
    got = deps.ensure_deps(["flex", "bison", "bc"], lambda p: p in installed, is_root=True)
    assert got == ["bison", "bc"]
    assert calls == [(["apt-get", "update"], "noninteractive"),
                     (["apt-get", "install", "-y", "bison", "bc"], "noninteractive")]


def test_install_that_did_not_take(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deps, "run_cmd", lambda args, **kw: None)
    with pytest.raises(DriverError, match="did not install: bison"):
        deps.ensure_deps(["bison"], lambda p: False, is_root=True)


def test_default_list_is_the_debian_build_set() -> None:
    for p in ("flex", "bison", "bc", "libelf-dev", "libssl-dev", "qemu-system-x86", "ccache",
              "rsync", "git"):
        assert p in deps.PACKAGES


def test_run_cmd_failure_is_one_line(tmp_path: Path) -> None:
    from cgkunit.common import run_cmd
    script = tmp_path / "tool"
    script.write_text("#!/bin/sh\necho first >&2\necho 'E: last words' >&2\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(DriverError) as exc:
        run_cmd([str(script), "-o", "Dir::Etc=x", "update"])
    assert str(exc.value) == f"{script} update failed: E: last words"
    with pytest.raises(DriverError, match="command not found: /no/such"):
        run_cmd(["/no/such"])
