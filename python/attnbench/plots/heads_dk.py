"""Time against head count and time against d_k at one fixed sequence length: the
cost should grow linearly in both (a slope of 1 on these log-log axes); a variant
whose tiling or vector width suits some d_k better than others shows it here.

    attnbench-plot results/<run> --only heads_dk [--seq N] [--heads H] [--d-k D] [--out DIR]

By default the fixed sequence length is the largest at which every variant has ok
cases along the axis (a variant skipped at the largest n is not left without points),
and the other axis is fixed at the value with the most points there.
"""

from __future__ import annotations

from pathlib import Path

from .. import plotting as ap, results as ar

# Each panel: the axis along x and the axis held fixed beside the sequence length.
_PANELS = (("heads", "d_k"), ("d_k", "heads"))


def choose_fixed(cases: list[dict], seq_axis: str, x_axis: str, other_axis: str,
                 seq: int | None, other: int | None) -> tuple[int, int] | None:
    """(seq, other value) for a panel along x_axis: requested values are kept; missing
    ones become the largest seq with ok cases of the most variants, then the other value
    where x_axis has most ok points."""
    ok = ar.ok_cases(cases) or list(cases)

    def variants_at(seq_value) -> int:
        return len({c["variant"] for c in ok if c[seq_axis] == seq_value})

    seqs = [seq] if seq is not None else sorted(ar.distinct(ok, seq_axis),
                                                key=lambda s: (variants_at(s), s), reverse=True)
    for seq_value in seqs:
        at_seq = [c for c in ok if c[seq_axis] == seq_value]
        by_other = ar.group_by(at_seq, lambda c: c[other_axis])
        if other is not None:
            by_other = {other: by_other.get(other, [])}
        ranked = sorted(by_other.items(), key=lambda kv: (len(ar.distinct(kv[1], x_axis)), kv[0]))
        if ranked and len(ar.distinct(ranked[-1][1], x_axis)) > 1:
            return seq_value, ranked[-1][0]
    return None


def figures(run, seq: int | None = None, heads: int | None = None,
            d_k: int | None = None) -> dict:
    """{"heads_dk": the figure}; run: a loaded Run or its folder."""
    run = ap.as_run(run)
    seq_axis = ar.sweep_axis(run.cases)
    requested = {"heads": heads, "d_k": d_k}
    panels = []
    for x_axis, other_axis in _PANELS:
        fixed = choose_fixed(run.cases, seq_axis, x_axis, other_axis, seq, requested[other_axis])
        if fixed:
            panels.append((x_axis, other_axis, *fixed))
    if not panels:
        requested_text = ", ".join(f"--{flag} {value}" for flag, value in
                                   (("seq", seq), ("heads", heads), ("d-k", d_k)) if value is not None)
        raise ar.NotApplicable(f"neither heads nor d_k takes two values at one {seq_axis} in this run"
                               + (f" (with {requested_text})" if requested_text else ""))

    fig, axes = ap.plt.subplots(1, len(panels), squeeze=False, figsize=(6 * len(panels), 4.5),
                             layout="constrained")
    shown, notes = [], []
    for ax, (x_axis, other_axis, seq_value, other_value) in zip(axes[0], panels):
        cases = [c for c in run.cases
                 if c[seq_axis] == seq_value and c[other_axis] == other_value]
        shown += cases
        caption = ar.status_caption(cases, x_axis)
        notes.append(f"time vs {x_axis}: {caption}" if caption else "")
        layout = ap.SweepLayout(cases, x_axis, facet_candidates=())
        ap.draw_series(ax, layout, cases, lambda c: c["time_ms_median"])
        ap.style_panel(ax, f"at {seq_axis}={seq_value}, {other_axis}={other_value}",
                       cases, layout, x_axis)
        ap.style_time_axis(ax)
        ap.add_legend(ax, cases)
    title = run.title("Attention time vs heads and d_k", run.devices(shown))
    return {"heads_dk": ap.finish_figure(fig, title, notes)}


def plot(run, out_dir: Path, seq: int | None = None, heads: int | None = None,
         d_k: int | None = None) -> list[Path]:
    return ap.save_figures(figures(run, seq, heads, d_k), out_dir)



