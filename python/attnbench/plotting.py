"""What every attnbench plot shares: cases laid out as panels and series, one colour per variant
(a palette keyed by the variant's name, the same in every plot of every run), a line style per
mask and a marker per dtype, legends outside the axes, power-law fits, and titles, captions and
files written the same way.

Every plot module (attnbench.plots.*) has `figures(run, ...)`, which returns its figures by file
stem for a notebook, and `plot(run, out_dir, ...)`, which writes them as PNG and SVG.
"""

from __future__ import annotations

import math
import sys
import textwrap
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
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from matplotlib.ticker import FixedFormatter, FuncFormatter, LogFormatter  # noqa: E402
from matplotlib.transforms import ScaledTranslation  # noqa: E402

from .results import (  # noqa: E402
    ResultsError, Run, distinct, group_by, is_disturbed, is_number, load_run,
    make_output_dir, safe_file_name,
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

# Distinct colours, none of them the red that rings disturbed records or the greys of the
# status markers and reference lines.
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf",
    "#393b79", "#637939", "#8c6d31", "#7b4173", "#5254a3", "#e7ba52", "#aec7e8", "#ffbb78",
    "#98df8a", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#6b6ecf", "#b5cf6b",
)
# attnbench's variants and the PyTorch peer's: each has its own slot, in every plot of every
# run. Any other name takes the slot its name hashes to (crc32), or the next one free in its
# figure, so a new variant is stable across runs too, and never shares a colour in a figure.
KNOWN_VARIANTS = (
    "naive", "blocked", "openmp", "blas", "chunked", "flash_cpu", "cublas", "cublas_tf32",
    "fused", "flash_tc", "chunked_cuda", "torch_math", "torch_efficient", "torch_cudnn",
    "torch_flash",
)
MASK_LINESTYLES = {"none": "-", "causal": "--", "window": ":", "documents": "-.",
                   "prefix": (0, (5, 1.5, 1, 1.5, 1, 1.5))}
DTYPE_MARKERS = {"fp32": "o", "bf16": "s", "fp16": "^"}


def variant_colors(variants: Iterable[str]) -> dict[str, str]:
    """One colour per variant of a figure, keyed by name (see KNOWN_VARIANTS)."""
    names = list(dict.fromkeys(variants))
    colors, used = {}, set()
    for name in names:
        if name in KNOWN_VARIANTS:
            colors[name] = PALETTE[KNOWN_VARIANTS.index(name)]
            used.add(colors[name])
    for name in sorted(n for n in names if n not in colors):
        slot = zlib.crc32(name.encode("utf-8")) % len(PALETTE)
        for step in range(len(PALETTE)):
            candidate = PALETTE[(slot + step) % len(PALETTE)]
            if candidate not in used:
                break
        else:  # more variants than colours: the hash's slot, shared
            candidate = PALETTE[slot]
        colors[name] = candidate
        used.add(candidate)
    return colors


def mask_family(mask: str | None) -> str:
    """window:819 -> window; none, causal -> themselves."""
    return str(mask or "none").split(":")[0]


def mask_linestyle(case: dict):
    return MASK_LINESTYLES.get(mask_family(case.get("mask")), "-")


def dtype_marker(case: dict) -> str:
    return DTYPE_MARKERS.get(str(case.get("dtype")), "D")


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


@dataclass
class PowerFit:
    """value ~ coefficient * x**exponent, fitted over x_low..x_high."""
    exponent: float
    coefficient: float
    x_low: float
    x_high: float
    constant: bool = False

    def label(self) -> str:
        return "n^0" if self.constant else f"n^{self.exponent:.2f}"

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


def fit_power_law(xs: Sequence[float], ys: Sequence[float],
                  min_x: float | None = FIT_MIN_SEQ) -> PowerFit | None:
    """Least squares of log(y) on log(x) over fit_range; None with fewer than
    FIT_MIN_POINTS x values there. A series that is constant over the range (zero
    workspace included) is n^0."""
    points = [(float(x), float(y)) for x, y in zip(xs, ys) if x is not None and y is not None]
    in_range = set(fit_range((x for x, _ in points), min_x))
    points = [(x, y) for x, y in points if x in in_range]
    if len({x for x, _ in points}) < FIT_MIN_POINTS:
        return None
    x_low, x_high = min(x for x, _ in points), max(x for x, _ in points)
    values = {y for _, y in points}
    if len(values) == 1:
        return PowerFit(0.0, values.pop(), x_low, x_high, constant=True)
    positive = [(x, y) for x, y in points if y > 0]
    if len({x for x, _ in positive}) < FIT_MIN_POINTS:
        return None
    log_x = np.log([x for x, _ in positive])
    log_y = np.log([y for _, y in positive])
    exponent, log_coefficient = np.polyfit(log_x, log_y, 1)
    return PowerFit(float(exponent), float(np.exp(log_coefficient)), x_low, x_high)


# ----------------------------------------------------------------------------
# Drawing


def draw_series(ax, layout: SweepLayout, cases: Sequence[dict],
                y_of: Callable[[dict], float | None], fit: bool = False,
                fit_min_x: float | None = FIT_MIN_SEQ) -> dict[str, PowerFit | None]:
    """One line per series over its ok cases, in its variant's colour, its mask's line style
    and its dtype's marker; skipped/failed cases of the series as markers on the panel's
    bottom edge in the series colour; a wide pale least-squares overlay over the fitted range
    when fit is set. Returns the fits by label."""
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
                legend = f"{label}  (under {FIT_MIN_POINTS} points: no fit)"
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
    caption = "\n".join(textwrap.fill(line, width=120, subsequent_indent="    ", drop_whitespace=False)
                        for text in caption_lines if text for line in text.split("\n"))
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


def show_text_as_written(fig) -> None:
    """Every text of the figure drawn as written: a '$' in a run's name, a variant, a reason or a
    token is a dollar sign, never the start of matplotlib math text (which fails to draw on
    `$\\sqrt{$`). Titles, captions, legends, labels and annotations stop parsing math; tick
    labels given as strings (tokens, sequence lengths: a Fixed or FuncFormatter) are escaped; the labels
    the axes' own formatters write (10^3 on a log axis) keep their math. Called by
    finish_figure (for a notebook) and again, harmlessly, by save_figure and the report."""
    formatter_labels = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for formatter, set_formatter in ((axis.get_major_formatter(), axis.set_major_formatter),
                                             (axis.get_minor_formatter(), axis.set_minor_formatter)):
                if (isinstance(formatter, (FixedFormatter, FuncFormatter))
                        and not getattr(formatter, "shows_text_as_written", False)):
                    escaped = FuncFormatter(
                        lambda x, pos, given=formatter: escape_math_text(str(given(x, pos))))
                    escaped.shows_text_as_written = True
                    set_formatter(escaped)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                formatter_labels.update((tick.label1, tick.label2))
    for text in fig.findobj(Text):
        if text not in formatter_labels:
            text.set_parse_math(False)


def save_figure(fig, out_dir: Path, stem: str) -> list[Path]:
    try:
        out_dir = make_output_dir(out_dir)
    except ResultsError:
        plt.close(fig)
        raise
    stem = safe_file_name(stem)
    show_text_as_written(fig)
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.svg"]
    try:
        draw_figure(fig, paths[0], stem, dpi=150)
        draw_figure(fig, paths[1], stem)
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
    except (OverflowError, ValueError) as error:
        raise ResultsError(f"{name}: cannot be drawn ({error}); are its values hundreds of "
                           "decades apart?") from None

