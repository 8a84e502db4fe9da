"""Peak workspace (scratch memory measured through the harness's allocator) against
sequence length on log-log axes, with each variant's fitted exponent: a variant that
materialises the score matrix shows n^2, a streaming (flash-style) one n^1, one that
needs no scratch at all n^0.

    attnbench-plot results/<run> --only memory [--out DIR]
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.ticker import FuncFormatter

from .. import plotting as ap, results as ar


def figures(run) -> dict:
    """{"memory": the figure}; run: a loaded Run or its folder."""
    run = ap.as_run(run)
    x_axis = ar.require_seq_sweep(run.cases)
    layout = ap.SweepLayout(run.cases, x_axis)
    has_zero = any(c["workspace_bytes"] == 0 for c in ar.ok_cases(run.cases))
    fig, panels = layout.figure()
    for ax, cases, title in panels:
        ap.draw_series(ax, layout, cases, lambda c: c["workspace_bytes"], fit=True)
        ap.style_panel(ax, title, cases, layout, ar.seq_axis_label(run.cases, x_axis))
        # Decades of 32 put ticks on whole binary units (1 KiB, 32 KiB, 1 MiB, ...).
        if has_zero:
            # A log axis cannot show zero; symlog is linear below 1 byte, so a
            # variant without scratch memory sits visibly on the bottom line.
            ax.set_yscale("symlog", base=32, linthresh=1, linscale=0.5)
            ax.autoscale_view()
            ax.set_ylim(bottom=-0.5)  # zero just above the bottom edge, not hidden under it
        else:
            ax.set_yscale("log", base=32)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: ar.format_bytes(value)))
        ax.set_ylabel("peak workspace")
        ap.add_legend(ax, cases)
    notes = [
        f"Exponent: least squares of log(bytes) on log({x_axis}) over {x_axis} >= {ap.FIT_MIN_SEQ}"
        " (or the upper half of the range); n^0: the same workspace at every size, zero included.",
        ar.status_caption(run.cases, x_axis),
    ]
    title = run.title("Peak workspace vs sequence length", run.devices())
    return {"memory": ap.finish_figure(fig, title, notes)}


def plot(run, out_dir: Path) -> list[Path]:
    return ap.save_figures(figures(run), out_dir)



