"""Shared code for the attnbench result scripts: load and validate a run folder,
group its cases into plot series, fit power-law exponents, and lay out, title and
save figures the same way in every script.

A run folder is what `attnbench` writes: manifest.json (how and where the run was
made), cases.jsonl (one record per case, written once) and peaks.jsonl (one line
per peak check, every session's). Every script reads it through `load_run`, so a
malformed folder fails the same way everywhere: one line on stderr and exit code 2
(see `cli_main`). `load_run` rates every record as the harness's readers do
(`rate_record`, the mirror of rate_record in harness/results/peak_checks.cpp):
peak_gflops, percent_of_peak, disturbed and disturbed_reason are derived against
the best peak check of the folder, never read from the record.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import matplotlib

matplotlib.use("Agg")  # scripts run headless (CI, clusters); never open a window

import matplotlib.pyplot as plt  # noqa: E402  (must follow the backend choice)
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import LogFormatter  # noqa: E402

# Keep SVG text as <text> elements: the figures stay searchable and diffable,
# and tests can read what a figure says.
plt.rcParams["svg.fonttype"] = "none"

MANIFEST_KEYS = (
    "name", "config", "config_text", "git_commit", "date", "build", "machine", "peaks", "gpu",
)
SIZE_AXES = ("batch", "heads", "kv_heads", "seq_q", "seq_kv", "d_k", "d_v")
# What tells two shapes apart, as the harness's Shape does: the sizes, the element type and the
# memory layout (a bf16 case is never the fp32 case of the same sizes).
SHAPE_AXES = (*SIZE_AXES, "dtype", "layout")
# Records from before typed tensors have no dtype or layout: they were fp32, bhsd.
SHAPE_DEFAULTS = {"dtype": "fp32", "layout": "bhsd"}
# The record fields these scripts read; a record has more (`attnbench schema` lists them all).
REQUIRED_CASE_KEYS = (
    "variant", "device", "precision", *SIZE_AXES, "causal", "status", "reason",
    "time_ms_median", "time_ms_min", "time_ms_max", "cv", "gflops", "workspace_bytes",
    "peak_gflops", "oracle_max_abs_err", "oracle_rel_l2_err", "oracle_sampled",
)
# The CPU peaks the harness re-checks during a run; checks further apart than this (highest over
# lowest, minus one) flag its records (harness/results/peak_checks.h).
PEAK_DISAGREEMENT_LIMIT = 0.10
STATUSES = ("ok", "skipped", "failed")
DEVICE_ORDER = ("cpu", "cuda")

# The n^2 term dominates attention cost only once seq is well past d and past the
# per-row overheads; below this the fixed costs bend the curve and bias the fit.
FIT_MIN_SEQ = 512
FIT_MIN_POINTS = 3


class ResultsError(Exception):
    """A results folder or input file that cannot be used; the message is one line."""


class NotApplicable(Exception):
    """This plot has nothing to show for this run (e.g. the axis it needs was not swept)."""


# ----------------------------------------------------------------------------
# Loading and validation


@dataclass
class Run:
    folder: Path
    manifest: dict
    cases: list[dict]  # rated: see rate_record
    peak_checks: list[dict] = field(default_factory=list)  # peaks.jsonl, every session's

    @property
    def name(self) -> str:
        return str(self.manifest["name"])

    @property
    def label(self) -> str:
        """How to name this run next to another: its folder, which is unique where names repeat."""
        return self.folder.name

    @property
    def machine(self) -> str:
        """The manifest's machine; for a run merged from shards on several kinds of machine
        (`attnbench merge --allow-mixed`), each one its records name."""
        machines = self.machines()
        if len(machines) > 1:
            return "mixed: " + "; ".join(machines)
        return str(self.manifest["machine"]["description"])

    def machines(self) -> list[str]:
        """The machines the records say they ran on (merged runs keep one per record)."""
        return sorted({str(c["machine"]) for c in self.cases if c.get("machine")})

    @property
    def gpu_name(self) -> str | None:
        gpu = self.manifest["gpu"]
        return str(gpu["name"]) if gpu else None

    def devices(self, cases: Iterable[dict] | None = None) -> list[str]:
        present = {c["device"] for c in (self.cases if cases is None else cases)}
        return [d for d in DEVICE_ORDER if d in present] + sorted(present - set(DEVICE_ORDER))

    def where(self, devices: Iterable[str]) -> str:
        """The machine a figure's numbers come from: the CPU, plus the GPU when cuda cases are shown."""
        parts = [self.machine]
        if "cuda" in devices and self.gpu_name:
            parts.append(self.gpu_name)
        return " + ".join(parts)

    def provenance(self) -> str:
        """Config name, date and commit: enough to find the run again."""
        commit = str(self.manifest["git_commit"] or "")[:10]
        date = str(self.manifest["date"] or "")[:10]
        return ", ".join(p for p in (self.name, date, commit) if p)

    def title(self, what: str, devices: Iterable[str]) -> str:
        return f"{what}\n{self.where(devices)}  ({self.provenance()})"


def load_run(folder: str | Path) -> Run:
    folder = Path(folder)
    if not folder.is_dir():
        raise ResultsError(f"{folder}: not a results folder (no such directory)")
    manifest = _load_manifest(folder / "manifest.json")
    checks = load_peak_checks(folder, manifest)
    cases = [rate_record(case, checks) for case in _load_cases(folder / "cases.jsonl")]
    return Run(folder=folder, manifest=manifest, cases=cases, peak_checks=checks)


def load_peak_checks(folder: Path, manifest: dict) -> list[dict]:
    """The folder's peak checks: peaks.jsonl, one check a line (a last line cut short by a kill is
    dropped); a folder written before peaks.jsonl existed: its manifest's peak_checks, if any."""
    path = folder / "peaks.jsonl"
    if not path.exists():
        old = manifest.get("peak_checks")
        return [c for c in old if isinstance(c, dict)] if isinstance(old, list) else []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ResultsError(f"{path}: cannot be read ({error})") from None
    checks = []
    lines = text.split("\n")
    for line_number, line in enumerate(lines[:-1], start=1):  # the last piece has no newline
        if not line.strip():
            continue
        try:
            check = json.loads(line)
        except json.JSONDecodeError as error:
            raise ResultsError(f"{path}: line {line_number}: not valid JSON ({error.msg})") from None
        if not isinstance(check, dict):
            raise ResultsError(f"{path}: line {line_number}: expected a JSON object")
        checks.append(check)
    return checks


def _load_manifest(path: Path) -> dict:
    if not path.is_file():
        raise ResultsError(f"{path}: missing (is {path.parent} a results folder?)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ResultsError(f"{path}: line {error.lineno}: not valid JSON ({error.msg})") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ResultsError(f"{path}: cannot be read ({error})") from None
    if not isinstance(manifest, dict):
        raise ResultsError(f"{path}: expected a JSON object")
    _require_keys(manifest, MANIFEST_KEYS, f"{path}")
    if not isinstance(manifest["machine"], dict) or not isinstance(
        manifest["machine"].get("description"), str
    ):
        raise ResultsError(f"{path}: 'machine' must be an object with a 'description' string")
    if not isinstance(manifest["peaks"], dict):
        raise ResultsError(f"{path}: 'peaks' must be an object")
    gpu = manifest["gpu"]
    if gpu is not None and not (isinstance(gpu, dict) and "name" in gpu):
        raise ResultsError(f"{path}: 'gpu' must be null or an object with a 'name'")
    return manifest


def _load_cases(path: Path) -> list[dict]:
    if not path.is_file():
        raise ResultsError(f"{path}: missing (is {path.parent} a results folder?)")
    cases = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ResultsError(f"{path}: cannot be read ({error})") from None
    for line_number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}: line {line_number}"
        try:
            case = json.loads(line)
        except json.JSONDecodeError as error:
            raise ResultsError(f"{where}: not valid JSON ({error.msg})") from None
        if not isinstance(case, dict):
            raise ResultsError(f"{where}: expected a JSON object")
        _require_keys(case, REQUIRED_CASE_KEYS, where)
        _check_case_values(case, where)
        case = {**SHAPE_DEFAULTS, **case}
        if not case.get("mask"):  # records from before the mask axis: their causal flag says it
            case["mask"] = "causal" if case["causal"] else "none"
        cases.append(case)
    if not cases:
        raise ResultsError(f"{path}: no cases recorded")
    return cases


def _require_keys(record: dict, keys: Sequence[str], where: str) -> None:
    missing = [k for k in keys if k not in record]
    if missing:
        raise ResultsError(f"{where}: missing keys: {', '.join(missing)}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_case_values(case: dict, where: str) -> None:
    if case["status"] not in STATUSES:
        raise ResultsError(f"{where}: status {case['status']!r} is not one of {', '.join(STATUSES)}")
    for axis in SIZE_AXES:
        if not _is_int(case[axis]) or case[axis] < 1:
            raise ResultsError(f"{where}: {axis!r} must be a positive integer, got {case[axis]!r}")
    if not isinstance(case["causal"], bool):
        raise ResultsError(f"{where}: 'causal' must be true or false, got {case['causal']!r}")
    for key in ("variant", "device"):
        if not isinstance(case[key], str) or not case[key]:
            raise ResultsError(f"{where}: {key!r} must be a non-empty string")
    if case["status"] == "ok":
        median = case["time_ms_median"]
        if not is_number(median) or not median > 0:
            raise ResultsError(f"{where}: status ok but time_ms_median is {median!r}")
    for key in ("time_ms_min", "time_ms_max", "cv", "gflops", "workspace_bytes", "peak_gflops",
                "percent_of_peak", "oracle_max_abs_err", "oracle_rel_l2_err"):
        if case.get(key) is not None and not is_number(case[key]):
            raise ResultsError(f"{where}: {key!r} must be a number or null, got {case[key]!r}")


# ----------------------------------------------------------------------------
# Rating a record against the folder's peak checks: the mirror of harness/results/peak_checks.cpp
# (PeakChecks::best, disagreement, busy_checks, doubts, for_shard and rate_record), message for
# message, so a plot says what summary.csv says.


def _peak_value(check: dict, name: str) -> float:
    value = check.get(name)
    return float(value) if is_number(value) else 0.0


def best_peak(checks: Sequence[dict], name: str) -> float:
    """The best check of a peak: interference only slows a measurement down."""
    return max((_peak_value(c, name) for c in checks), default=0.0)


def peak_disagreement(checks: Sequence[dict], name: str) -> str:
    lowest = highest = None
    for check in checks:
        value = _peak_value(check, name)
        if value <= 0:
            continue
        if lowest is None or value < _peak_value(lowest, name):
            lowest = check
        if highest is None or value > _peak_value(highest, name):
            highest = check
    if lowest is None or lowest is highest:
        return ""
    low, high = _peak_value(lowest, name), _peak_value(highest, name)
    if high / low - 1 <= PEAK_DISAGREEMENT_LIMIT:
        return ""
    return (f"{name} checks disagree: {low:.4g} ({lowest.get('when', '')}) to {high:.4g} "
            f"({highest.get('when', '')}) GFLOP/s, {100 * (high / low - 1):.0f}% apart")


def busy_checks(checks: Sequence[dict]) -> str:
    parts = []
    for check in checks:
        best = _peak_value(check, "cpu_fma_gflops")
        sustained = _peak_value(check, "cpu_fma_sustained_gflops")
        if best <= 0 or sustained <= 0 or sustained >= (1 - PEAK_DISAGREEMENT_LIMIT) * best:
            continue
        parts.append(f"other work ran during the {check.get('when', '')} check: the FMA loop "
                     f"sustained {sustained:.4g} of its best {best:.4g} GFLOP/s "
                     f"({100 * sustained / best:.0f}%)")
    return "; ".join(parts)


def peak_doubts(checks: Sequence[dict], name: str) -> str:
    return "; ".join(text for text in (peak_disagreement(checks, name), busy_checks(checks)) if text)


def rate_record(case: dict, checks: Sequence[dict]) -> dict:
    """The record as readers show it: peak_gflops is the best check of its peak_name (of its own
    shard, in a merged run), else the peak the record brought (`attnbench append`, or written
    before peaks.jsonl); percent_of_peak against it; disturbed_reason from the checks' doubts
    (CPU records) and a record above 100% of its peak. A record written before peaks.jsonl (it
    stores percent_of_peak) in a folder that kept no checks keeps the rating it was written with."""
    shard = case.get("shard") if isinstance(case.get("shard"), str) else ""
    checks = [c for c in checks if not c.get("shard") or c.get("shard") == shard]
    name = case.get("peak_name") if isinstance(case.get("peak_name"), str) else ""
    best = best_peak(checks, name)
    own = case.get("peak_gflops")
    peak = best if best > 0 else (float(own) if is_number(own) else 0.0)
    gflops = case.get("gflops")
    timed = is_number(gflops)
    percent = 100 * gflops / peak if timed and peak > 0 else None
    reason = ""
    if not checks and "percent_of_peak" in case:
        # Written before peaks.jsonl, in a folder that kept no checks: the rating as written.
        percent = case["percent_of_peak"]
        if "disturbed" in case:
            if case["disturbed"] is True:
                reason = str(case.get("disturbed_reason") or "flagged disturbed")
        elif is_number(percent) and percent > 100:
            reason = f"{percent:.0f}% of the measured peak: the peak read low"
    else:
        if best > 0 and case.get("device") == "cpu":
            reason = peak_doubts(checks, name)
        if peak > 0 and timed and gflops > peak:
            reason += (f"{'; ' if reason else ''}{100 * gflops / peak:.0f}% of the measured peak "
                       f"{peak:.4g} GFLOP/s: the peak read low")
    return {**case, "peak_gflops": peak if peak > 0 else None,
            "percent_of_peak": percent, "disturbed": bool(reason), "disturbed_reason": reason}


def ok_cases(cases: Iterable[dict]) -> list[dict]:
    return [c for c in cases if c["status"] == "ok"]


def disturbed_reason(case: dict) -> str:
    """Why other work on the machine makes this record's numbers doubtful, or "" when nothing
    does: the harness's own flag (peak checks that disagree, or above 100% of the peak), and,
    for records written before that flag existed, a percent_of_peak above 100."""
    if case.get("disturbed"):
        return str(case.get("disturbed_reason") or "flagged disturbed")
    percent = case.get("percent_of_peak")
    if case["status"] == "ok" and is_number(percent) and percent > 100:
        return f"{percent:.0f}% of the measured peak: the peak read low"
    return ""


def is_disturbed(case: dict) -> bool:
    return case["status"] == "ok" and bool(disturbed_reason(case))


# ----------------------------------------------------------------------------
# Command-line plumbing


def script_parser(doc: str, script_file: str) -> argparse.ArgumentParser:
    """A parser whose --help shows the script's docstring (its one job and its usage)
    and whose errors name the script, however it was started."""
    return argparse.ArgumentParser(prog=Path(script_file).name, description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="results folder written by attnbench (results/<run>)")
    parser.add_argument("--out", help="output folder (default: <run>/plots)")


def output_dir(args: argparse.Namespace, run: Run) -> Path:
    return Path(args.out) if args.out else run.folder / "plots"


def cli_main(parser: argparse.ArgumentParser, action: Callable[[argparse.Namespace], None],
             argv: Sequence[str] | None) -> int:
    """Parse argv and run action; a ResultsError or NotApplicable becomes one stderr line and exit 2."""
    args = parser.parse_args(argv)
    try:
        action(args)
    except (ResultsError, NotApplicable) as error:
        one_line = " ".join(str(error).split())
        print(f"{parser.prog}: error: {one_line}", file=sys.stderr)
        return 2
    return 0


def report_written(paths: Iterable[Path]) -> None:
    for path in paths:
        print(f"wrote {path}")


def plot_main(parser: argparse.ArgumentParser,
              draw: Callable[[Run, Path, argparse.Namespace], list[Path]],
              argv: Sequence[str] | None) -> int:
    """main() of a script that reads one run folder and writes figures."""
    def action(args):
        run = load_run(args.run)
        report_written(draw(run, output_dir(args, run), args))

    return cli_main(parser, action, argv)


# ----------------------------------------------------------------------------
# Formatting


def format_bytes(count: float | None) -> str:
    if count is None:
        return "-"
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    unit = 0
    while abs(count) >= 1024 and unit < len(units) - 1:
        count /= 1024
        unit += 1
    return f"{count:.0f} {units[unit]}" if count == int(count) else f"{count:.1f} {units[unit]}"


def format_number(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}"


def format_shape(case: dict) -> str:
    heads = str(case["heads"])
    if case["kv_heads"] != case["heads"]:
        heads += f" (kv {case['kv_heads']})"
    dims = f"{case['d_k']}" if case["d_k"] == case["d_v"] else f"{case['d_k']}/{case['d_v']}"
    mask = ", causal" if case["causal"] else ""
    if case.get("mask") not in (None, "none", "causal"):
        mask = f", {case['mask']}"  # window:L, prefix:P, documents:K
    # dtype and layout as the harness describes a shape: named when not the default.
    typed = "".join(f", {case[axis]}" for axis, default in SHAPE_DEFAULTS.items() if case[axis] != default)
    return (f"batch {case['batch']}, heads {heads}, seq {case['seq_q']}x{case['seq_kv']}, "
            f"d {dims}{mask}{typed}")


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    def cell(text) -> str:
        # A '|' inside a reason would split the cell; a newline would end the table.
        return " ".join(str(text).split()).replace("|", "\\|")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |",
             "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def status_text(case: dict) -> str:
    if case["status"] == "ok":
        return "ok"
    return f"{case['status']}: {case['reason'] or 'no reason given'}"


def status_counts_text(cases: Iterable[dict]) -> str:
    """E.g. '2 skipped, 1 failed'; empty when every case is ok."""
    cases = list(cases)
    parts = []
    for status in ("skipped", "failed"):
        count = sum(1 for c in cases if c["status"] == status)
        if count:
            parts.append(f"{count} {status}")
    return ", ".join(parts)


def status_caption(cases: Iterable[dict], x_axis: str, max_reasons: int = 6) -> str:
    """Names every skipped/failed case group with its reason, so none is silently absent from a
    plot, and every disturbed one, so none is silently trusted."""
    cases = list(cases)
    return "\n".join(text for text in (_not_ok_caption(cases, x_axis, max_reasons),
                                        disturbed_caption(cases, x_axis, max_reasons)) if text)


def disturbed_caption(cases: Iterable[dict], x_axis: str, max_reasons: int = 6) -> str:
    disturbed = [c for c in cases if is_disturbed(c)]
    if not disturbed:
        return ""
    by_reason = group_by(disturbed, lambda c: (c["variant"], disturbed_reason(c)))
    lines = [f"{len(disturbed)} disturbed (ringed in red): other work on the machine; "
             "read these numbers with care:"]
    for (variant, reason), group in list(by_reason.items())[:max_reasons]:
        xs = sorted({c[x_axis] for c in group})
        lines.append(f"  disturbed: {variant} at {x_axis} {', '.join(map(str, xs))}: {reason}")
    if len(by_reason) > max_reasons:
        lines.append(f"  ... and {len(by_reason) - max_reasons} more groups (see results_table.py)")
    return "\n".join(lines)


def _not_ok_caption(cases: list[dict], x_axis: str, max_reasons: int) -> str:
    not_ok = [c for c in cases if c["status"] != "ok"]
    if not not_ok:
        return ""
    by_reason = group_by(not_ok, lambda c: (c["status"], c["variant"], c["reason"] or "no reason given"))
    lines = [f"{status_counts_text(not_ok)} (marked along the bottom of each panel):"]
    for (status, variant, reason), group in list(by_reason.items())[:max_reasons]:
        xs = sorted({c[x_axis] for c in group})
        lines.append(f"  {status}: {variant} at {x_axis} {', '.join(map(str, xs))}: {reason}")
    if len(by_reason) > max_reasons:
        lines.append(f"  ... and {len(by_reason) - max_reasons} more groups (see results_table.py)")
    return "\n".join(lines)


# ----------------------------------------------------------------------------
# Grouping cases into facets and series


def group_by(items: Iterable[dict], key: Callable[[dict], object]) -> dict:
    """Groups in order of first appearance, which is the sweep's order."""
    groups: dict = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return groups


def distinct(cases: Iterable[dict], axis: str) -> list:
    return sorted({c[axis] for c in cases})


def sweep_axis(cases: Sequence[dict]) -> str:
    """The sequence axis a run swept: seq_kv, or seq_q when only that one varies."""
    if len(distinct(cases, "seq_kv")) < 2 and len(distinct(cases, "seq_q")) > 1:
        return "seq_q"
    return "seq_kv"


def require_seq_sweep(cases: Sequence[dict]) -> str:
    """The swept sequence axis, for plots that need one."""
    x_axis = sweep_axis(cases)
    if len(distinct(cases, x_axis)) < 2:
        raise NotApplicable("sequence length is not swept in this run: nothing to plot against it")
    return x_axis


def seq_axis_label(cases: Sequence[dict], x_axis: str) -> str:
    if all(c["seq_q"] == c["seq_kv"] for c in cases):
        return "sequence length n (seq_q = seq_kv)"
    return f"sequence length ({x_axis})"


# Axes that may tell two cases of one variant apart at the same x; tried in this
# order, and only those that actually do so end up in a series label.
_LABEL_CANDIDATES = ("causal", "precision", "device", "dtype", "layout", "batch", "kv_heads",
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
        labels = list(group_by(self.cases, self.series_label))
        palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        self.colors = {label: palette[i % len(palette)] for i, label in enumerate(labels)}

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
            if axis == "causal":
                if case["causal"]:
                    parts.append("causal")
            elif axis in ("precision", "device", "dtype", "layout"):
                parts.append(str(case[axis]))
            elif axis == "machine":
                parts.append(f"on {case.get('machine') or 'unknown machine'}")
            else:
                parts.append(f"{axis}={case[axis]}")
        return " ".join(parts)

    def series(self, cases: Iterable[dict]) -> dict[str, list[dict]]:
        grouped = group_by(cases, self.series_label)
        return {label: sorted(group, key=lambda c: c[self.x_axis]) for label, group in grouped.items()}

    def figure(self, panel_width: float = 5.6, panel_height: float = 4.2):
        """A figure with one panel per facet; returns (fig, [(ax, panel_cases, panel_title)])."""
        row_axis = self.facet_axes[0] if self.facet_axes else None
        col_axis = self.facet_axes[1] if len(self.facet_axes) > 1 else None
        rows = distinct(self.cases, row_axis) if row_axis else [None]
        cols = distinct(self.cases, col_axis) if col_axis else [None]
        fig, grid = plt.subplots(len(rows), len(cols), squeeze=False, sharex=True,
                                 figsize=(panel_width * len(cols), panel_height * len(rows)),
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
    """One line per series over its ok cases; skipped/failed cases of the series as
    markers on the panel's bottom edge in the series colour; a dashed least-squares
    overlay over the fitted range when fit is set. Returns the fits by label."""
    fits: dict[str, PowerFit | None] = {}
    for label, series in layout.series(cases).items():
        color = layout.colors[label]
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
                ax.plot(fit_xs, power_fit(fit_xs), linestyle="--", linewidth=2.5,
                        color=color, alpha=0.45)
        if plotted:
            ax.plot([x for x, _ in plotted], [y for _, y in plotted], marker="o",
                    markersize=4, color=color, label=legend)
        else:
            ax.plot([], [], color=color, label=f"{legend}  (no points)")
        mark_not_ok(ax, series, layout.x_axis, color)
        mark_disturbed(ax, series, layout.x_axis, y_of)
    return fits


_STATUS_MARKERS = {
    "skipped": dict(marker="v", markerfacecolor="none", markersize=9, markeredgewidth=1.5),
    "failed": dict(marker="X", markersize=9),
}
# Height of each status's marker strip, in axes units, so the two never overlap.
_STATUS_STRIP = {"skipped": 0.03, "failed": 0.09}


def mark_not_ok(ax, cases: Iterable[dict], x_axis: str, color: str = "0.3") -> None:
    """Skipped and failed cases have no value to plot; show where they would have been."""
    for status, style in _STATUS_MARKERS.items():
        xs = [c[x_axis] for c in cases if c["status"] == status]
        if xs:
            # x in data units, y in axes units: a strip along the panel's bottom edge.
            ax.plot(xs, [_STATUS_STRIP[status]] * len(xs), linestyle="none", color=color,
                    markeredgecolor=color, transform=ax.get_xaxis_transform(),
                    clip_on=False, zorder=6, **style)  # above a legend that may cover them


_DISTURBED_STYLE = dict(marker="o", markersize=11, markerfacecolor="none", markeredgewidth=1.8,
                       markeredgecolor="tab:red", linestyle="none")


def mark_disturbed(ax, cases: Iterable[dict], x_axis: str,
                   y_of: Callable[[dict], float | None]) -> None:
    """A red ring around each point whose record is disturbed (see disturbed_reason)."""
    points = [(c[x_axis], y_of(c)) for c in cases if is_disturbed(c)]
    points = [(x, y) for x, y in points if y is not None]
    if points:
        ax.plot([x for x, _ in points], [y for _, y in points], zorder=5, **_DISTURBED_STYLE)


def add_legend(ax, cases: Sequence[dict], extra_handles: Sequence = ()) -> None:
    """The series legend plus a key for the skipped/failed markers present in this panel."""
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
        ax.legend(handles, labels, fontsize="small")


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
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(_PlainLogFormatter())
    ax.yaxis.set_minor_formatter(_PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(1.5, 0.5)))


def style_time_axis(ax) -> None:
    plain_log_yaxis(ax)
    ax.set_ylabel("median time per pass (ms)")


def finish_figure(fig, title: str, caption_lines: Iterable[str], out_dir: Path, stem: str) -> list[Path]:
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
    return save_figure(fig, out_dir, stem)


# ----------------------------------------------------------------------------
# Writing outputs


def make_output_dir(out_dir: Path) -> Path:
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ResultsError(f"{out_dir}: cannot create output folder ({error.strerror})") from None
    return out_dir


def write_text(out_dir: Path, name: str, text: str) -> Path:
    path = make_output_dir(out_dir) / name
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise ResultsError(f"{path}: cannot write ({error.strerror})") from None
    return path


def save_figure(fig, out_dir: Path, stem: str) -> list[Path]:
    try:
        out_dir = make_output_dir(out_dir)
    except ResultsError:
        plt.close(fig)
        raise
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.svg"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    plt.close(fig)
    return paths
