"""Throughput against sequence length, with the roof the records are rated against (their
peak_name: the FMA loop for fp32, the best of the FMA, vdpbf16ps and AMX checks for bf16) and the
manifest's other measured peaks as horizontal lines, and % of that roof on the right-hand axis
where every record reads against one: how far each variant is from what this machine can do. One figure per device: GFLOP/s
for cpu, TFLOP/s for cuda; a log axis where the rates span more than a decade.
Causal cases count unmasked pairs only.

    attnbench-plot results/<run> --only throughput [--out DIR]
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .. import plotting as ap, results as ar

# Measured peaks per device: (manifest section, key, name on the plot).
_PEAKS = {
    "cpu": (("peaks", "cpu_fma_gflops", "FMA peak"), ("peaks", "cpu_sgemm_gflops", "sgemm")),
    "cuda": (("gpu", "sgemm_gflops", "cuBLAS sgemm"), ("gpu", "tf32_gemm_gflops", "TF32 GEMM")),
}
# Only draw the TF32 line when the run has tf32 cases: it is 7x the fp32 rate
# and would flatten every fp32 curve against the axis.
_PEAK_NEEDS_PRECISION = {"tf32_gemm_gflops": "tf32"}


def manifest_peaks(run: ar.Run, device: str, precisions: set[str]) -> list[tuple[str, float]]:
    """(name, GFLOP/s) of the measured peaks that apply to these cases."""
    peaks = []
    for section, key, name in _PEAKS.get(device, ()):
        values = run.manifest.get(section) or {}
        needed = _PEAK_NEEDS_PRECISION.get(key)
        if not ar.is_number(values.get(key)) or values[key] <= 0:
            continue
        if needed is None or needed in precisions:
            peaks.append((name, float(values[key])))
    return peaks


# How the plot names the check a record is rated against (its peak_name).
PEAK_LABELS = {
    "cpu_fma_gflops": "FMA peak", "cpu_bf16_dot_gflops": "vdpbf16ps peak",
    "cpu_amx_bf16_gflops": "AMX bf16 peak", "sgemm_gflops": "cuBLAS sgemm",
    "tf32_gemm_gflops": "TF32 GEMM", "bf16_gemm_gflops": "bf16 GEMM",
    "fp16_gemm_gflops": "fp16 GEMM",
}


def record_roofs(cases: list[dict], peaks: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """(name, GFLOP/s) of each roof the records' percent_of_peak is measured against (their
    peak_name and peak_gflops, as the binary rated them), the most records' first: records of
    different dtypes are rated against different checks (fp32 the FMA loop, bf16 its best of the
    FMA, vdpbf16ps and AMX checks). A record whose peak_name is empty (written before it existed)
    names its peak after the manifest peak of that value."""
    recorded = Counter((str(c.get("peak_name") or ""), float(c["peak_gflops"])) for c in cases
                       if ar.is_number(c["peak_gflops"]) and c["peak_gflops"] > 0)
    roofs = []
    for (name, value), _ in recorded.most_common():
        label = PEAK_LABELS.get(name, name) or next(
            (n for n, v in peaks if abs(v - value) <= 1e-6 * value), "peak")
        roofs.append((label, value))
    return roofs


def figure(run, device: str):
    """The throughput figure of one device's cases; run: a loaded Run or its folder."""
    run = ap.as_run(run)
    cases = [c for c in run.cases if c["device"] == device]
    x_axis = ar.sweep_axis(cases)
    unit_name, unit = ("TFLOP/s", 1000.0) if device == "cuda" else ("GFLOP/s", 1.0)
    peaks = manifest_peaks(run, device, {c["precision"] for c in cases})
    roofs = record_roofs(cases, peaks)
    # The records' own roofs are always drawn; a manifest peak of the same value once.
    peaks = roofs + [(n, v) for n, v in peaks if all(abs(v - r) > 1e-6 * v for _, r in roofs)]
    # One right-hand % axis where every record reads against one roof; with several (fp32 and
    # bf16 records on an AMX host), one axis would misread the others: their % is in results.md.
    reference = roofs[0] if len(roofs) == 1 else None
    if not roofs and peaks:
        reference = peaks[0]
    layout = ap.SweepLayout(cases, x_axis)
    fig, panels = layout.figure()
    left_out = 0
    for ax, panel_cases, title in panels:
        rates = [c["gflops"] / unit for c in ar.ok_cases(panel_cases) if ar.is_number(c["gflops"])]
        log_axis = ap.spans_decades(rates)
        # A rate of zero or less has no place on a log axis: left out (and counted in the
        # caption), where matplotlib would warn and draw nothing for it.
        left_out += sum(1 for rate in rates if log_axis and rate <= 0)

        def rate_of(case, log_axis=log_axis):
            rate = None if case["gflops"] is None else case["gflops"] / unit
            return None if rate is None or (log_axis and rate <= 0) else rate

        ap.draw_series(ax, layout, panel_cases, rate_of)
        peak_lines = []
        for (name, value), style in zip(peaks, ("-", ":", "-.", "--")):
            peak_lines.append(ax.axhline(value / unit, color="black", linestyle=style, linewidth=1,
                                         label=f"measured {name}: {value / unit:.3g} {unit_name}"))
        ap.style_panel(ax, title, panel_cases, layout, ar.seq_axis_label(cases, x_axis))
        ax.set_ylabel(ap.with_dtypes(unit_name, panel_cases))
        highest = max([v / unit for _, v in peaks] + rates + [1e-9])
        if log_axis:
            ap.plain_log_yaxis(ax)  # a 10x spread on a linear axis flattens the slow variants
            ax.set_ylim(min(rate for rate in rates if rate > 0) / 1.5, highest * 1.5)
        else:
            # From 0, or below it where a record's rate is negative: every rate drawn is shown.
            ax.set_ylim(min([0.0] + rates) * 1.1, highest * 1.1)
        if reference:
            right = ax.secondary_yaxis("right", functions=(lambda y: 100 * y * unit / reference[1],
                                                           lambda p: p * reference[1] / (100 * unit)))
            right.set_ylabel(f"% of measured {reference[0]}")
            if ax.get_yscale() == "log":
                ap.plain_log_yaxis(right)
        # Past the right-hand axis's labels.
        ap.add_legend(ax, panel_cases, gap=ap.LEGEND_GAP_RIGHT_AXIS if reference else ap.LEGEND_GAP)
    several = ", ".join(name for name, _ in roofs)
    notes = [
        "No measured peak in the manifest for this device." if not peaks else "",
        f"{left_out} record{'s' if left_out != 1 else ''} with a rate of zero or less left out: "
        "a log axis cannot show one (results.md has every rate)." if left_out else "",
        f"Records here are rated against several roofs ({several}): each record's % of its own "
        "is in results.md's table." if len(roofs) > 1 else "",
        ar.status_caption(cases, x_axis),
    ]
    title = run.title(f"Attention throughput vs sequence length ({device})", [device])
    return ap.finish_figure(fig, title, notes)


def figures(run) -> dict:
    """{"throughput_<device>": its figure} for every device of the run."""
    run = ap.as_run(run)
    ar.require_seq_sweep(run.cases)
    return {f"throughput_{device}": figure(run, device) for device in run.devices()}


def plot(run, out_dir: Path) -> list[Path]:
    return ap.save_figures(figures(run), out_dir)


