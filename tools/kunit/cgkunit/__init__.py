"""cgkunit: drive the cgroup KUnit suite from base source to report."""
