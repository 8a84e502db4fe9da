"""The roofline of a run (#24): every ok case as a point, arithmetic intensity (FLOPs per byte
moved) against achieved GFLOP/s, under the roofs the run measured on its device: the bandwidth
roof (the best bandwidth check, GB/s, times intensity: on the CPU the read-only sum or the triad,
whichever is higher, named in the legend) and one flat compute roof per peak the records are
rated against (an fp32 record against the FMA loop, a bf16 one against its dot or AMX check),
each named and starting at its own ridge, where it meets the bandwidth roof. Each point left of
the ridge carries its % of the bandwidth roof. Colour tells the variant, the marker the dtype,
fill the KV cache (filled: contiguous, hollow: paged) and size the phase (large: prefill,
seq_q = seq_kv; small: decode, seq_q < seq_kv); a disturbed record is ringed in red as in every
plot. Cheap: one point per record.

    attnbench-plot results/<run> --only roofline [--out DIR]
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .. import plotting as ap, results as ar

# Marker area (points²) per phase: the dtype owns the marker's shape and the cache its fill, so
# the phase takes the size (prefill and decode also sit decades apart in intensity).
PHASE_SIZES = {"prefill": 50, "decode": 20}
# What each bandwidth check (a record's bandwidth_name) measures, for the roof's legend.
BANDWIDTH_CHECK_NAMES = {"cpu_read_gbps": "read-only sum", "cpu_triad_gbps": "STREAM triad",
                         "gpu_copy_gbps": "device-to-device copy"}
# How far past the outermost point or ridge the x axis reaches (a factor, on a log axis).
X_MARGIN = 2.0


def phase(case: dict) -> str:
    return "decode" if case["seq_q"] < case["seq_kv"] else "prefill"


def is_paged(case: dict) -> bool:
    return str(case.get("kv_cache") or "contiguous").startswith("paged")


def roofline_cases(run: ar.Run) -> list[dict]:
    cases = [c for c in ar.ok_cases(run.cases)
             if ar.is_number(c["arithmetic_intensity"]) and c["arithmetic_intensity"] > 0
             and ar.is_number(c["gflops"]) and c["gflops"] > 0]
    if not cases:
        raise ar.NotApplicable("no record has an arithmetic_intensity: nothing to place on a roofline")
    return cases


def compute_roofs(cases: list[dict]) -> list[tuple[str, float]]:
    """(peak_name, GFLOP/s) of each distinct peak the records are rated against, lowest first:
    records of different dtypes are rated against different checks, and each is its own roof."""
    peaks = {(str(c.get("peak_name") or ""), float(c["peak_gflops"])) for c in cases
             if ar.is_number(c["peak_gflops"]) and c["peak_gflops"] > 0}
    return sorted(peaks, key=lambda roof: (roof[1], roof[0]))


def _draw_roofs(ax, cases: list[dict], intensities: np.ndarray) -> tuple[tuple[float, float], list[str]]:
    """The device's roofs, from the run's checks; returns the x range (every point and every
    ridge, with a margin) and notes on missing roofs."""
    roofs = compute_roofs(cases)
    rated = [c for c in cases if ar.is_number(c["peak_gbps"])]
    roof_case = max(rated, key=lambda c: c["peak_gbps"], default=None)
    bandwidth = roof_case["peak_gbps"] if roof_case else 0.0
    ridges = [peak / bandwidth for _, peak in roofs] if bandwidth > 0 else []
    # The ridges belong in the picture even when every point lies far left of them (decode):
    # where the roofs meet is what says how far from compute-bound a point is.
    lo = min([intensities.min(), *ridges]) / X_MARGIN
    hi = max([intensities.max(), *ridges]) * X_MARGIN
    notes = []
    if bandwidth > 0:
        name = roof_case.get("bandwidth_name") or ""
        what = f" ({BANDWIDTH_CHECK_NAMES.get(name, name)})" if name else ""
        # Up to the highest ridge, ending exactly on that compute roof. bandwidth × x is a
        # straight line on log-log axes: its two ends draw it exactly.
        end, top = (ridges[-1], roofs[-1][1]) if roofs else (hi, bandwidth * hi)
        ax.plot([lo, end], [bandwidth * lo, top], color="0.2", linewidth=1.5,
                label=f"bandwidth roof {bandwidth:.4g} GB/s{what}")
    else:
        notes.append("no bandwidth check in the run: no bandwidth roof")
    for i, (name, peak) in enumerate(roofs):
        # Each from its own ridge (where the bandwidth roof reaches it) to the right edge.
        start = ridges[i] if ridges else lo
        named = f" ({name})" if name else ""
        ax.plot([start, hi], [peak, peak], color="0.5", linestyle="--", linewidth=1,
                label=f"compute roof {peak:.4g} GFLOP/s{named}")
        if ridges:
            # With several roofs, the peak's name says whose ridge a line is.
            whose = named if len(roofs) > 1 else ""
            ax.axvline(ridges[i], color="0.7", linestyle=":", linewidth=1,
                       label=f"ridge {ridges[i]:.3g} FLOP/byte{whose}")
    if not roofs:
        notes.append("no compute peak in the run: no compute roof")
    return (lo, hi), notes


def _keys(cases: list[dict], colors: dict[str, str]) -> list:
    """Legend entries for what the points' colour, marker, fill and size say, for what this
    panel shows only."""
    keys = [Patch(color=colors[v], label=v) for v in dict.fromkeys(c["variant"] for c in cases)]
    for dtype, group in ar.group_by(cases, lambda c: str(c.get("dtype"))).items():
        keys.append(Line2D([], [], color="0.3", marker=ap.dtype_marker(group[0]), linestyle="",
                           label=dtype))
    layouts = ar.group_by(cases, is_paged)
    if False in layouts:
        keys.append(Line2D([], [], color="0.3", marker="o", linestyle="",
                           label="contiguous cache (filled)"))
    if True in layouts:
        paged = ", ".join(dict.fromkeys(str(c["kv_cache"]) for c in layouts[True]))
        keys.append(Line2D([], [], color="0.3", marker="o", markerfacecolor="none", linestyle="",
                           label=f"{paged} cache (hollow)"))
    for kind, size in PHASE_SIZES.items():
        if any(phase(c) == kind for c in cases):
            size_name = "large" if size == max(PHASE_SIZES.values()) else "small"
            keys.append(Line2D([], [], color="0.3", marker="o", markersize=np.sqrt(size),
                               linestyle="", label=f"{kind} ({size_name})"))
    return keys


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
        x_range, missing = _draw_roofs(ax, on_device, intensities)
        notes += [f"{device}: {note}" for note in missing]
        groups = ar.group_by(on_device, lambda c: (c["variant"], phase(c), str(c.get("dtype")),
                                                    is_paged(c)))
        for (variant, kind, _, paged), group in groups.items():
            color = colors[variant]
            points = ax.scatter([c["arithmetic_intensity"] for c in group],
                                [c["gflops"] for c in group], marker=ap.dtype_marker(group[0]),
                                s=PHASE_SIZES[kind], edgecolors=color,
                                facecolors="none" if paged else color,
                                linewidths=1.2 if paged else 0.5)
            ap.tag_variant(points, variant)
            # Left of the ridge the bandwidth bounds a point: its % of that roof beside it.
            for c in group:
                if ar.is_number(c.get("percent_of_bandwidth")):
                    ax.annotate(f"{c['percent_of_bandwidth']:.0f}%",
                                (c["arithmetic_intensity"], c["gflops"]), xytext=(4, -9),
                                textcoords="offset points", fontsize=6, color=color)
        # A hollow ring, larger than any point: the dtype's marker stays visible inside it.
        ap.mark_disturbed(ax, on_device, "arithmetic_intensity", lambda c: c["gflops"])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(*x_range)  # the roofs run edge to edge; no autoscale margin past them
        ax.set_xlabel("arithmetic intensity (FLOPs per byte moved)")
        ax.set_ylabel(ap.with_dtypes("achieved GFLOP/s", on_device))
        ax.set_title(device)
        ap.add_legend(ax, on_device, extra_handles=_keys(on_device, colors))
    notes.append("bytes moved: K/V read once, Q and O, the block table of a paged cache; "
                 "decode: seq_q < seq_kv. A point under the sloped roof is bound by memory "
                 "(beside it: its % of that roof), under a flat one by compute; each flat roof is "
                 "a peak the records are rated against (per dtype), from its own ridge. Colour: "
                 "variant; marker: dtype; filled: contiguous KV cache, hollow: paged; large: "
                 "prefill, small: decode.")
    notes.append(ar.disturbed_caption(cases))
    return {"roofline": ap.finish_figure(fig, run.title("Roofline", devices), notes)}


def plot(run, out_dir: Path) -> list[Path]:
    return ap.save_figures(figures(run), out_dir)
