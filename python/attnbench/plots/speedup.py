"""Speed-up of every variant over a baseline variant, against sequence length:
baseline median time / variant median time on the same shape (same batch, heads,
kv_heads, seq_q, seq_kv, d_k, d_v and mask), so 4 means four times faster. The
baseline may run on another device: cuda variants over a cpu baseline is allowed.

    attnbench-plot results/<run> --only speedup [--baseline NAME] [--out DIR]

Without --baseline: "naive" if the run has it, otherwise the first variant recorded.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.lines import Line2D

from .. import plotting as ap, results as ar

DEFAULT_BASELINE = "naive"


def shape_key(case: dict) -> tuple:
    return tuple(case[axis] for axis in ar.SHAPE_AXES) + (case["causal"],)


def choose_baseline(run: ar.Run, requested: str | None) -> str:
    variants = list(ar.group_by(run.cases, lambda c: c["variant"]))
    if requested is not None:
        if requested not in variants:
            raise ar.ResultsError(f"baseline {requested!r} is not in this run; "
                                  f"variants: {', '.join(variants)}")
        return requested
    if len(variants) < 2:
        raise ar.NotApplicable("only one variant in this run: nothing to compare with a baseline")
    return DEFAULT_BASELINE if DEFAULT_BASELINE in variants else variants[0]


def baseline_times(cases: list[dict], baseline: str) -> dict[tuple, float]:
    """Median time of the baseline's ok case for each shape; fp32 preferred where
    the baseline ran at several precisions, as the like-for-like reference."""
    times: dict[tuple, float] = {}
    for case in ar.ok_cases(cases):
        if case["variant"] != baseline:
            continue
        key = shape_key(case)
        if key not in times or case["precision"] == "fp32":
            times[key] = case["time_ms_median"]
    return times


def figures(run, baseline: str | None = None) -> dict:
    """{"speedup_vs_<baseline>": the figure}; run: a loaded Run or its folder."""
    run = ap.as_run(run)
    baseline = choose_baseline(run, baseline)
    x_axis = ar.require_seq_sweep(run.cases)
    reference = baseline_times(run.cases, baseline)
    compared = [c for c in run.cases if c["variant"] != baseline]
    if not compared:
        raise ar.NotApplicable(f"no variant besides the baseline {baseline!r}")

    def without_baseline(cases: list[dict]) -> list[dict]:
        """Ok cases whose shape the baseline did not finish: no ratio exists, but they
        must not vanish from the figure."""
        return [c for c in ar.ok_cases(cases) if shape_key(c) not in reference]

    def speedup(case: dict) -> float | None:
        base = reference.get(shape_key(case))
        return None if base is None else base / case["time_ms_median"]

    layout = ap.SweepLayout(compared, x_axis)
    fig, panels = layout.figure()
    for ax, cases, title in panels:
        ap.draw_series(ax, layout, cases, speedup)
        ax.axhline(1.0, color="black", linewidth=1, label=f"baseline: {baseline}")
        extra = []
        panel_unmatched = without_baseline(cases)
        if panel_unmatched:
            ax.plot([c[x_axis] for c in panel_unmatched], [0.97] * len(panel_unmatched),
                    linestyle="none", marker="o", markerfacecolor="none", color="0.3",
                    transform=ax.get_xaxis_transform(), clip_on=False)
            extra.append(Line2D([], [], linestyle="none", marker="o", markerfacecolor="none",
                                color="0.3", label=f"no baseline time ({len(panel_unmatched)})"))
        ap.style_panel(ax, title, cases, layout, ar.seq_axis_label(run.cases, x_axis))
        ap.plain_log_yaxis(ax)
        ax.set_ylabel(f"speed-up over {baseline} (x)")
        ap.add_legend(ax, cases, extra_handles=extra)
    unmatched = without_baseline(compared)
    notes = [
        f"{len(unmatched)} ok cases have no ok {baseline} case of the same shape (marked along the top)."
        if unmatched else "",
        ar.status_caption(compared, x_axis),
    ]
    title = run.title(f"Speed-up over {baseline}", run.devices())
    return {f"speedup_vs_{baseline}": ap.finish_figure(fig, title, notes)}


def plot(run, out_dir: Path, baseline: str | None = None) -> list[Path]:
    return ap.save_figures(figures(run, baseline), out_dir)



