"""Power-law fits a reader can trust (#37): the exponent is printed with its 95% interval (the
slope's standard error times Student's t at points - 2 degrees of freedom), or "too noisy to
fit" with no number when that interval is wider than +-0.25, or "too few points to fit" when
there is no interval at all; and the time-scaling plots draw a dashed grey n² reference."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from attnbench import plotting as ap, results as ar
from attnbench.plots import scaling
from commands import plot_scaling
from results_factory import power_law_cases, write_run

SEQS = (128, 256, 512, 1024, 2048, 4096)
# log2 of the sizes 512..4096, centred: -1.5, -0.5, 0.5, 1.5 (sum of squares 5).
FIT_SEQS = np.array([512, 1024, 2048, 4096], dtype=float)
# Residuals orthogonal to a constant and to log(seq): the slope stays exactly 2 and every
# residual is +-d (in log2 units), so the interval can be worked out by hand.
BALANCED = np.array([1, -1, -1, 1], dtype=float)


def t_cdf(q: float, dof: float) -> float:
    """Student's t distribution function at q >= 0, by integrating its density (no scipy)."""
    t = np.linspace(0.0, q, 400_001)
    log_scale = math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2) - 0.5 * math.log(dof * math.pi)
    density = np.exp(log_scale - (dof + 1) / 2 * np.log1p(t * t / dof))
    return 0.5 + float(np.sum((density[1:] + density[:-1]) / 2 * np.diff(t)))


def balanced_series(d: float) -> np.ndarray:
    """seq^2 times 2^(+-d): slope 2 exactly, residuals +-d in log2 units."""
    return FIT_SEQS ** 2 * 2.0 ** (d * BALANCED)


# ---------------------------------------------------------------------------
# The interval


def test_a_noiseless_n2_series_fits_2_00_with_a_tiny_interval():
    fit = ap.fit_power_law(np.array(SEQS, dtype=float), 3e-6 * np.array(SEQS, dtype=float) ** 2)
    assert fit.exponent == pytest.approx(2.0, abs=1e-9)
    assert 0 <= fit.half_width < 1e-6
    assert (fit.x_low, fit.x_high, fit.points) == (512, 4096, 4)
    assert not fit.too_noisy
    assert fit.label() == "n^2.00 ± 0.00"


def test_the_interval_is_the_slope_standard_error_times_t_worked_by_hand():
    # Residuals +-0.05 (log2): residual sum of squares 4 * 0.05^2 over 4 - 2 degrees of freedom,
    # sum of squared centred log2 sizes 5, so the standard error is 0.05 * sqrt(2 / 5) and the
    # half-width t(0.975, 2) = 4.302653 times that: 0.136062.
    fit = ap.fit_power_law(FIT_SEQS, balanced_series(0.05))
    assert fit.exponent == pytest.approx(2.0, abs=1e-12)
    assert fit.half_width == pytest.approx(4.302653 * 0.05 * math.sqrt(0.4), rel=1e-6)
    assert fit.half_width == pytest.approx(0.136062, abs=1e-6)
    assert fit.label() == "n^2.00 ± 0.14"

    # Three points, residuals (+d, -2d, +d): 6 d^2 over 1 degree of freedom, centred sum of
    # squares 2: the standard error is d sqrt(3), times t(0.975, 1) = 12.706205.
    three = FIT_SEQS[:3] ** 2 * 2.0 ** (0.01 * np.array([1, -2, 1]))
    fit = ap.fit_power_law(FIT_SEQS[:3], three)
    assert fit.points == 3
    assert fit.half_width == pytest.approx(12.706205 * 0.01 * math.sqrt(3), rel=1e-6)
    assert fit.label() == "n^2.00 ± 0.22"


def test_an_interval_past_a_quarter_prints_no_exponent():
    fit = ap.fit_power_law(FIT_SEQS, balanced_series(0.1))  # half-width 0.272124
    assert fit.half_width == pytest.approx(0.272124, abs=1e-6)
    assert fit.too_noisy
    assert fit.label() == ap.TOO_NOISY == "too noisy to fit"
    # Just inside the threshold the number is printed.
    inside = ap.fit_power_law(FIT_SEQS, balanced_series(0.09))  # half-width 0.244911
    assert not inside.too_noisy and inside.label() == "n^2.00 ± 0.24"


def test_a_noisy_series_gets_a_wide_interval_and_too_noisy_to_fit():
    seqs = np.array(SEQS, dtype=float)
    # Timings thrown +-40% by other work on the machine.
    times = 3e-6 * seqs ** 2 * np.array([1.0, 1.0, 1.4, 0.6, 1.4, 0.6])
    fit = ap.fit_power_law(seqs, times)
    assert fit.half_width > 3 * ap.MAX_EXPONENT_HALF_WIDTH
    assert fit.label() == "too noisy to fit"
    assert not re.search(r"\d", fit.label())  # no number at all, not even a rounded one


def test_two_points_give_no_interval_and_say_so():
    slope, _, half_width = ap.slope_interval(np.log([512.0, 1024.0]), np.log([1.0, 4.0]))
    assert slope == pytest.approx(2.0) and half_width is None
    bare = ap.PowerFit(slope, 1.0, 512, 1024, half_width=None, points=2)
    assert bare.label() == "too few points to fit"
    assert ap.fit_power_law([512, 1024], [1.0, 4.0]) is None


def test_constant_series_stay_n0_exactly():
    fit = ap.fit_power_law(SEQS, [4096] * len(SEQS))
    assert fit.constant and fit.half_width == 0.0 and fit.label() == "n^0"


@pytest.mark.parametrize("dof", [1, 2, 3, 4, 7, 12, 30, 35, 50, 90, 200, 10_000])
def test_t_quantiles_are_the_t_distributions(dof):
    q = ap.t_quantile_975(dof)
    # Tabled values to 1e-6; between them (past 30) interpolated in 1/dof, to 1e-4.
    assert t_cdf(q, dof) == pytest.approx(0.975, abs=1e-6 if dof in ap._T_975 else 2e-5)


def test_a_t_quantile_needs_a_degree_of_freedom():
    with pytest.raises(ValueError):
        ap.t_quantile_975(0)


def test_the_interval_covers_the_true_exponent_95_times_in_100():
    # Four points leave 2 degrees of freedom, where t (4.30) and the normal's 1.96 differ most:
    # an interval of 1.96 standard errors would cover about 81% of the time, not 95%.
    rng = np.random.default_rng(37)
    trials, covered = 4000, 0
    for _ in range(trials):
        times = 1e-6 * FIT_SEQS ** 1.7 * np.exp(rng.normal(0.0, 0.1, len(FIT_SEQS)))
        fit = ap.fit_power_law(FIT_SEQS, times)
        covered += abs(fit.exponent - 1.7) <= fit.half_width
    # The binomial standard error of the rate is 0.0034: 0.935-0.965 is over four of them.
    assert 0.935 < covered / trials < 0.965


# ---------------------------------------------------------------------------
# The plot


@pytest.fixture
def scaling_run(tmp_path):
    """naive: exactly n^2; jumpy: n^2 thrown +-40%; linear: exactly n^1."""
    noisy = power_law_cases("jumpy", 2.0, 1e-5, SEQS)
    for case, factor in zip(noisy, (1.0, 1.0, 1.4, 0.6, 1.4, 0.6)):
        for key in ("time_ms_median", "time_ms_min", "time_ms_max"):
            case[key] *= factor
    return write_run(tmp_path / "fits", power_law_cases("naive", 2.0, 1e-6, SEQS) + noisy
                     + power_law_cases("linear", 1.0, 1e-3, SEQS))


def test_the_scaling_figure_prints_intervals_and_draws_an_n2_reference(scaling_run, tmp_path):
    ap.plt.rcParams["svg.fonttype"] = "none"  # text as <text>, searchable
    out = tmp_path / "out"
    assert plot_scaling.main([scaling_run, "--out", out]) == 0
    svg = (out / "scaling.svg").read_text(encoding="utf-8")
    assert "naive  n^2.00 ± 0.00  (fit 512-4096)" in svg
    assert "linear  n^1.00 ± 0.00  (fit 512-4096)" in svg
    assert "jumpy  too noisy to fit  (over 512-4096)" in svg
    assert not re.search(r"jumpy  n\^", svg)  # no exponent printed for it anywhere
    assert ">n²</text>" in svg  # the reference's legend entry, a text of its own
    assert "n^k ± 95% interval" in svg and "past ±0.25" in svg  # the rule, short, in the caption

    table = (out / "scaling.md").read_text(encoding="utf-8")
    assert "| naive | n^2.00 ± 0.00 | 512-4096 | 4 |" in table
    assert "| linear | n^1.00 ± 0.00 | 512-4096 | 4 |" in table
    assert re.search(r"\| jumpy \| too noisy to fit \(95% interval ±\d+\.\d\d\) \| 512-4096 \| 4 \|",
                     table)
    assert "Student's t at points - 2 degrees of freedom" in table


def test_the_n2_reference_has_slope_2_through_a_point_of_the_data(scaling_run):
    fig = scaling.figures(ar.load_run(scaling_run))["scaling"]
    ax = fig.axes[0]
    references = [line for line in ax.lines if line.get_label() == ap.QUADRATIC_LABEL]
    assert len(references) == 1
    reference = references[0]
    assert reference.get_linestyle() == "--" and reference.get_color() == "0.35"
    xs, ys = (np.asarray(v, dtype=float) for v in reference.get_data())
    slopes = np.diff(np.log(ys)) / np.diff(np.log(xs))
    assert slopes == pytest.approx(np.full(len(slopes), 2.0))
    # Through the middle value at n = 512 (the first fitted size): of naive 0.262, jumpy 3.67
    # and linear 0.512, linear's; so y / x^2 along the line is linear's at 512.
    assert ys / xs ** 2 == pytest.approx(np.full(len(xs), 1e-3 * 512 / 512 ** 2))
    # Within the data's extent, so it never stretches the axes.
    plotted = [c["time_ms_median"] for c in ar.load_run(scaling_run).cases]
    assert min(plotted) * (1 - 1e-9) <= ys.min() and ys.max() <= max(plotted) * (1 + 1e-9)
    assert xs.min() >= min(SEQS) and xs.max() <= max(SEQS)
    assert ap.QUADRATIC_LABEL in [t.get_text() for t in ax.get_legend().get_texts()]
    ap.plt.close(fig)


def test_no_overlay_is_drawn_for_a_fit_too_noisy_to_print(scaling_run):
    fig = scaling.figures(ar.load_run(scaling_run))["scaling"]
    overlays = {getattr(line, "attnbench_variant", None) for line in fig.axes[0].lines
                if line.get_linewidth() == 6}  # the wide pale fit lines
    assert overlays == {"naive", "linear"}
    ap.plt.close(fig)


def test_a_coefficient_past_float_range_is_no_fit():
    # A damaged record's 1e300 ms left exp(log coefficient) past float's range: the plot stopped
    # with an OverflowError. No fit is drawn instead; values well inside the range still fit.
    assert ap.fit_power_law(FIT_SEQS, [1e-3, 1e-3, 1e-3, 1e300]) is None
    assert ap.fit_power_law(FIT_SEQS, [1e300, 1e-3, 1e-3, 1e-3]) is None
    fit = ap.fit_power_law(FIT_SEQS, FIT_SEQS ** 2 * 1e-3)
    assert fit is not None and fit.exponent == pytest.approx(2.0)
