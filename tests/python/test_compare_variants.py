"""attnbench-compare-variants: the bootstrap interval of a ratio on synthetic rounds (seeded, so
deterministic), paired against independent resampling, and the table and plot it writes."""

from __future__ import annotations

import numpy as np
import pytest

from attnbench import compare_variants, results as ar
from commands import compare_variants as compare_variants_command
from results_factory import make_case, write_run


def rounds(base_ms: float, noise: np.ndarray) -> list[float]:
    return list(base_ms * noise)


def with_rounds(case: dict, round_times: list[float], interleaved: bool) -> dict:
    case = dict(case, round_times_ms=round_times, interleaved=interleaved)
    case["time_ms_median"] = float(np.median(round_times))
    case["time_ms_min"], case["time_ms_max"] = min(round_times), max(round_times)
    return case


@pytest.fixture
def shared_noise():
    """Load that comes and goes: every round of every variant is slowed by the same factor, up
    to 2x; the true time ratio is 0.6."""
    rng = np.random.default_rng(1)
    return 1 + rng.uniform(0, 1, size=40)


def test_paired_ratio_is_exact_when_the_noise_is_shared(shared_noise):
    rng = np.random.default_rng(0)
    estimate, low, high = compare_variants.paired_ratio(
        np.array(rounds(6.0, shared_noise)), np.array(rounds(10.0, shared_noise)), 2000, rng)
    assert estimate == pytest.approx(0.6)
    assert low == pytest.approx(0.6) and high == pytest.approx(0.6)


def test_independent_ratio_carries_the_noise_and_covers_the_truth(shared_noise):
    rng = np.random.default_rng(0)
    # The variant met the noise in one order, the baseline in another: unpaired.
    estimate, low, high = compare_variants.independent_ratio(
        np.array(rounds(6.0, shared_noise)), np.array(rounds(10.0, shared_noise[::-1])), 2000, rng)
    assert low < 0.6 < high
    assert high - low > 0.05  # the load's spread is in the interval
    assert estimate == pytest.approx(0.6)  # the same rounds, reordered: equal medians


def test_bootstrap_interval_of_a_known_ratio_covers_it():
    """Independent lognormal noise per round (2% sd): the 95% interval of the median of the
    per-round ratios covers the true 0.8 and is about 2% wide either side or less."""
    rng = np.random.default_rng(42)
    base = 10 * np.exp(rng.normal(0, 0.02, 60))
    cand = 8 * np.exp(rng.normal(0, 0.02, 60))
    estimate, low, high = compare_variants.paired_ratio(cand, base, 4000,
                                                        np.random.default_rng(0))
    assert low < 0.8 < high
    assert (high - low) / 2 / estimate < 0.02
    assert estimate == pytest.approx(0.8, rel=0.02)


def test_the_bootstrap_is_seeded():
    rng = np.random.default_rng(3)
    cand, base = rng.uniform(5, 7, 20), rng.uniform(9, 11, 20)
    first = compare_variants.independent_ratio(cand, base, 500, np.random.default_rng(9))
    second = compare_variants.independent_ratio(cand, base, 500, np.random.default_rng(9))
    other = compare_variants.independent_ratio(cand, base, 500, np.random.default_rng(10))
    assert first == second
    assert first[1:] != other[1:]


def write_pair(folder, shared_noise, interleaved: bool, disturbed: bool = False):
    cases = []
    for seq in (1024, 2048):
        base = make_case("openmp", seq=seq, time_ms=10.0 * seq / 1024)
        cand = make_case("flash_cpu", seq=seq, time_ms=6.0 * seq / 1024)
        base_rounds = rounds(10.0 * seq / 1024, shared_noise)
        cand_noise = shared_noise if interleaved else shared_noise[::-1]
        cand_rounds = rounds(6.0 * seq / 1024, cand_noise)
        cases.append(with_rounds(base, base_rounds, interleaved))
        cand = with_rounds(cand, cand_rounds, interleaved)
        if disturbed:
            cand.update(disturbed=True,
                        disturbed_reason="cpu_fma_gflops checks disagree: 120 (end) to 230 (start)")
        cases.append(cand)
    return write_run(folder, cases)


def test_table_and_plot_for_interleaved_and_separate_runs(tmp_path, shared_noise, capsys):
    together = write_pair(tmp_path / "interleaved", shared_noise, interleaved=True)
    apart = write_pair(tmp_path / "separate", shared_noise, interleaved=False, disturbed=True)
    out = tmp_path / "out"
    assert compare_variants_command.main([str(together), str(apart), "--baseline", "openmp",
                                  "--out", str(out), "--seed", "5"]) == 0
    table = (out / "ratio_vs_openmp.md").read_text()
    assert table == capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith("| interleaved")]
    assert len(rows) == 2
    assert all("| 0.600 | 0.600 - 0.600 | 0.0 | 40 | paired rounds |" in row for row in rows)
    separate = [line for line in table.splitlines() if line.startswith("| separate")]
    assert all("independent rounds" in row and "checks disagree" in row for row in separate)
    assert "seed 5" in table
    svg = (out / "ratio_vs_openmp.svg").read_text()
    assert "interleaved: flash_cpu (paired rounds)" in svg
    assert "ringed in red" in svg
    assert (out / "ratio_vs_openmp.png").stat().st_size > 0


def test_records_without_rounds_give_the_ratio_of_medians(tmp_path):
    # As written before records had rounds.
    old = [make_case("openmp", time_ms=10.0), make_case("flash_cpu", time_ms=5.0)]
    for case in old:
        del case["round_times_ms"], case["interleaved"]
    run = write_run(tmp_path / "old", old)
    found = compare_variants.ratios(ar.load_run(run), "openmp", None, 500, 0)
    assert len(found) == 1
    assert found[0].estimate == pytest.approx(0.5)
    assert found[0].low is None and found[0].method == "medians only"


def test_a_missing_baseline_is_a_one_line_error(tmp_path, capsys):
    run = write_run(tmp_path / "r", [make_case("naive")])
    assert compare_variants_command.main([str(run), "--baseline", "openmp"]) == 2
    assert "no records of the baseline 'openmp'" in capsys.readouterr().err
    assert compare_variants_command.main([str(run), "--baseline", "naive", "--resamples", "5"]) == 2
    capsys.readouterr()
    # 1e8 resamples took the machine's memory and was killed with no word; seed -1 a traceback.
    assert compare_variants_command.main([str(run), "--baseline", "naive", "--resamples", "100000000"]) == 2
    assert "--resamples 100000000: use 100 to 100000" in capsys.readouterr().err
    assert compare_variants_command.main([str(run), "--baseline", "naive", "--seed", "-1"]) == 2
    assert "--seed -1: must be 0 or more" in capsys.readouterr().err
    # A misspelt --variants name gave an empty table and exit 0.
    assert compare_variants_command.main([str(run), "--baseline", "naive", "--variants", "nosuch"]) == 2
    assert "no records of the variant 'nosuch'" in capsys.readouterr().err


def test_two_folders_of_one_name_are_refused(tmp_path, shared_noise, capsys):
    # Each run is shown by its folder's name: two "run" folders' rows and series had merged.
    first = write_pair(tmp_path / "a" / "run", shared_noise, interleaved=True)
    second = write_pair(tmp_path / "b" / "run", shared_noise, interleaved=False)
    assert compare_variants_command.main([str(first), str(second), "--baseline", "openmp",
                                          "--out", str(tmp_path / "out")]) == 2
    assert "two folders share a name" in capsys.readouterr().err
