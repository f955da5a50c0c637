# SPDX-License-Identifier: GPL-2.0-only
#
# Front door of the project: every target calls the driver in tools/kunit.
# Variables: KERNEL_SRC=/path/to/your/linux (a git tree; default: the pinned
# Debian base), KERNEL_REF=<commit of it>, KERNEL_ARGS="cgroup_kunit.seed=N ...",
# FILTER='suite.case' (run, kcsan, kasan, lockdep-x86, coverage, stress, bisect,
# series-check, module-run), CGKUNIT_ACCEL=auto|kvm|tcg (QEMU accelerator; auto probes
# KVM first), CGKUNIT_WAIT_LOCK=1 (wait while another command uses the build root),
# CGKUNIT_UNPINNED=1 (kernel/BASE's version gone from Debian: build the newest, unpinned).
# A variable a target does not use (make check FILTER=..., make run PROFILE=...) stops it
# with one line and exit status 2, before anything runs.
# make check: ONLY=<check> (one check of tools/kunit/checks.json).
# make bench: PROFILE= (default bench.json's), REPS=N (1..50, default 5) repetitions of
# every point, DURATION_MS=N (100..60000, default 1000) per repetition, ROUNDS=N (1..10,
# default 3) boots of each kernel, alternating, VCPUS=N (default: host cores),
# DEPTH=N (2..16, default 2) the depth of the leaves the rstat benchmark charges,
# ONLY=rstat,ucount,migrate (default all), SEED=N.
# make module-run: PROFILE=x86_64-kasan (default) CYCLES=N (default 1) loads and
# unloads, MODULE_ARGS="seed=N threads=N" (insmod parameters; dynmods=1 also runs
# cgroup_migrate_dynmods, after which cgroup_migrate skips itself in later cycles), FILTER=,
# KDIR=<a built x86_64 kernel with the series>: build the module against it, boot it.
# make reach: PROFILE=um-lockdep (default) or x86_64-lockdep, KERNEL_ARGS=: the whole suite,
# then the reach table (cgkunit.py reach --last reads the last make run's console instead).
# make stress: PROFILE=um-lockdep (default) RUNS=N (default 10) boots of one build,
# SEED=N (the same seed every boot; default a new one each), UNTIL_FAIL=1 (or yes/true;
# 0/no/false: off).
# make bisect: GOOD=<rev> BAD=<rev> (commits of KERNEL_SRC, or without it patches of
# kernel/series: base, 0012, ...), SIGNATURE=<key>|auto (default auto: the most frequent
# at BAD), PROFILE=um-lockdep (default), RUNS=N boots per commit (default 10), FILTER=,
# KERNEL_ARGS=. make bisect-selftest: RUNS=N (default 3).
# make series-check: PROFILE=um-lockdep (default) FROM=<patch> (base, 0012, ...: the first
# commit checked; default base), KERNEL_ARGS= (default cgroup_kunit.duration_ms=200), FILTER=.

PYTHON ?= python3
CGKUNIT := $(PYTHON) tools/kunit/cgkunit.py

# The variables above reach the driver through the environment, as they were typed: the
# driver reads each as the default of its option, checks it (one line and exit status 2 for
# a bad value, or for one the target does not use, before anything runs) and no recipe
# holds a user's value. make expands a variable given on its command line whenever it is
# referenced or exported, so $(shell ...) in KERNEL_ARGS would run and $(x) would vanish:
# each one given is first made a simple variable holding its raw text ($(value)), which
# make exports as it is. MAKEOVERRIDES keeps them out of MAKEFLAGS, which the kernel's own
# make (run by kunit.py) would read and expand again.
CGKUNIT_VARS := KERNEL_SRC KERNEL_REF KERNEL_ARGS FILTER PROFILE RUNS SEED UNTIL_FAIL FROM \
	GOOD BAD SIGNATURE REPS DURATION_MS ROUNDS VCPUS DEPTH ONLY CYCLES MODULE_ARGS KDIR \
	CGKUNIT_ACCEL CGKUNIT_BUILD CGKUNIT_ISOLATE CGKUNIT_UNPINNED CGKUNIT_WAIT_LOCK \
	CGKUNIT_APT_MIRROR
$(foreach v,$(CGKUNIT_VARS),$(if $(filter command line environment environment override,$(origin $(v))),$(eval override $(v) := $$(value $(v)))))
export $(foreach v,$(CGKUNIT_VARS),$(if $(filter-out undefined,$(origin $(v))),$(v)))
MAKEOVERRIDES :=
# the goals as typed: the driver's first command (make deps) checks every variable against
# what they run
export CGKUNIT_MAKE_GOALS := $(value MAKECMDGOALS)

.PHONY: run test kcsan kasan lockdep-x86 check module module-run bench coverage reach stress bisect bisect-selftest series-check mbox pytest deps clean help

help:
	@echo "make run      the suite on UML under lockdep (the main job)"
	@echo "make test     the driver's tests, the suite on um-lockdep, x86_64-kcsan and x86_64-kasan,"
	@echo "              the oracle checks of those profiles on broken kernels, and the =m build"
	@echo "make kcsan    the suite on x86_64 QEMU under KCSAN"
	@echo "make kasan    the suite on x86_64 QEMU under generic KASAN"
	@echo "make lockdep-x86  the suite on x86_64 QEMU under lockdep (not in make test)"
	@echo "make check    prove the oracles: deliberately broken kernels must go red"
	@echo "make module   build the suite as a module (cgroup_kunit.ko)"
	@echo "make module-run  load and unload cgroup_kunit.ko in a booted x86_64 guest under kmemleak"
	@echo "              (PROFILE=x86_64-kasan CYCLES=N MODULE_ARGS=\"seed=N threads=N\" FILTER=;"
	@echo "              KDIR=<your built kernel>: the module built against it, in it; not in make test)"
	@echo "make bench    benchmarks: base kernel vs base + kernel/series, side by side"
	@echo "              (PROFILE= REPS=5 DURATION_MS=1000 ROUNDS=3 VCPUS= DEPTH=2 ONLY=;"
	@echo "              not part of make test)"
	@echo "make coverage which kernel lines the suite drives (UML gcov + lcov; not part of make test)"
	@echo "make reach    the lockdep usage the suite reached for each cgroup and ucount lock class,"
	@echo "              beside the contexts the kernel takes it in; missing cells are the to-do"
	@echo "              list (PROFILE=um-lockdep|x86_64-lockdep, KERNEL_ARGS=; not in make test)"
	@echo "make stress   boot one build RUNS=N times (PROFILE=, FILTER=, SEED=, UNTIL_FAIL=1):"
	@echo "              how often each failure signature comes, with a 95% interval (not in make test)"
	@echo "make bisect   the commit that introduced a failure: GOOD=<rev> BAD=<rev> [KERNEL_SRC=]"
	@echo "              [SIGNATURE=<key>|auto] [PROFILE=] [FILTER=] [RUNS=10] [KERNEL_ARGS=];"
	@echo "              repeated boots per commit, a confidence (not in make test)"
	@echo "make bisect-selftest  bisect a throwaway tree with a known culprit (not in make test:"
	@echo "              6 to 14 minutes of builds and boots)"
	@echo "make series-check  build and boot every commit of kernel/series on its own [PROFILE=]"
	@echo "              [FROM=<patch>] [KERNEL_ARGS=] [FILTER=]: a table of builds and KUnit totals"
	@echo "              (not in make test: per commit ~1-2 min build + the suite's run, 4-5 min"
	@echo "              at full length; KERNEL_ARGS defaults to cgroup_kunit.duration_ms=200)"
	@echo "make mbox      kernel/series and the suite as one patch set for git am (build/results/mbox)"
	@echo "make pytest   the driver's own tests alone"
	@echo "make deps     install the Debian packages the builds need (apt-get, as root)"
	@echo "make clean    remove build/ (sources, trees, build dirs, results)"

deps:
	$(CGKUNIT) deps

run: deps
	$(CGKUNIT) run --profile um-lockdep

kcsan: deps
	$(CGKUNIT) run --profile x86_64-kcsan

kasan: deps
	$(CGKUNIT) run --profile x86_64-kasan

lockdep-x86: deps
	$(CGKUNIT) run --profile x86_64-lockdep

check: deps
	$(CGKUNIT) check

module: deps
	$(CGKUNIT) module --profile um-lockdep

module-run: deps
	$(CGKUNIT) module-run

bench: deps
	$(CGKUNIT) bench

coverage: deps
	$(CGKUNIT) coverage

reach: deps
	$(CGKUNIT) reach

stress: deps
	$(CGKUNIT) stress

bisect: deps
	$(CGKUNIT) bisect

bisect-selftest: deps
	$(CGKUNIT) bisect-selftest

mbox: deps
	$(CGKUNIT) mbox

series-check: deps
	$(CGKUNIT) series-check

pytest:
	$(PYTHON) -m pytest -q tools/kunit/tests

# Within CI's budget (a cold run under 60 minutes on 2 cores): the sanitizer
# suites at one thread count (2 per vCPU; make kcsan, make kasan and make
# stress run all three), and the checks of the profiles built here
# (make check adds x86_64-lockdep's, about 9 minutes cold).
test: deps pytest
	$(CGKUNIT) run --profile um-lockdep --kernel-args cgroup_kunit.selfcheck=0
	$(CGKUNIT) run --profile x86_64-kcsan --kernel-args cgroup_kunit.threads=8
	$(CGKUNIT) run --profile x86_64-kasan --kernel-args cgroup_kunit.threads=8
	$(CGKUNIT) module --profile um-lockdep
	$(CGKUNIT) check --profiles um-lockdep,x86_64-kcsan,x86_64-kasan

clean:
	rm -rf build
