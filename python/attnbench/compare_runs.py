"""Compare two runs case by case: the candidate's median time over the baseline's,
each matched case marked faster, slower or same against the runs' own measured
spread. Writes a markdown table and a plot of the ratios; prints the table.

    attnbench-compare results/<baseline> results/<candidate> [--out DIR]
    attnbench-compare results/cpu-bf16-torch results/cpu-bf16 --pair torch_flash:flash_cpu

Either run may be a peer's records, as long as it is a folder in the attnbench
format. Cases match on variant, device, precision and shape (batch, heads,
kv_heads, seq_q, seq_kv, d_k, d_v, dtype, layout, causal, mask), the pass timed (fwd, bwd,
fwd_bwd) and the KV cache (kv_cache, kv_lens), so a peer's backward pairs with attnbench's
backward only; precision, dtype
and layout are part of the key because an fp32 and a tf32 time of one variant, or
a bf16 and an fp32 one, are not the same measurement. A record without dtype,
layout or mask (written before attnbench had them) counts as fp32, bhsd, and the
mask its causal flag says. --pair BASE:CAND compares two different variants, the
baseline run's BASE with the candidate run's CAND (a peer against attnbench's own),
matched on everything else.

"same" means the two runs' min..max ranges overlap (when a record lacks min/max:
the ratio is within 2 combined coefficients of variation of 1): the difference is
inside the noise each run measured on itself.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

from matplotlib.lines import Line2D

from . import cli, plotting as ap, results as ar

MATCH_AXES = ("variant", "device", "precision", *ar.SHAPE_AXES, "causal", "mask", "pass",
              "kv_cache", "kv_lens")
_VERDICT_STYLE = {
    "faster": dict(marker="v", color="tab:green"),
    "slower": dict(marker="^", color="tab:red"),
    "same": dict(marker="o", color="0.5"),
}


def match_key(case: dict, with_variant: bool = True) -> tuple:
    # .get: the loader's defaults (pass fwd, a contiguous cache) for records from before them;
    # kv_lens, a list, as a tuple so the key hashes.
    return tuple(tuple(value) if isinstance(value := case.get(axis), list) else value
                 for axis in MATCH_AXES if with_variant or axis != "variant")


@dataclass
class Comparison:
    baseline: dict | None
    candidate: dict | None

    @property
    def comparable(self) -> bool:
        return (self.baseline is not None and self.candidate is not None
                and self.baseline["status"] == "ok" and self.candidate["status"] == "ok")

    @property
    def ratio(self) -> float | None:
        """Candidate time over baseline time: above 1 the candidate is slower."""
        if not self.comparable:
            return None
        return self.candidate["time_ms_median"] / self.baseline["time_ms_median"]

    @property
    def verdict(self) -> str:
        if self.baseline is None:
            return "only in candidate"
        if self.candidate is None:
            return "only in baseline"
        if not self.comparable:
            which = [f"{side} {ar.status_text(case)}" for side, case in
                     (("baseline", self.baseline), ("candidate", self.candidate)) if case["status"] != "ok"]
            return "not comparable: " + "; ".join(which)
        if within_noise(self.baseline, self.candidate):
            return "same"
        return "slower" if self.ratio > 1 else "faster"


def within_noise(baseline: dict, candidate: dict) -> bool:
    ranges = (baseline["time_ms_min"], baseline["time_ms_max"],
              candidate["time_ms_min"], candidate["time_ms_max"])
    if all(v is not None for v in ranges):
        return (candidate["time_ms_min"] <= baseline["time_ms_max"]
                and baseline["time_ms_min"] <= candidate["time_ms_max"])
    band = 2 * math.hypot(baseline["cv"] or 0.0, candidate["cv"] or 0.0)
    ratio = candidate["time_ms_median"] / baseline["time_ms_median"]
    # Times far apart (1e-290 ms against 1 ms) make a ratio past a double's range: not the same.
    return 0 < ratio < math.inf and abs(math.log(ratio)) <= math.log1p(band)


def by_key(run: ar.Run, variant: str | None = None) -> tuple[dict[tuple, dict], int]:
    """Cases by match key, and how many repeats were dropped (a resumed sweep may
    record a case twice; the later record wins, as the newer measurement). With
    `variant`, only that variant's cases, keyed without the variant."""
    cases: dict[tuple, dict] = {}
    chosen = [c for c in run.cases if variant is None or c["variant"] == variant]
    if variant is not None and not chosen:
        names = ", ".join(sorted({c["variant"] for c in run.cases}))
        raise ar.ResultsError(f"{run.folder}: no variant {variant!r} to pair (it has {names})")
    for case in chosen:
        cases[match_key(case, with_variant=variant is None)] = case
    return cases, len(chosen) - len(cases)


def parse_pair(text: str | None) -> tuple[str | None, str | None]:
    """--pair BASE:CAND -> (BASE, CAND); no pair -> (None, None)."""
    if text is None:
        return None, None
    base, _, cand = text.partition(":")
    if not base or not cand:
        raise ar.ResultsError(f"--pair {text!r}: expected BASELINE_VARIANT:CANDIDATE_VARIANT")
    return base, cand


def compare(baseline: ar.Run, candidate: ar.Run,
            pair: tuple[str | None, str | None] = (None, None)) -> tuple[list[Comparison], list[str]]:
    base_cases, base_repeats = by_key(baseline, pair[0])
    cand_cases, cand_repeats = by_key(candidate, pair[1])
    keys = list(base_cases) + [k for k in cand_cases if k not in base_cases]
    comparisons = [Comparison(base_cases.get(k), cand_cases.get(k)) for k in keys]
    notes = [f"{run.label}: {n} repeated cases; the last record of each was used"
             for run, n in ((baseline, base_repeats), (candidate, cand_repeats)) if n]
    return comparisons, notes


def side_names(baseline: ar.Run, candidate: ar.Run,
               pair: tuple[str | None, str | None] = (None, None)) -> tuple[str, str]:
    """What the two sides are called in the table and the plot: the runs, or with --pair the
    variants compared, each with its run ("torch_flash (cpu-bf16-torch)")."""
    if pair[0] is None or pair[1] is None:
        return baseline.label, candidate.label
    return f"{pair[0]} ({baseline.label})", f"{pair[1]} ({candidate.label})"


def time_cell(case: dict | None) -> str:
    if case is None or case["status"] != "ok":
        return "-"
    spread = ""
    if case["time_ms_min"] is not None and case["time_ms_max"] is not None:
        spread = f" ({case['time_ms_min']:.4g}-{case['time_ms_max']:.4g})"
    return f"{case['time_ms_median']:.4g}{spread}"


def render_markdown(baseline: ar.Run, candidate: ar.Run, comparisons: list[Comparison],
                    notes: list[str], pair: tuple[str | None, str | None] = (None, None)) -> str:
    base_name, cand_name = side_names(baseline, candidate, pair)
    verdicts = [c.verdict for c in comparisons]
    counted = {v: verdicts.count(v) for v in ("faster", "slower", "same")}
    other = len(verdicts) - sum(counted.values())
    summary = (f"{sum(counted.values())} compared: {counted['faster']} faster, {counted['slower']} slower, "
               f"{counted['same']} same; {other} not compared (only in one run, or not ok in one)")
    headers = ("variant", "device", "precision", "shape", f"{base_name} ms (min-max)",
               f"{cand_name} ms (min-max)", "ratio", "verdict")
    rows = []
    for comparison in comparisons:
        case = comparison.candidate or comparison.baseline
        ratio = comparison.ratio
        variant = case["variant"]
        if comparison.comparable and comparison.baseline["variant"] != variant:
            variant = f"{variant} vs {comparison.baseline['variant']}"  # a --pair
        rows.append([variant, case["device"], case["precision"], ar.format_shape(case),
                     time_cell(comparison.baseline), time_cell(comparison.candidate),
                     "-" if ratio is None else f"{ratio:.3f}", comparison.verdict])
    lines = [
        f"# {cand_name} vs {base_name}",
        "",
        f"- baseline: {baseline.label}: {baseline.where(baseline.devices())} ({baseline.provenance()})",
        f"- candidate: {candidate.label}: {candidate.where(candidate.devices())} ({candidate.provenance()})",
        "- ratio: candidate median time / baseline median time (above 1: candidate slower)",
        "- same: the two min..max ranges overlap (without min/max: within 2 combined CVs)",
        *[f"- note: {note}" for note in notes],
        "",
        summary,
        "",
        ar.markdown_table(headers, rows),
    ]
    return "\n".join(lines)


def as_plot_case(comparison: Comparison) -> dict:
    """The candidate's record with the ratio as its value, and the worse of the two
    statuses, so the shared series drawing marks cases that cannot be compared."""
    case = dict(comparison.candidate, verdict=comparison.verdict)
    if comparison.comparable:
        case["ratio"] = comparison.ratio
    else:
        failed = [c for c in (comparison.baseline, comparison.candidate) if c["status"] != "ok"]
        case["status"], case["reason"], case["ratio"] = failed[0]["status"], failed[0]["reason"], None
    return case


def figure(baseline: ar.Run, candidate: ar.Run, comparisons: list[Comparison],
           pair: tuple[str | None, str | None] = (None, None)):
    """The figure of the time ratios (candidate / baseline) of the matched cases."""
    base_name, cand_name = side_names(baseline, candidate, pair)
    matched = [c for c in comparisons if c.baseline is not None and c.candidate is not None]
    if not matched:
        raise ar.NotApplicable(f"no case of {candidate.label} matches one of {baseline.label}")
    cases = [as_plot_case(c) for c in matched]
    x_axis = ar.sweep_axis(cases)
    layout = ap.SweepLayout(cases, x_axis)
    fig, panels = layout.figure()
    for ax, panel_cases, title in panels:
        ap.draw_series(ax, layout, panel_cases, lambda c: c["ratio"])
        for verdict, style in _VERDICT_STYLE.items():
            marked = [c for c in panel_cases if c["verdict"] == verdict]
            ax.plot([c[x_axis] for c in marked], [c["ratio"] for c in marked], linestyle="none",
                    markersize=9, markerfacecolor="none", markeredgewidth=1.5, **style)
        ax.axhline(1.0, color="black", linewidth=1)
        ap.style_panel(ax, title, panel_cases, layout, ar.seq_axis_label(cases, x_axis))
        ap.plain_log_yaxis(ax)
        # Symmetric about 1 in log space, at least 0.8x..1.25x, so "same" sits mid-panel.
        ratios = [c["ratio"] for c in panel_cases if c["ratio"] and c["ratio"] < math.inf]
        # Capped at 1e-200..1e200, past which matplotlib's log axis cannot place its ticks: a
        # ratio of 1e290 (a 1e-290 ms time) leaves the panel, and the figure still draws.
        reach = min(max([1.3 * abs(math.log(r)) for r in ratios] + [math.log(1.25)]),
                    200 * math.log(10))
        ax.set_ylim(math.exp(-reach), math.exp(reach))
        ax.set_ylabel(f"time ratio {cand_name} / {base_name}")
        counts = {v: sum(1 for c in panel_cases if c["verdict"] == v) for v in _VERDICT_STYLE}
        keys = [Line2D([], [], linestyle="none", markerfacecolor="none", markeredgewidth=1.5,
                       label=f"{verdict} ({counts[verdict]})", **style)
                for verdict, style in _VERDICT_STYLE.items() if counts[verdict]]
        ap.add_legend(ax, panel_cases, extra_handles=keys)
    unmatched = len(comparisons) - len(matched)
    notes = [
        "Ratio above 1: candidate slower. same: the runs' min..max ranges overlap.",
        f"{unmatched} cases are in only one of the runs (listed in the markdown table)." if unmatched else "",
        ar.status_caption(cases, x_axis),
    ]
    where_base, where_cand = baseline.where(baseline.devices()), candidate.where(candidate.devices())
    machines = where_cand if where_base == where_cand else f"{where_base} vs {where_cand}"
    title = f"{cand_name} vs {base_name}: time ratio\n{machines}"
    return ap.finish_figure(fig, title, notes)


def plot(baseline: ar.Run, candidate: ar.Run, comparisons: list[Comparison], out_dir: Path,
         pair: tuple[str | None, str | None] = (None, None)) -> list[Path]:
    return ap.save_figures({output_stem(baseline, candidate):
                            figure(baseline, candidate, comparisons, pair)}, out_dir)


def output_stem(baseline: ar.Run, candidate: ar.Run) -> str:
    return f"compare_{candidate.label}_vs_{baseline.label}"


def add_arguments(parser) -> None:
    parser.add_argument("baseline", help="results folder to compare against")
    parser.add_argument("candidate", help="results folder being compared")
    parser.add_argument("--out", help="output folder (default: <candidate>/plots)")
    parser.add_argument("--pair", metavar="BASE:CAND",
                        help="compare the baseline run's variant BASE with the candidate run's CAND")


def run(args) -> None:
    baseline, candidate = ar.load_run(args.baseline), ar.load_run(args.candidate)
    out_dir = Path(args.out) if args.out else candidate.folder / "plots"
    pair = parse_pair(args.pair)
    comparisons, notes = compare(baseline, candidate, pair)
    text = render_markdown(baseline, candidate, comparisons, notes, pair)
    print(text, end="")
    written = [ar.write_text(out_dir, output_stem(baseline, candidate) + ".md", text)]
    try:
        written += plot(baseline, candidate, comparisons, out_dir, pair)
    except ar.NotApplicable as reason:
        print(f"no plot: {reason}", file=sys.stderr)
    cli.report_written(written, sys.stderr)
