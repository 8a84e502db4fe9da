"""Peak workspace (scratch memory measured through the harness's allocator) against
sequence length on log-log axes, with each variant's fitted exponent and its 95% interval: a
variant that materialises the score matrix shows n^2, a streaming (flash-style) one n^1, one
that needs no scratch at all n^0. Writes memory.png/.svg and memory.md (the fits as a table).

    attnbench-plot results/<run> --only memory [--out DIR]
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.ticker import FuncFormatter

from .. import plotting as ap, results as ar

FIT_HEADING = "Fitted exponents of peak workspace"


def _draw(run: ar.Run):
    """The figure and its fits: (fig, [(panel title, fits by series)])."""
    x_axis = ar.require_seq_sweep(run.cases)
    layout = ap.SweepLayout(run.cases, x_axis)
    has_zero = any(c["workspace_bytes"] == 0 for c in ar.ok_cases(run.cases))
    fig, panels = layout.figure()
    panel_fits = []
    for ax, cases, title in panels:
        fits = ap.draw_series(ax, layout, cases, lambda c: c["workspace_bytes"], fit=True)
        panel_fits.append((title, fits))
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
        ap.fit_rule_caption("bytes", x_axis),
        "n^0: the same workspace at every size, zero included.",
        ar.status_caption(run.cases, x_axis),
    ]
    title = run.title("Peak workspace vs sequence length", run.devices())
    return ap.finish_figure(fig, title, notes), panel_fits


def figures(run) -> dict:
    """{"memory": the figure}; run: a loaded Run or its folder."""
    fig, _ = _draw(ap.as_run(run))
    return {"memory": fig}


def render_fits(run: ar.Run, panel_fits) -> str:
    """memory.md: the exponents the legends show, with their intervals, points and ranges."""
    x_axis = ar.require_seq_sweep(run.cases)
    return ap.fits_document(run, "Peak workspace vs sequence length",
                            [ap.fits_markdown(FIT_HEADING, "bytes", x_axis, panel_fits)])


def plot(run, out_dir: Path) -> list[Path]:
    run = ap.as_run(run)
    fig, panel_fits = _draw(run)
    written = ap.save_figures({"memory": fig}, out_dir)
    return [*written, ar.write_text(out_dir, "memory.md", render_fits(run, panel_fits))]
