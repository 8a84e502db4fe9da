#!/usr/bin/env python3
"""Time against sequence length on log-log axes, one line per variant, with each
variant's fitted exponent in the legend: attention is O(n^2), and a slope of 2 over
the large cases is how a plot shows it. Panels split by heads and d_k when swept.

    python3 scripts/plot_scaling.py results/<run> [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import attnbench_results as ar


def plot(run: ar.Run, out_dir: Path) -> list[Path]:
    x_axis = ar.require_seq_sweep(run.cases)
    layout = ar.SweepLayout(run.cases, x_axis)
    fig, panels = layout.figure()
    for ax, cases, title in panels:
        ar.draw_series(ax, layout, cases, lambda c: c["time_ms_median"], fit=True)
        ar.style_panel(ax, title, cases, layout, ar.seq_axis_label(run.cases, x_axis))
        ar.style_time_axis(ax)
        ar.add_legend(ax, cases)
    notes = [
        f"Exponent: least squares of log(time) on log({x_axis}) over {x_axis} >= {ar.FIT_MIN_SEQ}"
        f" (or the upper half of the range when that has fewer than {ar.FIT_MIN_POINTS} points);"
        " dashed: the fit over its range.",
        ar.status_caption(run.cases, x_axis),
    ]
    title = run.title("Attention time vs sequence length", run.devices())
    return ar.finish_figure(fig, title, notes, out_dir, "scaling")


def build_parser() -> argparse.ArgumentParser:
    parser = ar.script_parser(__doc__, __file__)
    ar.add_run_arguments(parser)
    return parser


def main(argv=None) -> int:
    return ar.plot_main(build_parser(), lambda run, out_dir, args: plot(run, out_dir), argv)


if __name__ == "__main__":
    sys.exit(main())
