"""A quantized KV cache's trade (kv_dtype, harness/core/kv_quant.h): each quantized decode record
as a point, its cache's own error (kv_quant_rel_l2_err: the relative L2 distance of the float64
outputs on the dequantized and on the unquantized K and V) against its speed-up over its
unquantized twin (the same variant, shape, dtype and cache layout with K and V in the dtype,
timed in the same run). The twins sit at error 0, speed-up 1. Colour tells the variant, the
case's dtype and cache length, the marker the kv_dtype, fill the cache (filled: contiguous, hollow: paged); a
disturbed record is ringed in red as in every plot.

    attnbench-plot results/<run> --only kv_quant [--out DIR]
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from .. import plotting as ap, results as ar

KV_DTYPE_MARKERS = {"int8": "s", "fp8_e4m3": "^"}
# The error axis is linear up to this (so the twins' 0 shows), logarithmic past it.
ERROR_LINEAR_BELOW = 1e-4

# What makes two records twins: everything but the cache's element type.
TWIN_FIELDS = ("variant", "dtype", "layout", "pass", "batch", "heads", "kv_heads", "seq_q",
               "seq_kv", "d_k", "d_v", "mask", "kv_cache", "alibi", "softcap", "distribution",
               "threads", "shard")


def twin_key(case: dict) -> tuple:
    return (*(case.get(name) for name in TWIN_FIELDS), tuple(case.get("kv_lens") or ()),
            tuple(case.get("doc_lens") or ()))


def is_quantized(case: dict) -> bool:
    return case.get("kv_quant_rel_l2_err") is not None


def trade_points(run: ar.Run) -> list[tuple[dict, float]]:
    """(quantized record, speed-up over its twin) for every ok quantized record with an ok twin."""
    cases = [c for c in ar.ok_cases(run.cases) if ar.is_number(c.get("time_ms_median"))]
    twins = {twin_key(c): c for c in cases if not is_quantized(c)}
    points = [(c, twins[twin_key(c)]["time_ms_median"] / c["time_ms_median"])
              for c in cases if is_quantized(c) and twin_key(c) in twins]
    if not points:
        raise ar.NotApplicable("no timed quantized record (kv_dtype int8 or fp8_e4m3) with an "
                               "unquantized twin in the run")
    return points


def group_name(case: dict) -> str:
    keys = case["kv_lens"] and "+".join(str(k) for k in case["kv_lens"]) or case["seq_kv"]
    return f"{case['variant']}: {case['dtype']}, {keys} keys, seq_q {case['seq_q']}"


def _draw(run: ar.Run):
    points = trade_points(run)
    groups = sorted({group_name(c) for c, _ in points})
    colors = dict(zip(groups, plt.get_cmap("tab10").colors * (len(groups) // 10 + 1)))
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.axhline(1.0, color="0.6", linewidth=0.8)
    ax.scatter([0.0], [1.0], marker="o", color="0.3", zorder=3, label="K, V in the dtype")
    for case, speedup in points:
        color = colors[group_name(case)]
        paged = str(case.get("kv_cache") or "contiguous").startswith("paged")
        ax.scatter([case["kv_quant_rel_l2_err"]], [speedup], zorder=3,
                   marker=KV_DTYPE_MARKERS.get(case["kv_dtype"], "D"),
                   facecolors="none" if paged else color, edgecolors=color,
                   linewidths=1.2)
        if ar.is_disturbed(case):
            ax.scatter([case["kv_quant_rel_l2_err"]], [speedup], s=160, facecolors="none",
                       edgecolors="red", linewidths=1.0, zorder=2)
    ax.set_xscale("symlog", linthresh=ERROR_LINEAR_BELOW)
    ax.set_xlim(left=0)
    ax.set_xlabel("quantization error of the cache: relative L2 of O (kv_quant_rel_l2_err)")
    ax.set_ylabel("speed-up over the same case with K, V in its dtype")
    handles = [plt.Line2D([], [], linestyle="", marker=m, color="0.3", label=name)
               for name, m in KV_DTYPE_MARKERS.items()]
    handles += [plt.Line2D([], [], linestyle="", marker="o", color=colors[g], label=g)
                for g in groups]
    handles += [plt.Line2D([], [], linestyle="", marker="o", markerfacecolor="none",
                           color="0.3", label="hollow: paged cache")]
    ax.legend(handles=handles, fontsize="small", **ap.outside_right(ax))
    notes = ["Each quantized record against its twin timed in the same run (same variant, shape, "
             "dtype and cache layout, K and V in the dtype); the error is the cache's own, not the "
             "kernel's (the oracle checks the kernel against the dequantized values).",
             ar.disturbed_caption([case for case, _ in points])]
    title = run.title("Quantized KV cache: speed-up against error", run.devices())
    return ap.finish_figure(fig, title, notes)


def figures(run) -> dict:
    """{"kv_quant": the figure}; run: a loaded Run or its folder."""
    return {"kv_quant": _draw(ap.as_run(run))}


def plot(run, out_dir: Path) -> list[Path]:
    return ap.save_figures(figures(run), out_dir)
