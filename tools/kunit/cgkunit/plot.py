"""Draw the benchmark plots with matplotlib (optional, from Debian's python3-matplotlib).

Runs inside the driver when its interpreter has matplotlib, or as a script
under the system's python3 when only that one has it:
    python3 plot.py DEST < plots.json
where plots.json maps a file name to {title, xlabel, ylabel, logy, curves:
{label: [[x, y], ...]}}. Stdlib and matplotlib only: no package imports.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Mapping


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def draw(specs: Mapping[str, Mapping[str, Any]], dest: Path) -> list[Path]:
    """One PNG per spec in dest; the files written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    for name, spec in specs.items():
        fig, ax = plt.subplots(figsize=(8, 5))
        for label, pts in spec["curves"].items():
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=label)
        if spec.get("logy"):
            ax.set_yscale("log")
        ax.set_title(spec["title"])
        ax.set_xlabel(spec["xlabel"])
        ax.set_ylabel(spec["ylabel"])
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(dest / name, dpi=100)
        plt.close(fig)
        written.append(dest / name)
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: plot.py DEST < plots.json", file=sys.stderr)
        return 2
    for path in draw(json.load(sys.stdin), Path(argv[1])):
        print(path)
    return 0


if __name__ == "__main__":
    # Run as a script, this file's directory comes first on sys.path, where the driver's
    # modules (bisect.py, for one) would shadow the standard library's for matplotlib.
    if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
        sys.path.pop(0)
    sys.exit(main(sys.argv))
