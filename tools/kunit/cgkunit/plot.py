"""Draw the benchmark plots with matplotlib (optional, from Debian's python3-matplotlib).

Runs inside the driver when its interpreter has matplotlib, or as a script
under the system's python3 when only that one has it:
    python3 plot.py DEST < plots.json
where plots.json maps a file name to {title, xlabel, ylabel, logy, curves:
{label: [[x, y], ...]}}, or, with kind "ratios", to {title, xlabel, rows: [{label, ratio,
interval: [lo, hi], band: [lo, hi], verdict}]}: one row per comparison, the ratio with its
interval over the grey A/A band. Stdlib and matplotlib only: no package imports.
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
        if spec.get("kind") == "ratios":
            written.append(_ratios(plt, spec, dest / name))
            continue
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


COLOURS = {"faster": "tab:green", "slower": "tab:red"}


def _values(row: Mapping[str, Any]) -> list[float]:
    """Every x a ratios row draws."""
    out = [row["ratio"]]
    for key in ("interval", "band"):
        out += list(row.get(key) or [])
    return [float(v) for v in out if v]


def _ratios(plt: Any, spec: Mapping[str, Any], path: Path) -> Path:
    """A forest plot: per row the grey A/A band, the ratio and its interval."""
    rows = spec["rows"]
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.5))
    for i, row in enumerate(rows):
        y = len(rows) - i
        if row.get("band"):
            lo, hi = row["band"]
            ax.plot([lo, hi], [y, y], color="0.8", linewidth=8, solid_capstyle="butt")
        colour = COLOURS.get(row.get("verdict", ""), "tab:blue")
        if row.get("interval"):
            lo, hi = row["interval"]
            ax.plot([lo, hi], [y, y], color=colour, linewidth=1.5)
        ax.plot([row["ratio"]], [y], "o", color=colour)
    ax.axvline(1.0, color="0.5", linewidth=0.8)
    ax.set_xscale("log")
    ticks = [t for t in (0.25, 0.33, 0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 8.0)
             if any(t / 1.3 <= v <= t * 1.3 for r in rows for v in _values(r))] or [1.0]
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}x" for t in ticks])
    ax.minorticks_off()
    ax.set_yticks(range(len(rows), 0, -1))
    ax.set_yticklabels([f"{r['label']}: {r.get('verdict', '')}" for r in rows], fontsize=7)
    ax.set_title(spec["title"], fontsize=9)
    ax.set_xlabel(spec["xlabel"])
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


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
