"""Tests for attnbench-compare's columns, verdicts and summaries: the dtype shown for a row (not
the arithmetic precision alone), "same" decided by the medians' 95% confidence intervals (min..max
only where a record has none), the per-dtype geometric mean of the ratios with its bootstrap
interval, and the warning when the two runs were taken under conditions that disagree."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from attnbench import compare_runs, results as ar
from commands import compare_runs as compare_command
from results_factory import make_case, make_manifest, write_run

SEQS = (256, 512, 1024)


def with_ci(case: dict, low: float, high: float) -> dict:
    return dict(case, ci_low_ms=low, ci_high_ms=high)


def write_peaks(folder, *checks: dict) -> None:
    # One check a line, each ended by a newline (a last line without one reads as cut short).
    (folder / "peaks.jsonl").write_text("".join(json.dumps(c) + "\n" for c in checks))


def run_compare(baseline, candidate, tmp_path, capsys, *extra) -> tuple[str, str]:
    assert compare_command.main([baseline, candidate, "--out", tmp_path / "cmp", *extra]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def table_rows(text: str) -> list[list[str]]:
    """The cells of the case table's rows (the table whose header starts with | variant |)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| variant |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


# ---------------------------------------------------------------------------
# The dtype column


def test_the_dtype_column_shows_the_dtype_and_the_arithmetic_only_where_it_differs(tmp_path, capsys):
    cases = [make_case("naive", seq=seq, dtype="bf16", time_ms=1.0) for seq in SEQS]
    cases += [make_case("naive", seq=seq, time_ms=1.0) for seq in SEQS]
    cases += [make_case("naive", seq=seq, precision="tf32", time_ms=1.0) for seq in SEQS]
    before, after = write_run(tmp_path / "before", cases), write_run(tmp_path / "after", cases)
    out, _ = run_compare(before, after, tmp_path, capsys)
    header = out.splitlines()[next(i for i, l in enumerate(out.splitlines()) if l.startswith("| variant |"))]
    assert "| variant | device | dtype | shape |" in header and "precision" not in header
    shown = [(row[2], row[3]) for row in table_rows(out)]
    assert len(shown) == 3 * len(SEQS)
    # The bf16 records' precision is fp32 (their accumulation): the row says bf16.
    assert [dtype for dtype, shape in shown if shape.endswith("bf16")] == ["bf16"] * len(SEQS)
    assert sorted(dtype for dtype, shape in shown if not shape.endswith("bf16")) == (
        ["fp32"] * len(SEQS) + ["fp32 (tf32)"] * len(SEQS))
    assert compare_runs.type_cell(make_case(dtype="fp16", precision="fp32")) == "fp16"


# ---------------------------------------------------------------------------
# The verdict


def test_confidence_intervals_decide_where_min_max_ranges_would_call_it_the_same():
    base = with_ci(make_case(time_ms=1.00, spread=0.05), 0.99, 1.01)      # min..max 0.95..1.05
    slower = with_ci(make_case(time_ms=1.04, spread=0.05), 1.03, 1.05)    # min..max 0.988..1.092
    faster = with_ci(make_case(time_ms=0.96, spread=0.05), 0.95, 0.97)    # min..max 0.912..1.008
    for candidate in (slower, faster):
        # The ranges overlap; the intervals do not: the intervals decide.
        assert candidate["time_ms_min"] <= base["time_ms_max"]
        assert base["time_ms_min"] <= candidate["time_ms_max"]
        assert compare_runs.noise_rule(base, candidate) == compare_runs.CI_RULE
        assert not compare_runs.within_noise(base, candidate)
    assert compare_runs.Comparison(base, slower).verdict == "slower"
    assert compare_runs.Comparison(base, faster).verdict == "faster"
    assert compare_runs.Comparison(base, slower).rule == "95% CI"
    # Overlapping intervals: the same, by the intervals.
    near = with_ci(make_case(time_ms=1.005, spread=0.05), 1.0, 1.02)
    assert compare_runs.Comparison(base, near).verdict == "same"
    assert compare_runs.Comparison(base, near).rule == "95% CI"
    # One record without an interval: both fall back to min..max, and their ranges overlap.
    old = dict(slower, ci_low_ms=None, ci_high_ms=None)
    assert compare_runs.noise_rule(base, old) == compare_runs.RANGE_RULE
    assert compare_runs.Comparison(base, old).verdict == "same"
    assert compare_runs.Comparison(base, old).rule == "min-max"


def test_the_table_names_the_rule_and_shows_the_interval_it_compared(tmp_path, capsys):
    base = [with_ci(make_case("naive", seq=256, time_ms=1.00, spread=0.05), 0.99, 1.01),
            make_case("naive", seq=512, time_ms=1.00, spread=0.05)]
    cand = [with_ci(make_case("naive", seq=256, time_ms=1.04, spread=0.05), 1.03, 1.05),
            with_ci(make_case("naive", seq=512, time_ms=1.04, spread=0.05), 1.03, 1.05)]
    out, _ = run_compare(write_run(tmp_path / "b", base), write_run(tmp_path / "c", cand), tmp_path, capsys)
    rows = {row[3]: row for row in table_rows(out)}
    by_ci = rows["batch 1, heads 8, seq 256x256, d 64"]
    assert by_ci[4:] == ["1 (0.99-1.01)", "1.04 (1.03-1.05)", "1.040", "slower", "95% CI"]
    # The baseline's 512 record has no interval: min..max for both sides, which overlap.
    by_range = rows["batch 1, heads 8, seq 512x512, d 64"]
    assert by_range[4:] == ["1 (0.95-1.05)", "1.04 (0.988-1.092)", "1.040", "same", "min-max"]
    assert "2 compared: 0 faster, 1 slower, 1 same" in out
    assert "(decided 1 by 95% CI, 1 by min-max)" in out
    assert "95% confidence intervals overlap" in out


# ---------------------------------------------------------------------------
# The per-dtype geometric mean


def test_equal_ratios_have_that_geometric_mean_and_a_zero_width_interval():
    assert compare_runs.geometric_mean_interval([2.0] * 7) == (2.0, 2.0, 2.0)
    # One case: nothing to resample.
    assert compare_runs.geometric_mean_interval([3.0]) == (3.0, None, None)


def test_the_bootstrap_interval_of_mixed_ratios_is_reproducible_and_about_the_right_width():
    ratios = [0.5, 2.0, 1.0, 4.0, 0.25, 1.0]
    mean, low, high = compare_runs.geometric_mean_interval(ratios)
    assert mean == pytest.approx(1.0)  # the logs sum to 0
    assert min(ratios) <= low < mean < high <= max(ratios)
    assert compare_runs.geometric_mean_interval(ratios) == (mean, low, high)  # seeded
    # Many cases: the interval of the mean of logs is near the normal one, mean ± 1.96 s/sqrt(n).
    logs = np.random.default_rng(3).normal(0.1, 0.3, size=200)
    mean, low, high = compare_runs.geometric_mean_interval(np.exp(logs))
    assert mean == pytest.approx(math.exp(logs.mean()))
    half = 1.96 * logs.std(ddof=1) / math.sqrt(logs.size)
    assert math.log(high / mean) == pytest.approx(half, rel=0.08)
    assert math.log(mean / low) == pytest.approx(half, rel=0.08)


def test_geometric_means_are_per_dtype_over_the_cases_both_runs_timed(tmp_path, capsys):
    base = [make_case("naive", seq=seq, time_ms=1.0) for seq in SEQS]
    base += [make_case("naive", seq=seq, dtype="bf16", time_ms=1.0) for seq in SEQS]
    base.append(make_case("naive", seq=2048, status="skipped", reason="too large"))
    cand = [make_case("naive", seq=seq, time_ms=2.0) for seq in SEQS]            # 2x slower
    cand += [make_case("naive", seq=256, dtype="bf16", time_ms=0.5),              # 0.5, 2, 1
             make_case("naive", seq=512, dtype="bf16", time_ms=2.0),
             make_case("naive", seq=1024, dtype="bf16", time_ms=1.0)]
    cand.append(make_case("naive", seq=2048, time_ms=100.0))  # not comparable: left out
    before, after = write_run(tmp_path / "before", base), write_run(tmp_path / "after", cand)
    comparisons, _ = compare_runs.compare(ar.load_run(before), ar.load_run(after))
    means = {m.dtype: m for m in compare_runs.geometric_means(comparisons)}
    assert list(means) == ["fp32", "bf16"]
    assert (means["fp32"].cases, means["fp32"].mean, means["fp32"].low, means["fp32"].high) == (3, 2.0, 2.0, 2.0)
    bf16 = means["bf16"]
    assert bf16.cases == 3 and bf16.mean == pytest.approx(1.0)
    assert 0.5 <= bf16.low < 1.0 < bf16.high <= 2.0
    out, _ = run_compare(before, after, tmp_path, capsys)
    assert "| dtype | cases | geometric mean of the ratios | 95% bootstrap interval |" in out
    assert "| fp32 | 3 | 2.000 | 2.000-2.000 |" in out
    assert f"| bf16 | 3 | 1.000 | {bf16.low:.3f}-{bf16.high:.3f} |" in out
    assert "2000 resamples, seed 0" in out
    # The same numbers every time the command runs.
    assert run_compare(before, after, tmp_path, capsys)[0] == out


# ---------------------------------------------------------------------------
# Conditions the runs were taken under


@pytest.fixture
def same_cases():
    return [make_case("naive", seq=seq, time_ms=1.0) for seq in SEQS]


def quiet_check(fma: float, when: str = "start") -> dict:
    return {"when": when, "cpu_fma_gflops": fma, "cpu_fma_sustained_gflops": 0.97 * fma}


def test_matching_runs_are_compared_without_a_warning(tmp_path, capsys, same_cases):
    before, after = write_run(tmp_path / "before", same_cases), write_run(tmp_path / "after", same_cases)
    write_peaks(before, quiet_check(300.0), quiet_check(295.0, "end"))
    write_peaks(after, quiet_check(290.0), quiet_check(292.0, "end"))  # 300 vs 292: 3% apart
    out, err = run_compare(before, after, tmp_path, capsys)
    assert "warning" not in out and "warning" not in err
    assert "peak check in" not in out  # both runs have checks: nothing to note


def test_different_machines_are_named_with_both_models(tmp_path, capsys, same_cases):
    other = make_manifest("after")
    other["machine"] = dict(other["machine"], cpu_model="Intel Xeon Platinum 8480", hostname="box2")
    before = write_run(tmp_path / "before", same_cases)
    after = write_run(tmp_path / "after", same_cases, other)
    out, err = run_compare(before, after, tmp_path, capsys)
    expected = "different machines: cpu_model 'AMD EPYC 9R14' vs 'Intel Xeon Platinum 8480'"
    assert f"- **warning**: {expected}" in out
    assert f"attnbench-compare: warning: {expected}" in err
    # The factory's manifest has no hostname: only the one that both name is compared.
    assert "hostname" not in out


def test_peak_checks_that_disagree_or_saw_other_work_are_warned_with_their_numbers(
        tmp_path, capsys, same_cases):
    before, after = write_run(tmp_path / "before", same_cases), write_run(tmp_path / "after", same_cases)
    write_peaks(before, quiet_check(300.0))
    write_peaks(after, quiet_check(200.0))
    out, err = run_compare(before, after, tmp_path, capsys)
    assert ("peak checks disagree: best cpu_fma_gflops 300 GFLOP/s (baseline before) vs 200 "
            "(candidate after), 50% apart (more than 10%)") in out
    assert "peak checks disagree" in err
    # Best checks that agree, but one of the candidate's checks sustained half the best.
    write_peaks(after, quiet_check(300.0), {"when": "end", "cpu_fma_gflops": 290.0,
                                            "cpu_fma_sustained_gflops": 150.0})
    out, err = run_compare(before, after, tmp_path, capsys)
    assert "peak checks disagree" not in out
    assert ("- **warning**: candidate after: other work ran during the end check: the FMA loop "
            "sustained 150 of the best 300 GFLOP/s (50%)") in out
    assert "before: other work" not in out


def test_runs_days_apart_are_warned_and_a_run_without_checks_is_noted(tmp_path, capsys, same_cases):
    # The factory's date + 3.5 days; no peak checks, and no peaks kept in the manifests either.
    later = dict(make_manifest("after"), date="2025-01-05T15:04:05Z", peaks={})
    before = write_run(tmp_path / "before", same_cases, dict(make_manifest("before"), peaks={}))
    after = write_run(tmp_path / "after", same_cases, later)
    out, _ = run_compare(before, after, tmp_path, capsys)
    assert ("- **warning**: taken 3.5 days apart: baseline 2025-01-02T03:04:05Z, candidate "
            "2025-01-05T15:04:05Z") in out
    assert "no cpu_fma_gflops peak check in baseline before or candidate after" in out
    # Twelve hours apart: not warned.
    write_run(tmp_path / "after", same_cases, dict(later, date="2025-01-02T15:04:05Z"))
    assert "warning" not in run_compare(before, after, tmp_path, capsys)[0]


def test_an_unreadable_date_is_noted_not_passed_over(tmp_path, capsys, same_cases):
    # A damaged date silenced the days-apart warning without a word.
    before = write_run(tmp_path / "before", same_cases)
    after = write_run(tmp_path / "after", same_cases, dict(make_manifest("after"), date="garbage"))
    out, _ = run_compare(before, after, tmp_path, capsys)
    assert ("the dates could not be compared: candidate after's 'garbage' is not an ISO 8601 "
            "date") in out


def test_folders_from_before_peak_checks_are_compared_by_their_manifests_peaks(
        tmp_path, capsys, same_cases):
    # Without peaks.jsonl, 387.5 against 179.3 GFLOP/s was only "no peak check" noted.
    before = write_run(tmp_path / "before", same_cases,
                       dict(make_manifest("before"), peaks={"cpu_fma_gflops": 300.0}))
    after = write_run(tmp_path / "after", same_cases,
                      dict(make_manifest("after"), peaks={"cpu_fma_gflops": 150.0}))
    out, _ = run_compare(before, after, tmp_path, capsys)
    assert ("peak checks disagree: best cpu_fma_gflops 300 GFLOP/s (baseline before) vs 150 "
            "(candidate after), 100% apart") in out
