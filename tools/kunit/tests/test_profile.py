"""profile: metadata, unknown profiles, accel choice and the qemu shim."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cgkunit import profile as pf
from cgkunit.common import DriverError
from conftest import KUNIT_DIR

REPO = KUNIT_DIR.parent.parent


def write_profile(repo: Path, name: str, text: str) -> Path:
    d = repo / pf.PROFILES_DIR
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{name}.config"
    path.write_text(text)
    return path


def test_parse_metadata(tmp_path: Path) -> None:
    write_profile(tmp_path, "x86_64-kcsan", "#@ arch: x86_64\n#@ kernel_args: a=1 'b=two words'\n"
                  "#@ qemu_smp: 4\n#@ boot_timeout: 180\n#@ timeout: 1800\n"
                  "#@ description: x86_64 QEMU, KCSAN\n# plain comment\nCONFIG_KCSAN=y\n")
    p = pf.load_profile(tmp_path, "x86_64-kcsan")
    assert p == pf.Profile(name="x86_64-kcsan", arch="x86_64",
                           fragment=(tmp_path / pf.PROFILES_DIR / "x86_64-kcsan.config").resolve(),
                           kernel_args=["a=1", "b=two words"], qemu_smp=4, boot_timeout=180,
                           timeout=1800, description="x86_64 QEMU, KCSAN")


def test_defaults_and_um_ignores_smp(tmp_path: Path) -> None:
    write_profile(tmp_path, "um-x", "#@ arch: um\n#@ qemu_smp: 4\nCONFIG_X=y\n")
    p = pf.load_profile(tmp_path, "um-x")
    assert (p.arch, p.kernel_args, p.qemu_smp, p.boot_timeout, p.timeout) == ("um", [], None, 120, 900)


@pytest.mark.parametrize("text,needle", [
    ("#@ arch: arm\n", "arch must be one of um, x86_64, got 'arm'"),
    ("#@ timeout: soon\n", "timeout must be a positive integer, got 'soon'"),
    ("#@ boot_timeout: 0\n", "boot_timeout must be a positive integer"),
    ("#@ nonsense\n", "expected '#@ key: value'"),
])
def test_bad_metadata(tmp_path: Path, text: str, needle: str) -> None:
    write_profile(tmp_path, "bad", text)
    with pytest.raises(DriverError) as exc:
        pf.load_profile(tmp_path, "bad")
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_watchdog_rules_and_isolation(tmp_path: Path) -> None:
    write_profile(tmp_path, "x", "#@ arch: x86_64\n#@ crash_grace: 15\n#@ storm_repeats: 5\n"
                  "#@ storm_window: 12.5\n#@ post_report_silence: 0\n#@ isolate: suite\n")
    p = pf.load_profile(tmp_path, "x")
    assert (p.crash_grace, p.storm_repeats, p.storm_window, p.post_report_silence, p.isolate) == \
        (15.0, 5, 12.5, 0.0, "suite")
    write_profile(tmp_path, "d", "#@ arch: um\n#@ isolate: none\n")
    d = pf.load_profile(tmp_path, "d")
    assert (d.crash_grace, d.storm_repeats, d.storm_window, d.post_report_silence, d.isolate) == \
        (pf.CRASH_GRACE_S, pf.STORM_REPEATS, pf.STORM_WINDOW_S, pf.POST_REPORT_SILENCE_S, "")
    assert (pf.CRASH_GRACE_S, pf.STORM_REPEATS, pf.STORM_WINDOW_S, pf.POST_REPORT_SILENCE_S) == \
        (5.0, 3, 30.0, 30.0)


@pytest.mark.parametrize("text,needle", [
    ("#@ crash_grace: soon\n", "crash_grace must be a number of seconds >= 0 (0: off), got 'soon'"),
    ("#@ post_report_silence: -1\n", "post_report_silence must be a number of seconds >= 0"),
    ("#@ storm_window: nan\n", "storm_window must be a number of seconds >= 0"),
    ("#@ storm_repeats: 1\n", "storm_repeats must be 0 (off) or an integer >= 2, got '1'"),
    ("#@ storm_repeats: many\n", "storm_repeats must be 0 (off) or an integer >= 2"),
    ("#@ isolate: cases\n", "isolate must be one of suite, test or none, got 'cases'"),
])
def test_bad_watchdog_metadata(tmp_path: Path, text: str, needle: str) -> None:
    path = write_profile(tmp_path, "bad", text)
    with pytest.raises(DriverError) as exc:
        pf.load_profile(tmp_path, "bad")
    assert needle in str(exc.value) and str(path) in str(exc.value)


def test_unknown_profile_lists_the_known_ones(tmp_path: Path) -> None:
    write_profile(tmp_path, "b", "#@ arch: um\n")
    write_profile(tmp_path, "a", "#@ arch: um\n")
    with pytest.raises(DriverError) as exc:
        pf.load_profile(tmp_path, "c")
    assert str(exc.value) == "unknown profile 'c' (known: a, b)"
    with pytest.raises(DriverError):
        pf.load_profile(tmp_path, "../a")


def test_the_repo_profiles_parse() -> None:
    for name in pf.list_profiles(REPO):
        p = pf.load_profile(REPO, name)
        assert p.arch in pf.ARCHES and p.timeout > 0 and p.boot_timeout > 0


def test_dirs(tmp_path: Path) -> None:
    p = pf.Profile(name="um-lockdep", arch="um", fragment=tmp_path)
    assert pf.out_dir(tmp_path, p) == tmp_path / "out" / "um-lockdep"
    assert pf.results_dir(tmp_path, "um-lockdep") == tmp_path / "results" / "um-lockdep"
    assert pf.results_dir(tmp_path, "um-lockdep", "broken") == tmp_path / "results" / "um-lockdep+broken"


# --- shim ---------------------------------------------------------------------

def fake_qemu(tmp_path: Path, body: str = "") -> Path:
    d = tmp_path / "realbin"
    d.mkdir(exist_ok=True)
    q = d / pf.QEMU
    q.write_text(f"#!{sys.executable}\nimport sys, time\n" + (body or "for a in sys.argv[1:]:\n    print(a)\n"))
    q.chmod(0o755)
    return q


KUNIT_ARGS = ["-nodefaults", "-m", "1024", "-kernel", "/b/bzImage", "-append",
              "kunit.enable=1 console=ttyS0 kunit_shutdown=reboot", "-no-reboot", "-nographic",
              "-accel", "kvm", "-accel", "hvf", "-accel", "tcg", "-serial", "stdio",
              "-bios", "qboot.rom", "-smp", "4"]


def run_shim(shim_dir: Path, args: list[str]) -> list[str]:
    out = subprocess.run([str(shim_dir / pf.QEMU), *args], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


@pytest.mark.parametrize("accel", ["tcg", "kvm"])
def test_shim_keeps_only_the_chosen_accel(tmp_path: Path, accel: str) -> None:
    real = fake_qemu(tmp_path)
    shim = pf.make_shim(tmp_path / "build", accel, str(real))
    assert shim == tmp_path / "build" / "shim"
    got = run_shim(shim, KUNIT_ARGS)
    expected = [a for a in KUNIT_ARGS]
    for other in ("kvm", "hvf", "tcg"):
        if other != accel:
            i = expected.index(other)
            del expected[i - 1:i + 1]
    assert got == expected
    assert got.count("-accel") == 1 and got[got.index("-accel") + 1] == accel
    assert "kunit.enable=1 console=ttyS0 kunit_shutdown=reboot" in got


def test_shim_adds_the_accel_when_none_was_given(tmp_path: Path) -> None:
    real = fake_qemu(tmp_path)
    shim = pf.make_shim(tmp_path, "tcg", str(real))
    assert run_shim(shim, ["-m", "256", ""]) == ["-m", "256", "", "-accel", "tcg"]


def test_find_real_qemu_skips_the_shim(tmp_path: Path) -> None:
    real = fake_qemu(tmp_path)
    shim = pf.make_shim(tmp_path, "tcg", str(real))
    path = f"{shim}:{real.parent}"
    assert pf.find_real_qemu(shim, path) == str(real)
    with pytest.raises(DriverError, match="not found"):
        pf.find_real_qemu(shim, str(shim))


# --- accel choice -----------------------------------------------------------------

def accel(tmp_path: Path, mode: str | None = None, kvm: bool = True, qemu: str = "/nonexistent",
          boot_id: str = "boot-1") -> tuple[str, str]:
    dev = tmp_path / "kvm"
    if kvm:
        dev.write_text("")
    bid = tmp_path / "boot_id"
    bid.write_text(boot_id + "\n")
    (tmp_path / "bzImage").write_bytes(b"kernel")
    return pf.choose_accel(tmp_path / "bzImage", tmp_path, mode, env={}, kvm_dev=dev, qemu=qemu,
                           boot_id_file=bid, probe_seconds=1.0)


def test_accel_forced(tmp_path: Path) -> None:
    assert accel(tmp_path, "tcg") == ("tcg", "forced by CGKUNIT_ACCEL=tcg")
    assert accel(tmp_path, "kvm", kvm=False)[0] == "kvm"
    assert pf.choose_accel(tmp_path, tmp_path, env={"CGKUNIT_ACCEL": "tcg"})[0] == "tcg"
    with pytest.raises(DriverError, match="CGKUNIT_ACCEL must be one of auto, kvm, tcg"):
        accel(tmp_path, "hvf")


def test_accel_without_kvm_device(tmp_path: Path) -> None:
    got, why = accel(tmp_path, kvm=False)
    assert got == "tcg" and "is not accessible" in why


def test_accel_without_an_image_does_not_probe_or_cache(tmp_path: Path) -> None:
    dev = tmp_path / "kvm"
    dev.write_text("")
    got, why = pf.choose_accel(tmp_path / "missing", tmp_path, env={}, kvm_dev=dev, qemu="/x")
    assert got == "tcg" and "no kernel image" in why
    assert not (tmp_path / "accel.json").exists()


def test_accel_probe_fast_kvm(tmp_path: Path) -> None:
    q = fake_qemu(tmp_path, "print('early console in setup code')\nprint('Linux version 7.3.4')\n"
                            "sys.stdout.flush()\ntime.sleep(30)\n")
    got, why = accel(tmp_path, qemu=str(q))
    assert got == "kvm" and "within" in why
    cached = json.loads((tmp_path / "accel.json").read_text())
    assert cached["boot_id"] == "boot-1" and cached["accel"] == "kvm"


def test_accel_probe_slow_kvm_and_cache(tmp_path: Path) -> None:
    q = fake_qemu(tmp_path, "time.sleep(30)\n")
    assert accel(tmp_path, qemu=str(q))[0] == "tcg"
    fast = fake_qemu(tmp_path, "print('Linux version 7.3.4', flush=True)\ntime.sleep(30)\n")
    got, why = accel(tmp_path, qemu=str(fast))
    assert got == "tcg" and "cached" in why  # same boot: no second probe
    assert accel(tmp_path, qemu=str(fast), boot_id="boot-2")[0] == "kvm"  # new boot: probe again
