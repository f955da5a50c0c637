"""cgkunit: drive the cgroup KUnit suite from base source to report.

Module layering, top down (tests/test_layers.py holds the package to it: no command
imports another command or cli, nothing below the commands imports one, no import
cycle, no private name used outside its module):

  cli           the command line: options, preflight of the inputs, the build lock, and
                HANDLERS, one handler per command (run, build, prepare, module, fetch,
                report, profiles and deps are handlers over the modules below)
  commands      one module per command: bench, bisection (bisect, bisect-step,
                bisect-selftest), check, coverage, mbox, module_run, reach, series_check,
                stress
  below them    what the commands share:
    engines     pipeline (base -> tree -> build -> boot -> report), run (kunit.py build
                and exec under the watchdog), boots (repeated boots of one kernel, for
                stress and bisect), commits (a private clone's commits, for bisect and
                series-check), carry (the suite on an older commit: the suites it cannot
                build turned off, backports), tree, fetch, deps, lock
    the report  report (the model and exit statuses), console (the console reader),
                signature (failure signatures), summary (the one screen and the replay
                commands), export (the files: summary.json, results.ktap/.xml/.json)
    inputs      profile, params (the suite's parameters and its seed), titles
                (report_titles.h), checklist (checks.json), fixes (fixed-by.json: the
                patch of the series that fixes what a case catches)
    helpers     common (errors, paths, Context, text), machine, procs, progress, stats, plot
"""
