"""The backward pass (#23) against sequence length: time per variant for each pass timed (fwd,
bwd, fwd_bwd) with fitted exponents and their 95% intervals, against a dashed grey n²
reference; the bwd/fwd time ratio of each variant (FLOPs count 2.5x, so a ratio near 2.5 means
the backward runs at the forward's rate); and the memory the forward keeps for backward on
log-log axes, where a variant keeping P shows n^2 and one keeping the log-sum-exp n^1. Cheap:
one pass over the records, three figures; backward.md beside them lists the fits.

    attnbench-plot results/<run> --only backward [--out DIR]
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.ticker import FuncFormatter

from .. import plotting as ap, results as ar

# The FLOP convention of the harness: backward 2.5x the forward's FLOPs, fwd_bwd 3.5x.
BWD_FLOP_RATIO = 2.5


def backward_cases(run: ar.Run) -> list[dict]:
    """The run's records, if it timed a backward pass (bwd or fwd_bwd); else NotApplicable."""
    if not any(c["pass"] != "fwd" for c in run.cases):
        raise ar.NotApplicable("no backward pass in this run (every record has pass fwd)")
    return run.cases


def fwd_partner_key(case: dict) -> tuple:
    """What pairs a bwd record with the fwd record of the same case: everything but the pass."""
    return (case["variant"], case["device"], *(case[a] for a in ar.SHAPE_AXES if a != "pass"),
            case["mask"],
            case["precision"], case["kv_cache"])


def bwd_fwd_ratios(cases: list[dict]) -> list[dict]:
    """One bwd record per case that also has an ok fwd record, its "bwd_fwd_ratio" set to the
    bwd median over the fwd median."""
    forward = {fwd_partner_key(c): c for c in ar.ok_cases(cases) if c["pass"] == "fwd"}
    paired = []
    for case in ar.ok_cases(cases):
        partner = forward.get(fwd_partner_key(case))
        if case["pass"] == "bwd" and partner is not None:
            paired.append({**case, "bwd_fwd_ratio": case["time_ms_median"] / partner["time_ms_median"]})
    return paired


def _panel_figure(run: ar.Run, cases: list[dict], x_axis: str, value, title: str, notes: list[str],
                  style_axes, fit: bool = False, quadratic_reference: bool = False):
    """One panel per sweep panel, a line per variant and pass of value(case) against x_axis;
    style_axes(ax) sets what the figure's y axis means. Returns the figure and its fits,
    [(panel title, fits by series)] (empty fits without fit)."""
    layout = ap.SweepLayout(cases, x_axis)
    fig, panels = layout.figure()
    panel_fits = []
    for ax, panel_cases, panel_title in panels:
        fits = ap.draw_series(ax, layout, panel_cases, value, fit=fit)
        if quadratic_reference:
            ap.draw_quadratic_reference(ax, panel_cases, x_axis, value, fits)
        panel_fits.append((panel_title, fits))
        ap.style_panel(ax, panel_title, panel_cases, layout, ar.seq_axis_label(cases, x_axis))
        style_axes(ax)
        ap.add_legend(ax, panel_cases)
    return ap.finish_figure(fig, run.title(title, run.devices(cases)), notes), panel_fits


def _time_figure(run: ar.Run, cases: list[dict], x_axis: str):
    notes = ["One line per variant and pass: fwd times the forward alone, bwd the backward alone "
             "(its forward untimed), fwd_bwd both.", ap.fit_rule_caption("time", x_axis),
             ap.quadratic_reference_caption(x_axis), ar.status_caption(cases, x_axis)]
    return _panel_figure(run, cases, x_axis, lambda c: c["time_ms_median"],
                         "Forward and backward time vs sequence length", notes, ap.style_time_axis,
                         fit=True, quadratic_reference=True)


def _style_ratio_axis(ax) -> None:
    ax.axhline(BWD_FLOP_RATIO, color="0.5", linestyle=":", linewidth=1,
               label=f"{BWD_FLOP_RATIO}: the FLOP ratio")
    ax.set_ylabel("bwd time / fwd time")
    ax.set_ylim(bottom=0)


def _ratio_figure(run: ar.Run, ratios: list[dict], x_axis: str):
    notes = [f"Above {BWD_FLOP_RATIO}: the backward runs slower per FLOP than the forward; below: "
             "faster. Only cases with both an ok fwd and an ok bwd record.",
             ar.disturbed_caption(ratios)]
    return _panel_figure(run, ratios, x_axis, lambda c: c["bwd_fwd_ratio"],
                         "Backward over forward time", notes, _style_ratio_axis)


def _style_saved_axis(ax) -> None:
    ax.set_yscale("log", base=32)  # decades of 32: ticks on whole binary units
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: ar.format_bytes(value)))
    ax.set_ylabel("memory kept for backward")


def _saved_figure(run: ar.Run, saved: list[dict], x_axis: str):
    notes = ["Expected: n^2 where the forward keeps the probabilities P (naive, blas), n^1 where "
             "it keeps only the log-sum-exp per row (flash_cpu).",
             ap.fit_rule_caption("bytes", x_axis)]
    return _panel_figure(run, saved, x_axis, lambda c: c["saved_for_backward_bytes"],
                         "Memory the forward keeps for backward vs sequence length", notes,
                         _style_saved_axis, fit=True)


# The fitted figures by stem: the heading of their fits in backward.md, and what was fitted.
FIT_HEADINGS = {"pass_time": ("Fitted exponents of time, per pass", "time"),
                "saved_for_backward": ("Fitted exponents of the memory kept for backward", "bytes")}


def _draw(run: ar.Run):
    """The figures by stem, and the fits of those with fits: ({stem: fig}, {stem: panel fits})."""
    cases = backward_cases(run)
    x_axis = ar.require_seq_sweep(cases)
    found, fits = {}, {}
    found["pass_time"], fits["pass_time"] = _time_figure(run, cases, x_axis)
    ratios = bwd_fwd_ratios(cases)
    if len(ar.distinct(ratios, x_axis)) > 1:
        found["bwd_fwd_ratio"], _ = _ratio_figure(run, ratios, x_axis)
    # One record per case: the fwd record carries what the forward keeps (or the bwd one, when
    # the run timed no fwd).
    saved = [c for c in ar.ok_cases(cases) if ar.is_number(c["saved_for_backward_bytes"])
             and c["saved_for_backward_bytes"] > 0]
    first_pass = {c["pass"] for c in saved}
    saved = [c for c in saved if c["pass"] == min(first_pass, key=ar.PASSES.index)]
    if len(ar.distinct(saved, x_axis)) > 1:
        found["saved_for_backward"], fits["saved_for_backward"] = _saved_figure(run, saved, x_axis)
    return found, fits


def figures(run) -> dict:
    """{"pass_time", "bwd_fwd_ratio", "saved_for_backward"} as the run allows; run: a loaded
    Run or its folder."""
    found, _ = _draw(ap.as_run(run))
    return found


def render_fits(run: ar.Run, fits: dict) -> str:
    """backward.md: the exponents the legends of the fitted figures show, with their intervals,
    points and ranges."""
    x_axis = ar.require_seq_sweep(backward_cases(run))
    sections = [ap.fits_markdown(FIT_HEADINGS[stem][0], FIT_HEADINGS[stem][1], x_axis, panel_fits)
                for stem, panel_fits in fits.items()]
    return ap.fits_document(run, "The backward pass vs sequence length", sections)


def plot(run, out_dir: Path) -> list[Path]:
    run = ap.as_run(run)
    found, fits = _draw(run)
    written = ap.save_figures(found, out_dir)
    return [*written, ar.write_text(out_dir, "backward.md", render_fits(run, fits))]
