"""What every attnbench plot shares: cases laid out as panels and series, one colour per variant
(a palette keyed by the variant's name, the same in every plot of every run, any two of a figure
at least MIN_DELTA_E apart in CIELAB), a line style per mask and a marker per dtype, rate axes
that name every dtype they draw, legends outside the axes, power-law fits with the 95% interval of
their exponent (or no number, where the interval supports none), an n² reference line, and
titles, captions and files written the same way.

Every plot module (attnbench.plots.*) has `figures(run, ...)`, which returns its figures by file
stem for a notebook, and `plot(run, out_dir, ...)`, which writes them as PNG and SVG.
"""

from __future__ import annotations

import functools
import math
import sys
import textwrap
import unicodedata
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import matplotlib

if "IPython" not in sys.modules:
    matplotlib.use("Agg")  # commands run headless (CI, clusters); a notebook keeps its own backend

import matplotlib.pyplot as plt  # noqa: E402  (must follow the backend choice)
import numpy as np  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from matplotlib.ticker import FixedFormatter, FuncFormatter, LogFormatter  # noqa: E402
from matplotlib.transforms import ScaledTranslation  # noqa: E402

from .results import (  # noqa: E402
    CAPTION_LINE_CHARS, ResultsError, Run, distinct, group_by, is_disturbed, is_number, load_run,
    make_output_dir, markdown_table, safe_file_name, write_output,
)

# Keep SVG text as <text> elements: the figures stay searchable and diffable,
# and tests can read what a figure says.
plt.rcParams["svg.fonttype"] = "none"

# The n^2 term dominates attention cost only once seq is well past d and past the
# per-row overheads; below this the fixed costs bend the curve and bias the fit.
FIT_MIN_SEQ = 512
FIT_MIN_POINTS = 3


def as_run(run: Run | str | Path) -> Run:
    """A loaded run, or the folder to load: plot functions take either."""
    return run if isinstance(run, Run) else load_run(run)


# ----------------------------------------------------------------------------
# Colour by variant, line style by mask, marker by dtype

# How far apart (CIE76 ΔE: distance in CIELAB, where about 2.3 is the smallest difference a
# reader notices) any two variants' colours of one figure are at least. Thin lines and small
# markers need far more than a patch does: tab10's pink and purple, 27.7 apart, read as one
# colour in a legend of a dozen series.
MIN_DELTA_E = 30.0
# Colours no variant's may come that close to either: the red that rings disturbed records, and
# the black and greys of the peak and reference lines and of the status and legend keys.
RESERVED_COLORS = ("tab:red", "black", "0.2", "0.3", "0.35", "0.5", "0.7", "white")
# Hand-made so that every pair, and every colour against RESERVED_COLORS, is at least MIN_DELTA_E
# apart, and none is lighter than L* 80 (a line paler than that vanishes on white); the first
# KNOWN_VARIANTS slots keep the tab10/tab20 colours those variants had wherever that distance
# allowed: chunked's brown is deeper (tab10's is within MIN_DELTA_E of the greys), flash_cpu's
# pink a magenta (tab10's is that close to blas's purple), the CUDA and peer slots the nearest
# colours that keep the distance.
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#a65628", "#e7298a", "#bcbd22", "#17becf",
    "#6c3461", "#667c3e", "#8f7303", "#ba6873", "#2138ab", "#ffb16d", "#a2bffe", "#bccb7a",
    "#32bf84", "#f075e6", "#137e6d", "#9e003a", "#fdb915", "#3e82fc", "#a552e6", "#61de2a",
)
# attnbench's variants and the PyTorch peer's: each has its own slot, in every plot of every
# run. Any other name takes the slot its name hashes to (crc32), or the next one that keeps
# MIN_DELTA_E from the colours its figure has taken, so a new variant is stable across runs too.
KNOWN_VARIANTS = (
    "naive", "blocked", "openmp", "blas", "chunked", "flash_cpu", "cublas", "cublas_tf32",
    "fused", "flash_tc", "chunked_cuda", "torch_math", "torch_efficient", "torch_cudnn",
    "torch_flash",
)
MASK_LINESTYLES = {"none": "-", "causal": "--", "window": ":", "documents": "-.",
                   "prefix": (0, (5, 1.5, 1, 1.5, 1, 1.5))}
DTYPE_MARKERS = {"fp32": "o", "bf16": "s", "fp16": "^"}

# sRGB's D65 primaries to CIE XYZ, and the D65 white point (IEC 61966-2-1).
_SRGB_TO_XYZ = np.array([[0.4124564, 0.3575761, 0.1804375],
                         [0.2126729, 0.7151522, 0.0721750],
                         [0.0193339, 0.1191920, 0.9503041]])
_D65_WHITE = np.array([0.95047, 1.0, 1.08883])


def cielab(color) -> np.ndarray:
    """The colour (anything matplotlib reads: "#9467bd", "tab:red", "0.3") as CIELAB (L*, a*, b*)
    under D65: sRGB decoded to linear light, to XYZ, to Lab."""
    return np.array(_cielab(to_rgb(color)))


@functools.lru_cache(maxsize=None)
def _cielab(rgb: tuple[float, float, float]) -> tuple[float, float, float]:
    # Cached: variant_colors measures every palette colour against every one taken, per figure.
    srgb = np.asarray(rgb, dtype=float)
    linear = np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)
    xyz = _SRGB_TO_XYZ @ linear / _D65_WHITE
    edge = 6 / 29  # below edge³ the cube root turns into a line, as CIE defines it
    f = np.where(xyz > edge ** 3, np.cbrt(xyz), xyz / (3 * edge ** 2) + 4 / 29)
    return (float(116 * f[1] - 16), float(500 * (f[0] - f[1])), float(200 * (f[1] - f[2])))


def delta_e(first, second) -> float:
    """CIE76 colour difference: the distance between the two colours in CIELAB."""
    return float(np.linalg.norm(cielab(first) - cielab(second)))


def variant_colors(variants: Iterable[str]) -> dict[str, str]:
    """One colour per variant of a figure, keyed by name (see KNOWN_VARIANTS), any two at least
    MIN_DELTA_E apart while the figure has no more variants than PALETTE has colours. Known
    variants take their slots first, then the other names in sorted order their hashed slot or
    the next that keeps the distance, so the colours depend on the set of names, not their order.
    Past the palette's size, a name shares its slot's colour: a figure that crowded has outgrown
    colour as its key."""
    names = list(dict.fromkeys(variants))
    known = [n for n in KNOWN_VARIANTS if n in names]
    others = sorted(n for n in names if n not in KNOWN_VARIANTS)
    colors: dict[str, str] = {}
    for name in known + others:
        slot = (KNOWN_VARIANTS.index(name) if name in KNOWN_VARIANTS
                else zlib.crc32(name.encode("utf-8")) % len(PALETTE))
        order = [PALETTE[(slot + step) % len(PALETTE)] for step in range(len(PALETTE))]
        taken = list(colors.values())
        colors[name] = next((c for c in order
                             if all(delta_e(c, t) >= MIN_DELTA_E for t in taken)), order[0])
    return colors


def mask_family(mask: str | None) -> str:
    """window:819 -> window; none, causal -> themselves."""
    return str(mask or "none").split(":")[0]


def mask_linestyle(case: dict):
    return MASK_LINESTYLES.get(mask_family(case.get("mask")), "-")


def dtype_marker(case: dict) -> str:
    return DTYPE_MARKERS.get(str(case.get("dtype")), "D")


# The order an axis label lists dtypes in: widest first; any other name after these, by name.
_DTYPE_ORDER = ("fp32", "tf32", "bf16", "fp16")


def dtype_name(case: dict) -> str:
    """The number format a record computes in, as axis labels name it: its dtype (fp32 for a
    record from before typed tensors), or tf32 for fp32 tensors multiplied in TF32 (precision
    tf32), as the oracle names that tolerance: a TF32 rate is not an fp32 one."""
    dtype = str(case.get("dtype") or "fp32")
    return "tf32" if dtype == "fp32" and case.get("precision") == "tf32" else dtype


def dtypes_label(cases: Iterable[dict]) -> str:
    """Every dtype of the cases (see dtype_name), "fp32, bf16"; "" for no cases."""
    names = {dtype_name(c) for c in cases}
    return ", ".join(sorted(names, key=lambda n: (_DTYPE_ORDER.index(n) if n in _DTYPE_ORDER
                                                  else len(_DTYPE_ORDER), n)))


def with_dtypes(quantity: str, cases: Iterable[dict]) -> str:
    """An axis label for a quantity that depends on the dtype (a rate): "GFLOP/s (fp32, bf16)",
    naming every dtype among the cases the axis draws, so a label never names one dtype of a
    panel that holds several (the markers tell them apart)."""
    dtypes = dtypes_label(cases)
    return f"{quantity} ({dtypes})" if dtypes else quantity


def tag_variant(artist, variant: str):
    """Mark a drawn artist with the variant it shows (read by the plots' tests)."""
    artist.attnbench_variant = variant
    return artist


# Axes that may tell two cases of one variant apart at the same x; tried in this
# order, and only those that actually do so end up in a series label.
_LABEL_CANDIDATES = ("pass", "kv_cache", "mask", "precision", "device", "dtype", "layout", "batch", "kv_heads",
                     "seq_q", "seq_kv", "d_v", "d_k", "heads", "machine")


class SweepLayout:
    """How cases become a figure: a grid of panels over the swept facet axes (heads
    and d_k by default), x along one axis, and one series per variant plus whatever
    else separates cases at the same x. Colours follow the series label, so a
    variant keeps its colour in every panel."""

    def __init__(self, cases: Sequence[dict], x_axis: str,
                 facet_candidates: Sequence[str] = ("heads", "d_k")):
        self.cases = list(cases)
        self.x_axis = x_axis
        self.facet_axes = [a for a in facet_candidates
                           if a != x_axis and len(distinct(self.cases, a)) > 1]
        self.label_axes = self._distinguishing_axes()
        self.variant_colors = variant_colors(c["variant"] for c in self.cases)
        self.colors = {label: self.variant_colors[group[0]["variant"]]
                       for label, group in group_by(self.cases, self.series_label).items()}

    def _distinguishing_axes(self) -> list[str]:
        chosen: list[str] = []
        fixed = ["variant", self.x_axis, *self.facet_axes]
        for axis in _LABEL_CANDIDATES:
            if axis in fixed:
                continue
            groups = group_by(self.cases, lambda c: tuple(c[a] for a in fixed + chosen))
            # .get: only merged runs give their records a "machine".
            if any(len({c.get(axis) for c in g}) > 1 for g in groups.values()):
                chosen.append(axis)
        return chosen

    def series_label(self, case: dict) -> str:
        parts = [case["variant"]]
        for axis in self.label_axes:
            if axis == "mask":
                if case.get("mask", "none") != "none":
                    parts.append(str(case["mask"]))
            elif axis in ("pass", "kv_cache", "precision", "device", "dtype", "layout"):
                parts.append(str(case[axis]))
            elif axis == "machine":
                parts.append(f"on {case.get('machine') or 'unknown machine'}")
            else:
                parts.append(f"{axis}={case[axis]}")
        return " ".join(parts)

    def series(self, cases: Iterable[dict]) -> dict[str, list[dict]]:
        grouped = group_by(cases, self.series_label)
        return {label: sorted(group, key=lambda c: c[self.x_axis]) for label, group in grouped.items()}

    def figure(self, panel_width: float = 5.6, panel_height: float = 4.2,
               legend_width: float = 3.6):
        """A figure with one panel per facet, each with room on its right for its legend (see
        add_legend); returns (fig, [(ax, panel_cases, panel_title)])."""
        # Tall enough for a panel's legend: its series plus the status, disturbed and peak keys.
        entries = len(group_by(self.cases, self.series_label)) + 5
        columns = legend_columns(entries)
        panel_height = max(panel_height, LEGEND_ENTRY_HEIGHT * math.ceil(entries / columns) + 0.8)
        legend_width *= columns
        row_axis = self.facet_axes[0] if self.facet_axes else None
        col_axis = self.facet_axes[1] if len(self.facet_axes) > 1 else None
        rows = distinct(self.cases, row_axis) if row_axis else [None]
        cols = distinct(self.cases, col_axis) if col_axis else [None]
        fig, grid = plt.subplots(len(rows), len(cols), squeeze=False, sharex=True,
                                 figsize=((panel_width + legend_width) * len(cols),
                                          panel_height * len(rows)),
                                 layout="constrained")
        panels = []
        for r, row_value in enumerate(rows):
            for c, col_value in enumerate(cols):
                selected = [case for case in self.cases
                            if (row_axis is None or case[row_axis] == row_value)
                            and (col_axis is None or case[col_axis] == col_value)]
                title = ", ".join(f"{axis}={value}" for axis, value in
                                  ((row_axis, row_value), (col_axis, col_value)) if axis)
                panels.append((grid[r][c], selected, title))
        return fig, panels


# ----------------------------------------------------------------------------
# Fitting


# Student's t at 0.975 (the half-width of a two-sided 95% interval, in standard errors) by degrees
# of freedom; scipy is not a dependency, and these few values are all a fit over a sweep needs.
# Between the tabled values (past 30), linear in 1/dof: within 1e-4 of the exact quantile.
_T_975 = {
    1: 12.706205, 2: 4.302653, 3: 3.182446, 4: 2.776445, 5: 2.570582, 6: 2.446912, 7: 2.364624,
    8: 2.306004, 9: 2.262157, 10: 2.228139, 11: 2.200985, 12: 2.178813, 13: 2.160369,
    14: 2.144787, 15: 2.131450, 16: 2.119905, 17: 2.109816, 18: 2.100922, 19: 2.093024,
    20: 2.085963, 21: 2.079614, 22: 2.073873, 23: 2.068658, 24: 2.063899, 25: 2.059539,
    26: 2.055529, 27: 2.051831, 28: 2.048407, 29: 2.045230, 30: 2.042272, 40: 2.021075,
    60: 2.000298, 120: 1.979930,
}
_Z_975 = 1.959964  # the normal's: t's limit as dof grows


def t_quantile_975(dof: int) -> float:
    """Student's t 0.975 quantile with `dof` degrees of freedom (dof >= 1): a 95% interval is
    the estimate +- this many standard errors."""
    if dof < 1:
        raise ValueError(f"a t quantile needs at least 1 degree of freedom, not {dof}")
    if dof in _T_975:
        return _T_975[dof]
    tabled = sorted(_T_975)
    above = next((d for d in tabled if d > dof), None)
    below = max(d for d in tabled if d < dof)
    upper_value, upper_inverse = (_T_975[above], 1 / above) if above else (_Z_975, 0.0)
    weight = (1 / dof - upper_inverse) / (1 / below - upper_inverse)
    return upper_value + weight * (_T_975[below] - upper_value)


# Past this half-width the 95% interval of an exponent does not support a number: it is over
# half a unit long, so it cannot place a series within a quarter step of n^1 or n^2 (or tell
# n^1.75 from n^2.25), and a printed "n^1.49" would claim what the points do not show.
MAX_EXPONENT_HALF_WIDTH = 0.25
TOO_NOISY = "too noisy to fit"
TOO_FEW = "too few points to fit"


@dataclass
class PowerFit:
    """value ~ coefficient * x**exponent, fitted over x_low..x_high to `points` points, with
    half_width the 95% interval of the exponent (exponent +- half_width; None when the points
    give no interval)."""
    exponent: float
    coefficient: float
    x_low: float
    x_high: float
    constant: bool = False
    half_width: float | None = None
    points: int = 0

    @property
    def too_noisy(self) -> bool:
        """Whether the interval is too wide to support a number: wider than
        +-MAX_EXPONENT_HALF_WIDTH (or not finite)."""
        if self.constant or self.half_width is None:
            return False
        return not math.isfinite(self.half_width) or self.half_width > MAX_EXPONENT_HALF_WIDTH

    @property
    def shows_exponent(self) -> bool:
        """Whether the label prints an exponent: a constant series (n^0, exact), or a fit with an
        interval narrow enough to support one."""
        return self.constant or (self.half_width is not None and not self.too_noisy)

    def label(self) -> str:
        """n^1.97 ± 0.04 (the exponent and its 95% interval); n^0 for a constant series (exact,
        so no interval); with no number, "too few points to fit" when the points give no
        interval (two: the line passes through both) and "too noisy to fit" when it is wider
        than +-MAX_EXPONENT_HALF_WIDTH."""
        if self.constant:
            return "n^0"
        if self.half_width is None:
            return TOO_FEW
        if self.too_noisy:
            return TOO_NOISY
        return f"n^{self.exponent:.2f} ± {self.half_width:.2f}"

    def range_label(self) -> str:
        return f"{self.x_low:g}-{self.x_high:g}"

    def __call__(self, x):
        return self.coefficient * np.power(np.asarray(x, dtype=float), self.exponent)


def fit_range(xs: Iterable[float], min_x: float | None = FIT_MIN_SEQ,
              min_points: int = FIT_MIN_POINTS) -> list[float]:
    """The x values where the leading term dominates: those >= min_x if there are
    at least min_points of them, otherwise the upper half of the range (at least
    min_points values, or all of them when there are fewer)."""
    values = sorted(set(xs))
    if min_x is not None:
        large = [x for x in values if x >= min_x]
        if len(large) >= min_points:
            return large
    keep = max(min_points, math.ceil(len(values) / 2))
    return values[-keep:]


def slope_interval(log_x: np.ndarray, log_y: np.ndarray) -> tuple[float, float, float | None]:
    """Ordinary least squares log_y = intercept + slope * log_x: (slope, intercept, half-width
    of the slope's 95% interval). The half-width is the slope's standard error,
    sqrt(residual sum of squares / (n - 2) / sum((log_x - mean)^2)), times Student's t at
    n - 2 degrees of freedom; None with n = 2, where the line passes through both points and
    leaves nothing to estimate the scatter from. log_x must hold at least two distinct values."""
    log_x, log_y = np.asarray(log_x, dtype=float), np.asarray(log_y, dtype=float)
    centred_x = log_x - log_x.mean()
    spread = float(np.sum(centred_x ** 2))
    slope = float(np.sum(centred_x * (log_y - log_y.mean())) / spread)
    intercept = float(log_y.mean() - slope * log_x.mean())
    dof = len(log_x) - 2
    if dof < 1:
        return slope, intercept, None
    residuals = log_y - (intercept + slope * log_x)
    standard_error = math.sqrt(float(np.sum(residuals ** 2)) / dof / spread)
    return slope, intercept, t_quantile_975(dof) * standard_error


LOG_FLOAT_MAX = math.log(sys.float_info.max)


def fit_power_law(xs: Sequence[float], ys: Sequence[float],
                  min_x: float | None = FIT_MIN_SEQ) -> PowerFit | None:
    """Least squares of log(y) on log(x) over fit_range (x >= min_x where at least
    FIT_MIN_POINTS sizes are that large, else the upper half of the sizes: where the leading
    term dominates the fixed costs), with the exponent's 95% interval (slope_interval); None
    with fewer than FIT_MIN_POINTS x values there. A series that is constant over the range
    (zero workspace included) is n^0. A fit whose interval is wider than
    +-MAX_EXPONENT_HALF_WIDTH is too_noisy: its label prints no exponent."""
    points = [(float(x), float(y)) for x, y in zip(xs, ys) if x is not None and y is not None]
    in_range = set(fit_range((x for x, _ in points), min_x))
    points = [(x, y) for x, y in points if x in in_range]
    if len({x for x, _ in points}) < FIT_MIN_POINTS:
        return None
    x_low, x_high = min(x for x, _ in points), max(x for x, _ in points)
    values = {y for _, y in points}
    if len(values) == 1:
        return PowerFit(0.0, values.pop(), x_low, x_high, constant=True, half_width=0.0,
                        points=len(points))
    positive = [(x, y) for x, y in points if y > 0]
    if len({x for x, _ in positive}) < FIT_MIN_POINTS:
        return None
    exponent, log_coefficient, half_width = slope_interval(np.log([x for x, _ in positive]),
                                                           np.log([y for _, y in positive]))
    # Values near float's ends (a damaged 1e300 ms) leave a coefficient no float holds: no fit.
    if not -LOG_FLOAT_MAX < log_coefficient < LOG_FLOAT_MAX:
        return None
    return PowerFit(exponent, math.exp(log_coefficient), x_low, x_high,
                    half_width=half_width, points=len(positive))


def fit_rule_text(quantity: str, x_axis: str) -> str:
    """How a plot's exponents were fitted and what their labels say, in full (the .md beside it)."""
    return (f"Exponent: least squares of log({quantity}) on log({x_axis}) over {x_axis} >= "
            f"{FIT_MIN_SEQ}, where the leading term dominates the fixed costs (or the upper half of "
            f"the range when that has fewer than {FIT_MIN_POINTS} points), ± its 95% interval (the "
            "slope's standard error times Student's t at points - 2 degrees of freedom); "
            f"\"{TOO_NOISY}\" where that interval is wider than ±{MAX_EXPONENT_HALF_WIDTH:g}, "
            f"\"{TOO_FEW}\" under {FIT_MIN_POINTS}; wide pale line: the fit over its range.")


def fit_rule_caption(quantity: str, x_axis: str) -> str:
    """The caption line of fit_rule_text: the rule in short, the rest in the .md beside the plot."""
    return (f"n^k ± 95% interval: log-log slope of {quantity}, {x_axis} >= {FIT_MIN_SEQ} (pale "
            f"line); \"{TOO_NOISY}\" past ±{MAX_EXPONENT_HALF_WIDTH:g}; in full: the .md")


def fits_document(run: Run, title: str, sections: Sequence[str]) -> str:
    """The .md file of a plot's fits: its title with the run's provenance, the machine, then
    the fits_markdown sections."""
    return (f"# {title}: {run.provenance()}\n\nMachine: {run.where(run.devices())}\n\n"
            + "\n".join(sections))


def fits_markdown(heading: str, quantity: str, x_axis: str,
                  panel_fits: Sequence[tuple[str, dict[str, PowerFit | None]]]) -> str:
    """A markdown section of a plot's fits, for the .md file written beside it: the fit rule, then
    per panel and series the legend's label (the exponent with its 95% interval), the fitted
    range and the number of points; for a fit too noisy to print, the half-width that made it
    so. panel_fits: (panel title, fits by series) as draw_series returns them."""
    with_panels = any(panel for panel, _ in panel_fits)
    headers = (["panel"] if with_panels else []) + ["series", "exponent (95% interval)",
                                                     f"fitted {x_axis}", "points"]
    rows = []
    for panel, fits in panel_fits:
        for series, fit in fits.items():
            cells = [panel] if with_panels else []
            if fit is None:
                cells += [series, f"{TOO_FEW} (under {FIT_MIN_POINTS})", "-", "-"]
            else:
                shown = fit.label()
                if fit.too_noisy and fit.half_width is not None and math.isfinite(fit.half_width):
                    shown += f" (95% interval ±{fit.half_width:.2f})"
                cells += [series, shown, fit.range_label(), str(fit.points)]
            rows.append(cells)
    return (f"## {heading}\n\n{fit_rule_text(quantity, x_axis)}\n\n"
            + markdown_table(headers, rows))


# ----------------------------------------------------------------------------
# Drawing


def draw_series(ax, layout: SweepLayout, cases: Sequence[dict],
                y_of: Callable[[dict], float | None], fit: bool = False,
                fit_min_x: float | None = FIT_MIN_SEQ) -> dict[str, PowerFit | None]:
    """One line per series over its ok cases, in its variant's colour, its mask's line style
    and its dtype's marker; skipped/failed cases of the series as markers on the panel's
    bottom edge in the series colour; when fit is set, the fit's label in the legend (see
    PowerFit.label) and a wide pale least-squares overlay over the fitted range (none for a fit
    too noisy to print: its slope would say what its label does not). Returns the fits by
    label."""
    fits: dict[str, PowerFit | None] = {}
    for label, series in layout.series(cases).items():
        color = layout.colors[label]
        variant = series[0]["variant"]
        style = dict(color=color, linestyle=mask_linestyle(series[0]), marker=dtype_marker(series[0]))
        plotted = [(c[layout.x_axis], y_of(c)) for c in series if c["status"] == "ok"]
        plotted = [(x, y) for x, y in plotted if y is not None]
        legend = label
        if fit and plotted:
            power_fit = fit_power_law([x for x, _ in plotted], [y for _, y in plotted], fit_min_x)
            fits[label] = power_fit
            if power_fit is None:
                legend = f"{label}  ({TOO_FEW}: under {FIT_MIN_POINTS})"
            elif not power_fit.shows_exponent:
                legend = f"{label}  {power_fit.label()}  (over {power_fit.range_label()})"
            else:
                legend = f"{label}  {power_fit.label()}  (fit {power_fit.range_label()})"
                fit_xs = np.geomspace(power_fit.x_low, power_fit.x_high, 20)
                tag_variant(ax.plot(fit_xs, power_fit(fit_xs), linestyle="-", linewidth=6,
                                    solid_capstyle="round", color=color, alpha=0.2)[0], variant)
        if plotted:
            line, = ax.plot([x for x, _ in plotted], [y for _, y in plotted], markersize=4,
                            label=legend, **style)
        else:
            line, = ax.plot([], [], label=f"{legend}  (no points)", **style)
        tag_variant(line, variant)
        mark_not_ok(ax, series, layout.x_axis, color, variant)
        mark_disturbed(ax, series, layout.x_axis, y_of)
    return fits


QUADRATIC_LABEL = "n²"
# Over the series (zorder 2): through a point of a quadratic series it lies on that series, and
# drawn under it would be hidden just where it says the most.
_QUADRATIC_STYLE = dict(color="0.35", linestyle="--", linewidth=1.0, zorder=2.5)


def draw_quadratic_reference(ax, cases: Sequence[dict], x_axis: str,
                             y_of: Callable[[dict], float | None],
                             fits: dict[str, PowerFit | None]) -> float | None:
    """A thin dashed grey line of slope 2 on log-log axes, labelled n² in the legend, so a reader
    sees at a glance which series grow quadratically (those parallel to it). It passes through a
    point of the data: the middle value (the lower median over the series) at the first x of the
    panel's fitted range, or at the middle x when nothing was fitted; it spans the data's x range
    but stops where it would leave the data's y range, so it never stretches the axes. Returns
    the anchor's x, or None with nothing to draw through."""
    points = [(c[x_axis], y_of(c)) for c in cases if c["status"] == "ok"]
    # Positive values only: a log axis shows no other (a zero workspace sits on a symlog line).
    points = [(float(x), float(y)) for x, y in points
              if is_number(x) and is_number(y) and x > 0 and y > 0]
    if not points:
        return None
    xs = sorted({x for x, _ in points})
    fitted_from = [fit.x_low for fit in fits.values() if fit is not None and fit.x_low in xs]
    anchor_x = min(fitted_from) if fitted_from else xs[(len(xs) - 1) // 2]
    at_anchor = sorted(y for x, y in points if x == anchor_x)
    anchor_y = at_anchor[(len(at_anchor) - 1) // 2]
    y_low, y_high = min(y for _, y in points), max(y for _, y in points)
    # y = anchor_y * (x / anchor_x)^2 stays within y_low..y_high for x in this range.
    x_from = max(xs[0], anchor_x * math.sqrt(y_low / anchor_y))
    x_to = min(xs[-1], anchor_x * math.sqrt(y_high / anchor_y))
    if x_to <= x_from:
        return None
    line_xs = np.geomspace(x_from, x_to, 20)
    ax.plot(line_xs, anchor_y * (line_xs / anchor_x) ** 2, label=QUADRATIC_LABEL, **_QUADRATIC_STYLE)
    return anchor_x


def quadratic_reference_caption(x_axis: str) -> str:
    return (f"Dashed grey: {QUADRATIC_LABEL} through the first fitted {x_axis}'s middle value; a "
            "series parallel to it grows as n².")


_STATUS_MARKERS = {
    "skipped": dict(marker="v", markerfacecolor="none", markersize=9, markeredgewidth=1.5),
    "failed": dict(marker="X", markersize=9),
}
# Height of each status's marker strip, in axes units, so the two never overlap.
_STATUS_STRIP = {"skipped": 0.03, "failed": 0.09}


def mark_not_ok(ax, cases: Iterable[dict], x_axis: str, color: str = "0.3",
                variant: str | None = None) -> None:
    """Skipped and failed cases have no value to plot; show where they would have been."""
    for status, style in _STATUS_MARKERS.items():
        xs = [c[x_axis] for c in cases if c["status"] == status]
        if xs:
            # x in data units, y in axes units: a strip along the panel's bottom edge.
            line, = ax.plot(xs, [_STATUS_STRIP[status]] * len(xs), linestyle="none", color=color,
                            markeredgecolor=color, transform=ax.get_xaxis_transform(),
                            clip_on=False, zorder=6, **style)
            if variant is not None:
                tag_variant(line, variant)


_DISTURBED_STYLE = dict(marker="o", markersize=11, markerfacecolor="none", markeredgewidth=1.8,
                       markeredgecolor="tab:red", linestyle="none")


def mark_disturbed(ax, cases: Iterable[dict], x_axis: str,
                   y_of: Callable[[dict], float | None]) -> None:
    """A red ring around each point whose record is disturbed (see disturbed_reason)."""
    points = [(c[x_axis], y_of(c)) for c in cases if is_disturbed(c)]
    points = [(x, y) for x, y in points if y is not None]
    if points:
        ax.plot([x for x, _ in points], [y for _, y in points], zorder=5, **_DISTURBED_STYLE)


# A legend entry's height in inches (fontsize small), and the most entries in one column.
LEGEND_ENTRY_HEIGHT = 0.2
LEGEND_COLUMN_ENTRIES = 24


def legend_columns(entries: int) -> int:
    return max(1, math.ceil(entries / LEGEND_COLUMN_ENTRIES))


# Where a panel's legend goes: outside the axes, to the right of them (this far from their right
# edge, in inches), so it never covers data; constrained layout makes room for it.
LEGEND_GAP = 0.1
# Past the labels of a right-hand axis (% of peak).
LEGEND_GAP_RIGHT_AXIS = 0.85


def outside_right(ax, gap: float = LEGEND_GAP) -> dict:
    """legend() arguments that put a legend outside ax, its top left corner `gap` inches right
    of the axes' top right corner."""
    return dict(loc="upper left", bbox_to_anchor=(1.0, 1.0), borderaxespad=0.0,
                bbox_transform=ax.transAxes + ScaledTranslation(gap, 0, ax.figure.dpi_scale_trans))


def add_legend(ax, cases: Sequence[dict], extra_handles: Sequence = (),
               gap: float = LEGEND_GAP) -> None:
    """The series legend plus a key for the skipped/failed markers present in this panel, outside
    the axes on the right, `gap` inches from them (see outside_right)."""
    handles, labels = ax.get_legend_handles_labels()
    handles, labels = list(handles), list(labels)
    for handle in extra_handles:
        handles.append(handle)
        labels.append(handle.get_label())
    for status, style in _STATUS_MARKERS.items():
        count = sum(1 for c in cases if c["status"] == status)
        if count:
            handles.append(Line2D([], [], linestyle="none", color="0.3", **style))
            labels.append(f"{status} ({count})")
    disturbed = sum(1 for c in cases if is_disturbed(c))
    if disturbed:
        handles.append(Line2D([], [], **_DISTURBED_STYLE))
        labels.append(f"disturbed ({disturbed})")
    if handles:
        ax.legend(handles, labels, fontsize="small", ncols=legend_columns(len(handles)),
                  **outside_right(ax, gap))


def style_panel(ax, title: str, cases: Sequence[dict], layout: SweepLayout, x_label: str) -> None:
    ax.set_title(title or None, fontsize="medium")
    ax.set_xscale("log", base=2)
    # Panels share x, so every panel gets the whole figure's ticks.
    ticks = distinct(layout.cases, layout.x_axis)
    if 0 < len(ticks) <= 12:
        ax.set_xticks(ticks, [str(t) for t in ticks], rotation=45)
    if ax.get_subplotspec().is_last_row():  # panels share x: label it once per column
        ax.set_xlabel(x_label)
    ax.grid(True, which="major", alpha=0.3)


class _PlainLogFormatter(LogFormatter):
    """Log-axis labels as plain numbers (0.2, 10), not 2x10^-1: times are read, not admired."""

    def _num_to_string(self, x, vmin, vmax):
        return f"{x:g}"


def plain_log_yaxis(ax) -> None:
    """A log y axis labelled in plain numbers (ax may be a secondary axis, already log)."""
    if ax.get_yscale() != "log":
        ax.set_yscale("log")
    ax.yaxis.set_major_formatter(_PlainLogFormatter())
    ax.yaxis.set_minor_formatter(_PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(1.5, 0.5)))


def spans_decades(values: Iterable[float | None], decades: float = 1.0) -> bool:
    """Whether the positive values span more than `decades` powers of ten: then a log axis."""
    positive = [float(v) for v in values if is_number(v) and v > 0]
    return bool(positive) and max(positive) / min(positive) > 10 ** decades


def style_time_axis(ax) -> None:
    plain_log_yaxis(ax)
    ax.set_ylabel("median time per pass (ms)")


# A caption says what a reader needs to read the figure, in a few lines: what each run says at
# length (every reason, every fit) is in results.md, report.html and the .md beside the plot.
CAPTION_MAX_LINES = 6


def caption_text(caption_lines: Iterable[str]) -> list[str]:
    """The caption's lines as drawn: each wrapped at CAPTION_LINE_CHARS, at most
    CAPTION_MAX_LINES of them (the last then says how many more the figure's files hold)."""
    lines = [wrapped for text in caption_lines if text for line in text.split("\n")
             for wrapped in textwrap.wrap(line, width=CAPTION_LINE_CHARS, subsequent_indent="    ")]
    if len(lines) > CAPTION_MAX_LINES:
        left = len(lines) - (CAPTION_MAX_LINES - 1)
        lines = lines[:CAPTION_MAX_LINES - 1] + [f"... {left} more caption lines: see results.md"]
    return lines


def finish_figure(fig, title: str, caption_lines: Iterable[str]):
    """The figure's title and caption (the lines below the panels); returns the figure."""
    for ax in fig.axes:
        if ax.get_yscale() != "linear" and not np.isfinite(ax.dataLim.intervaly).all():
            # Nothing plotted in data units (only skipped/failed markers, or no cases):
            # a log axis has no limits to choose and would fail to draw.
            ax.set_ylim(1, 10)
            ax.set_yticks([])
            ax.text(0.5, 0.5, "no ok cases", transform=ax.transAxes, ha="center", va="center")
    fig.suptitle(title)
    caption = "\n".join(caption_text(caption_lines))
    if caption:
        # Below the panels; bbox_inches="tight" grows the canvas to keep it.
        fig.text(0.01, -0.01, caption, ha="left", va="top", fontsize="small", wrap=False)
    show_text_as_written(fig)
    return fig


def save_figures(figures: dict, out_dir: Path) -> list[Path]:
    """Each figure (by file stem) as PNG and SVG into out_dir, then closed."""
    paths: list[Path] = []
    figures = dict(figures)
    try:
        for stem, fig in figures.items():
            paths += save_figure(fig, out_dir, stem)
    finally:
        for fig in figures.values():
            plt.close(fig)
    return paths


# ----------------------------------------------------------------------------

def escape_math_text(text: str) -> str:
    """`text` with every '$' escaped, for a string matplotlib would otherwise read as math text."""
    return text.replace("$", r"\$")


def escape_control_characters(text: str) -> str:
    """`text` with each control or format character but the line break written as Python writes
    it in a string ('\\x01'): no font has a glyph for one, so matplotlib would draw an empty box
    and warn about it once per character and per file, and a reader could not tell which
    character a variant's name holds."""
    if all(char == "\n" or unicodedata.category(char)[0] != "C" for char in text):
        return text
    return "".join(char if char == "\n" or unicodedata.category(char)[0] != "C"
                   else repr(char)[1:-1] for char in text)


def show_text_as_written(fig) -> None:
    """Every text of the figure drawn as written: a '$' in a run's name, a variant, a reason or a
    token is a dollar sign, never the start of matplotlib math text (which fails to draw on
    `$\\sqrt{$`). Titles, captions, legends, labels and annotations stop parsing math; tick
    labels given as strings (tokens, sequence lengths: a Fixed or FuncFormatter) are escaped; the labels
    the axes' own formatters write (10^3 on a log axis) keep their math. A control character is
    drawn as its escape (escape_control_characters). Called by finish_figure (for a notebook)
    and again, harmlessly, by save_figure and the report."""
    formatter_labels = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for formatter, set_formatter in ((axis.get_major_formatter(), axis.set_major_formatter),
                                             (axis.get_minor_formatter(), axis.set_minor_formatter)):
                if (isinstance(formatter, (FixedFormatter, FuncFormatter))
                        and not getattr(formatter, "shows_text_as_written", False)):
                    escaped = FuncFormatter(lambda x, pos, given=formatter: escape_math_text(
                        escape_control_characters(str(given(x, pos)))))
                    escaped.shows_text_as_written = True
                    set_formatter(escaped)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                formatter_labels.update((tick.label1, tick.label2))
    for text in fig.findobj(Text):
        if text not in formatter_labels:
            text.set_parse_math(False)
            if text.get_text() != escape_control_characters(text.get_text()):
                text.set_text(escape_control_characters(text.get_text()))


def save_figure(fig, out_dir: Path, stem: str) -> list[Path]:
    """The figure as <stem>.png and <stem>.svg in out_dir, each through write_output (whole or
    not at all, never through a link or into a FIFO), then closed."""
    try:
        out_dir = make_output_dir(out_dir)
    except ResultsError:
        plt.close(fig)
        raise
    stem = safe_file_name(stem)
    show_text_as_written(fig)
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.svg"]
    try:
        # The format named: a file object has no extension to tell it.
        write_output(paths[0], lambda handle: draw_figure(fig, handle, stem, format="png", dpi=150))
        write_output(paths[1], lambda handle: draw_figure(fig, handle, stem, format="svg"))
    finally:
        plt.close(fig)
    return paths


def draw_figure(fig, target, name: str, **options) -> None:
    """fig.savefig(target, bbox_inches="tight", **options), with the failure values that load
    takes can still cause as one ResultsError line: finite values hundreds of decades apart (a
    1e-290 ms time next to a 1 ms one) put an axis past what matplotlib can draw."""
    try:
        with warnings.catch_warnings():
            # numpy's overflow warnings on such an axis: the error below says it in one line.
            warnings.simplefilter("ignore", RuntimeWarning)
            fig.savefig(target, bbox_inches="tight", **options)
    except OSError:
        # The file being written failed (a full disk; io.UnsupportedOperation is a ValueError
        # too): the writer says so, naming the file, not the values.
        raise
    except (OverflowError, ValueError) as error:
        raise ResultsError(f"{name}: cannot be drawn ({error}); are its values hundreds of "
                           "decades apart?") from None

