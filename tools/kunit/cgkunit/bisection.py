"""Bisect a race: `git bisect run` with repeated boots per commit, one failure signature,
and a confidence computed the way syzbot's bisection does (syzkaller pkg/bisect).

The commits come from a user's git tree (KERNEL_SRC, whose commits carry the series'
helper patches) or from our own series (GOOD/BAD name patches: `0012`, `base`). Either
way the driver works in a private shared clone under the build root
(<build>/bisect/<profile>/linux; the source is only read), hooks the suite into each
commit's work tree (tree.hook_suite, nothing committed), builds the profile into its own
directory (<build>/out/<profile>+bisect) and boots it up to RUNS times with the seeds that
reproduced at BAD first. A step answers git bisect run: 0 good (no run matched the
signature, at least one run was clean and ran the case it came in at BAD), 1 bad (a run
matched: the boots stop there), 125 skip (the build failed; no run reached KUnit; only
other signatures; the case did not run: a commit before the helper patches it needs).

Before any step: BAD must reproduce (RUNS boots; p = matching runs / runs) and GOOD must
be clean. Confidence starts at 1.0 and every good verdict after n clean runs multiplies
it by 1 - (1-p)^n; below MIN_CONFIDENCE the result is withheld. The state (what was
asked, p, the seeds, every commit's verdict, the bisect log) is saved after every step in
<build>/results/bisect/<profile>/state.json: the same command again continues from it
(git bisect replay), a different one starts over.
"""
from __future__ import annotations

import fnmatch
import math
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from . import pipeline
from . import profile as profiles
from . import report as rp
from . import titles
from .boots import FAIL, PASS, Outcome, Replay, RunRecord, aggregate, stress_loop
from .checklist import load_checks
from .commits import (BASE, Workspace, clone_path, ensure_clone, prepared_commits, series_pick,
                      subject_of, unhook)
from .common import (Context, DriverError, fmt_time, overlaps, pct, plural, read_json, run_cmd,
                     say, write_json)
from .params import (SEED_PARAM, check_filter, check_kernel_args, draw_seeds, seed_in_args,
                     without_seed)
from .stats import wilson
from .summary import replay_env
from .tree import (AUTHOR_ENV, GIT_CONFIG, apply_patch, git, kernel_commit, rev, series_names,
                   validate_kernel_src)

RESULTS = Path("results") / "bisect"
CLONES = Path("bisect")
STATE = "state.json"
VARIANT = "bisect"                   # the build directory: <build>/out/<profile>+bisect
ENTRY = Path(__file__).resolve().parent.parent / "cgkunit.py"
GOOD, BAD, SKIP, ABORT = 0, 1, 125, 128  # a step's answers to git bisect run (128: stop it)
CODES = {"good": GOOD, "bad": BAD, "skip": SKIP}
MIN_CONFIDENCE = 0.66
RUNS = (1, 1000)
AUTO = "auto"
FIRST_BAD = "# first bad commit: ["
POSSIBLE = "# possible first bad commit: ["
SELFTEST_CHECK = "leaked-reference"  # checks.json entry whose breakage patch is the culprit
SELFTEST_RUNS = 3
SELFTEST_INNOCUOUS = (4, 3)          # innocuous commits before and after the culprit
SELFTEST_MIN_CONFIDENCE = 0.9

BISECT_DESCRIPTION = """Find the commit that introduced a failure signature with git bisect run,
booting every commit up to --runs times (the seeds that reproduced at BAD first). With
--kernel-src, GOOD and BAD are commits of your tree (it must carry the series' helper
patches: the suite is hooked into each commit, and a commit where it does not build is
skipped); without it they name patches of kernel/series (e.g. 0012, or base). BAD must
reproduce and GOOD must be clean before the bisection starts. Confidence: 1.0, times
1-(1-p)^n for every good verdict after n clean runs, p the rate at BAD; below 0.66 the
result is withheld. Running the same command again continues an interrupted bisection.
Results in build/results/bisect/<profile>/ (bisect.json, bisect.txt)."""
BISECT_EXIT_HELP = """exit status:
  0  the first bad commit was found, with confidence >= 0.66
  1  not found: BAD does not reproduce, GOOD is not clean, only skipped commits were
     left, or the confidence is below 0.66 (the result is withheld)
  2  bad input: GOOD/BAD unknown or GOOD not an ancestor of BAD, KERNEL_SRC with
     uncommitted changes, RUNS not in 1..1000, an unknown profile or SIGNATURE format"""


# --- input ------------------------------------------------------------------------------

@dataclass(frozen=True)
class BisectOptions:
    """What one `bisect` asks for."""
    good: str
    bad: str
    profile: str = "um-lockdep"
    signature: str = AUTO
    runs: int = 10
    filter_glob: str = ""
    kernel_args: tuple[str, ...] = ()
    kernel_src: str | None = None
    jobs: int | None = None
    echo: bool = False


def parse_runs(text: str) -> int:
    """RUNS / --runs: a number in RUNS; DriverError otherwise."""
    low, high = RUNS
    try:
        n = int(str(text).strip())
    except ValueError:
        n = low - 1
    if not low <= n <= high:
        raise DriverError(f"RUNS (--runs) must be a number in {low}..{high}, got {text!r}")
    return n


def signature_kinds() -> list[str]:
    """The first part of a signature key (signature.py): report kinds, the crash/hang/fail
    keys, and "<status>:unclassified"."""
    reports = {t.kind for t in titles.table().entries}
    return sorted((reports | {"fail", "crash", "hang"} | set(rp.STATUS_EXIT)) - {"pass"})


def check_signature(spec: str) -> str:
    """SIGNATURE: auto, or a key as make stress prints it (kind:details; '*' and '?' as
    wildcards); DriverError for anything else."""
    if spec == AUTO:
        return spec
    kind, sep, rest = spec.partition(":")
    kinds = signature_kinds()
    if not sep or not rest.strip() or kind not in kinds:
        raise DriverError(f"SIGNATURE={spec!r}: unknown format; want auto or a key as make stress "
                          f"prints it, <kind>:<details> with kind one of {', '.join(kinds)}")
    return spec


def user_rev(src: Path, name: str, what: str) -> str:
    """The commit a GOOD/BAD revision names in KERNEL_SRC; DriverError when none."""
    sha = rev(src, name) if name and not name.startswith("-") else None
    if sha is None:
        raise DriverError(f"{what}={name}: unknown revision in KERNEL_SRC {src}")
    return sha


def check_clean(src: Path) -> None:
    """DriverError when KERNEL_SRC has uncommitted changes to tracked files: only commits
    are bisected, so what is not committed would silently not be tested."""
    status = git(src, "status", "--porcelain", "--untracked-files=no").stdout
    if status.strip():
        n = len(status.strip().splitlines())
        raise DriverError(f"KERNEL_SRC={src}: {n} uncommitted change(s) to tracked files; bisect "
                          f"tests commits only: commit or stash them first")


def check_ancestry(src: Path, good: str, bad: str, names: tuple[str, str]) -> None:
    """DriverError unless good is a proper ancestor of bad."""
    if good == bad:
        raise DriverError(f"GOOD={names[0]} and BAD={names[1]} are the same commit")
    if git(src, "merge-base", "--is-ancestor", good, bad, check=False).returncode != 0:
        raise DriverError(f"GOOD={names[0]} is not an ancestor of BAD={names[1]}")


@dataclass(frozen=True)
class Target:
    """What is bisected: KERNEL_SRC's commits, or our series' patches (by position)."""
    src: Path | None
    good: str           # a commit (KERNEL_SRC), else a position in kernel/series as text
    bad: str


def check_input(ctx: Context, opts: BisectOptions) -> tuple[Target, int | None]:
    """Every input checked before any build: (what to bisect, the fixed seed or None)."""
    for what, value in (("GOOD", opts.good), ("BAD", opts.bad)):
        if not value:
            raise DriverError(f"{what} (--{what.lower()}) is required: a commit of KERNEL_SRC, "
                              f"or {BASE} or a patch of kernel/series")
    parse_runs(str(opts.runs))
    check_signature(opts.signature)
    profiles.load_profile(ctx.repo, opts.profile)
    check_filter(opts.filter_glob, "--filter (or FILTER)", ctx.repo)
    check_kernel_args(opts.kernel_args, ctx.repo)
    fixed = seed_in_args(opts.kernel_args, "--kernel-args (or KERNEL_ARGS)")
    if opts.kernel_src:
        src, _ = validate_kernel_src(opts.kernel_src, "HEAD", ctx.build)
        good, bad = user_rev(src, opts.good, "GOOD"), user_rev(src, opts.bad, "BAD")
        check_ancestry(src, good, bad, (opts.good, opts.bad))
        check_clean(src)
        return Target(src=src, good=good, bad=bad), fixed
    names = series_names(ctx.repo)
    good_i, bad_i = series_pick(names, opts.good, "GOOD"), series_pick(names, opts.bad, "BAD")
    if good_i >= bad_i:
        raise DriverError(f"GOOD={opts.good} is not an ancestor of BAD={opts.bad}: "
                          f"GOOD must come before BAD in kernel/series")
    return Target(src=None, good=str(good_i), bad=str(bad_i)), fixed


def series_commits(ctx: Context, target: Target) -> tuple[Path, str, str]:
    """(source repo, GOOD commit, BAD commit) of a target: KERNEL_SRC's, or the prepared
    tree's commits of the series positions (the tree is made or brought up to date)."""
    if target.src is not None:
        return target.src, target.good, target.bad
    tree, _ = pipeline.prepare(ctx, None)
    commits = [c for _, c in prepared_commits(tree)]
    return tree.path, commits[int(target.good)], commits[int(target.bad)]


# --- one commit -----------------------------------------------------------------------------

@dataclass
class Verdict:
    """What the boots of one commit said."""
    commit: str
    subject: str
    role: str           # BAD, GOOD, step <k>
    verdict: str        # good, bad, skip
    runs: int = 0       # counted runs (boots that reached KUnit)
    matches: int = 0    # runs with the signature
    clean: int = 0      # runs with no failure at all
    boots: int = 0
    seeds: list[int] = field(default_factory=list)   # of the matching runs
    other: list[str] = field(default_factory=list)   # other signatures seen
    reason: str = ""
    elapsed: float = 0.0
    signature: str = ""  # the key the runs were judged against
    cases: list[str] = field(default_factory=list)  # suite.case where it comes (from BAD)

    @property
    def code(self) -> int:
        return CODES[self.verdict]

    @property
    def rate(self) -> float:
        return self.matches / self.runs if self.runs else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"commit": self.commit, "subject": self.subject, "role": self.role,
                "verdict": self.verdict, "runs": self.runs, "matches": self.matches,
                "clean": self.clean, "boots": self.boots, "seeds": self.seeds,
                "other": self.other, "reason": self.reason, "elapsed": round(self.elapsed, 1),
                "rate": round(self.rate, 6), "signature": self.signature, "cases": self.cases}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Verdict":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


Match = Callable[[str], bool]


def matcher(spec: str) -> Match:
    """A signature key test: equal to spec, or matching it as a glob."""
    return lambda key: key == spec or fnmatch.fnmatchcase(key, spec)


def matched(rec: RunRecord, match: Match) -> bool:
    return rec.status == FAIL and any(match(s.key) for s in rec.signatures)


def signature_cases(records: Sequence[RunRecord], match: Match) -> list[str]:
    """The suite.case the signature came in (none for a report outside any case)."""
    return sorted({s.case for r in records if r.status == FAIL for s in r.signatures
                   if match(s.key) and s.case})


def judge(commit: str, subject: str, role: str, records: Sequence[RunRecord], signature: str,
          build_error: str = "", cases: Sequence[str] | None = None) -> Verdict:
    """A commit's verdict from its runs: bad when a run has the signature; good when none
    has and at least one run was clean (its n: the clean runs); skip otherwise (the build
    failed, no run reached KUnit, only other signatures, or the cases the signature comes
    in did not run: a commit before the helpers they need). signature: a key or glob (""
    for none: nothing matches); cases: where it comes (None: where it came in these runs)."""
    match = matcher(signature) if signature else (lambda key: False)
    cases = signature_cases(records, match) if cases is None else list(cases)
    v = Verdict(commit=commit, subject=subject, role=role, verdict="skip", boots=len(records),
                signature=signature, cases=cases)
    v.runs = sum(r.counted for r in records)
    v.matches = sum(matched(r, match) for r in records)
    passed = [r for r in records if r.status == PASS]
    v.clean = sum(not cases or bool(set(cases) & set(r.cases)) for r in passed)
    v.seeds = [r.seed for r in records if matched(r, match)]
    v.other = sorted({s.key for r in records if r.status == FAIL for s in r.signatures
                      if not match(s.key)})
    if build_error:
        v.reason = build_error
    elif v.matches:
        v.verdict = "bad"
    elif v.clean:
        v.verdict = "good"
    elif passed:
        v.reason = (f"{', '.join(cases)} did not run (a commit before the helper patches "
                    f"{'it needs' if len(cases) == 1 else 'they need'}?)")
    elif v.other:
        v.reason = "only other signatures: " + ", ".join(v.other)
    else:
        reasons = [r.reason for r in records if r.reason]
        v.reason = "no run counted" + (f": {reasons[0]}" if reasons else "")
    return v


def good_factor(p: float, clean: int) -> float:
    """How sure one good verdict is: the chance that n clean runs would have shown a bug
    that reproduces at rate p, 1 - (1-p)^n."""
    return 1.0 - (1.0 - p) ** clean


def confidence(p: float, verdicts: Sequence[Verdict]) -> float:
    """1.0 times good_factor(p, n) for every good verdict (syzkaller pkg/bisect)."""
    return math.prod(good_factor(p, v.clean) for v in verdicts if v.verdict == "good")


def auto_signature(records: Sequence[RunRecord]) -> str:
    """The signature seen in most runs (first seen on a tie); "" when no run failed."""
    stats = aggregate(records)
    return stats[0].key if stats else ""


def step_seeds(repro: Sequence[int], fixed: int | None,
               rng: random.Random | None = None) -> Iterator[int]:
    """The seeds that reproduced at BAD, then new ones (all fixed with a fixed seed)."""
    if fixed is None:
        yield from repro
    yield from draw_seeds(fixed, rng)


# --- the work tree ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Bisection:
    """One bisection: where and how its commits are built and booted."""
    ctx: Context
    prof: profiles.Profile
    clone: Path
    runs: int
    filter_glob: str = ""
    kernel_args: tuple[str, ...] = ()   # without the seed
    kernel_src: str | None = None
    jobs: int | None = None
    echo: bool = False

    @property
    def dest(self) -> Path:
        return bisect_dir(self.ctx.build, self.prof.name)

    @property
    def out(self) -> Path:
        return profiles.out_dir(self.ctx.build, self.prof, VARIANT)

    @property
    def workspace(self) -> Workspace:
        return Workspace(ctx=self.ctx, prof=self.prof, clone=self.clone,
                         out=self.out, jobs=self.jobs, echo=self.echo)


def bisect_dir(build: Path, profile: str) -> Path:
    return build / RESULTS / profile


def boot_runs(bis: Bisection, commit: str, seeds: Iterator[int], match: Match, label: str,
              stop_at_match: bool) -> Outcome:
    """Boot the built commit up to bis.runs times into <dest>/<commit>/run-<i>."""
    boot_at = bis.workspace.booter(commit, f"bisect {commit[:12]}")
    where = bis.dest / commit[:12]
    shutil.rmtree(where, ignore_errors=True)
    replay = Replay(target=profiles.make_target(bis.prof.name), kernel_args=bis.kernel_args,
                    filter_glob=bis.filter_glob, env=replay_env(bis.kernel_src, commit))

    def boot(i: int, seed: int) -> rp.Report:
        return boot_at(where / f"run-{i}", [f"{SEED_PARAM}={seed}", *bis.kernel_args],
                       bis.filter_glob)

    def stop(rec: RunRecord) -> str:
        return f"run {rec.run} has the signature" if stop_at_match and matched(rec, match) else ""
    return stress_loop(boot, seeds, bis.runs, replay, label=label, keep_root=where, stop_when=stop)


def test_commit(bis: Bisection, commit: str, label: str, seeds: Iterator[int], match: Match,
                stop_at_match: bool) -> tuple[list[RunRecord], str]:
    """Check out, hook the suite in, build, boot: (the runs, a build error or "")."""
    say(f"{label}: {commit[:12]} {subject_of(bis.clone, commit)}: building")
    try:
        bis.workspace.build_commit(commit)
    except DriverError as e:
        say(f"{label}: {commit[:12]}: skip: {e.reason}")
        return [], e.reason
    try:
        outcome = boot_runs(bis, commit, seeds, match, label, stop_at_match)
    except DriverError as e:  # no kernel image, no QEMU: this commit cannot be tested
        return [], e.reason
    finally:
        unhook(bis.clone)
    if outcome.interrupted:
        raise KeyboardInterrupt
    return outcome.records, ""


def verdict_at(bis: Bisection, commit: str, role: str, label: str, seeds: Iterator[int],
               spec: str, stop_at_match: bool, cases: Sequence[str] | None = None) -> Verdict:
    """test_commit + judge; spec auto (BAD only): the most frequent signature there;
    cases: where it comes (None at BAD: where it came there)."""
    start = time.monotonic()
    records, error = test_commit(bis, commit, label, seeds, matcher(spec),
                                 stop_at_match and spec != AUTO)
    sig = auto_signature(records) if spec == AUTO else spec
    v = judge(commit, subject_of(bis.clone, commit), role, records, sig, error, cases)
    v.elapsed = time.monotonic() - start
    say(f"{label}: {commit[:12]}: {v.verdict} ({v.matches} of {v.runs} runs match, "
        f"{v.clean} clean{', ' + v.reason if v.reason else ''}; {fmt_time(v.elapsed)})")
    return v


# --- state ----------------------------------------------------------------------------------------

def command_key(opts: BisectOptions, src: Path, good: str, bad: str) -> dict[str, Any]:
    """What identifies a bisection: the same key continues it, another starts over."""
    return {"source": str(src), "good": good, "bad": bad, "signature": opts.signature,
            "profile": opts.profile, "runs": opts.runs, "filter": opts.filter_glob,
            "kernel_args": list(opts.kernel_args), "kernel_src": opts.kernel_src}


def load_state(dest: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The saved state of the same command, else None."""
    state = read_json(dest / STATE)
    return state if isinstance(state, dict) and state.get("key") == key else None


def save_state(dest: Path, state: dict[str, Any]) -> None:
    write_json(dest / STATE, state)


def new_state(key: dict[str, Any], clone: Path, fixed: int | None, steps: int,
              commits: int) -> dict[str, Any]:
    return {"key": key, "clone": str(clone), "seed": fixed, "signature": None, "cases": [],
            "p": None, "seeds": [], "verdicts": {}, "log": "", "steps": steps, "commits": commits,
            "spent": 0.0, "result": None}


def clear_dest(dest: Path) -> None:
    """Remove an earlier bisection's results of this profile."""
    if dest.is_dir():
        shutil.rmtree(dest)
    dest.mkdir(parents=True, exist_ok=True)


def verdicts_of(state: dict[str, Any]) -> list[Verdict]:
    return [Verdict.from_json(v) for v in state["verdicts"].values()]


def bisection_of(ctx: Context, state: dict[str, Any]) -> Bisection:
    key = state["key"]
    return Bisection(ctx=ctx, prof=profiles.load_profile(ctx.repo, key["profile"]),
                   clone=Path(state["clone"]), runs=int(key["runs"]), filter_glob=key["filter"],
                   kernel_args=tuple(without_seed(key["kernel_args"])),
                   kernel_src=key["kernel_src"], jobs=state.get("jobs"),
                   echo=bool(state.get("echo")))


# --- git bisect ---------------------------------------------------------------------------------------

def bisect_log(tree: Path) -> str:
    proc = git(tree, "bisect", "log", check=False)
    return proc.stdout if proc.returncode == 0 else ""


def parse_log(log: str) -> tuple[str, list[str]]:
    """(the first bad commit or "", the possible ones when only skipped commits were left)."""
    first, possible = "", []
    for line in log.splitlines():
        if line.startswith(FIRST_BAD):
            first = line[len(FIRST_BAD):].split("]", 1)[0]
        elif line.startswith(POSSIBLE):
            possible.append(line[len(POSSIBLE):].split("]", 1)[0])
    return first, possible


def estimate_steps(tree: Path, good: str, bad: str) -> tuple[int, int]:
    """(commits after GOOD up to BAD, about how many steps a bisection of them takes)."""
    n = int(git(tree, "rev-list", "--count", f"{good}..{bad}").stdout.strip() or 0)
    return n, max(1, math.ceil(math.log2(n))) if n > 1 else 0


def start_or_replay(bis: Bisection, state: dict[str, Any], good: str, bad: str) -> None:
    """Begin git bisect in the clone, or replay the saved log (an interrupted bisection)."""
    unhook(bis.clone)
    git(bis.clone, "bisect", "reset", "HEAD", check=False)
    if state["log"]:
        saved = bis.dest / "bisect.log"
        saved.write_text(state["log"])
        say(f"continuing the bisection from its log ({saved})")
        git(bis.clone, "bisect", "replay", str(saved))
    else:
        git(bis.clone, "bisect", "start", bad, good)


def bisect_run(bis: Bisection) -> int:
    """git bisect run with the step (bisect-step); git's own output to git-bisect-run.log."""
    cmd = ["git", *GIT_CONFIG, "-C", str(bis.clone), "bisect", "run", sys.executable, str(ENTRY),
           "--build-dir", str(bis.ctx.build), "bisect-step", "--profile", bis.prof.name]
    log = bis.dest / "git-bisect-run.log"
    with open(log, "a") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        return subprocess.call(cmd, stdout=out, stdin=subprocess.DEVNULL)


def step(ctx: Context, profile: str) -> int:
    """One `git bisect run` step on the clone's HEAD: 0 good, 1 bad, 125 skip, 128 (stop
    the bisection) when it cannot test at all; never a traceback (git would read 1)."""
    try:
        return _step(ctx, profile)
    except DriverError as e:
        say(f"bisect step: {e.reason}; stopping the bisection")
    except KeyboardInterrupt:
        say("bisect step: interrupted")
    except Exception as e:  # a bug must not be read as "bad"
        say(f"bisect step: internal error {type(e).__name__}: {e}; stopping the bisection")
    return ABORT


def _step(ctx: Context, profile: str) -> int:
    dest = bisect_dir(ctx.build, profile)
    state = read_json(dest / STATE)
    if not isinstance(state, dict) or state.get("p") is None:
        raise DriverError(f"no bisection in progress in {dest}")
    bis = bisection_of(ctx, state)
    commit = rev(bis.clone, "HEAD")
    if commit is None:
        raise DriverError(f"{bis.clone}: no HEAD")
    state["log"] = bisect_log(bis.clone)  # every verdict before this one
    save_state(dest, state)
    done = state["verdicts"].get(commit)
    if isinstance(done, dict):
        say(f"bisect: {commit[:12]} was tested before: {done['verdict']} (from {dest / STATE})")
        return CODES[done["verdict"]]
    k = 1 + sum(v.role.startswith("step") for v in verdicts_of(state))
    label = f"bisect step {k} of ~{max(k, int(state['steps']))}"
    v = verdict_at(bis, commit, f"step {k}", label, step_seeds(state["seeds"], state["seed"]),
                   state["signature"], True, state["cases"])
    state["verdicts"][commit] = v.to_json()
    save_state(dest, state)
    return v.code


# --- the whole bisection ----------------------------------------------------------------------------

def check_endpoints(bis: Bisection, state: dict[str, Any], good: str, bad: str) -> str:
    """BAD reproduces (p and its seeds measured there) and GOOD is clean; "" when both hold,
    else why the bisection cannot start. Verdicts saved as they come."""
    dest = bis.dest
    if state["p"] is None:
        v = verdict_at(bis, bad, "BAD", "bisect BAD", step_seeds([], state["seed"]),
                       state["key"]["signature"], False)
        state["verdicts"][bad] = v.to_json()
        save_state(dest, state)
        if v.verdict != "bad":
            return bad_failed(v)
        state["signature"], state["cases"] = v.signature, v.cases
        state["p"], state["seeds"] = v.rate, v.seeds
        save_state(dest, state)
        say(f"bisect: BAD reproduces {v.matches} of {v.runs} runs (p = {v.rate:.2f}): "
            f"{state['signature']}")
    if good not in state["verdicts"]:
        v = verdict_at(bis, good, "GOOD", "bisect GOOD", step_seeds(state["seeds"], state["seed"]),
                       state["signature"], True, state["cases"])
        state["verdicts"][good] = v.to_json()
        save_state(dest, state)
    v = Verdict.from_json(state["verdicts"][good])
    if v.verdict == "bad":
        return f"GOOD is not clean: the signature came in run {v.boots} (seed {v.seeds[0]})"
    if v.verdict == "skip":
        return f"GOOD could not be tested: {v.reason}"
    return ""


def bad_failed(v: Verdict) -> str:
    """Why a BAD that did not reproduce stops the bisection."""
    if v.verdict == "good" or v.other:
        return (f"BAD does not reproduce: no run of {v.runs} had the signature"
                + (f" (other signatures: {', '.join(v.other)})" if v.other else ""))
    return f"BAD could not be tested: {v.reason}"


def run_bisect(ctx: Context, opts: BisectOptions) -> int:
    """Check the input, then confirm the endpoints, git bisect run, print and write the
    result; the exit status. The same command again continues an interrupted bisection."""
    start = time.monotonic()
    target, fixed = check_input(ctx, opts)
    src, good, bad = series_commits(ctx, target)
    prof = profiles.load_profile(ctx.repo, opts.profile)
    dest = bisect_dir(ctx.build, prof.name)
    key = command_key(opts, src, good, bad)
    state = load_state(dest, key)
    if state is not None and state.get("result"):
        return finish(state, dest, state["result"])
    clone = ensure_clone(clone_path(ctx.build, CLONES, prof.name), src)
    if state is None:
        clear_dest(dest)
        commits, steps = estimate_steps(clone, good, bad)
        state = new_state(key, clone, fixed, steps, commits)
    else:
        say(f"bisect: continuing the bisection saved in {dest / STATE}")
    state.update(jobs=opts.jobs, echo=opts.echo)
    save_state(dest, state)
    bis = bisection_of(ctx, state)
    spent = float(state.get("spent", 0.0))
    try:
        why = check_endpoints(bis, state, good, bad)
        if not why:
            start_or_replay(bis, state, good, bad)
            if not parse_log(bisect_log(clone))[0]:
                bisect_run(bis)
            state = read_json(dest / STATE) or state
            state["log"] = bisect_log(clone)
        result = result_of(state, why)
        state["result"] = result if result["final"] else None  # else: the same command resumes
    finally:
        state["spent"] = spent + time.monotonic() - start
        save_state(dest, state)
    return finish(state, dest, result)


# --- result -------------------------------------------------------------------------------------------

def result_of(state: dict[str, Any], why: str) -> dict[str, Any]:
    """The outcome: found (with its commit) only when the bisection named a first bad commit
    with confidence >= MIN_CONFIDENCE; otherwise the reason."""
    p = state["p"]
    conf = confidence(p, verdicts_of(state)) if p is not None else 0.0
    first, possible = parse_log(state["log"]) if not why else ("", [])
    if why:
        reason = why
    elif possible:
        reason = (f"only skipped commits were left: the first bad commit is one of "
                  f"{', '.join(c[:12] for c in possible)}")
    elif not first:
        reason = ("the bisection stopped before it ended (see git-bisect-run.log); the same "
                  "command again continues it")
    elif conf < MIN_CONFIDENCE:
        reason = (f"confidence {conf:.2f} is below {MIN_CONFIDENCE}: the result "
                  f"({first[:12]}) is withheld")
    else:
        reason = ""
    done = state["verdicts"].get(first, {})
    return {"final": bool(why or first or possible),
            "found": bool(first) and not reason, "commit": first if not reason else "",
            "subject": done.get("subject", "") if not reason else "", "candidate": first,
            "possible": possible, "confidence": round(conf, 6), "reason": reason}


def _order(v: Verdict) -> tuple[int, int]:
    if v.role in ("BAD", "GOOD"):
        return (0 if v.role == "BAD" else 1), 0
    return 2, int(v.role.split()[-1])


def verdict_table(verdicts: Sequence[Verdict]) -> list[str]:
    rows = [["commit", "verdict", "runs", "matches", "rate", "time", "role", "subject"]]
    for v in sorted(verdicts, key=_order):
        rows.append([v.commit[:12], v.verdict, str(v.runs), str(v.matches),
                     pct(v.rate) if v.runs else "-", fmt_time(v.elapsed), v.role,
                     v.subject + (f" ({v.reason})" if v.reason else "")])
    widths = [max(len(r[i]) for r in rows) for i in range(7)]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r[:7], widths)) + "  " + r[7] for r in rows]


def format_result(state: dict[str, Any], res: dict[str, Any], json_path: Path) -> str:
    """The text report: what was bisected, the rate at BAD, each commit, the result."""
    key = state["key"]
    verdicts = verdicts_of(state)
    where = f"KERNEL_SRC {key['kernel_src']}" if key["kernel_src"] else f"kernel/series ({key['source']})"
    out = [f"cgkunit bisect: {key['profile']}, {where}",
           f"  GOOD {key['good'][:12]}  BAD {key['bad'][:12]}: {plural(state['commits'], 'commit')}, "
           f"about {plural(state['steps'], 'step')}; up to {key['runs']} runs per commit",
           f"  filter {key['filter'] or '(whole suite)'}; kernel args "
           f"{' '.join(key['kernel_args']) or '(none)'}",
           f"  signature: {state['signature'] or key['signature']}"
           + (" (auto: the most frequent at BAD)" if key["signature"] == AUTO else "")]
    bad = state["verdicts"].get(key["bad"])
    if state["p"] is not None and bad:
        lo, hi = wilson(bad["matches"], bad["runs"])
        out.append(f"  reproduction at BAD: {bad['matches']}/{bad['runs']} runs, p = "
                   f"{pct(state['p'])} (95% interval {pct(lo)}-{pct(hi)})")
    out += [""] + verdict_table(verdicts) + [""]
    if res["found"]:
        out.append(f"first bad commit: {res['commit']} {res['subject']}")
    else:
        out.append(f"not found: {res['reason']}")
    if state["p"] is not None:
        goods = [f"{v.clean}" for v in sorted(verdicts, key=_order) if v.verdict == "good"]
        out.append(f"confidence: {res['confidence']:.2f} (1.0 times 1-(1-p)^n for each good verdict, "
                   f"p = {state['p']:.2f}, n = {', '.join(goods) or 'none'}; "
                   f"withheld below {MIN_CONFIDENCE})")
    out += [f"total time: {fmt_time(float(state.get('spent', 0.0)))}", f"json: {json_path}"]
    return "\n".join(out) + "\n"


def to_json(state: dict[str, Any], res: dict[str, Any]) -> dict[str, Any]:
    return {"asked": state["key"], "signature": state["signature"], "cases": state["cases"],
            "p": state["p"],
            "seeds": state["seeds"], "commits": state["commits"], "steps": state["steps"],
            "verdicts": [v.to_json() for v in sorted(verdicts_of(state), key=_order)],
            "result": res, "seconds": round(float(state.get("spent", 0.0)), 1),
            "bisect_log": state["log"]}


def finish(state: dict[str, Any], dest: Path, res: dict[str, Any]) -> int:
    """Print the report, write bisect.json/.txt; 0 found, 1 not."""
    json_path = dest / "bisect.json"
    text = format_result(state, res, json_path)
    print(text, end="", flush=True)
    write_json(json_path, to_json(state, res))
    (dest / "bisect.txt").write_text(text)
    return rp.EXIT_PASS if res["found"] else rp.EXIT_FAIL


# --- self-test ------------------------------------------------------------------------------------------

def innocuous_commit(tree: Path, n: int) -> str:
    """A commit that changes no code: a line in a text file of its own."""
    note = tree / "Documentation" / "cgkunit-bisect-selftest.txt"
    with open(note, "a") as f:
        f.write(f"innocuous change {n}\n")
    git(tree, "add", "-f", str(note.relative_to(tree)))
    git(tree, "commit", "-q", "--no-verify", "-m", f"Documentation: bisect self-test note {n}",
        env=AUTHOR_ENV)
    head = rev(tree, "HEAD")
    assert head
    return head


def make_selftest_tree(prepared: Path, top: str, dest: Path, breakage: Path) -> tuple[str, str, str]:
    """A throwaway git tree at dest: top (base + series), innocuous commits, breakage
    applied as one commit, innocuous commits; (GOOD, the culprit, BAD)."""
    run_cmd(["git", *GIT_CONFIG, "clone", "-q", "--shared", "--no-checkout", str(prepared), str(dest)])
    say(f"self-test tree {dest}: checking out {top[:12]} (the series' top)")
    git(dest, "checkout", "-q", "-b", "selftest", top)
    before, after = SELFTEST_INNOCUOUS
    for n in range(1, before + 1):
        innocuous_commit(dest, n)
    culprit = apply_patch(dest, breakage.name, breakage, "HEAD")
    for n in range(before + 1, before + after + 1):
        bad = innocuous_commit(dest, n)
    return top, culprit, bad


def run_selftest(ctx: Context, runs: int = SELFTEST_RUNS, jobs: int | None = None,
                 echo: bool = False) -> int:
    """Bisect a throwaway tree with a known culprit (checks.json's SELFTEST_CHECK breakage
    patch) through KERNEL_SRC: it must be named with confidence >= 0.9; 0 when it is."""
    start = time.monotonic()
    runs = parse_runs(str(runs))
    check = next((c for c in load_checks(ctx.repo) if c.name == SELFTEST_CHECK), None)
    if check is None or len(check.extra_patches) != 1:
        raise DriverError(f"checks.json has no check {SELFTEST_CHECK} with one breakage patch")
    tree, _ = pipeline.prepare(ctx, None)
    with tempfile.TemporaryDirectory(prefix="cgkunit-bisect-selftest-") as tmp:
        if overlaps(Path(tmp).resolve(), ctx.build.resolve()):
            raise DriverError(f"the temporary directory {tmp} is in the build root; set TMPDIR")
        src = Path(tmp) / "linux"
        good, culprit, bad = make_selftest_tree(tree.path, kernel_commit(tree), src,
                                                ctx.repo / check.extra_patches[0])
        say(f"self-test: GOOD {good[:12]}, culprit {culprit[:12]}, BAD {bad[:12]}")
        code = run_bisect(ctx, BisectOptions(
            good=good, bad=bad, profile=check.profile, runs=runs, filter_glob=check.filter,
            kernel_args=tuple(check.kernel_args), kernel_src=str(src), jobs=jobs, echo=echo))
        # its source is gone
        shutil.rmtree(clone_path(ctx.build, CLONES, check.profile), ignore_errors=True)
    data = read_json(bisect_dir(ctx.build, check.profile) / "bisect.json") or {}
    res = data.get("result") or {}
    ok = code == 0 and res.get("commit") == culprit and res.get("confidence", 0) >= SELFTEST_MIN_CONFIDENCE
    print(f"bisect self-test: {'PASS' if ok else 'FAIL'}: named {res.get('commit') or 'nothing'} "
          f"(the culprit is {culprit}, {check.extra_patches[0]}), confidence "
          f"{res.get('confidence', 0):.2f} (want >= {SELFTEST_MIN_CONFIDENCE}), "
          f"in {fmt_time(time.monotonic() - start)}", flush=True)
    return rp.EXIT_PASS if ok else rp.EXIT_FAIL
