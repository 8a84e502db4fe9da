"""Time against sequence length on log-log axes, one line per variant, with each
variant's fitted exponent in the legend: attention is O(n^2), and a slope of 2 over
the large cases is how a plot shows it. Panels split by heads and d_k when swept.

    attnbench-plot results/<run> --only scaling [--out DIR]
"""

from __future__ import annotations

from pathlib import Path

from .. import plotting as ap, results as ar


def figures(run) -> dict:
    """{"scaling": the figure}; run: a loaded Run or its folder."""
    run = ap.as_run(run)
    x_axis = ar.require_seq_sweep(run.cases)
    layout = ap.SweepLayout(run.cases, x_axis)
    fig, panels = layout.figure()
    for ax, cases, title in panels:
        ap.draw_series(ax, layout, cases, lambda c: c["time_ms_median"], fit=True)
        ap.style_panel(ax, title, cases, layout, ar.seq_axis_label(run.cases, x_axis))
        ap.style_time_axis(ax)
        ap.add_legend(ax, cases)
    notes = [
        f"Exponent: least squares of log(time) on log({x_axis}) over {x_axis} >= {ap.FIT_MIN_SEQ}"
        f" (or the upper half of the range when that has fewer than {ap.FIT_MIN_POINTS} points);"
        " wide pale line: the fit over its range.",
        ar.status_caption(run.cases, x_axis),
    ]
    title = run.title("Attention time vs sequence length", run.devices())
    return {"scaling": ap.finish_figure(fig, title, notes)}


def plot(run, out_dir: Path) -> list[Path]:
    return ap.save_figures(figures(run), out_dir)



