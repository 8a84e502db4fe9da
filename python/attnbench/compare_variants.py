"""Each variant's time over a baseline variant's, shape by shape, with a bootstrap
95% interval: how much faster or slower one variant is than another, and how sure
that is. Writes a markdown table and a plot of the ratios; prints the table.

    attnbench-compare-variants results/<run> [more runs] --baseline openmp \\
        [--variants flash_cpu,...] [--resamples 2000] [--seed 0] [--out DIR]

A record's rounds (round_times_ms) are its repetitions' mean times. In a run with
measure.interleave = true the variants of a shape ran in alternating rounds, so
round i of the variant and round i of the baseline met the same load: the ratio is
the median of the per-round ratios, and the bootstrap resamples rounds in pairs,
which keeps the shared noise out of the interval. Otherwise (the variants timed
minutes apart) it is the ratio of the two medians, and the bootstrap resamples each
variant's rounds on its own. The bootstrap is seeded, so a table is reproducible.

Several runs (e.g. the same sweep quiet and under load, separate and interleaved)
go in one table and one plot, a series per run and variant.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import cli, plotting as ap, results as ar

SHAPE_KEY = ("device", "dtype", "precision", *ar.SHAPE_AXES, "causal")
CONFIDENCE = 0.95
MIN_ROUNDS = 2  # fewer and there is nothing to resample


@dataclass
class Ratio:
    run: str
    variant: str
    baseline: str
    case: dict  # the variant's record: its shape, for the table and the plot
    estimate: float
    low: float | None  # None: no interval (too few rounds)
    high: float | None
    method: str  # "paired rounds", "independent rounds", or "medians only"
    rounds: int
    disturbed: str  # why either record is disturbed, or ""

    @property
    def rel_half_width(self) -> float | None:
        # A ratio that under- or overflowed (round times of 1e308 against milliseconds) has no
        # relative width to give.
        if self.low is None or self.high is None or not 0 < self.estimate < math.inf:
            return None
        return (self.high - self.low) / 2 / self.estimate


def rounds_of(case: dict) -> np.ndarray:
    rounds = case.get("round_times_ms") or []
    return np.asarray([r for r in rounds if ar.is_number(r) and r > 0], dtype=float)


# Draws per chunk of the bootstrap: resamples x rounds indices at once took tens of gigabytes
# for long runs; in chunks the memory stays ~100 MB whatever both counts (a chunk holds every
# resample of a usual run, so its draws, and its interval, are those of one draw).
CHUNK_DRAWS = 1 << 22


def bootstrap_medians(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The median of each of `resamples` resamples of `values` (with replacement)."""
    per_chunk = max(1, CHUNK_DRAWS // len(values))
    medians = []
    for start in range(0, resamples, per_chunk):
        picks = rng.integers(0, len(values), size=(min(per_chunk, resamples - start), len(values)))
        medians.append(np.median(values[picks], axis=1))
    return np.concatenate(medians)


def paired_ratio(candidate: np.ndarray, baseline: np.ndarray, resamples: int,
                 rng: np.random.Generator) -> tuple[float, float, float]:
    """Median of the per-round ratios, and its percentile bootstrap interval over rounds
    resampled in pairs."""
    per_round = candidate / baseline
    medians = bootstrap_medians(per_round, resamples, rng)
    low, high = np.percentile(medians, [50 * (1 - CONFIDENCE), 50 * (1 + CONFIDENCE)])
    return float(np.median(per_round)), float(low), float(high)


def independent_ratio(candidate: np.ndarray, baseline: np.ndarray, resamples: int,
                      rng: np.random.Generator) -> tuple[float, float, float]:
    """Ratio of the medians, and its percentile bootstrap interval with each variant's rounds
    resampled on their own."""
    ratios = (bootstrap_medians(candidate, resamples, rng)
              / bootstrap_medians(baseline, resamples, rng))
    low, high = np.percentile(ratios, [50 * (1 - CONFIDENCE), 50 * (1 + CONFIDENCE)])
    return float(np.median(candidate) / np.median(baseline)), float(low), float(high)


def ratio_of(run: ar.Run, candidate: dict, baseline: dict, resamples: int, seed: int) -> Ratio:
    # One generator per comparison, from the seed: a row does not change when others are added.
    rng = np.random.default_rng(seed)
    cand_rounds, base_rounds = rounds_of(candidate), rounds_of(baseline)
    paired = (candidate.get("interleaved") is True and baseline.get("interleaved") is True
              and len(cand_rounds) == len(base_rounds))
    disturbed = "; ".join(f"{c['variant']}: {ar.disturbed_reason(c)}"
                          for c in (candidate, baseline) if ar.is_disturbed(c))
    common = dict(run=run.label, variant=candidate["variant"], baseline=baseline["variant"],
                  case=candidate, disturbed=disturbed)
    if min(len(cand_rounds), len(base_rounds)) < MIN_ROUNDS:
        estimate = candidate["time_ms_median"] / baseline["time_ms_median"]
        return Ratio(estimate=estimate, low=None, high=None, method="medians only",
                     rounds=min(len(cand_rounds), len(base_rounds)), **common)
    if paired:
        estimate, low, high = paired_ratio(cand_rounds, base_rounds, resamples, rng)
        method = "paired rounds"
    else:
        estimate, low, high = independent_ratio(cand_rounds, base_rounds, resamples, rng)
        method = "independent rounds"
    return Ratio(estimate=estimate, low=low, high=high, method=method,
                 rounds=min(len(cand_rounds), len(base_rounds)), **common)


def ratios(run: ar.Run, baseline: str, variants: list[str] | None, resamples: int,
           seed: int) -> list[Ratio]:
    ok = ar.ok_cases(run.cases)
    # The last record of a shape wins, as in compare_runs.py (a resumed run may repeat one).
    baselines = {tuple(c[k] for k in SHAPE_KEY): c for c in ok if c["variant"] == baseline}
    found = []
    for case in ok:
        if case["variant"] == baseline or (variants and case["variant"] not in variants):
            continue
        base = baselines.get(tuple(case[k] for k in SHAPE_KEY))
        if base is not None:
            found.append(ratio_of(run, case, base, resamples, seed))
    return found


def render_markdown(runs: list[ar.Run], found: list[Ratio], baseline: str, resamples: int,
                    seed: int) -> str:
    headers = ("run", "variant", "shape", f"time / {baseline}", "95% interval", "± %", "rounds",
               "method", "disturbed")
    rows = []
    for r in found:
        interval = "-" if r.low is None else f"{r.low:.3f} - {r.high:.3f}"
        half = "-" if r.rel_half_width is None else f"{100 * r.rel_half_width:.1f}"
        rows.append([r.run, r.variant, ar.format_shape(r.case), f"{r.estimate:.3f}", interval, half,
                     str(r.rounds), r.method, r.disturbed or "-"])
    lines = [
        f"# Time ratio to {baseline}",
        "",
        *[f"- {run.label}: {run.where(run.devices())} ({run.provenance()})" for run in runs],
        f"- ratio: the variant's time over {baseline}'s (below 1: the variant is faster)",
        "- paired rounds (interleaved runs): median of per-round ratios, rounds resampled in pairs;",
        "  independent rounds: ratio of medians, each variant's rounds resampled on their own",
        f"- percentile bootstrap, {resamples} resamples, seed {seed}",
        "",
        ar.markdown_table(headers, rows),
    ]
    return "\n".join(lines)


SHAPE_FAMILY_AXES = tuple(k for k in SHAPE_KEY if k not in ("seq_q", "seq_kv"))


def figure(found: list[Ratio], baseline: str):
    """The ratios with their intervals against n: one line per run, variant and shape family
    (every axis but the sequence length), in the variant's colour, its mask's line style and
    its dtype's marker; a run after the first drawn with hollow markers."""
    if not found:
        raise ar.NotApplicable(f"no variant shares a shape with {baseline}")
    cases = [r.case for r in found]
    x_axis = ar.sweep_axis(cases)
    fig, ax = ap.plt.subplots(figsize=(9, 5), layout="constrained")
    colors = ap.variant_colors(r.variant for r in found)
    runs = list(dict.fromkeys(r.run for r in found))
    families = list(dict.fromkeys(tuple(r.case[k] for k in SHAPE_FAMILY_AXES) for r in found))
    # What tells the shape families apart, for their labels.
    differing = [k for i, k in enumerate(SHAPE_FAMILY_AXES) if len({f[i] for f in families}) > 1]
    series = ar.group_by(found, lambda r: (r.run, r.variant, tuple(r.case[k] for k in SHAPE_FAMILY_AXES)))
    offsets = np.linspace(-0.04, 0.04, len(series)) if len(series) > 1 else [0.0]
    for (run, variant, _), group, offset in zip(series, series.values(), offsets):
        group = sorted(group, key=lambda r: r.case[x_axis])
        # Nudged apart along x (a log axis: by a factor), so the intervals do not hide each other.
        xs = np.asarray([r.case[x_axis] for r in group], dtype=float) * 2 ** offset
        ys = np.asarray([r.estimate for r in group])
        below = [r.estimate - r.low if r.low is not None else 0 for r in group]
        above = [r.high - r.estimate if r.high is not None else 0 for r in group]
        method = group[0].method
        shape = ", ".join(f"{k} {group[0].case[k]}" for k in differing)
        label = f"{run}: {variant}" + (f", {shape}" if shape else "") + f" ({method})"
        container = ax.errorbar(xs, ys, yerr=[below, above], capsize=4, label=label,
                                color=colors[variant], linestyle=ap.mask_linestyle(group[0].case),
                                marker=ap.dtype_marker(group[0].case),
                                markerfacecolor=colors[variant] if run == runs[0] else "none")
        for artist in (container.lines[0], *container.lines[2]):
            ap.tag_variant(artist, variant)
        ringed = [(x, r.estimate) for x, r in zip(xs, group) if r.disturbed]
        if ringed:
            ax.plot(*zip(*ringed), marker="o", markersize=12, markerfacecolor="none",
                    markeredgecolor="tab:red", markeredgewidth=1.8, linestyle="none")
    ax.axhline(1.0, color="black", linewidth=1)
    ap.plain_log_yaxis(ax)  # 0.5x and 2x equally far from 1
    ax.set_xscale("log", base=2)
    ticks = sorted({r.case[x_axis] for r in found})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel(ar.seq_axis_label(cases, x_axis))
    ax.set_ylabel(f"time / {baseline} time (95% bootstrap interval)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", **ap.outside_right(ax))
    disturbed = [r for r in found if r.disturbed]
    notes = [f"{len(disturbed)} ratios involve a disturbed record (ringed in red): "
             + "; ".join(sorted({r.disturbed for r in disturbed}))[:600] if disturbed else ""]
    return ap.finish_figure(fig, f"Time ratio to {baseline}", notes)


def plot(found: list[Ratio], baseline: str, out_dir: Path, stem: str) -> list[Path]:
    return ap.save_figures({stem: figure(found, baseline)}, out_dir)


MIN_RESAMPLES = 100
MAX_RESAMPLES = 100_000


def add_arguments(parser) -> None:
    parser.add_argument("runs", nargs="+", help="results folders written by attnbench")
    parser.add_argument("--baseline", required=True, help="the variant the others are divided by")
    parser.add_argument("--variants", help="comma-separated variants to compare (default: all)")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--out", help="output folder (default: <first run>/plots)")


def run(args) -> None:
    # Past this the interval is no steadier, only slower (1e8 resamples ran for minutes before
    # the draws were chunked, and took the machine's memory).
    if not MIN_RESAMPLES <= args.resamples <= MAX_RESAMPLES:
        raise ar.ResultsError(
            f"--resamples {args.resamples}: use {MIN_RESAMPLES} to {MAX_RESAMPLES}")
    if args.seed < 0:
        raise ar.ResultsError(f"--seed {args.seed}: must be 0 or more")
    runs = [ar.load_run(folder) for folder in args.runs]
    ar.require_distinct_labels(runs)  # (their rows and plot series had merged)
    variants = args.variants.split(",") if args.variants else None
    found = []
    for loaded in runs:
        if not any(c["variant"] == args.baseline for c in loaded.cases):
            raise ar.ResultsError(f"{loaded.folder}: no records of the baseline {args.baseline!r}")
        # A misspelt variant would otherwise give an empty table and exit 0.
        for name in variants or []:
            if not any(c["variant"] == name for c in loaded.cases):
                raise ar.ResultsError(f"{loaded.folder}: no records of the variant {name!r}")
        found += ratios(loaded, args.baseline, variants, args.resamples, args.seed)
    out_dir = Path(args.out) if args.out else runs[0].folder / "plots"
    stem = f"ratio_vs_{args.baseline}"
    text = render_markdown(runs, found, args.baseline, args.resamples, args.seed)
    print(text, end="")
    written = [ar.write_text(out_dir, stem + ".md", text)]
    try:
        written += plot(found, args.baseline, out_dir, stem)
    except ar.NotApplicable as reason:
        print(f"no plot: {reason}", file=sys.stderr)
    cli.report_written(written, sys.stderr)
