"""The roofline of a run (#24): every ok case as a point, arithmetic intensity (FLOPs per byte
moved) against achieved GFLOP/s, under both roofs the run measured on its device: the
bandwidth roof (the best bandwidth check, GB/s, times intensity: on the CPU the read-only sum or
the triad, whichever is higher, named in the legend) and the compute roof (the best FMA/GEMM
check the records are rated against). Each point left of the ridge carries its % of the
bandwidth roof. Prefill (seq_q = seq_kv) and decode (seq_q < seq_kv) share one picture, told
apart by marker. Cheap: one point per record.

    attnbench-plot results/<run> --only roofline [--out DIR]
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from .. import plotting as ap, results as ar

PHASE_MARKERS = {"prefill": "o", "decode": "^"}
# What each bandwidth check (a record's bandwidth_name) measures, for the roof's legend.
BANDWIDTH_CHECK_NAMES = {"cpu_read_gbps": "read-only sum", "cpu_triad_gbps": "STREAM triad",
                         "gpu_copy_gbps": "device-to-device copy"}


def phase(case: dict) -> str:
    return "decode" if case["seq_q"] < case["seq_kv"] else "prefill"


def roofline_cases(run: ar.Run) -> list[dict]:
    cases = [c for c in ar.ok_cases(run.cases)
             if ar.is_number(c["arithmetic_intensity"]) and c["arithmetic_intensity"] > 0
             and ar.is_number(c["gflops"]) and c["gflops"] > 0]
    if not cases:
        raise ar.NotApplicable("no record has an arithmetic_intensity: nothing to place on a roofline")
    return cases


def _draw_roofs(ax, cases: list[dict], intensities: np.ndarray) -> list[str]:
    """Both roofs of the device's records, from the run's checks; returns notes on missing ones."""
    peak = max((c["peak_gflops"] for c in cases if ar.is_number(c["peak_gflops"])), default=0.0)
    rated = [c for c in cases if ar.is_number(c["peak_gbps"])]
    roof_case = max(rated, key=lambda c: c["peak_gbps"], default=None)
    bandwidth = roof_case["peak_gbps"] if roof_case else 0.0
    notes = []
    xs = np.geomspace(intensities.min() / 2, intensities.max() * 2, 200)
    if bandwidth > 0:
        roof = bandwidth * xs if peak <= 0 else np.minimum(bandwidth * xs, peak)
        name = roof_case.get("bandwidth_name") or ""
        what = f" ({BANDWIDTH_CHECK_NAMES.get(name, name)})" if name else ""
        ax.plot(xs, roof, color="0.2", linewidth=1.5,
                label=f"bandwidth roof {bandwidth:.4g} GB/s{what}")
    else:
        notes.append("no bandwidth check in the run: no bandwidth roof")
    if peak > 0:
        ax.axhline(peak, color="0.5", linestyle="--", linewidth=1,
                   label=f"compute roof {peak:.4g} GFLOP/s")
        if bandwidth > 0:
            ax.axvline(peak / bandwidth, color="0.7", linestyle=":", linewidth=1,
                       label=f"ridge {peak / bandwidth:.3g} FLOP/byte")
    else:
        notes.append("no compute peak in the run: no compute roof")
    return notes


def figures(run) -> dict:
    """{"roofline": the figure, one panel per device}; run: a loaded Run or its folder."""
    run = ap.as_run(run)
    cases = roofline_cases(run)
    devices = run.devices(cases)
    colors = ap.variant_colors(c["variant"] for c in cases)
    fig, axes = plt.subplots(1, len(devices), squeeze=False, figsize=(9.5 * len(devices), 5.5),
                             layout="constrained")
    notes = []
    for ax, device in zip(axes[0], devices):
        on_device = [c for c in cases if c["device"] == device]
        intensities = np.array([c["arithmetic_intensity"] for c in on_device])
        notes += [f"{device}: {note}" for note in _draw_roofs(ax, on_device, intensities)]
        for (variant, kind), group in ar.group_by(on_device, lambda c: (c["variant"], phase(c))).items():
            points = ax.scatter([c["arithmetic_intensity"] for c in group],
                                [c["gflops"] for c in group], color=colors[variant],
                                marker=PHASE_MARKERS[kind], s=22)
            ap.tag_variant(points, variant)
            # Left of the ridge the bandwidth bounds a point: its % of that roof beside it.
            for c in group:
                if ar.is_number(c.get("percent_of_bandwidth")):
                    ax.annotate(f"{c['percent_of_bandwidth']:.0f}%",
                                (c["arithmetic_intensity"], c["gflops"]), xytext=(4, -9),
                                textcoords="offset points", fontsize=6, color=colors[variant])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOPs per byte moved)")
        ax.set_ylabel("achieved GFLOP/s")
        ax.set_title(device)
        handles = [Line2D([], [], color=colors[v], marker="o", linestyle="", label=v)
                   for v in dict.fromkeys(c["variant"] for c in on_device)]
        handles += [Line2D([], [], color="0.3", marker=m, linestyle="", label=k)
                    for k, m in PHASE_MARKERS.items()]
        roofs, _ = ax.get_legend_handles_labels()
        ax.legend(handles=handles + list(roofs), **ap.outside_right(ax), fontsize="small")
    notes.append("bytes moved: K/V read once, Q and O, the block table of a paged cache; "
                 "decode: seq_q < seq_kv. A point under the sloped roof is bound by memory "
                 "(beside it: its % of that roof), under the flat one by compute.")
    return {"roofline": ap.finish_figure(fig, run.title("Roofline", devices), notes)}


def plot(run, out_dir: Path) -> list[Path]:
    return ap.save_figures(figures(run), out_dir)
