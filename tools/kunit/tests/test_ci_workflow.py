"""CI on a hosted service (issue 14, part 4): .github/workflows/sanitizers.yml and the
KernelCI job in ci/kernelci/.

Neither can run from this machine (no network to GitHub or KernelCI), so these tests check
that they are valid and agree with the Makefile, the profiles, the driver's paths and the
suite's parameters:

- a standard-library structural check of the workflow, which always runs and must fail on
  a broken copy (Python has no YAML parser in its standard library, so it reads the file's
  lines; the workflow keeps to a plain block style for that reason);
- actionlint, when it is on PATH (it also runs shellcheck on every `run:` script when
  shellcheck is installed);
- with PyYAML: the parsed workflow and KernelCI jobs, as GitHub and kernelci-pipeline's
  tests/validate_yaml.py read them; with jinja2: the runtime template renders to Python;
  with kcidb-io: the KCIDB payload against the schema;
- ci/kernelci/run.sh with fake tools on PATH (never a real make: a kernel build is not run).
"""
from __future__ import annotations

import fnmatch
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pytest

from cgkunit import cli, fetch
from cgkunit.params import check_kernel_args

REPO = Path(__file__).resolve().parents[3]
WORKFLOW = REPO / ".github" / "workflows" / "sanitizers.yml"
KCI = REPO / "ci" / "kernelci"
RUN_SH = KCI / "run.sh"
PROFILES_DIR = REPO / "tools" / "kunit" / "profiles"
SANITIZER_PROFILES = ["um-lockdep", "x86_64-kcsan", "x86_64-kasan", "x86_64-lockdep"]
JUNIT_PUBLISHERS = ("mikepenz/action-junit-report", "EnricoMi/publish-unit-test-result-action")
USES_PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@(v\d+(\.\d+){0,2}|[0-9a-f]{40})$")


# --- the Makefile -------------------------------------------------------------------------

makefile_targets = cli.makefile_recipes  # rule name -> its recipe lines


def profile_targets(makefile: str) -> dict[str, str]:
    """Profile -> the make target that runs it alone (`cgkunit run --profile P`)."""
    out: dict[str, str] = {}
    for target, recipe in makefile_targets(makefile).items():
        runs = [m.group(1) for line in recipe
                for m in [re.search(r"\$\(CGKUNIT\) run --profile ([\w-]+)$", line)] if m]
        if len(runs) == 1 and len(recipe) == 1:
            out.setdefault(runs[0], target)
    return out


MAKEFILE = (REPO / "Makefile").read_text()
TARGETS = makefile_targets(MAKEFILE)
PROFILE_TARGET = profile_targets(MAKEFILE)


def test_makefile_reading() -> None:
    assert PROFILE_TARGET["um-lockdep"] == "run"
    assert PROFILE_TARGET["x86_64-lockdep"] == "lockdep-x86"
    assert {"deps", "check", "pytest", "test"} <= set(TARGETS)


# --- stdlib structural check of a workflow -------------------------------------------------

def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def child_keys(lines: list[str], parent: int | None, indent: int) -> dict[str, int]:
    """Keys at exactly `indent` in the block of the line `parent` (None: top level): key ->
    line index."""
    start = 0 if parent is None else parent + 1
    keys: dict[str, int] = {}
    for i in range(start, len(lines)):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        ind = indent_of(line)
        if parent is not None and ind <= indent_of(lines[parent]):
            break
        m = re.match(r"^\s*([A-Za-z_][\w-]*)\s*:(\s|$)", line)
        if ind == indent and m:
            keys[m.group(1)] = i
    return keys


def block(lines: list[str], at: int) -> list[str]:
    """The lines of the block under line `at` (deeper indented, blank lines kept)."""
    out = []
    for line in lines[at + 1:]:
        if line.strip() and indent_of(line) <= indent_of(lines[at]):
            break
        out.append(line)
    return out


def value_of(line: str) -> str:
    return line.split(":", 1)[1].strip()


def run_scripts(lines: list[str]) -> list[str]:
    """The text of every `run:` (one-line or block scalar)."""
    scripts = []
    for i, line in enumerate(lines):
        m = re.match(r"^\s*(?:- )?run:\s*(.*)$", line)
        if not m:
            continue
        if m.group(1) in ("|", ">", "|-", ">-"):
            scripts.append("\n".join(b.strip() for b in block(lines, i)))
        else:
            scripts.append(m.group(1))
    return scripts


def make_targets_called(script: str) -> list[str]:
    """The targets of the `make` commands in a shell script ($VAR for variables)."""
    found = []
    command = r"(?:^|[;&|(]|\b(?:then|do|else))\s*"  # where a command starts
    for m in re.finditer(command + r"make((?:[ \t]+[^\s;&|]+)*)", script, re.M):
        skip = False
        for word in m.group(1).split():
            word = word.strip("\"'")
            if skip or "=" in word:
                skip = False
                continue
            if word.startswith("-"):
                skip = word in ("-C", "-f", "-I", "-o", "-W")  # options with an argument
                continue
            found.append(word)
            break
    return found


def workflow_problems(text: str, repo: Path = REPO) -> list[str]:
    """What is wrong with the workflow (empty: nothing found)."""
    problems: list[str] = []
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if "\t" in line:
            problems.append(f"line {n}: a tab (YAML indents with spaces)")
    top = child_keys(lines, None, 0)
    for key in ("name", "on", "permissions", "jobs"):
        if key not in top:
            problems.append(f"no top-level '{key}:'")
    if "on" in top:
        triggers = child_keys(lines, top["on"], 2)
        for trig in ("push", "pull_request", "workflow_dispatch"):
            if trig not in triggers:
                problems.append(f"'on:' has no {trig} trigger")
    jobs = child_keys(lines, top["jobs"], 2) if "jobs" in top else {}
    if not jobs:
        problems.append("no jobs")
    for job, at in jobs.items():
        keys = child_keys(lines, at, 4)
        for key in ("runs-on", "steps", "timeout-minutes"):
            if key not in keys:
                problems.append(f"job {job}: no {key}")
        if "timeout-minutes" in keys:
            minutes = value_of(lines[keys["timeout-minutes"]])
            if not minutes.isdigit() or not 1 <= int(minutes) <= 360:
                problems.append(f"job {job}: timeout-minutes {minutes!r} is not 1..360")

    uses = [value_of(line).strip("'\"") for line in lines
            if re.match(r"^\s*(?:- )?uses:", line)]
    for u in uses:
        if not USES_PINNED.match(u):
            problems.append(f"uses: {u} is not pinned to a major version or a commit")
    used = {u.split("@")[0] for u in uses}
    for action in ("actions/checkout", "actions/cache", "actions/upload-artifact"):
        if action not in used:
            problems.append(f"{action} is not used")
    if not used & set(JUNIT_PUBLISHERS):
        problems.append("no JUnit publisher action")

    # The make targets: called directly, or through the matrix's `target:`.
    targets_rules = makefile_targets((repo / "Makefile").read_text())
    matrix_targets = [value_of(line) for line in lines if re.match(r"^\s*target:", line)]
    for script in run_scripts(lines):
        for target in make_targets_called(script):
            names = matrix_targets if target.startswith("$") else [target]
            for name in names:
                if name not in targets_rules:
                    problems.append(f"make {name}: no such target in the Makefile")

    # The matrix: profiles that exist, each with its own make target, and seed shards.
    profile_lines = [line for line in lines if re.match(r"^\s*profile:\s*\[", line)]
    if len(profile_lines) != 1:
        problems.append("no single matrix 'profile: [...]' list")
        profiles: list[str] = []
    else:
        profiles = [p.strip() for p in value_of(profile_lines[0]).strip("[]").split(",")]
    for p in profiles:
        if not (repo / "tools" / "kunit" / "profiles" / f"{p}.config").is_file():
            problems.append(f"matrix profile {p}: no tools/kunit/profiles/{p}.config")
    if profiles and sorted(profiles) != sorted(SANITIZER_PROFILES):
        problems.append(f"matrix profiles {profiles} are not {SANITIZER_PROFILES}")
    wanted = profile_targets((repo / "Makefile").read_text())
    pairs: dict[str, str] = {}
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)- profile:\s*(\S+)\s*$", line)
        if m and i + 1 < len(lines):
            t = re.match(r"^\s*target:\s*(\S+)\s*$", lines[i + 1])
            if t:
                pairs[m.group(2)] = t.group(1)
    for p in profiles:
        if p not in pairs:
            problems.append(f"matrix profile {p}: no include entry with its make target")
        elif wanted.get(p) != pairs[p]:
            problems.append(f"matrix profile {p}: target {pairs[p]}, but the Makefile runs it "
                            f"with make {wanted.get(p)}")
    seed_lines = [line for line in lines if re.match(r"^\s*seed:", line)]
    seeds: Any = None
    if len(seed_lines) == 1:
        m = re.search(r"'(\[[^']*\])'", seed_lines[0])
        try:
            seeds = json.loads(m.group(1)) if m else None
        except ValueError:
            seeds = None
    if not (isinstance(seeds, list) and seeds and len(set(seeds)) == len(seeds)
            and all(isinstance(s, int) and 0 < s < 2**64 for s in seeds)):
        problems.append("matrix seed: no default list of distinct non-zero u64 seeds")
    if "cgroup_kunit.seed=$SEED" not in text:
        problems.append("the shards do not pass cgroup_kunit.seed=$SEED in KERNEL_ARGS")

    # Caches and artifacts.
    cache_keys = [value_of(line) for line in lines if re.match(r"^\s*key:", line)]
    if not any("matrix.profile" in k and "kernel/series" in k and "kernel/BASE" in k
               for k in cache_keys):
        problems.append("no cache key on the profile, kernel/series and kernel/BASE")
    paths = [value_of(line) for line in lines if re.match(r"^\s*path:", line)]
    if "build/base/*.deb" not in paths:
        problems.append("the base .deb (build/base/*.deb) is not cached")
    m = re.search(r"CCACHE_DIR=\$GITHUB_WORKSPACE/(\S+?)\"", text)
    if not m or m.group(1) not in paths:
        problems.append("CCACHE_DIR is not set to a cached path")
    if "build/results/" not in text or not any(
            "upload-artifact" in u for u in uses):
        problems.append("build/results/ is not uploaded")
    return problems


def workflow_text() -> str:
    return WORKFLOW.read_text()


def test_workflow_stdlib_check_passes() -> None:
    assert workflow_problems(workflow_text()) == []


def mutate(text: str, old: str, new: str, count: int = 1) -> str:
    assert old in text, f"{old!r} not in the workflow: update this test"
    return text.replace(old, new, count)


BREAKAGES: dict[str, tuple[Callable[[str], str], str]] = {
    "no timeout": (lambda t: re.sub(r"\n    timeout-minutes: 240\n", "\n", t, count=1),
                   "job check: no timeout-minutes"),
    "unpinned action": (lambda t: mutate(t, "actions/cache@v4", "actions/cache"),
                        "uses: actions/cache is not pinned"),
    "branch-pinned action": (lambda t: mutate(t, "actions/checkout@v5", "actions/checkout@main"),
                             "uses: actions/checkout@main is not pinned"),
    "unknown profile": (lambda t: mutate(t, "x86_64-kasan, x86_64-lockdep]",
                                         "x86_64-kasan, x86_64-lockdep, um-nonexistent]"),
                        "no tools/kunit/profiles/um-nonexistent.config"),
    "wrong target": (lambda t: mutate(t, "target: kasan", "target: kcsan"),
                     "matrix profile x86_64-kasan: target kcsan"),
    "unknown target": (lambda t: mutate(t, "run: make deps", "run: make depz"),
                       "make depz: no such target"),
    "no workflow_dispatch": (lambda t: mutate(t, "  workflow_dispatch:\n", "  release:\n"),
                             "no workflow_dispatch trigger"),
    "tab": (lambda t: mutate(t, "    runs-on: ubuntu-latest", "\truns-on: ubuntu-latest"),
            "a tab"),
    "no junit": (lambda t: t.replace("mikepenz/action-junit-report@v6", "actions/cache@v4"),
                 "no JUnit publisher"),
    "seed dropped": (lambda t: mutate(t, "cgroup_kunit.seed=$SEED", "cgroup_kunit.threads=4"),
                     "cgroup_kunit.seed=$SEED"),
    "ccache not cached": (lambda t: t.replace("path: build/ccache", "path: build/cache"),
                          "CCACHE_DIR is not set to a cached path"),
    "results not uploaded": (lambda t: t.replace("build/results/", "build/resultz/"),
                             "build/results/ is not uploaded"),
}


@pytest.mark.parametrize("name", sorted(BREAKAGES))
def test_workflow_stdlib_check_fails_on_broken_copy(name: str, tmp_path: Path) -> None:
    """A broken copy, written out and read back as the real one is: the check names it."""
    breaker, expected = BREAKAGES[name]
    broken = tmp_path / "sanitizers.yml"
    broken.write_text(breaker(workflow_text()))
    problems = workflow_problems(broken.read_text())
    assert any(expected in p for p in problems), problems


def test_workflow_seeds_are_suite_parameters() -> None:
    """The seed shards and the input's kernel args go through the driver's own check."""
    seed_line = next(line for line in workflow_text().splitlines()
                     if re.match(r"^\s*seed:", line))
    m = re.search(r"'(\[[^']*\])'", seed_line)
    assert m
    for seed in json.loads(m.group(1)):
        check_kernel_args([f"cgroup_kunit.seed={seed}"], REPO)


def test_workflow_caches_where_the_driver_puts_the_deb(tmp_path: Path) -> None:
    """The driver downloads the base .deb into <build>/base; the cache glob must match it."""
    assert 'build / "base"' in inspect.getsource(fetch.fetch_base), \
        "fetch_base no longer keeps the .deb in <build>/base: update the workflow's cache path"
    spec = fetch.parse_base(REPO / "kernel" / "BASE")
    base = tmp_path / "build" / "base"
    base.mkdir(parents=True)
    quoted = spec.version.replace(":", "%3a")
    (base / f"{spec.package}_{quoted}_all.deb").write_bytes(b"")
    deb = fetch.deb_path(base, spec.package, spec.version)
    assert deb is not None
    assert fnmatch.fnmatch(deb.relative_to(tmp_path).as_posix(), "build/base/*.deb")


# --- actionlint --------------------------------------------------------------------------

def actionlint() -> str:
    exe = shutil.which("actionlint")
    if exe is None:
        pytest.skip("actionlint not on PATH (go install "
                    "github.com/rhysd/actionlint/cmd/actionlint@v1.7.12)")
    return exe


def test_actionlint_passes() -> None:
    exe = actionlint()
    proc = subprocess.run([exe, "-no-color", str(WORKFLOW)], capture_output=True, text=True,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == ""


def test_actionlint_fails_on_broken_copy(tmp_path: Path) -> None:
    """It really lints: an undefined matrix key and an unknown input are errors."""
    exe = actionlint()
    wf = tmp_path / ".github" / "workflows" / "sanitizers.yml"
    wf.parent.mkdir(parents=True)
    text = mutate(workflow_text(), "TARGET: ${{ matrix.target }}", "TARGET: ${{ matrix.tagret }}")
    text = mutate(text, "inputs.filter", "inputs.filtre")
    wf.write_text(text)
    proc = subprocess.run([exe, "-no-color", str(wf)], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "tagret" in proc.stdout and "filtre" in proc.stdout


# --- with PyYAML ---------------------------------------------------------------------------

def load_yaml(path: Path) -> Any:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load(path.read_text())


def test_workflow_parsed() -> None:
    wf = load_yaml(WORKFLOW)
    on = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` as true
    assert {"push", "pull_request", "workflow_dispatch"} <= set(on)
    jobs = wf["jobs"]
    assert set(jobs) == {"pytest", "sanitizers", "check"}
    lines = workflow_text().splitlines()
    assert set(child_keys(lines, child_keys(lines, None, 0)["jobs"], 2)) == set(jobs)
    for name, job in jobs.items():
        assert isinstance(job["timeout-minutes"], int), name
        assert job["container"]["image"].startswith("debian:"), name
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), (name, step)
    matrix = jobs["sanitizers"]["strategy"]["matrix"]
    assert matrix["profile"] == SANITIZER_PROFILES
    assert {i["profile"]: i["target"] for i in matrix["include"]} == \
        {p: PROFILE_TARGET[p] for p in SANITIZER_PROFILES}
    assert jobs["sanitizers"]["strategy"]["fail-fast"] is False
    assert "--privileged" in jobs["sanitizers"]["container"]["options"]
    steps = jobs["sanitizers"]["steps"]
    run = [s for s in steps if "run" in s and "KERNEL_ARGS" in s["run"]]
    assert len(run) == 1 and run[0]["env"]["TARGET"] == "${{ matrix.target }}"
    after = steps[steps.index(run[0]) + 1:]
    uploads = [s for s in after if s.get("uses", "").startswith("actions/upload-artifact@")]
    junit = [s for s in after if s.get("uses", "").split("@")[0] in JUNIT_PUBLISHERS]
    assert uploads and junit
    for s in uploads + junit:  # results of a red run are the ones that matter
        assert "!cancelled()" in s["if"] or "always()" in s["if"]
    assert "build/results/" in uploads[0]["with"]["path"]
    assert junit[0]["with"]["report_paths"] == "build/results/${{ matrix.profile }}/results.xml"
    check_steps = jobs["check"]["steps"]
    assert any(s.get("run") == "make check" for s in check_steps)
    # Broken kernels fail on purpose: their JUnit is not published as test results.
    assert not any(s.get("uses", "").split("@")[0] in JUNIT_PUBLISHERS for s in check_steps)
    assert any(s.get("run") == "make pytest" for s in jobs["pytest"]["steps"])


# --- the KernelCI job ----------------------------------------------------------------------

JOBS_YAML = KCI / "jobs.yaml"


def profile_arch(profile: str) -> str:
    m = re.search(r"^#@\s*arch:\s*(\S+)", (PROFILES_DIR / f"{profile}.config").read_text(), re.M)
    assert m
    return m.group(1)


def test_kernelci_jobs_stdlib() -> None:
    """Every scheduled job is defined, every job a sanitizer profile, the template exists."""
    lines = JOBS_YAML.read_text().splitlines()
    top = child_keys(lines, None, 0)
    assert {"jobs", "scheduler"} <= set(top)
    jobs = child_keys(lines, top["jobs"], 2)
    scheduled = [value_of(line) for line in lines if re.match(r"^\s*- job:", line)]
    assert sorted(jobs) == sorted(set(scheduled))
    profiles = [value_of(line) for line in lines if re.match(r"^\s*profile:", line)]
    assert sorted(profiles) == sorted(SANITIZER_PROFILES)
    templates = {value_of(line) for line in lines if re.match(r"^\s*template:", line)}
    assert templates == {"kunit-cgroup.jinja2"}
    assert (KCI / "kunit-cgroup.jinja2").is_file()


def test_kernelci_jobs_validate() -> None:
    """The rules of kernelci-pipeline's tests/validate_yaml.py, and ours."""
    data = load_yaml(JOBS_YAML)
    jobs, scheduler = data["jobs"], data["scheduler"]
    for name, job in jobs.items():
        assert job.get("kind") == "job", name
        assert job.get("kcidb_test_suite"), name
        assert (KCI / job["template"]).is_file(), name
        params = job["params"]
        assert params["profile"] in SANITIZER_PROFILES, name
        assert name == f"kunit-cgroup-{params['profile']}"
        assert params["arch"] == profile_arch(params["profile"]), name
        assert params["kernel_src"] in ("pinned", "checkout"), name
        assert "repo_url" in params and params["repo_ref"], name
        check_kernel_args([f"cgroup_kunit.seed={params['seed']}"], REPO)
        for bound in ("min_version", "max_version"):
            v = job["rules"][bound]
            assert isinstance(v["version"], int) and isinstance(v["patchlevel"], int)
    base = fetch.parse_base(REPO / "kernel" / "BASE")
    major, minor = (int(x) for x in base.version.split(".")[:2])
    for name, job in jobs.items():
        assert job["rules"]["min_version"] == {"version": major, "patchlevel": minor}, name
    for entry in scheduler:
        assert entry["job"] in jobs
        event = entry["event"]
        assert event.get("channel") and event.get("state") and event.get("kind"), entry
    assert {e["job"] for e in scheduler} == set(jobs)


BASE_STUB = """\
{% block python_imports %}import os
import sys{% endblock %}
{% block python_local_imports %}{% endblock %}
{% block python_globals %}NODE_ID = 'node'{% endblock %}
class BaseJob:
    def __init__(self, workspace):
        self._workspace = workspace

    def _get_storage(self):
        return None
{% block python_job %}{% endblock %}
"""


def render_template(**params: Any) -> str:
    jinja2 = pytest.importorskip("jinja2")
    env = jinja2.Environment(loader=jinja2.DictLoader({
        "base/python.jinja2": BASE_STUB,
        "kunit-cgroup.jinja2": (KCI / "kunit-cgroup.jinja2").read_text()}))
    return str(env.get_template("kunit-cgroup.jinja2").render(**params))


def test_kernelci_template_renders_to_python(tmp_path: Path) -> None:
    data = load_yaml(JOBS_YAML)
    params = dict(data["jobs"]["kunit-cgroup-x86_64-kasan"]["params"],
                  repo_url="https://example.org/x'y\".git", filter="cgroup_rstat.*")
    source = render_template(**params)
    compile(source, "kunit-cgroup.py", "exec")
    # Run the module's top level with a stub kernelci: the parameters come through intact.
    module = ModuleType("kunit_cgroup_job")
    kernelci = ModuleType("kernelci")
    api = ModuleType("kernelci.api")
    helper = ModuleType("kernelci.api.helper")
    setattr(kernelci, "api", api)
    setattr(api, "helper", helper)
    saved = {k: sys.modules.get(k) for k in ("kernelci", "kernelci.api", "kernelci.api.helper")}
    sys.modules.update({"kernelci": kernelci, "kernelci.api": api, "kernelci.api.helper": helper})
    try:
        exec(compile(source, "kunit-cgroup.py", "exec"), module.__dict__)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    ns = module.__dict__
    assert ns["PROFILE"] == "x86_64-kasan" and ns["REPO_URL"] == "https://example.org/x'y\".git"
    assert ns["SEED"] == "1" and ns["FILTER"] == "cgroup_rstat.*" and ns["KERNEL_SRC"] == "pinned"
    # Its result parsing, on kunit.py JSON and the driver's verdicts.
    job = ns["Job"](str(tmp_path))
    kunit = {"name": "KUnit Test Group", "test_cases": [], "sub_groups": [
        {"name": "cgroup_ucount", "test_cases": [{"name": "plain", "status": "PASS"}],
         "sub_groups": [{"name": "ucount_inc_dec", "sub_groups": [],
                         "test_cases": [{"name": "4 threads", "status": "PASS"}]}]}]}
    nodes = job._parse(kunit, [], {"cgroup_ucount.ucount_inc_dec.4 threads": "FAIL"})
    suite = nodes[0]
    assert suite["node"]["name"] == "cgroup_ucount"
    assert suite["child_nodes"][0]["node"] == {"name": "plain", "result": "pass"}
    assert suite["child_nodes"][1]["child_nodes"][0]["node"] == \
        {"name": "4 threads", "result": "fail"}
    with pytest.raises(ValueError, match="repo_url"):
        ns["REPO_URL"] = ""
        job._clone_repo()


# --- run.sh --------------------------------------------------------------------------------

def run_sh_profile_targets() -> dict[str, str]:
    text = RUN_SH.read_text()
    return dict(re.findall(r"^([\w-]+)\) target=([\w-]+) ;;$", text, re.M))


def test_run_sh_targets_match_makefile() -> None:
    mapping = run_sh_profile_targets()
    assert mapping == {p: PROFILE_TARGET[p] for p in SANITIZER_PROFILES}


def test_run_sh_shellcheck() -> None:
    assert subprocess.run(["bash", "-n", str(RUN_SH)]).returncode == 0
    exe = shutil.which("shellcheck")
    if exe is None:
        pytest.skip("shellcheck not on PATH (apt-get install shellcheck)")
    proc = subprocess.run([exe, str(RUN_SH)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def fake_bin(tmp_path: Path, kci_dev: bool = True) -> Path:
    """A PATH directory with python3, a make that records its arguments and environment
    (JSON in make-called) and exits 97, and maybe a kci-dev that records its arguments and
    the payload it is given."""
    bindir = tmp_path / "bin"
    if bindir.exists():
        shutil.rmtree(bindir)
    bindir.mkdir(parents=True)
    (bindir / "python3").symlink_to(sys.executable)
    make = bindir / "make"
    make.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    f"with open({str(tmp_path / 'make-called')!r}, 'w') as f:\n"
                    "    json.dump({'argv': sys.argv[1:], 'env': dict(os.environ)}, f)\n"
                    "sys.exit(97)\n")
    make.chmod(0o755)
    if kci_dev:
        kci = bindir / "kci-dev"
        kci.write_text("#!/bin/sh\n"
                       f"echo \"$@\" >> {tmp_path / 'kci-args'}\n"
                       "case \"$*\" in *--from-json*) "
                       "for a; do [ \"$prev\" = --from-json ] && "
                       f"cp \"$a\" {tmp_path / 'submitted.json'}; prev=$a; done ;; esac\n"
                       "exit 0\n")
        kci.chmod(0o755)
    return bindir


def run_sh(tmp_path: Path, *args: str, kci_dev: bool = True,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    bindir = fake_bin(tmp_path, kci_dev)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    full = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(home),
            "CGKUNIT_BUILD": str(tmp_path / "build"), "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull, **(env or {})}
    return subprocess.run(["bash", str(RUN_SH), *args], capture_output=True, text=True,
                          env=full, cwd=tmp_path, stdin=subprocess.DEVNULL)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("run.sh: error: "), proc.stderr
    return lines[0]


def test_run_sh_without_kci_dev(tmp_path: Path) -> None:
    if shutil.which("kci-dev", path="/usr/bin:/bin"):
        pytest.skip("a kci-dev is installed in /usr/bin or /bin")
    line = one_error_line(run_sh(tmp_path, "--profile", "x86_64-kcsan", kci_dev=False,
                                 env={"KCIDB_REST": "https://t@kcidb.invalid/"}))
    assert "kci-dev not found" in line
    assert not (tmp_path / "make-called").exists()


def test_run_sh_without_credentials(tmp_path: Path) -> None:
    line = one_error_line(run_sh(tmp_path))
    assert "no KCIDB credentials" in line and "KCIDB_REST" in line
    assert not (tmp_path / "make-called").exists()


def test_run_sh_credentials_from_kci_dev_config(tmp_path: Path) -> None:
    """A kci-dev config with a kcidb_token counts; one without does not."""
    cfg = tmp_path / "home" / ".config" / "kci-dev" / "kci-dev.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('default_instance = "x"\n[x]\nkcidb_rest_url = "https://k.invalid/"\n')
    assert "no KCIDB credentials" in one_error_line(run_sh(tmp_path, "--submit-only"))
    cfg.write_text(cfg.read_text() + 'kcidb_token = "secret"\n')
    proc = run_sh(tmp_path, "--submit-only")
    assert "no KCIDB credentials" not in proc.stderr
    assert "results.json" in one_error_line(proc)  # got past the credentials


@pytest.mark.parametrize("args,expected", [
    (["--profile", "um-coverage"], "unknown profile 'um-coverage'"),
    (["--seed", "12x"], "--seed must be a number"),
    (["--bogus"], "unknown argument '--bogus'"),
    (["--no-submit", "--submit-only"], "nothing to do"),
])
def test_run_sh_bad_input(tmp_path: Path, args: list[str], expected: str) -> None:
    assert expected in one_error_line(run_sh(tmp_path, *args))
    assert not (tmp_path / "make-called").exists()


def test_run_sh_values_reach_make_as_text(tmp_path: Path) -> None:
    """run.sh checks none of the values the driver checks: --filter, --kernel-args and
    --kernel-src reach make through its environment as typed (make does not expand the
    environment's values, the Makefile passes them on to the driver quoted), never on make's
    command line; nothing in them runs, in run.sh or in make."""
    hostile = {name: f"$(shell touch X{name}) $(touch Y{name}) `touch Z{name}`; touch W{name} #"
               for name in ("filter", "args", "src")}  # relative: run.sh runs in tmp_path
    src = tmp_path / hostile["src"]
    src.mkdir()
    for git in (["init", "-q"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                                 "--allow-empty", "-m", "k"]):
        subprocess.run(["git", "-C", str(src), *git], check=True, env={**os.environ,
                       "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"})
    for args, target in ((["--filter", hostile["filter"], "--kernel-args", hostile["args"]], "run"),
                         (["--profile", "x86_64-kasan", "--seed", "7", "--kernel-args",
                           "$(x);touch Y #", "--filter", "cgroup_ucount.$(y)",
                           "--kernel-src", str(src)], "kasan")):
        proc = run_sh(tmp_path, "--no-submit", *args)
        assert proc.returncode == 97, proc.stderr  # make's own exit status
        called = json.loads((tmp_path / "make-called").read_text())
        (tmp_path / "make-called").unlink()
        assert called["argv"] == ["-C", str(REPO), target]
        env = called["env"]
        if target == "run":
            assert (env["FILTER"], env["KERNEL_ARGS"]) == (hostile["filter"], hostile["args"])
            assert "KERNEL_SRC" not in env
        else:
            assert env["KERNEL_ARGS"] == "cgroup_kunit.seed=7 $(x);touch Y #"
            assert (env["FILTER"], env["KERNEL_SRC"]) == ("cgroup_ucount.$(y)", str(src))
        assert proc.stdout.startswith(f"run.sh: make {target} with KERNEL_ARGS=")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["bin", "home", src.name])
    assert not [p for p in REPO.iterdir() if p.name[:1] in "XYZW" and len(p.name) <= 7]


def test_run_sh_bad_origin(tmp_path: Path) -> None:
    line = one_error_line(run_sh(tmp_path, env={"KCIDB_ORIGIN": "My-CI"}))
    assert "KCIDB_ORIGIN 'My-CI'" in line


def kunit_results() -> dict[str, Any]:
    def case(name: str, status: str) -> dict[str, str]:
        return {"name": name, "status": status}
    return {"name": "KUnit Test Group", "test_cases": [], "sub_groups": [
        {"name": "cgroup_ucount", "test_cases": [case("ucount_plain", "PASS")], "sub_groups": [
            {"name": "ucount_inc_dec", "sub_groups": [],
             "test_cases": [case("4 threads", "PASS"), case("8 threads", "PASS")]}]},
        {"name": "cgroup_rstat", "sub_groups": [], "test_cases": [
            case("rstat_base_exact", "FAIL"), case("rstat_skipped", "SKIP")]}]}


def driver_summary() -> dict[str, Any]:
    def t(id_: str, status: str, splats: list[dict[str, str]] | None = None) -> dict[str, Any]:
        return {"id": id_, "status": status, "splats": splats or []}
    return {"profile": "x86_64-kcsan", "status": "fail", "verdict": "completed",
            "base": "linux-source-7.3 7.3.4-1~bpo13+1 (pinned)", "not_run": [], "tests": [
                t("cgroup_ucount.ucount_plain", "PASS"),
                t("cgroup_ucount.ucount_inc_dec.4 threads", "PASS"),
                t("cgroup_ucount.ucount_inc_dec.8 threads", "FAIL",
                  [{"kind": "kcsan", "title": "BUG: KCSAN: data-race in foo / bar"}]),
                t("cgroup_rstat.rstat_base_exact", "CRASH"),
                t("cgroup_rstat.rstat_skipped", "SKIP")]}


def write_results(build: Path, profile: str = "x86_64-kcsan", summary: bool = True) -> Path:
    d = build / "results" / profile
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps(kunit_results()))
    if summary:
        (d / "summary.json").write_text(json.dumps(driver_summary()))
    return d


def test_run_sh_submit_only(tmp_path: Path) -> None:
    write_results(tmp_path / "build")
    proc = run_sh(tmp_path, "--profile", "x86_64-kcsan", "--submit-only",
                  env={"KCIDB_REST": "https://tok@kcidb.invalid/", "KCIDB_ORIGIN": "my_ci"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (tmp_path / "make-called").exists()
    calls = (tmp_path / "kci-args").read_text().splitlines()
    assert calls[-1].startswith("submit build --from-json ")
    assert calls[-1].endswith("results/x86_64-kcsan/kcidb.json")
    payload = json.loads((tmp_path / "submitted.json").read_text())
    assert payload["builds"][0]["config_name"] == "x86_64-kcsan"
    assert {t["origin"] for t in payload["tests"]} == {"my_ci"}


def test_run_sh_dry_run_needs_no_credentials(tmp_path: Path) -> None:
    write_results(tmp_path / "build", "um-lockdep")
    proc = run_sh(tmp_path, "--submit-only", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "kci-args").read_text().splitlines()[-1].endswith("--dry-run")


def test_run_sh_submit_failure(tmp_path: Path) -> None:
    write_results(tmp_path / "build", "um-lockdep")
    bindir = fake_bin(tmp_path / "x", kci_dev=False)
    kci = bindir / "kci-dev"
    kci.write_text("#!/bin/sh\ncase \"$*\" in *--help*) exit 0 ;; esac\n"
                   "echo 'KCIDB submission failed: HTTP 401' >&2\nexit 1\n")
    kci.chmod(0o755)
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path),
           "CGKUNIT_BUILD": str(tmp_path / "build"), "KCIDB_REST": "https://t@k.invalid/"}
    proc = subprocess.run(["bash", str(RUN_SH), "--submit-only"], capture_output=True,
                          text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].startswith("run.sh: error: kci-dev could not submit")


# --- kcidb_payload.py ----------------------------------------------------------------------

def payload_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kcidb_payload", KCI / "kcidb_payload.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["kcidb_payload"] = module
    spec.loader.exec_module(module)
    return module


def test_payload(tmp_path: Path) -> None:
    kp = payload_module()
    d = write_results(tmp_path)
    payload = kp.build_payload(d, "cgkunit", compiler="gcc-12")
    assert payload["version"] == {"major": 5, "minor": 3}
    (checkout,), (build,) = payload["checkouts"], payload["builds"]
    assert build["checkout_id"] == checkout["id"]
    assert build["architecture"] == "x86_64" and build["config_name"] == "x86_64-kcsan"
    assert build["compiler"] == "gcc-12" and build["status"] == "PASS"
    assert "7.3.4" in checkout["comment"]
    tests = {t["path"]: t for t in payload["tests"]}
    assert sorted(tests) == [
        "kunit.cgroup_rstat.rstat_base_exact", "kunit.cgroup_rstat.rstat_skipped",
        "kunit.cgroup_ucount.ucount_inc_dec.4_threads",
        "kunit.cgroup_ucount.ucount_inc_dec.8_threads", "kunit.cgroup_ucount.ucount_plain"]
    status = {p: t["status"] for p, t in tests.items()}
    # The driver's verdict wins: a KCSAN report under a case KUnit passed fails it.
    assert status["kunit.cgroup_ucount.ucount_inc_dec.8_threads"] == "FAIL"
    assert tests["kunit.cgroup_ucount.ucount_inc_dec.8_threads"]["misc"]["reports"] == \
        ["kcsan: BUG: KCSAN: data-race in foo / bar"]
    assert status["kunit.cgroup_rstat.rstat_base_exact"] == "FAIL"
    assert "crashed" in tests["kunit.cgroup_rstat.rstat_base_exact"]["comment"]
    assert status["kunit.cgroup_rstat.rstat_skipped"] == "SKIP"
    assert status["kunit.cgroup_ucount.ucount_plain"] == "PASS"
    ids = [t["id"] for t in payload["tests"]]
    assert len(set(ids)) == len(ids) and all(i.startswith("cgkunit:t-") for i in ids)
    assert all(t["build_id"] == build["id"] for t in payload["tests"])


def test_payload_without_summary_uses_kunit_status(tmp_path: Path) -> None:
    kp = payload_module()
    d = write_results(tmp_path, "um-lockdep", summary=False)
    payload = kp.build_payload(d, "cgkunit")
    assert payload["builds"][0]["architecture"] == "um"
    status = {t["path"]: t["status"] for t in payload["tests"]}
    assert status["kunit.cgroup_ucount.ucount_inc_dec.8_threads"] == "PASS"
    assert status["kunit.cgroup_rstat.rstat_base_exact"] == "FAIL"


def test_payload_checkout_from_git(tmp_path: Path) -> None:
    kp = payload_module()
    d = write_results(tmp_path / "build")
    work = tmp_path / "work"
    work.mkdir()
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q", "-b", "topic"], check=True)
    subprocess.run(git + ["commit", "-q", "--allow-empty", "-m", "x"], check=True)
    subprocess.run(git + ["remote", "add", "origin", "https://git.example.org/cg.git"],
                   check=True)
    checkout = kp.build_payload(d, "cgkunit", git_folder=work)["checkouts"][0]
    assert re.fullmatch(r"[0-9a-f]{40}", checkout["git_commit_hash"])
    assert checkout["git_repository_branch"] == "topic"
    assert checkout["git_repository_url"] == "https://git.example.org/cg.git"
    subprocess.run(git + ["remote", "set-url", "origin", "git@example.org:cg.git"], check=True)
    assert "git_repository_url" not in kp.build_payload(d, "cgkunit", git_folder=work)[
        "checkouts"][0]  # KCIDB takes https URLs only


def test_payload_bad_input(tmp_path: Path) -> None:
    kp = payload_module()
    d = write_results(tmp_path)
    with pytest.raises(kp.InputError, match="not a KCIDB origin"):
        kp.build_payload(d, "Bad-Origin")
    proc = subprocess.run([sys.executable, str(KCI / "kcidb_payload.py"), str(tmp_path / "none"),
                           "--origin", "cgkunit"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "does not exist" in proc.stderr


def test_payload_kcidb_schema(tmp_path: Path) -> None:
    kcidb_io = pytest.importorskip("kcidb_io")
    kp = payload_module()
    payload = kp.build_payload(write_results(tmp_path), "cgkunit", compiler="gcc-12",
                               git_folder=REPO)
    kcidb_io.schema.V5_3.validate_exactly(payload)
