#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# KernelCI-style job: run the suite under one profile through the project's
# make target (the driver builds with the kernel's kunit.py and writes
# kunit.py's JSON), then submit build/results/<profile>/results.json to KCIDB
# with kci-dev.
#
#   ci/kernelci/run.sh [--profile P] [--seed N] [--kernel-args "A=B ..."]
#                      [--filter GLOB] [--kernel-src DIR]
#                      [--no-submit | --submit-only] [--dry-run]
#
#   --profile      um-lockdep (default), x86_64-kcsan, x86_64-kasan, x86_64-lockdep
#   --seed         cgroup_kunit.seed (default: the suite picks one and prints it)
#   --kernel-src   a kernel git tree to test instead of the pinned base (KERNEL_SRC)
#   --no-submit    build and run only; kci-dev and credentials are not needed
#   --submit-only  submit the results already in build/results/<profile>/
#   --dry-run      print the KCIDB payload (kci-dev --dry-run); no credentials needed
#
# Submitting needs kci-dev >= 0.1.12 (pip install kci-dev; `kci-dev submit build`)
# and KCIDB credentials: KCIDB_REST=https://<token>@<host>/ in the environment,
# or kcidb_rest_url and kcidb_token in kci-dev's config file (the first that
# exists of $KCI_DEV_SETTINGS or ./.kci-dev.toml, ~/.config/kci-dev/kci-dev.toml,
# /etc/kci-dev.toml). KCIDB_ORIGIN is this CI system's KCIDB origin (default
# cgkunit; the KCIDB maintainers assign origins). Both are checked before
# anything is built: when one is missing the script stops with one line on
# stderr and exit status 2.
#
# Exit status: the make target's (0 passed; 1 a test failed, a report was
# printed or the kernel crashed; 2 bad input or an infrastructure failure), or
# 2 when the results cannot be converted or submitted.
set -euo pipefail

die() {
	printf 'run.sh: error: %s\n' "$*" >&2
	exit 2
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

profile=um-lockdep
seed=
kernel_args=
filter=
kernel_src=
submit=1
build=1
dry_run=

while [ $# -gt 0 ]; do
	case "$1" in
	--profile) [ $# -ge 2 ] || die "--profile needs a value"; profile=$2; shift 2 ;;
	--seed) [ $# -ge 2 ] || die "--seed needs a value"; seed=$2; shift 2 ;;
	--kernel-args) [ $# -ge 2 ] || die "--kernel-args needs a value"; kernel_args=$2; shift 2 ;;
	--filter) [ $# -ge 2 ] || die "--filter needs a value"; filter=$2; shift 2 ;;
	--kernel-src) [ $# -ge 2 ] || die "--kernel-src needs a value"; kernel_src=$2; shift 2 ;;
	--no-submit) submit=; shift ;;
	--submit-only) build=; shift ;;
	--dry-run) dry_run=1; shift ;;
	-h | --help) sed -n '4,31s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done

# The make target of each profile (as in the Makefile).
case "$profile" in
um-lockdep) target=run ;;
x86_64-kcsan) target=kcsan ;;
x86_64-kasan) target=kasan ;;
x86_64-lockdep) target=lockdep-x86 ;;
*) die "unknown profile '$profile' (um-lockdep, x86_64-kcsan, x86_64-kasan, x86_64-lockdep)" ;;
esac
[ -n "$submit" ] || [ -n "$build" ] || die "--no-submit and --submit-only leave nothing to do"
case "$seed" in
'' | *[!0-9]*) [ -z "$seed" ] || die "--seed must be a number, got '$seed'" ;;
esac

origin=${KCIDB_ORIGIN:-cgkunit}
settings=${KCI_DEV_SETTINGS:-}

# kci-dev's config file: the first of these that exists is the one it reads.
config_has_token() {
	local f
	for f in "${settings:-.kci-dev.toml}" "$HOME/.config/kci-dev/kci-dev.toml" /etc/kci-dev.toml; do
		if [ -f "$f" ]; then
			grep -Eq '^[[:space:]]*kcidb_token[[:space:]]*=' "$f"
			return
		fi
	done
	return 1
}

if [ -n "$submit" ]; then
	[[ $origin =~ ^[a-z0-9_]+$ ]] ||
		die "KCIDB_ORIGIN '$origin' is not a KCIDB origin (lower case letters, digits and _)"
	command -v kci-dev >/dev/null 2>&1 ||
		die "kci-dev not found on PATH: install it (pip install 'kci-dev>=0.1.12') or use --no-submit"
	kci-dev submit build --help >/dev/null 2>&1 ||
		die "this kci-dev has no 'submit build' command (needs kci-dev >= 0.1.12)"
	if [ -z "$dry_run" ] && [ -z "${KCIDB_REST:-}" ] && ! config_has_token; then
		die "no KCIDB credentials: set KCIDB_REST=https://<token>@<host>/ or kcidb_rest_url and kcidb_token in kci-dev's config (or use --no-submit / --dry-run)"
	fi
fi

results="${CGKUNIT_BUILD:-$repo/build}/results/$profile"
rc=0
if [ -n "$build" ]; then
	if [ -n "$kernel_src" ]; then
		git -C "$kernel_src" rev-parse --verify -q HEAD >/dev/null 2>&1 ||
			die "--kernel-src $kernel_src is not a git tree with a commit (the driver clones it)"
	fi
	args=()
	[ -z "$seed" ] || args+=("cgroup_kunit.seed=$seed")
	[ -z "$kernel_args" ] || args+=("$kernel_args")
	# The values come from CI job parameters: they reach make (and the driver, which
	# checks them) through the environment, never on make's command line, where make
	# would expand $(...) in them.
	make_env=("KERNEL_ARGS=${args[*]}" "FILTER=$filter")
	[ -z "$kernel_src" ] || make_env+=("KERNEL_SRC=$kernel_src")
	printf 'run.sh: make %s with' "$target"
	printf ' %q' "${make_env[@]}"
	printf '\n'
	env "${make_env[@]}" make -C "$repo" "$target" || rc=$?
fi

[ -n "$submit" ] || exit "$rc"

[ -f "$results/results.json" ] ||
	die "no $results/results.json (make $target exited $rc): nothing to submit"

payload="$results/kcidb.json"
conv=(python3 "$here/kcidb_payload.py" "$results" --origin "$origin" --profile "$profile"
	--git-folder "$repo" --output "$payload")
if command -v gcc >/dev/null 2>&1; then
	conv+=(--compiler "gcc-$(gcc -dumpversion)")
fi
"${conv[@]}" || exit 2

kci=(kci-dev)
[ -z "$settings" ] || kci+=(--settings "$settings")
kci+=(submit build --from-json "$payload")
[ -z "$dry_run" ] || kci+=(--dry-run)
"${kci[@]}" || die "kci-dev could not submit $payload (see its message above)"
exit "$rc"
