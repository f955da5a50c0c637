"""make reach: the console reader's reach records, the usage arithmetic, the table against
the kernel's production contexts, the command's bad input; on the console of a real
um-lockdep boot (data/real_um_reach.log: the main boot of a whole-suite run of this
branch on 2026-11-26; its cgroup_migrate_dynmods boot is left out) and of a real
favordynmods boot (data/real_um_reach_dynmods.log: the second boot of make reach on
2026-11-26, cgroup_migrate_dynmods then cgroup_migrate_dynmods_reach)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from cgkunit import cli, reach
from cgkunit.common import DriverError
from cgkunit.console import parse_console, parse_reach
from conftest import DATA, KUNIT_DIR

REPO = KUNIT_DIR.parent.parent
REAL = DATA / "real_um_reach.log"
REAL_DYNMODS = DATA / "real_um_reach_dynmods.log"

SMALL = """KTAP version 1
1..1
    KTAP version 1
    # Subtest: cgroup_reach
    # module: cgroup_kunit
    1..1
    # lockdep_usage: reach: class usage={-.-.} fd=34 bd=52 name=css_set_lock
    # lockdep_usage: reach: class usage={+.+.} fd=9 bd=1 name=cgroup_mutex
    # lockdep_usage: reach: class usage={....} fd=0 bd=3 name=ucounts_lock
    # lockdep_usage: reach: class usage={+.+.} fd=1 bd=2 name=&sig->cgroup_threadgroup_rwsem#2
    # lockdep_usage: reach: class usage={..-.} fd=1 bd=2 name=&sig->cgroup_threadgroup_rwsem/1
    # lockdep_usage: reach: lockdep debug_locks=1 classes=1873 targets=5
    # lockdep_usage: reach: class usage=none name=cpuset_mutex
    # lockdep_usage: reach: end matched=5
    ok 1 lockdep_usage
ok 1 cgroup_reach
"""


def test_parse_reach_lines() -> None:
    assert parse_reach("lockdep_usage: reach: class usage={-.-.} fd=34 bd=52 name=css_set_lock") \
        == {"kind": "class", "name": "css_set_lock", "usage": "-.-.", "fd": 34, "bd": 52}
    assert parse_reach("x: reach: class usage=none name=per_cpu_ptr(&l, cpu)") \
        == {"kind": "class", "name": "per_cpu_ptr(&l, cpu)", "usage": ""}
    assert parse_reach("x: reach: lockdep debug_locks=0 classes=12 targets=3") \
        == {"kind": "lockdep", "debug_locks": 0, "classes": 12, "targets": 3}
    assert parse_reach("x: reach: end matched=7") == {"kind": "end", "matched": 7}
    assert parse_reach("x: 12 moves, reach: nothing") is None
    assert parse_reach("x: reach: class usage={-.-} fd=1 bd=1 name=odd") is None  # odd length
    assert parse_reach("ucount: metric: rate k=1") is None


def test_reach_records_are_the_case_s_not_its_diagnostics() -> None:
    report = parse_console(SMALL)
    t = report.test("cgroup_reach.lockdep_usage")
    assert t is not None and t.status == "PASS"
    assert len(t.reach) == 8 and not any("reach:" in d for d in t.diagnostics)
    assert report.reach() == t.reach
    assert t.to_json()["reach"][0]["name"] == "css_set_lock"


def test_usage_bits() -> None:
    assert reach.usage_bits("....") == set()
    assert reach.usage_bits("-.-.") == {("hardirq", "W"), ("softirq", "W")}
    assert reach.usage_bits("+.+.") == {("irqs-on", "W"), ("bh-on", "W")}
    assert reach.usage_bits(".?..") == {("hardirq", "R"), ("irqs-on", "R")}
    assert reach.usage_bits("..+-") == {("bh-on", "W"), ("softirq", "R")}
    with pytest.raises(DriverError):
        reach.usage_bits("-.-")
    with pytest.raises(DriverError):
        reach.usage_bits("x...")


def test_base_name() -> None:
    assert reach.base_name("&sig->cgroup_threadgroup_rwsem#2") == "&sig->cgroup_threadgroup_rwsem"
    assert reach.base_name("css_set_lock/1") == "css_set_lock"
    assert reach.base_name("a#3/1") == "a"
    assert reach.base_name("(wq_completion)cgroup_free") == "(wq_completion)cgroup_free"
    assert reach.base_name("ss_rstat_lock(ss)") == "ss_rstat_lock(ss)"


def test_variants_are_joined_and_unregistered_classes_kept() -> None:
    got = reach.reached(parse_console(SMALL).reach())
    sig = "&sig->cgroup_threadgroup_rwsem"
    assert got.classes[sig] == {("irqs-on", "W"), ("bh-on", "W"), ("softirq", "W")}
    assert got.variants[sig] == [f"{sig}#2", f"{sig}/1"]
    assert "cpuset_mutex" in got.classes and "cpuset_mutex" not in got.registered
    assert got.debug_locks == 1 and got.lockdep_classes == 1873


def test_a_lost_or_cut_report_is_an_error() -> None:
    lost = SMALL.replace("    # lockdep_usage: reach: class usage={+.+.} fd=9 bd=1 "
                         "name=cgroup_mutex\n", "")
    with pytest.raises(DriverError, match="printed 5 classes, 4 were read"):
        reach.reached(parse_console(lost).reach())
    cut = SMALL.replace("    # lockdep_usage: reach: end matched=5\n", "")
    with pytest.raises(DriverError, match="cut short"):
        reach.reached(parse_console(cut).reach())


def test_two_reports_are_joined_and_each_must_be_whole() -> None:
    """SMALL twice, the second with what favordynmods adds: the union, the lowest
    debug_locks; a line lost from either report is an error."""
    dyn = SMALL.replace("debug_locks=1", "debug_locks=0").replace(
        "usage={....} fd=0 bd=3 name=ucounts_lock", "usage={-...} fd=0 bd=3 name=ucounts_lock")
    got = reach.reached(parse_console(SMALL).reach() + parse_console(dyn).reach())
    assert got.classes["ucounts_lock"] == {("hardirq", "W")}
    assert got.debug_locks == 0 and got.matched == got.printed == 10
    lost = dyn.replace("    # lockdep_usage: reach: class usage={+.+.} fd=9 bd=1 "
                       "name=cgroup_mutex\n", "")
    with pytest.raises(DriverError, match="printed 5 classes, 4 were read"):
        reach.reached(parse_console(SMALL).reach() + parse_console(lost).reach())
    no_lockdep = "".join(ln for ln in dyn.splitlines(True) if "reach: lockdep" not in ln)
    with pytest.raises(DriverError, match="cut short"):
        reach.reached(parse_console(SMALL).reach() + parse_console(no_lockdep).reach())


def test_real_dynmods_boot_fills_the_per_threadgroup_rwsem() -> None:
    """The main boot never takes &sig->cgroup_threadgroup_rwsem; the favordynmods boot's
    report does, and the union has it beside everything the main boot reached."""
    main = parse_console(REAL.read_text(errors="replace"))
    dyn = parse_console(REAL_DYNMODS.read_text(errors="replace"))
    assert dyn.test("cgroup_migrate_dynmods_reach.lockdep_usage_dynmods").status == "PASS"
    sig = "&sig->cgroup_threadgroup_rwsem"
    assert sig not in reach.reached(main.reach()).registered
    alone = reach.reached(dyn.reach())
    got = reach.reached(main.reach() + dyn.reach())
    assert sig in got.registered and {("irqs-on", "W"), ("irqs-on", "R")} <= got.classes[sig]
    assert reach.reached(main.reach()).registered | alone.registered == got.registered
    _, _, hit, _ = reach.compare(reach.PRODUCTION, got)
    _, _, hit_main, _ = reach.compare(reach.PRODUCTION, reach.reached(main.reach()))
    assert hit > hit_main


def test_compare_marks_missing_and_unexpected_cells() -> None:
    table = (reach.Lock("a", "x.c", {"softirq": reach.Cell("W", "rcu callback"),
                                     "irqs-on": reach.Cell("", "irqsave only")}),
             reach.Lock("b", "y.c", {"bh-on": reach.Cell("WR", "rwsem")}))
    got = reach.Reached(classes={"a": {("irqs-on", "W")}, "b": {("bh-on", "R")}},
                        registered={"a", "b"}, debug_locks=1, matched=2, printed=2)
    rows, gaps, hit, total = reach.compare(table, got)
    assert rows[0] == ["a", "registered", "-", "W?", "W!", "-"]
    assert rows[1] == ["b", "registered", "-", "-", "-", "W? R"]
    assert (hit, total) == (1, 3)
    assert [(g.lock, g.context, g.modes, g.kind) for g in gaps] == [
        ("a", "softirq", "W", "missing"), ("a", "irqs-on", "W", "unexpected"),
        ("b", "bh-on", "W", "missing")]
    text = reach.format_table(table, got, "test")
    assert "1 of 3 production cells reached, 2 missing, 1 unexpected" in text
    assert "  a softirq W: rcu callback" in text


def test_every_class_of_the_suite_has_a_row_and_every_row_a_class() -> None:
    """reach_kunit.c's reach_classes[] and reach.PRODUCTION name the same classes."""
    source = (REPO / "lib" / "kunit-cgroup" / "reach_kunit.c").read_text()
    body = source.split("reach_classes[] = {", 1)[1].split("};", 1)[0]
    names = re.findall(r'^\s*"([^"]+)",', body, re.MULTILINE)
    assert sorted(names) == sorted(lk.name for lk in reach.PRODUCTION)
    assert len(set(names)) == len(names)


def test_every_cell_has_a_reason() -> None:
    for lk in reach.PRODUCTION:
        for ctx in reach.CONTEXTS:
            cell = lk.cell(ctx)
            assert cell.why and "\n" not in cell.why, (lk.name, ctx)
            assert set(cell.modes) <= set(reach.MODES), (lk.name, ctx)


# --- the recorded console of a real boot ------------------------------------------------------

def test_real_boot_reach_table() -> None:
    report = parse_console(REAL.read_text(errors="replace"))
    assert report.test("cgroup_reach.lockdep_usage").status == "PASS"
    got = reach.reached(report.reach())
    assert got.debug_locks == 1 and got.lockdep_classes > 100
    # what any boot of the suite takes: the attach path's and the css_set's locks
    for name in ("cgroup_mutex", "css_set_lock", "cgroup_threadgroup_rwsem", "ucounts_lock"):
        assert name in got.registered, name
    # the mutex is taken with irqs on, css_set_lock never
    assert ("irqs-on", "W") in got.classes["cgroup_mutex"]
    assert not {("irqs-on", "W"), ("bh-on", "W")} & got.classes["css_set_lock"]
    rows, gaps, hit, total = reach.compare(reach.PRODUCTION, got)
    assert len(rows) == len(reach.PRODUCTION) and 0 < hit < total
    assert not [g for g in gaps if g.kind == "unexpected"], gaps
    missing = {(g.lock, g.context) for g in gaps}
    assert ("cpuset_mutex", "irqs-on") in missing      # no cpuset in um-lockdep
    text = reach.format_table(reach.PRODUCTION, got, str(REAL))
    assert text.splitlines()[0].startswith(f"reach of {REAL}: {hit} of {total}")
    assert "to do (the kernel takes these, the suite did not):" in text


def test_cli_reads_a_console(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["reach", "--console", str(REAL)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"reach of {REAL}:") and "css_set_lock" in out


def _fails(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        code = cli.main(argv)
    except SystemExit as e:  # argparse errors
        code = e.code  # type: ignore[assignment]
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert code == 2 and len(lines) == 1, captured.err
    assert lines[0].startswith("cgkunit: error: ") and "Traceback" not in captured.err
    return lines[0]


def test_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "No such file" in _fails(["reach", "--console", str(tmp_path / "nope")], capsys)
    assert "lockdep profile" in _fails(["reach", "--profile", "x86_64-kasan"], capsys)
    no_reach = tmp_path / "console.log"
    no_reach.write_text((DATA / "01_all_pass.log").read_text())
    assert "cgroup_reach did not run" in _fails(["reach", "--console", str(no_reach)], capsys)
    cut = tmp_path / "cut.log"
    cut.write_text(SMALL.replace("    # lockdep_usage: reach: end matched=5\n", ""))
    assert "cut short" in _fails(["reach", "--console", str(cut)], capsys)
    bad = tmp_path / "bad.log"
    bad.write_text(SMALL.replace("{+.+.} fd=9", "{+.+.+.} fd=9"))
    assert "bad lockdep usage" in _fails(["reach", "--console", str(bad)], capsys)
    assert _fails(["reach", "--last", "--console", str(bad)], capsys)  # exclusive
    assert "no earlier run" in _fails(["--build-dir", str(tmp_path / "b"), "reach", "--last"],
                                      capsys)


UM_CONFIG = DATA / "um_lockdep_config_excerpt"  # cgroup, cpuset and SMP lines of a real build


def test_built_configs_reads_a_real_config() -> None:
    built = reach.built_configs(UM_CONFIG.read_text())
    assert {"CONFIG_CPUSETS", "CONFIG_CPUSETS_V1", "CONFIG_CGROUP_FREEZER",
            "CONFIG_CGROUP_RDMA", "CONFIG_CGROUP_DMEM", "CONFIG_SMP"} <= built
    assert "CONFIG_HOTPLUG_CPU" not in built   # UML has no CPU hotplug
    assert reach.built_configs("CONFIG_A=m\n# CONFIG_B is not set\nCONFIG_C=n\n"
                               "CONFIG_D=\"y\"\nCONFIG_E=y\n") == {"CONFIG_A", "CONFIG_E"}


def test_a_lock_the_kernel_does_not_build_is_not_counted() -> None:
    """cpu_hotplug_lock on UML: "not built", no missing cells, named under the table;
    every other lock counts as without the config."""
    built = reach.built_configs(UM_CONFIG.read_text())
    got = reach.reached(parse_console(REAL.read_text(errors="replace")).reach())
    rows, gaps, hit, total = reach.compare(reach.PRODUCTION, got, built)
    rows_all, gaps_all, hit_all, total_all = reach.compare(reach.PRODUCTION, got)
    row = next(r for r in rows if r[0] == "cpu_hotplug_lock")
    assert row[1:] == ["not built", "n/a", "n/a", "n/a", "n/a"]
    assert (hit, total) == (hit_all, total_all - 4)
    assert not any(g.lock == "cpu_hotplug_lock" for g in gaps)
    assert [g for g in gaps_all if g.lock != "cpu_hotplug_lock"] == gaps
    assert [r for r in rows_all if r[0] != "cpu_hotplug_lock"] == \
        [r for r in rows if r[0] != "cpu_hotplug_lock"]
    text = reach.format_table(reach.PRODUCTION, got, "um", built=built)
    assert "not in this kernel (reach them on a profile that builds them): " \
        "cpu_hotplug_lock (CONFIG_HOTPLUG_CPU off)" in text
    assert "cpu_hotplug_lock W" not in text.split("to do")[-1]
    locks = {lk["name"]: lk for lk in reach.to_json(reach.PRODUCTION, got, "um", built)["locks"]}
    assert locks["cpu_hotplug_lock"]["built"] is False
    assert locks["freezer_mutex"]["built"] is True and locks["cgroup_mutex"]["built"] is None
    assert reach.to_json(reach.PRODUCTION, got, "um")["locks"][0]["built"] is None


def test_a_lock_reached_is_counted_whatever_the_config_says() -> None:
    table = (reach.Lock("a", "x.c", {"irqs-on": reach.Cell("W", "mutex")}, "CONFIG_A"),)
    got = reach.reached(parse_console(SMALL.replace("name=cgroup_mutex", "name=a")).reach())
    rows, _, hit, total = reach.compare(table, got, set())
    assert rows[0][1] == "registered" and (hit, total) == (1, 1)


def test_cli_last_reads_the_build_s_config(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """--last: the profile's last console beside its build's .config."""
    results = tmp_path / "results" / "um-lockdep"
    results.mkdir(parents=True)
    (results / "console.log").write_text(REAL.read_text(errors="replace"))
    assert cli.main(["--build-dir", str(tmp_path), "reach", "--last"]) == 0
    assert "not built" not in capsys.readouterr().out    # no build: every lock counts
    out_dir = tmp_path / "out" / "um-lockdep"
    out_dir.mkdir(parents=True)
    (out_dir / ".config").write_text(UM_CONFIG.read_text())
    assert cli.main(["--build-dir", str(tmp_path), "reach", "--last"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"cpu_hotplug_lock +not built +n/a", out)
    assert "(CONFIG_HOTPLUG_CPU off)" in out and (results / "reach.json").is_file()
