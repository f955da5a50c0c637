#!/usr/bin/env python3
"""Entry point: python3 tools/kunit/cgkunit.py <command> [options]."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cgkunit.common import DriverError, error_line  # noqa: E402

try:
    from cgkunit.cli import main  # noqa: E402  (report.py reads report_titles.h on import)
except (DriverError, OSError, UnicodeError, ValueError) as e:
    print(f"cgkunit: error: {error_line(e)}", file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
