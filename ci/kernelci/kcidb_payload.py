#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""One profile's results (build/results/<profile>/) -> a KCIDB v5.3 submission.

results.json is kunit.py's JSON (the KernelCI KUnit format): every leaf becomes a
KCIDB test, path kunit.<suite>.<case>[.<parameter>]. summary.json, when present, has
the driver's verdict per test, which wins: a case KUnit said ok but under which
lockdep, KCSAN, KASAN or a WARNING reported is FAIL here too, a crashed case is FAIL,
and the reports are listed in the test's misc. The payload has one checkout (this
repository's commit: the suite and kernel/series), one build (the profile) and the
tests, with ids made the way kci-dev makes them (origin:ck-/b-/t-<sha256>).

    kcidb_payload.py build/results/um-lockdep --origin cgkunit > payload.json
    kci-dev submit build --from-json payload.json

Standard library only; exit status 2 with one line on stderr for bad input.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

SCHEMA = {"major": 5, "minor": 3}
ORIGIN_RE = re.compile(r"^[a-z0-9_]+$")          # KCIDB origin
PATH_PART_BAD = re.compile(r"[^a-zA-Z0-9_-]")     # KCIDB test path components
ARCH_RE = re.compile(r"^[a-z0-9_]*$")
SHA1_RE = re.compile(r"^[0-9a-f]{40}$")
TREE_NAME = "cgroup-kunit"
# The driver's per-test status -> KCIDB status (a crash is the kernel's fault: FAIL).
DRIVER_STATUS = {"PASS": "PASS", "FAIL": "FAIL", "SKIP": "SKIP", "CRASH": "FAIL"}
# kunit.py's JSON status -> KCIDB status.
KUNIT_STATUS = {"PASS": "PASS", "FAIL": "FAIL", "SKIP": "SKIP", "ERROR": "ERROR"}


class InputError(Exception):
    """Bad input: reported as one line, exit status 2."""


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def path_part(name: str) -> str:
    """A KUnit name as one KCIDB path component ("4 threads" -> "4_threads")."""
    return PATH_PART_BAD.sub("_", name.strip()) or "_"


def load_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist") from None
    except (OSError, ValueError) as e:
        raise InputError(f"{what} {path}: {e}") from None


def leaves(group: dict[str, Any], names: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    """(names from the suite down, kunit.py status) of every test case under group."""
    for case in group.get("test_cases") or []:
        yield (*names, str(case.get("name", ""))), str(case.get("status", ""))
    for sub in group.get("sub_groups") or []:
        yield from leaves(sub, (*names, str(sub.get("name", ""))))


def git(folder: Path, *args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", str(folder), *args], capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, check=False)
    except OSError:
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def checkout_fields(folder: Path | None) -> dict[str, str]:
    """KCIDB checkout fields of a git work tree (only those KCIDB accepts)."""
    if folder is None:
        return {}
    out: dict[str, str] = {}
    commit = git(folder, "rev-parse", "HEAD")
    if SHA1_RE.match(commit):
        out["git_commit_hash"] = commit
    branch = git(folder, "rev-parse", "--abbrev-ref", "HEAD")
    if branch and branch != "HEAD":
        out["git_repository_branch"] = branch
    url = git(folder, "remote", "get-url", "origin")
    if url.startswith("https://"):  # KCIDB takes https URLs only
        out["git_repository_url"] = url
    return out


def profile_arch(repo: Path, profile: str) -> str:
    """The `#@ arch:` of tools/kunit/profiles/<profile>.config ("" when unknown)."""
    try:
        text = (repo / "tools" / "kunit" / "profiles" / f"{profile}.config").read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        m = re.match(r"#@\s*arch:\s*(\S+)", line)
        if m:
            return m.group(1)
    return ""


def build_payload(results_dir: Path, origin: str, *, profile: str | None = None,
                  arch: str | None = None, compiler: str | None = None,
                  git_folder: Path | None = None, repo: Path | None = None) -> dict[str, Any]:
    """The KCIDB submission for one results directory; InputError on bad input."""
    if not ORIGIN_RE.match(origin):
        raise InputError(f"origin {origin!r} is not a KCIDB origin (lower case letters, "
                         "digits and _)")
    results_json = results_dir / "results.json"
    results = load_json(results_json, "kunit.py results")
    if not isinstance(results, dict):
        raise InputError(f"{results_json} is not a kunit.py JSON object")
    summary_path = results_dir / "summary.json"
    summary = load_json(summary_path, "driver summary") if summary_path.exists() else {}
    if not isinstance(summary, dict):
        raise InputError(f"{summary_path} is not a JSON object")
    profile = profile or str(summary.get("profile") or results_dir.name)
    repo = repo or Path(__file__).resolve().parents[2]
    arch = arch if arch is not None else profile_arch(repo, profile)
    if not ARCH_RE.match(arch):
        raise InputError(f"architecture {arch!r} is not a KCIDB architecture")

    fields = checkout_fields(git_folder)
    patchset = ""
    checkout_id = f"{origin}:ck-" + sha256_hex("|".join([
        fields.get("git_repository_url", ""), fields.get("git_repository_branch", ""),
        fields.get("git_commit_hash", ""), patchset]))
    checkout: dict[str, Any] = {"id": checkout_id, "origin": origin, "tree_name": TREE_NAME,
                                "patchset_hash": patchset, **fields}
    base = summary.get("base")
    if isinstance(base, str) and base:
        checkout["comment"] = f"base {base} with kernel/series applied"

    mtime = datetime.fromtimestamp(results_json.stat().st_mtime, timezone.utc)
    start_time = mtime.isoformat(timespec="seconds")
    build_id = f"{origin}:b-" + sha256_hex("|".join([checkout_id, arch, profile,
                                                      compiler or "", start_time]))
    build: dict[str, Any] = {"id": build_id, "origin": origin, "checkout_id": checkout_id,
                             "config_name": profile, "start_time": start_time,
                             "status": "PASS",  # results.json exists: it built and booted
                             "comment": f"cgroup_kunit, profile {profile}"}
    if arch:
        build["architecture"] = arch
    if compiler:
        build["compiler"] = compiler
    misc: dict[str, Any] = {}
    for key in ("status", "verdict"):
        if isinstance(summary.get(key), str):
            misc[f"driver_{key}"] = summary[key]
    not_run = summary.get("not_run")
    if isinstance(not_run, list) and not_run:
        misc["not_run"] = not_run
    if misc:
        build["misc"] = misc

    by_id: dict[str, dict[str, Any]] = {}
    for t in summary.get("tests") or []:
        if isinstance(t, dict) and isinstance(t.get("id"), str):
            by_id[t["id"]] = t

    tests: list[dict[str, Any]] = []
    seen: set[str] = set()
    for names, kunit_status in leaves(results):
        path = ".".join(["kunit", *(path_part(n) for n in names)])
        if path in seen:  # two names that differ only in characters KCIDB refuses
            n = 2
            while f"{path}_{n}" in seen:
                n += 1
            path = f"{path}_{n}"
        seen.add(path)
        test: dict[str, Any] = {"id": f"{origin}:t-" + sha256_hex(f"{build_id}|{path}"),
                                "origin": origin, "build_id": build_id, "path": path,
                                "start_time": start_time}
        driver = by_id.get(".".join(names))
        if driver is not None and driver.get("status") in DRIVER_STATUS:
            test["status"] = DRIVER_STATUS[driver["status"]]
            reports = [f"{s.get('kind', '')}: {s.get('title', '')}"
                       for s in driver.get("splats") or [] if isinstance(s, dict)]
            tmisc: dict[str, Any] = {"kunit_status": kunit_status}
            if reports:
                tmisc["reports"] = reports
            if driver["status"] == "CRASH":
                test["comment"] = "the kernel crashed or hung in this test"
            test["misc"] = tmisc
        else:
            test["status"] = KUNIT_STATUS.get(kunit_status, "ERROR")
        tests.append(test)

    return {"version": dict(SCHEMA), "checkouts": [checkout], "builds": [build],
            "tests": tests}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results_dir", type=Path, help="build/results/<profile>")
    ap.add_argument("--origin", required=True, help="KCIDB origin of this CI system")
    ap.add_argument("--profile", help="profile name (default: summary.json's)")
    ap.add_argument("--arch", help="architecture (default: the profile's #@ arch)")
    ap.add_argument("--compiler", help="compiler, e.g. gcc-12")
    ap.add_argument("--git-folder", type=Path, help="git work tree of the checkout")
    ap.add_argument("--output", type=Path, help="write here instead of stdout")
    args = ap.parse_args(argv)
    try:
        payload = build_payload(args.results_dir, args.origin, profile=args.profile,
                                arch=args.arch, compiler=args.compiler,
                                git_folder=args.git_folder)
    except InputError as e:
        print(f"kcidb_payload: error: {e}", file=sys.stderr)
        return 2
    text = json.dumps(payload, indent=2, sort_keys=True) + "\n"
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
