/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The titles of kernel reports: the line that starts a lockdep, KCSAN,
 * KASAN, WARNING, BUG, ... report. One table for the suite's console oracle
 * (harness.c matches each console line with glob_match()) and for tools that
 * find the reports in a console log, which can read this file.
 *
 * CGK_REPORT(kind, name, pattern): a console line that matches pattern, less
 * its printk prefix, is the title of a report of that kind. kind is a short
 * lower-case word for it, for such tools; name is the oracle's
 * ("oracle: <name> report while the case ran: <title>"): one name per kind,
 * without blanks. The first pattern that matches wins, so a specific pattern
 * goes before a general one of another kind. A pattern is glob(7): * ? [a-z]
 * [!a-z] and no backslash; it must match the whole line, so it ends in *
 * unless the title is all there is on its line.
 */

CGK_REPORT("kcsan", "KCSAN", "BUG: KCSAN: *")
CGK_REPORT("kasan", "KASAN", "BUG: KASAN: *")
CGK_REPORT("refcount", "refcount_t", "refcount_t: *")

/* lockdep: these kernels say WARNING:, older ones said INFO: */
CGK_REPORT("lockdep", "lockdep", "WARNING: possible *")
CGK_REPORT("lockdep", "lockdep", "WARNING: inconsistent lock state*")
CGK_REPORT("lockdep", "lockdep", "WARNING: bad unlock balance*")
CGK_REPORT("lockdep", "lockdep", "WARNING: held lock freed*")
CGK_REPORT("lockdep", "lockdep", "WARNING: lock held when returning*")
CGK_REPORT("lockdep", "lockdep", "WARNING: suspicious RCU usage*")
CGK_REPORT("lockdep", "lockdep", "WARNING: *-safe -> *-unsafe lock order*")
CGK_REPORT("lockdep", "lockdep", "WARNING: Nested lock was not taken*")
CGK_REPORT("lockdep", "lockdep", "WARNING: bad contention detected*")
CGK_REPORT("lockdep", "lockdep", "WARNING: chain_key collision*")
CGK_REPORT("lockdep", "lockdep", "WARNING: */[0-9]* still has locks held*")
CGK_REPORT("lockdep", "lockdep", "WARNING: trying to register non-static key*")
CGK_REPORT("lockdep", "lockdep", "INFO: possible *")
CGK_REPORT("lockdep", "lockdep", "INFO: inconsistent lock state*")
CGK_REPORT("lockdep", "lockdep", "INFO: bad unlock balance*")
CGK_REPORT("lockdep", "lockdep", "INFO: held lock freed*")
CGK_REPORT("lockdep", "lockdep", "INFO: lock held when returning*")
CGK_REPORT("lockdep", "lockdep", "INFO: suspicious RCU usage*")
CGK_REPORT("lockdep", "lockdep", "INFO: *-safe -> *-unsafe lock order*")
CGK_REPORT("lockdep", "lockdep", "INFO: Nested lock was not taken*")
CGK_REPORT("lockdep", "lockdep", "INFO: bad contention detected*")
CGK_REPORT("lockdep", "lockdep", "INFO: chain_key collision*")
CGK_REPORT("lockdep", "lockdep", "INFO: */[0-9]* still has locks held*")
CGK_REPORT("lockdep", "lockdep", "INFO: trying to register non-static key*")
CGK_REPORT("lockdep", "lockdep", "DEBUG_LOCKS_WARN_ON(*")

CGK_REPORT("panic", "panic", "Kernel panic - not syncing*")

/* the soft- and hard-lockup detectors (kernel/watchdog.c, older forms) */
CGK_REPORT("lockup", "lockup", "watchdog: BUG: soft lockup*")
CGK_REPORT("lockup", "lockup", "watchdog: CPU*: Watchdog detected hard LOCKUP*")
CGK_REPORT("lockup", "lockup", "Watchdog detected hard LOCKUP*")
CGK_REPORT("lockup", "lockup", "NMI watchdog: Watchdog detected hard LOCKUP*")

CGK_REPORT("bug", "BUG", "BUG: *")
CGK_REPORT("bug", "BUG", "kernel BUG at *")

/*
 * WARN(): "WARNING: <file>:<line> at <function>, CPU#<n>: <task>", or "at"
 * alone, or in older kernels "WARNING: CPU: <n> PID: <pid> at". Not every
 * line that starts with WARNING: (CPU mitigations, BIOS bugs, deprecations).
 */
CGK_REPORT("warning", "WARNING", "WARNING: CPU: [0-9]* PID: [0-9]* at *")
CGK_REPORT("warning", "WARNING", "WARNING: at *")
CGK_REPORT("warning", "WARNING", "WARNING: *:[0-9]* at *")

CGK_REPORT("oops", "Oops", "Oops")
CGK_REPORT("oops", "Oops", "Oops[!0-9A-Za-z_]*")
CGK_REPORT("oops", "Oops", "general protection fault*")
CGK_REPORT("oops", "Oops", "Internal error: Oops*")

CGK_REPORT("hung", "hung-task", "INFO: task * blocked* for more than *")

CGK_REPORT("rcu-stall", "RCU-stall", "INFO: *detected stall*")
CGK_REPORT("rcu-stall", "RCU-stall", "rcu: INFO: *detected stall*")

CGK_REPORT("ubsan", "UBSAN", "UBSAN: *")
