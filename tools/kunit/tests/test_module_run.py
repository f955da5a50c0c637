"""make module-run: MODULE_ARGS checks, the initramfs, the console cut into cycles, verdicts."""
from __future__ import annotations

import stat
from pathlib import Path

import pytest

from cgkunit import module_run as mr
from cgkunit.common import DriverError
from cgkunit.console import parse_console
from cgkunit.report import Report

REPO = Path(__file__).resolve().parents[3]
DATA = Path(__file__).parent / "data"


def read_newc(blob: bytes) -> dict[str, tuple[int, bytes, tuple[int, int]]]:
    """name -> (mode, data, (rdevmajor, rdevminor)) of a newc archive."""
    out = {}
    pos = 0
    while True:
        assert blob[pos:pos + 6] == b"070701"
        fields = [int(blob[pos + 6 + 8 * i: pos + 14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = fields[1], fields[6], fields[11]
        name_at = pos + 110
        name = blob[name_at:name_at + namesize - 1].decode()
        data_at = name_at + namesize
        data_at += -data_at % 4
        data = blob[data_at:data_at + size]
        pos = data_at + size
        pos += -pos % 4
        if name == "TRAILER!!!":
            return out
        out[name] = (mode, data, (fields[9], fields[10]))


def test_initramfs_holds_busybox_module_init_and_console(tmp_path: Path) -> None:
    ko = tmp_path / "cgroup_kunit.ko"
    ko.write_bytes(b"\x7fELF module")
    bb = tmp_path / "busybox"
    bb.write_bytes(b"\x7fELF busybox")
    script = mr.init_script(3, ["seed=7", "threads=4"])
    cpio = mr.write_initramfs(tmp_path / "out" / "initramfs.cpio", ko, script, busybox=bb)
    blob = cpio.read_bytes()
    assert len(blob) % 512 == 0
    files = read_newc(blob)
    assert files["init"][1].decode() == script
    assert stat.S_IMODE(files["init"][0]) == 0o755 and stat.S_ISREG(files["init"][0])
    assert files["cgroup_kunit.ko"][1] == b"\x7fELF module"
    assert files["bin/busybox"][1] == b"\x7fELF busybox"
    mode, _, rdev = files["dev/console"]
    assert stat.S_ISCHR(mode) and rdev == (5, 1)
    assert all(stat.S_ISDIR(files[d][0]) for d in ("bin", "dev", "proc", "sys", "tmp"))


def test_init_script_loads_unloads_and_scans() -> None:
    script = mr.init_script(50, ["seed=1"])
    assert script.startswith("#!/bin/busybox sh\n")
    assert "insmod /cgroup_kunit.ko seed=1" in script
    assert "while [ $i -le 50 ]" in script
    assert "rmmod cgroup_kunit" in script
    assert "echo scan > $K" in script and "echo clear > $K" in script
    assert script.rstrip().endswith("reboot -f")  # QEMU runs with -no-reboot


@pytest.mark.parametrize("text", ["seed=1 threads=4", "", "duration_ms=200 provoke=warn"])
def test_module_args_accepts_declared_parameters(text: str) -> None:
    assert mr.module_args(text, REPO) == text.split()


@pytest.mark.parametrize("text,message", [
    ("nosuch=1", "nosuch is not a parameter of cgroup_kunit"),
    ("cgroup_kunit.seed=1", "take no 'cgroup_kunit.' prefix"),
    ("seed", "want seed=<value>"),
    ("seed=1;reboot", "want seed=<value>"),
    ("seed='1", "MODULE_ARGS: No closing quotation"),
])
def test_module_args_refuses_bad_words(text: str, message: str) -> None:
    with pytest.raises(DriverError, match=message.replace("(", r"\(")):
        mr.module_args(text, REPO)


@pytest.mark.parametrize("n", [0, -1, mr.MAX_CYCLES + 1])
def test_cycles_out_of_range(n: int) -> None:
    with pytest.raises(DriverError, match="CYCLES"):
        mr.check_cycles(n)


def console(cycles: int, fail_case: int = 0, leak: int = 0, rmmod_fail: int = 0) -> str:
    lines = ["[    1.000000] Linux version 7.3.4", f"{mr.MARK} start: {cycles} cycles: insmod x"]
    for i in range(1, cycles + 1):
        lines.append(f"{mr.MARK} cycle {i} of {cycles}: insmod")
        ok = "not ok" if i == fail_case else "ok"
        lines += ["[    2.000000] KTAP version 1", "[    2.000000] 1..1",
                  "[    2.000000]     KTAP version 1", "[    2.000000]     # Subtest: cgroup_ucount",
                  "[    2.000000]     1..1",
                  f"[    2.000000]     {ok} 1 ucount_inc_dec",
                  f"[    2.000000] {ok} 1 cgroup_ucount"]
        lines.append(f"{mr.MARK} cycle {i}: debugfs cgroup_ucount {'fail' if i == fail_case else 'pass'}")
        if i == rmmod_fail:
            lines.append(f"{mr.MARK} cycle {i}: rmmod failed")
            break
        lines.append(f"{mr.MARK} cycle {i} of {cycles}: unloaded")
    lines.append(f"{mr.MARK} kmemleak begin: {leak}")
    lines += ["unreferenced object 0xffff888003 (size 64):"] * leak
    lines.append(f"{mr.MARK} kmemleak end")
    lines.append(f"{mr.MARK} done: {'rmmod' if rmmod_fail else 'ok'}")
    return "\n".join(lines) + "\n"


def test_split_console_cuts_cycles() -> None:
    log = mr.split_console(console(3))
    assert [c.number for c in log.cycles] == [1, 2, 3]
    assert all(c.unloaded and not c.failed for c in log.cycles)
    assert log.cycles[1].debugfs == {"cgroup_ucount": "pass"}
    assert log.kmemleak == 0 and log.done == "ok"
    report = parse_console("\n".join(log.cycles[0].lines))
    assert report.status == "pass" and report.counts.passed == 1


def test_split_console_keeps_leaks_and_failures() -> None:
    log = mr.split_console(console(2, leak=2, rmmod_fail=2))
    assert log.kmemleak == 2 and len(log.kmemleak_text) == 2
    assert log.cycles[1].failed == "rmmod" and not log.cycles[1].unloaded


def result(number: int, status: str = "pass", mismatch: list[str] | None = None) -> mr.CycleResult:
    return mr.CycleResult(number=number, status=status, passed=1, failed=0, skipped=0, crashed=0,
                          splats=0, debugfs_mismatch=mismatch or [], results="r")


def test_problems_clean_run_has_none() -> None:
    log = mr.split_console(console(2))
    assert mr.problems_of(log, [result(1), result(2)], 2, "completed") == []


def test_problems_name_each_failure() -> None:
    log = mr.split_console(console(3, leak=1))
    problems = mr.problems_of(log, [result(1), result(2, "fail", ["cgroup_ucount: console fail, debugfs pass"])],
                              3, "hang")
    assert any(p.startswith("cycle 2: fail") for p in problems)
    assert "cycle 2: cgroup_ucount: console fail, debugfs pass" in problems
    assert "kmemleak: 1 unreferenced object(s)" in problems
    log.cycles = log.cycles[:2]
    assert "2 of 3 cycles completed (the guest hang)" in mr.problems_of(log, [result(1), result(2)], 3, "hang")


def test_debugfs_mismatch_against_console() -> None:
    text = "\n".join(mr.split_console(console(1, fail_case=1)).cycles[0].lines)
    report = parse_console(text)
    assert mr.debugfs_mismatches(report, {"cgroup_ucount": "fail"}) == []
    assert mr.debugfs_mismatches(report, {"cgroup_ucount": "pass"}) == \
        ["cgroup_ucount: console fail, debugfs pass"]
    assert mr.debugfs_mismatches(report, {}) == ["cgroup_ucount: console fail, debugfs missing"]


def test_qemu_command_boots_our_initramfs(tmp_path: Path) -> None:
    from cgkunit.profile import load_profile
    prof = load_profile(REPO, "x86_64-kasan")
    cmd = mr.qemu_command(tmp_path / "bzImage", tmp_path / "i.cpio", prof, ["kunit.filter_glob=x"])
    assert cmd[0] == "qemu-system-x86_64"
    assert cmd[cmd.index("-initrd") + 1] == str(tmp_path / "i.cpio")
    append = cmd[cmd.index("-append") + 1]
    assert "console=ttyS0" in append and "kmemleak=on" in append and "kunit.filter_glob=x" in append
    assert "i8042.nokbd" in append  # the profile's own arguments


def clean_recorded_cycles(name: str) -> tuple[mr.GuestLog, list[Report]]:
    """A recorded two-cycle module-run console: both cycles loaded, passed without a
    report and unloaded, debugfs agreeing, kmemleak clean; the log and each cycle's report."""
    log = mr.split_console((DATA / name).read_text())
    assert [c.number for c in log.cycles] == [1, 2]
    assert all(c.unloaded and not c.failed for c in log.cycles)
    assert log.kmemleak == 0 and log.done == "ok"
    reports = [parse_console("\n".join(c.lines)) for c in log.cycles]
    for cycle, report in zip(log.cycles, reports):
        assert report.status == "pass" and not report.splats, cycle.number
        assert mr.debugfs_mismatches(report, cycle.debugfs) == []
    assert mr.problems_of(log, [result(c.number) for c in log.cycles], 2, "completed") == []
    return log, reports


def test_recorded_kasan_console(tmp_path: Path) -> None:
    """The first two of 50 cycles of a real x86_64-kasan module-run (threads=4), then its
    kmemleak scan: every cycle parses as a full KTAP document, debugfs agrees, no leak."""
    log, reports = clean_recorded_cycles("module_run_kasan_2cycles.log")
    for cycle, report in zip(log.cycles, reports):
        assert report.counts.passed > 40
        assert set(cycle.debugfs) == set(mr.suite_status(report))
    # recorded when cgroup_migrate_dynmods always ran (now only with MODULE_ARGS=dynmods=1):
    # favordynmods is one-way, so the global-lock migrate suite skips from the second cycle on
    second = parse_console("\n".join(log.cycles[1].lines))
    skipped = [t.id for t in second.tests if t.level == "case" and t.status == "SKIP"]
    assert "cgroup_migrate.migrate_idle" in skipped


# --- KDIR: the suite built against a user's kernel build directory ---------------------------

def fake_kdir(root: Path, config: tuple[str, ...] = mr.KDIR_NEEDS + (mr.KMEMLEAK,),
              helpers: bool = True, image: bool = True, symvers: bool = True) -> Path:
    """An O= build directory as Kbuild leaves it: .config, Module.symvers, kernel.release,
    bzImage, and a "source" link to a tree whose cgroup.h has (or lacks) the helpers."""
    src = root / "linux"
    (src / "include" / "linux").mkdir(parents=True)
    (src / "include" / "linux" / "cgroup.h").write_text(
        "struct cgroup *cgroup_create_for_test(struct cgroup *parent, const char *name);\n"
        if helpers else "/* no helpers */\n")
    kdir = root / "build"
    (kdir / "include" / "config").mkdir(parents=True)
    (kdir / "source").symlink_to(src)
    (kdir / ".config").write_text("# comment\n" + "\n".join(config) + "\n")
    (kdir / "include" / "config" / "kernel.release").write_text("7.3.4-user\n")
    if symvers:
        (kdir / "Module.symvers").write_text("")
    if image:
        (kdir / "arch" / "x86" / "boot").mkdir(parents=True)
        (kdir / "arch" / "x86" / "boot" / "bzImage").write_bytes(b"MZ")
    return kdir


def test_kdir_accepted(tmp_path: Path) -> None:
    kdir = mr.check_kdir(str(fake_kdir(tmp_path)))
    assert kdir.source == (tmp_path / "linux").resolve()
    assert kdir.release == "7.3.4-user" and kdir.kmemleak
    assert kdir.image.name == "bzImage"
    assert mr.kdir_make_command(kdir.path, tmp_path / "m", 2) == [
        "make", "-C", str(kdir.path), f"M={tmp_path / 'm'}", "CONFIG_CGROUP_KUNIT_TEST=m",
        "-j2", "modules"]


@pytest.mark.parametrize("kwargs, message", [
    ({"symvers": False}, "no Module.symvers: want a configured and built kernel"),
    ({"image": False}, "no arch/x86/boot/bzImage"),
    ({"helpers": False}, "does not carry kernel/series"),
    ({"config": ("CONFIG_X86_64=y", "CONFIG_MODULES=y")}, "its .config lacks CONFIG_MODULE_UNLOAD=y"),
])
def test_kdir_refused(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(DriverError, match=message):
        mr.check_kdir(str(fake_kdir(tmp_path, **kwargs)))  # type: ignore[arg-type]


def test_kdir_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(DriverError, match="not a directory"):
        mr.check_kdir(str(tmp_path / "nope"))


def test_kdir_without_kmemleak_is_no_problem(tmp_path: Path) -> None:
    kdir = mr.check_kdir(str(fake_kdir(tmp_path, config=mr.KDIR_NEEDS)))
    assert not kdir.kmemleak
    log = mr.split_console(console(1).replace(f"{mr.MARK} kmemleak begin: 0\n", "")
                           .replace(f"{mr.MARK} kmemleak end\n", "")
                           .replace(f"{mr.MARK} done", f"{mr.MARK} kmemleak: unavailable\n"
                                    f"{mr.MARK} done"))
    assert log.kmemleak_off
    assert mr.problems_of(log, [result(1)], 1, "completed", kmemleak=False) == []
    assert mr.problems_of(log, [result(1)], 1, "completed") == ["kmemleak was not available in the guest"]


def test_recorded_kdir_console() -> None:
    """A real `make module-run KDIR=<an x86_64-kasan O= build dir> CYCLES=2
    FILTER='cgroup_rstat_reader*'`: the module built out of tree against that directory,
    loaded into its bzImage; both cycles pass, debugfs agrees, kmemleak is clean."""
    _, reports = clean_recorded_cycles("module_run_kdir_2cycles.log")
    for report in reports:
        assert mr.suite_status(report) == {"cgroup_rstat_reader": "PASS"}
        assert report.counts.passed == 12


def test_kdir_summary_names_the_kernel() -> None:
    summary = {"profile": "x86_64-kasan", "kernel": "KDIR /k (x86_64-kasan's watchdog)",
               "status": "pass", "cycles_completed": 1, "cycles_wanted": 1, "elapsed": 50.0,
               "accel": "tcg", "kmemleak": 0, "problems": [], "cycles": []}
    assert mr.format_module_run(summary, None).startswith(
        "cgkunit: KDIR /k (x86_64-kasan's watchdog) module-run: PASS: 1 of 1")
