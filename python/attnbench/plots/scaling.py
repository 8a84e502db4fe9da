"""Time against sequence length on log-log axes, one line per variant, with each
variant's fitted exponent and its 95% interval in the legend ("too noisy to fit" where the
interval is too wide to support a number), and a dashed grey n² reference: attention is
O(n^2), and a slope of 2 over the large cases is how a plot shows it. Panels split by heads
and d_k when swept. Writes scaling.png/.svg and scaling.md (the fits as a table).

    attnbench-plot results/<run> --only scaling [--out DIR]
"""

from __future__ import annotations

from pathlib import Path

from .. import plotting as ap, results as ar

FIT_HEADING = "Fitted exponents of time"


def median_time(case: dict) -> float | None:
    return case["time_ms_median"]


def _draw(run: ar.Run):
    """The figure and its fits: (fig, [(panel title, fits by series)])."""
    x_axis = ar.require_seq_sweep(run.cases)
    layout = ap.SweepLayout(run.cases, x_axis)
    fig, panels = layout.figure()
    panel_fits = []
    for ax, cases, title in panels:
        fits = ap.draw_series(ax, layout, cases, median_time, fit=True)
        ap.draw_quadratic_reference(ax, cases, x_axis, median_time, fits)
        ap.style_panel(ax, title, cases, layout, ar.seq_axis_label(run.cases, x_axis))
        ap.style_time_axis(ax)
        ap.add_legend(ax, cases)
        panel_fits.append((title, fits))
    notes = [
        ap.fit_rule_caption("time", x_axis),
        ap.quadratic_reference_caption(x_axis),
        ar.status_caption(run.cases, x_axis),
    ]
    title = run.title("Attention time vs sequence length", run.devices())
    return ap.finish_figure(fig, title, notes), panel_fits


def figures(run) -> dict:
    """{"scaling": the figure}; run: a loaded Run or its folder."""
    fig, _ = _draw(ap.as_run(run))
    return {"scaling": fig}


def render_fits(run: ar.Run, panel_fits) -> str:
    """scaling.md: the exponents the legends show, with their intervals, points and ranges."""
    x_axis = ar.require_seq_sweep(run.cases)
    return ap.fits_document(run, "Attention time vs sequence length",
                            [ap.fits_markdown(FIT_HEADING, "time", x_axis, panel_fits)])


def plot(run, out_dir: Path) -> list[Path]:
    run = ap.as_run(run)
    fig, panel_fits = _draw(run)
    written = ap.save_figures({"scaling": fig}, out_dir)
    return [*written, ar.write_text(out_dir, "scaling.md", render_fits(run, panel_fits))]
