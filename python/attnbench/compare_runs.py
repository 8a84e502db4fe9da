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

"same" means the two medians' 95% confidence intervals (ci_low_ms..ci_high_ms)
overlap: the difference is inside the uncertainty each run measured on itself. A
record without an interval (written before attnbench computed one) falls back to
the two min..max ranges, and one without min/max to the ratio being within 2
combined coefficients of variation of 1; the table's "decided by" column names the
rule each row used. The dtype column is the tensors' element type, with the
arithmetic in parentheses where it is not fp32 accumulation ("fp32 (tf32)").

Above the table: the geometric mean of the ratios per dtype, over the cases both
runs timed, with a 95% percentile bootstrap interval (the cases resampled,
seeded, so the output is reproducible), and a warning where the two runs were taken
under conditions that disagree: different machines (cpu_model, hostname), best FMA
peak checks more than 10% apart or checks that saw other work, or dates more than a
day apart. A ratio across such runs measures the change and the conditions together.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D

from . import cli, plotting as ap, results as ar

MATCH_AXES = ("variant", "device", "precision", *ar.SHAPE_AXES, "causal", "mask", "pass",
              "kv_cache", "kv_lens")
_VERDICT_STYLE = {
    "faster": dict(marker="v", color="tab:green"),
    "slower": dict(marker="^", color="tab:red"),
    "same": dict(marker="o", color="0.5"),
}
# The rules "same" is decided by, best first: a rule is used only when both records carry
# what it needs (the confidence interval of the median, else the min..max range, else the CV).
CI_RULE = "95% CI"
RANGE_RULE = "min-max"
CV_RULE = "2 CVs"
# The per-dtype geometric mean's bootstrap: fixed, so a table is the same each time it is made.
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
DATES_APART_LIMIT_DAYS = 1.0


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

    @property
    def rule(self) -> str | None:
        """Which rule decided the verdict (CI_RULE, RANGE_RULE or CV_RULE); None when the
        cases were not compared."""
        return noise_rule(self.baseline, self.candidate) if self.comparable else None


def _has_interval(case: dict, low: str, high: str) -> bool:
    return ar.is_number(case.get(low)) and ar.is_number(case.get(high))


def noise_rule(baseline: dict, candidate: dict) -> str:
    """The rule within_noise uses for these two records: the medians' 95% confidence intervals
    where both have one (min..max ranges on a busy machine span a run's worst interruption and
    call nearly everything the same), else their min..max ranges, else their CVs."""
    if all(_has_interval(c, "ci_low_ms", "ci_high_ms") for c in (baseline, candidate)):
        return CI_RULE
    if all(_has_interval(c, "time_ms_min", "time_ms_max") for c in (baseline, candidate)):
        return RANGE_RULE
    return CV_RULE


def within_noise(baseline: dict, candidate: dict) -> bool:
    """Whether the two records' times are the same within what each run measured of its own
    noise, by noise_rule's rule: the two intervals overlap, or without any, the ratio is within
    2 combined coefficients of variation of 1."""
    rule = noise_rule(baseline, candidate)
    if rule != CV_RULE:
        low, high = ("ci_low_ms", "ci_high_ms") if rule == CI_RULE else ("time_ms_min", "time_ms_max")
        return candidate[low] <= baseline[high] and baseline[low] <= candidate[high]
    band = 2 * math.hypot(baseline.get("cv") or 0.0, candidate.get("cv") or 0.0)
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


def time_cell(case: dict | None, rule: str | None = None) -> str:
    """The median and, in parentheses, the interval `rule` compared (without a rule: the
    record's own best, its confidence interval or else its min..max)."""
    if case is None or case["status"] != "ok":
        return "-"
    if rule is None:
        rule = noise_rule(case, case)
    spread = ""
    if rule == CI_RULE:
        spread = f" ({case['ci_low_ms']:.4g}-{case['ci_high_ms']:.4g})"
    elif rule == RANGE_RULE:
        spread = f" ({case['time_ms_min']:.4g}-{case['time_ms_max']:.4g})"
    return f"{case['time_ms_median']:.4g}{spread}"


def type_cell(case: dict) -> str:
    """The record's dtype, and its arithmetic where that is not fp32 accumulation: "bf16",
    "fp32 (tf32)". A record's precision is the arithmetic (bf16 tensors accumulate in fp32),
    so the precision alone would call a bf16 row fp32."""
    dtype = str(case["dtype"])
    precision = str(case.get("precision") or "fp32")
    return dtype if precision == "fp32" else f"{dtype} ({precision})"


@dataclass
class GeometricMean:
    """The geometric mean of one dtype's time ratios and its 95% bootstrap interval (low and
    high None with fewer than 2 cases: one case has nothing to resample)."""
    dtype: str
    cases: int
    mean: float
    low: float | None
    high: float | None
    left_out: int = 0  # ratios past a double's range (0 or inf): no logarithm to average


def geometric_mean_interval(ratios, resamples: int = BOOTSTRAP_RESAMPLES,
                            seed: int = BOOTSTRAP_SEED) -> tuple[float, float | None, float | None]:
    """(geometric mean, low, high): the mean of the log ratios, and its 95% percentile bootstrap
    interval with the cases resampled with replacement, from a generator seeded with `seed`."""
    values = np.asarray(ratios, dtype=float)
    if values.size == 0:
        raise ValueError("no ratios to average")
    logs = np.log(values)
    # A geometric mean lies between the least and the greatest ratio: clipping to them removes
    # only rounding (exp(log(3)) is not 3), so equal ratios give exactly that ratio.
    least, greatest = values.min(), values.max()
    mean = float(np.clip(np.exp(logs.mean()), least, greatest))
    if logs.size < 2:
        return mean, None, None
    rng = np.random.default_rng(seed)
    # In chunks of about 4 million picks, so that a run of 100,000 cases stays small in memory.
    chunk = max(1, (4 << 20) // logs.size)
    means = np.concatenate([logs[rng.integers(0, logs.size, size=(min(chunk, resamples - start), logs.size))]
                            .mean(axis=1) for start in range(0, resamples, chunk)])
    low, high = np.clip(np.exp(np.percentile(means, [2.5, 97.5])), least, greatest)
    return mean, float(low), float(high)


def geometric_means(comparisons: list[Comparison], resamples: int = BOOTSTRAP_RESAMPLES,
                    seed: int = BOOTSTRAP_SEED) -> list[GeometricMean]:
    """Per dtype (in order of first appearance), the geometric mean of the ratios of the cases
    both runs timed, with its bootstrap interval (geometric_mean_interval)."""
    compared = [c for c in comparisons if c.comparable]
    summaries = []
    for dtype, group in ar.group_by(compared, lambda c: str(c.candidate["dtype"])).items():
        ratios = [c.ratio for c in group]
        usable = [r for r in ratios if 0 < r < math.inf]
        if not usable:
            continue
        mean, low, high = geometric_mean_interval(usable, resamples, seed)
        summaries.append(GeometricMean(dtype, len(usable), mean, low, high, len(ratios) - len(usable)))
    return summaries


def fma_peak(run: ar.Run) -> float:
    """The run's best FMA peak check; for a folder from before peaks.jsonl, the check its manifest
    kept (`peaks`), so two such runs' loads are compared too; 0 when neither has one."""
    best = run.best_peak("cpu_fma_gflops")
    if best > 0:
        return best
    peaks = run.manifest.get("peaks")
    kept = peaks.get("cpu_fma_gflops") if isinstance(peaks, dict) else None
    return float(kept) if ar.is_number(kept) and math.isfinite(kept) and kept > 0 else 0.0


def _check_date(run: ar.Run) -> datetime | None:
    """The manifest's date as an aware datetime (a naive one read as UTC), or None when it is
    missing or not ISO 8601."""
    text = run.manifest.get("date")
    if not isinstance(text, str) or not text:
        return None
    try:
        # Python before 3.11 does not read a trailing Z.
        when = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def interleaved_partner(baseline: ar.Run, candidate: ar.Run) -> str:
    """How the peer's manifest names the other run when the two were taken interleaved (the peer's
    --interleave: its manifest's peer.interleaved_with is the other folder), else ''."""
    for run, other in ((baseline, candidate), (candidate, baseline)):
        partner = (run.manifest.get("peer") or {}).get("interleaved_with")
        if isinstance(partner, dict) and Path(str(partner.get("folder"))).name == other.folder.name:
            return f"{run.label} with {other.label}'s {partner.get('variant')}"
    return ""


def condition_warnings(baseline: ar.Run, candidate: ar.Run) -> tuple[list[str], list[str]]:
    """(warnings, notes) about the conditions the two runs were taken under. A warning names,
    with its numbers, what disagrees: the machine (manifest cpu_model, hostname), the best FMA
    peak check of each run (further apart than the binary's disagreement limit), a check of
    either run that saw other work (the export's busy checks), the dates (more than a day apart). A note says what could
    not be compared (a run without peak checks)."""
    warnings, notes = [], []
    sides = ((baseline, "baseline"), (candidate, "candidate"))
    machines = [(key, baseline.manifest["machine"].get(key), candidate.manifest["machine"].get(key))
                for key in ("cpu_model", "hostname")]
    differ = [f"{key} {str(base)!r} vs {str(cand)!r}" for key, base, cand in machines
              if base is not None and cand is not None and str(base) != str(cand)]
    if differ:
        warnings.append(f"different machines: {', '.join(differ)} (baseline vs candidate)")

    peaks = [fma_peak(run) for run, _ in sides]
    # Further apart than the harness's own limit for checks within a run.
    limit = max(run.peak_check_summary["disagreement_limit"] for run, _ in sides)
    if all(peak > 0 for peak in peaks):
        apart = max(peaks) / min(peaks) - 1
        if apart > limit:
            warnings.append(f"peak checks disagree: best cpu_fma_gflops {peaks[0]:.4g} GFLOP/s "
                            f"(baseline {baseline.label}) vs {peaks[1]:.4g} (candidate "
                            f"{candidate.label}), {100 * apart:.0f}% apart (more than "
                            f"{100 * limit:.0f}%): the machine was not equally free")
    else:
        lacking = [f"{side} {run.label}" for (run, side), peak in zip(sides, peaks) if peak <= 0]
        notes.append(f"no cpu_fma_gflops peak check in {' or '.join(lacking)}: the two runs' "
                     "loads could not be compared")
    for run, side in sides:
        summary = run.peak_check_summary
        count = summary["busy_check_count"]
        if count == 1:
            warnings.append(f"{side} {run.label}: {summary['busy_checks']}")
        elif count:  # said once: how many checks saw other work, and the worst of them
            warnings.append(f"{side} {run.label}: other work ran during {count} of its "
                            f"{len(run.peak_checks)} peak checks; {summary['worst_check']}")

    if partner := interleaved_partner(baseline, candidate):
        notes.append(f"taken interleaved case by case ({partner}): each pair of times shares the "
                     "machine's noise")
    dates = [_check_date(run) for run, _ in sides]
    if all(dates):
        days = abs((dates[1] - dates[0]).total_seconds()) / 86400
        if days > DATES_APART_LIMIT_DAYS:
            warnings.append(f"taken {days:.1f} days apart: baseline {baseline.manifest['date']}, "
                            f"candidate {candidate.manifest['date']}")
    else:  # said, not passed over: a damaged date had silenced the warning
        unread = [f"{side} {run.label}'s {run.manifest.get('date')!r}"
                  for (run, side), date in zip(sides, dates) if date is None]
        notes.append(f"the dates could not be compared: {' and '.join(unread)} is not an ISO 8601 "
                     "date")
    return warnings, notes


def render_markdown(baseline: ar.Run, candidate: ar.Run, comparisons: list[Comparison],
                    notes: list[str], pair: tuple[str | None, str | None] = (None, None)) -> str:
    base_name, cand_name = side_names(baseline, candidate, pair)
    verdicts = [c.verdict for c in comparisons]
    counted = {v: verdicts.count(v) for v in ("faster", "slower", "same")}
    other = len(verdicts) - sum(counted.values())
    summary = (f"{sum(counted.values())} compared: {counted['faster']} faster, {counted['slower']} slower, "
               f"{counted['same']} same; {other} not compared (only in one run, or not ok in one)")
    rules = [c.rule for c in comparisons if c.rule is not None]
    decided = ", ".join(f"{rules.count(rule)} by {rule}" for rule in (CI_RULE, RANGE_RULE, CV_RULE)
                        if rule in rules)
    headers = ("variant", "device", "dtype", "shape", f"{base_name} median ms (interval)",
               f"{cand_name} median ms (interval)", "ratio", "verdict", "decided by")
    rows = []
    for comparison in comparisons:
        case = comparison.candidate or comparison.baseline
        ratio = comparison.ratio
        variant = case["variant"]
        if comparison.comparable and comparison.baseline["variant"] != variant:
            variant = f"{variant} vs {comparison.baseline['variant']}"  # a --pair
        rule = comparison.rule
        rows.append([variant, case["device"], type_cell(case), ar.format_shape(case),
                     time_cell(comparison.baseline, rule), time_cell(comparison.candidate, rule),
                     "-" if ratio is None else f"{ratio:.3f}", comparison.verdict, rule or "-"])
    warnings, condition_notes = condition_warnings(baseline, candidate)
    lines = [
        f"# {cand_name} vs {base_name}",
        "",
        f"- baseline: {baseline.label}: {baseline.where(baseline.devices())} ({baseline.provenance()})",
        f"- candidate: {candidate.label}: {candidate.where(candidate.devices())} ({candidate.provenance()})",
        "- ratio: candidate median time / baseline median time (above 1: candidate slower)",
        f"- same: the two medians' 95% confidence intervals overlap ({CI_RULE}); where a record has "
        f"none, the two min..max ranges ({RANGE_RULE}); without min/max, within 2 combined CVs "
        f"({CV_RULE}). The interval shown beside each median is the one compared.",
        "- dtype: the tensors' element type; in parentheses the arithmetic, where it is not fp32 "
        "accumulation",
        *[f"- **warning**: {warning}" for warning in warnings],
        *[f"- note: {note}" for note in [*notes, *condition_notes]],
        "",
        summary + (f" (decided {decided})" if decided else ""),
        "",
        geometric_mean_markdown(geometric_means(comparisons)),
        ar.markdown_table(headers, rows),
    ]
    return "\n".join(lines)


def geometric_mean_markdown(summaries: list[GeometricMean]) -> str:
    """The per-dtype geometric means as a markdown table, with how they were computed."""
    if not summaries:
        return "No case was timed in both runs: no geometric mean of the ratios.\n"
    rows = []
    for summary in summaries:
        interval = ("-" if summary.low is None
                    else f"{summary.low:.3f}-{summary.high:.3f}")
        cases = str(summary.cases) + (f" ({summary.left_out} past a double's range left out)"
                                      if summary.left_out else "")
        rows.append([summary.dtype, cases, f"{summary.mean:.3f}", interval])
    return (ar.markdown_table(("dtype", "cases", "geometric mean of the ratios", "95% bootstrap interval"),
                              rows)
            + f"\nThe geometric mean of the ratios of the cases timed in both runs; its interval a "
              f"percentile bootstrap over those cases ({BOOTSTRAP_RESAMPLES} resamples, seed "
              f"{BOOTSTRAP_SEED}; none with one case).\n")


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
        "Ratio above 1: candidate slower. same: the medians' 95% confidence intervals overlap "
        "(min..max ranges where a record has none).",
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
    # Also on stderr, so the warning is seen when the table is piped to a file.
    for warning in condition_warnings(baseline, candidate)[0]:
        print(f"{args.prog}: warning: {warning}", file=sys.stderr)
    written = [ar.write_text(out_dir, output_stem(baseline, candidate) + ".md", text)]
    try:
        written += plot(baseline, candidate, comparisons, out_dir, pair)
    except ar.NotApplicable as reason:
        print(f"no plot: {reason}", file=sys.stderr)
    cli.report_written(written, sys.stderr)
