"""Reading attnbench results folders: a run's records as the attnbench binary rates them, as dicts
(`load_run`) or as a pandas DataFrame (`load`, `load_many`).

A run folder is what `attnbench` writes: manifest.json (how and where the run was made),
cases.jsonl (one record per case, written once) and peaks.jsonl (one line per peak check,
every session's). This module reads none of them itself: `load_run` asks the binary
(`attnbench export FOLDER`), which checks every record against the record schema, upgrades a
record of an older schema version, and rates it against the folder's peak checks (peak_gflops,
percent_of_peak, disturbed, ...): one rater, in C++, for the terminal, summary.csv, and every
plot and table made here. A folder the binary refuses is a `ResultsError` with its one line.

The binary is ATTNBENCH_BINARY when set, else this checkout's build/attnbench, else `attnbench`
on PATH.

    >>> import attnbench.results as r
    >>> frame = r.load("results/cpu-scaling")        # one row per record, typed columns
    >>> both = r.load_many(["results/quick-before", "results/quick-after"])  # a "run" column
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import stat
import subprocess
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Sequence

SIZE_AXES = ("batch", "heads", "kv_heads", "seq_q", "seq_kv", "d_k", "d_v")
# What tells two shapes apart, as the harness's Shape does: the sizes, the element type, the
# memory layout and the pass timed (a bf16 case is never the fp32 case of the same sizes, a
# backward case never the forward one).
SHAPE_AXES = (*SIZE_AXES, "dtype", "layout", "pass")
# A shape's description names its dtype, layout and pass only where they are not these (as the
# harness describes a shape).
SHAPE_DEFAULTS = {"dtype": "fp32", "layout": "bhsd", "pass": "fwd"}
# The passes in the order one leads to the next (a plot of saved bytes shows the first).
PASSES = ("fwd", "bwd", "fwd_bwd")
DEVICE_ORDER = ("cpu", "cuda")
# What `attnbench export` prints, and this package reads.
EXPORT_KEYS = ("manifest", "fields", "peak_checks", "peak_check_summary", "records")
# This checkout's binary, where scripts/setup.sh builds it.
CHECKOUT_BINARY = Path(__file__).resolve().parents[2] / "build" / "attnbench"


class ResultsError(Exception):
    """A results folder or input file that cannot be used; the message is one line."""


class NotApplicable(Exception):
    """This plot has nothing to show for this run (e.g. the axis it needs was not swept)."""


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ----------------------------------------------------------------------------
# Loading: the binary's export


@dataclass
class Run:
    folder: Path
    manifest: dict
    cases: list[dict]  # rated by the binary, in case order
    peak_checks: list[dict] = field(default_factory=list)  # peaks.jsonl, every session's
    # What the checks say together (PeakChecks::summary_json): "disagreement_limit", "best" (the
    # best check of each peak), "busy_checks", "busy_check_count", "worst_check".
    peak_check_summary: dict = field(default_factory=dict)
    fields: list[dict] = field(default_factory=list)  # the record schema: name, type, ...

    @property
    def name(self) -> str:
        return str(self.manifest.get("name") or self.folder.name)

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
        machine = self.manifest.get("machine") or {}
        return str(machine.get("description") or "an unnamed machine")

    def machines(self) -> list[str]:
        """The machines the records say they ran on (merged runs keep one per record)."""
        return sorted({str(c["machine"]) for c in self.cases if c.get("machine")})

    @property
    def gpu_name(self) -> str | None:
        gpu = self.manifest.get("gpu")
        return str(gpu.get("name")) if isinstance(gpu, dict) and gpu.get("name") else None

    def best_peak(self, name: str) -> float:
        """The best check of a peak in this folder (GFLOP/s, or GB/s for a bandwidth); 0 when no
        check measured it."""
        return float(self.peak_check_summary.get("best", {}).get(name, 0.0))

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
        commit = str(self.manifest.get("git_commit") or "")[:10]
        date = str(self.manifest.get("date") or "")[:10]
        return ", ".join(p for p in (self.name, date, commit) if p)

    def title(self, what: str, devices: Iterable[str]) -> str:
        return f"{what}\n{self.where(devices)}  ({self.provenance()})"


def attnbench_binary() -> str:
    """The binary that reads results folders: ATTNBENCH_BINARY, else this checkout's
    build/attnbench, else `attnbench` on PATH; a ResultsError when there is none."""
    if os.environ.get("ATTNBENCH_BINARY"):
        return os.environ["ATTNBENCH_BINARY"]
    if CHECKOUT_BINARY.is_file():
        return str(CHECKOUT_BINARY)
    found = shutil.which("attnbench")
    if found:
        return found
    raise ResultsError(f"no attnbench binary to read results with: build it (scripts/setup.sh, "
                       f"which makes {CHECKOUT_BINARY}) or set ATTNBENCH_BINARY")


def binary_name(binary: str) -> str:
    """The binary's name as given, for a message: quoted (as Python writes a string) where it holds
    whitespace or control characters, which one line of error would otherwise lose or hide
    (ATTNBENCH_BINARY=" build/attnbench" is not build/attnbench)."""
    return binary if binary.isprintable() and binary == " ".join(binary.split()) else repr(binary)


def export_folder(folder: Path) -> dict:
    """`attnbench export FOLDER`, parsed; the binary's one-line error as a ResultsError."""
    binary = attnbench_binary()
    shown = binary_name(binary)
    try:
        # "--": a folder whose name starts with "-" is still the folder.
        result = subprocess.run([binary, "export", "--", str(folder)], capture_output=True,
                                stdin=subprocess.DEVNULL)
    except OSError as error:
        raise ResultsError(f"{shown}: cannot run ({error.strerror})") from None
    if result.returncode != 0:
        lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
        if lines and lines[-1].startswith("attnbench: error: "):
            # The binary's own one line says the folder's problem, naming the file.
            raise ResultsError(lines[-1].removeprefix("attnbench: error: "))
        if lines:  # something else at ATTNBENCH_BINARY: which program said it
            raise ResultsError(f"{shown} export {folder}: {lines[-1]}")
        how = (f"killed by signal {-result.returncode}" if result.returncode < 0
               else f"exit status {result.returncode}")
        raise ResultsError(f"{shown} export {folder}: failed ({how}) and said nothing")
    try:
        exported = json.loads(result.stdout)
    except (ValueError, UnicodeDecodeError) as error:
        raise ResultsError(f"{shown} export {folder}: not the JSON it should print ({error})") from None
    missing = [key for key in EXPORT_KEYS if not isinstance(exported, dict) or key not in exported]
    if missing:
        raise ResultsError(f"{shown} export {folder}: no {', '.join(missing)} in what it printed "
                           "(a binary older than this package: rebuild it, scripts/setup.sh)")
    return exported


def load_run(folder: str | Path) -> Run:
    folder = Path(folder)
    if not folder.is_dir():
        raise ResultsError(f"{folder}: not a results folder (no such directory)")
    exported = export_folder(folder)
    if not exported["records"]:
        raise ResultsError(f"{folder / 'cases.jsonl'}: no cases recorded")
    return Run(folder=folder, manifest=exported["manifest"], cases=exported["records"],
               peak_checks=exported["peak_checks"],
               peak_check_summary=exported["peak_check_summary"], fields=exported["fields"])


def ok_cases(cases: Iterable[dict]) -> list[dict]:
    return [c for c in cases if c["status"] == "ok"]


def disturbed_reason(case: dict) -> str:
    """Why other work on the machine makes this record's numbers doubtful, or "" when nothing
    does: the binary's rating says (peak checks that disagree or saw other work, a record above
    100% of its peak)."""
    return str(case.get("disturbed_reason") or "flagged disturbed") if case.get("disturbed") else ""


def is_disturbed(case: dict) -> bool:
    return case["status"] == "ok" and bool(disturbed_reason(case))


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


def format_percent(value: float) -> str:
    """A percentage to one decimal; a damaged one past a million (a peak of 1e-300 GFLOP/s that
    the rater took) in powers of ten, not hundreds of digits."""
    return f"{value:.1f}" if abs(value) < 1e6 else f"{value:.3g}"


def supported_digits(rel_half_width: float | None) -> int:
    """Significant digits a measurement with this relative 95% half-width supports: down to the
    digit the interval reaches (±1.5%: 3 digits, ±0.2%: 4), 3 where there is no interval."""
    if not is_number(rel_half_width) or rel_half_width <= 0:
        return 3
    return max(2, min(6, math.ceil(-math.log10(rel_half_width)) + 1))


def format_measured(value: float | None, rel_half_width: float | None) -> str:
    """A measured value rounded to the digits its interval supports (supported_digits)."""
    if not is_number(value):
        return "-"
    return format_number(value, supported_digits(rel_half_width))


def format_shape(case: dict) -> str:
    heads = str(case["heads"])
    if case["kv_heads"] != case["heads"]:
        heads += f" (kv {case['kv_heads']})"
    dims = f"{case['d_k']}" if case["d_k"] == case["d_v"] else f"{case['d_k']}/{case['d_v']}"
    mask = ", causal" if case["causal"] else ""
    if case.get("mask") not in (None, "none", "causal"):
        mask = f", {case['mask']}"  # window:L, prefix:P, documents:K
    # dtype and layout as the harness describes a shape: named when not the default.
    typed = "".join(f", {case.get(axis, default)}" for axis, default in SHAPE_DEFAULTS.items()
                    if case.get(axis, default) != default)
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


# A caption line, at most: the width finish_figure wraps captions at. Each part of a caption
# says its part in one such line; the whole story (every reason) is in results.md and report.html.
CAPTION_LINE_CHARS = 120


def one_line(text: str, width: int = CAPTION_LINE_CHARS) -> str:
    return textwrap.shorten(" ".join(str(text).split()), width=width, placeholder=" ...")


def status_caption(cases: Iterable[dict], x_axis: str) -> str:
    """A line naming the skipped/failed cases, so none is silently absent from a plot, and a
    line counting the disturbed ones, so none is silently trusted (their reasons: footnotes)."""
    cases = list(cases)
    return "\n".join(text for text in (_not_ok_caption(cases, x_axis),
                                        disturbed_caption(cases)) if text)


def disturbed_caption(cases: Iterable[dict]) -> str:
    """One line: how many points are disturbed and where their reasons are (the run's numbered
    footnotes, Disturbances), never the reasons themselves: a reason is said once per run."""
    cases = list(cases)
    notes = Disturbances(cases)
    if not notes.count:
        return ""
    count = len(notes.reasons)
    marks = "[1]" if count == 1 else f"[1]-[{count}]"
    return one_line(f"{notes.count} of {len(ok_cases(cases))} disturbed (ringed in red) by other "
                    f"work on the machine: reasons {marks} under results.md's table, atop "
                    f"report.html")


def _not_ok_caption(cases: list[dict], x_axis: str) -> str:
    not_ok = [c for c in cases if c["status"] != "ok"]
    if not not_ok:
        return ""
    by_reason = group_by(not_ok, lambda c: (c["status"], c["variant"], c["reason"] or "no reason given"))
    groups = [f"{status}: {variant} at {x_axis} {', '.join(map(str, sorted({c[x_axis] for c in group})))}"
              f": {reason}" for (status, variant, reason), group in by_reason.items()]
    # Two lines at most: the counts with the first group, then the second (and how many more).
    more = f" (and {len(groups) - 2} more groups: results.md)" if len(groups) > 2 else ""
    lines = [one_line(f"{status_counts_text(not_ok)} (marked along the bottom): {groups[0]}")]
    if len(groups) > 1:
        lines.append(one_line(f"  {groups[1]}", CAPTION_LINE_CHARS - len(more)) + more)
    return "\n".join(lines)


class Disturbances:
    """A run's disturbed records, each distinct reason once: footnote [k] is reasons[k - 1], in
    the order the records first give them (the order the terminal numbered them in)."""

    def __init__(self, cases: Iterable[dict]):
        disturbed = [c for c in cases if is_disturbed(c)]
        self.count = len(disturbed)
        self.reasons = list(dict.fromkeys(disturbed_reason(c) for c in disturbed))

    def mark(self, case: dict) -> str:
        """The case's footnote mark, '[k]', or '' when it is not disturbed."""
        if not is_disturbed(case):
            return ""
        return f"[{self.reasons.index(disturbed_reason(case)) + 1}]"

    def footnotes(self) -> list[str]:
        return [f"[{k}] {reason}" for k, reason in enumerate(self.reasons, start=1)]


def disturbance_summary(run: Run) -> list[str]:
    """The run-level note: how many records are disturbed, the worst peak check (as the binary
    names it), then the footnotes. Empty when no record is."""
    notes = Disturbances(run.cases)
    if not notes.count:
        return []
    head = (f"{notes.count} of {len(ok_cases(run.cases))} ok records disturbed by other work on "
            "the machine")
    worst = run.peak_check_summary.get("worst_check", "")
    return [head + (f"; {worst}" if worst else "") + "."] + notes.footnotes()


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


# Writing outputs


def make_output_dir(out_dir: Path) -> Path:
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ResultsError(f"{out_dir}: cannot create output folder ({error.strerror})") from None
    return out_dir


# Characters a file name built from a run's own names writes as %XX: path separators, the escape
# itself, characters shells and other file systems treat specially, and whitespace.
_UNSAFE_IN_FILE_NAMES = set('%/\\:*?"<>|')
_MAX_FILE_NAME_BYTES = 200


def safe_file_name(name: str) -> str:
    """`name` (built from a variant, a run or a file's name) as one file name inside the output
    folder: readable, and one to one, as a URL writes it: '/', '%', control characters,
    whitespace and a leading '.' become %XX (their UTF-8 bytes), so no name climbs out of the
    folder or makes one of its own. A name over 200 bytes is cut, with a hash of the whole."""
    parts = []
    for index, char in enumerate(name):
        if (char in _UNSAFE_IN_FILE_NAMES or not char.isprintable() or char.isspace()
                or (index == 0 and char == ".")):
            parts.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8")))
        else:
            parts.append(char)
    safe = "".join(parts) or "%00"
    if len(safe.encode("utf-8")) > _MAX_FILE_NAME_BYTES:
        digest = hashlib.sha256(safe.encode("utf-8")).hexdigest()[:12]
        stem, dot, extension = safe.rpartition(".") if len(safe.rpartition(".")[2]) <= 8 else (safe, "", "")
        cut = stem.encode("utf-8")[:_MAX_FILE_NAME_BYTES - 30].decode("utf-8", "ignore")
        safe = f"{cut}-{digest}{dot}{extension}"
    return safe


def write_text(out_dir: Path, name: str, text: str) -> Path:
    """`text` into out_dir under `name`, made safe (see safe_file_name)."""
    return write_file(make_output_dir(out_dir) / safe_file_name(name), text)


def write_file(path: str | Path, text: str) -> Path:
    """`text` at a path the user gave (--out), its folder made; a failure is a ResultsError."""
    return write_output(path, lambda handle: handle.write(text.encode("utf-8")))


# A results folder's own files, written by the binary and read by every reader: no output of
# this package replaces one, whatever path names it (--out RUN/cases.jsonl, plots/../cases.jsonl).
RUN_DATA_FILES = ("manifest.json", "cases.jsonl", "peaks.jsonl", "summary.csv",
                  "failed_attempts.jsonl")
# What makes a folder a results folder, for RUN_DATA_FILES.
_RUN_FOLDER_MARKS = ("manifest.json", "cases.jsonl")
# The temporary's name holds at most this many bytes of the target's, so that a target name near
# the file system's limit (255 bytes) still has a temporary.
_TEMPORARY_NAME_BYTES = 100


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, as the binary names it (regular_file.cpp)."""
    for test, kind in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "a special file"


def check_output_target(path: str | Path) -> None:
    """A ResultsError unless `path` may be replaced by an output: absent, or a regular file that
    is not a results folder's own data (RUN_DATA_FILES). A link is refused, never replaced or
    written through (that would change the file it names: a plots/results.md linked to
    ../cases.jsonl would overwrite the records); a FIFO would block the writer forever, a
    directory or a device is no file to replace."""
    path = Path(path)
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        status = None
    except OSError as error:
        raise ResultsError(f"{path}: cannot write ({error.strerror})") from None
    if status is not None and stat.S_ISLNK(status.st_mode):
        raise ResultsError(f"{path}: is a symbolic link, so it is not replaced (writing through it "
                           "would change the file it names)")
    if status is not None and not stat.S_ISREG(status.st_mode):
        raise ResultsError(f"{path}: exists and is {file_kind(status.st_mode)}, not a regular "
                           "file, so it is not replaced")
    # The folder as resolved: plots/.. is the run folder itself.
    folder = Path(os.path.realpath(path.parent))
    if path.name in RUN_DATA_FILES and any((folder / mark).exists() for mark in _RUN_FOLDER_MARKS):
        raise ResultsError(f"{path}: is {folder / path.name}, a results folder's own data, so no "
                           "output replaces it")


def write_output(path: str | Path, write: Callable[[BinaryIO], object]) -> Path:
    """The one writer of every output file (tables, reports, figures): `write(handle)` fills a
    hidden temporary beside the target, which is synced and then renamed over it, so the target
    is either its old self or the whole new file, never a part (a full disk, an interrupt), and
    the temporary is removed on any failure. The target is checked first (check_output_target).
    Any OSError is a ResultsError naming the target and the reason."""
    path = Path(path)
    make_output_dir(path.parent)
    check_output_target(path)
    cut = os.fsdecode(os.fsencode(path.name)[:_TEMPORARY_NAME_BYTES])
    temporary = None
    try:
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{cut}.tmp.")
        with os.fdopen(descriptor, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp makes the file 0600; an output should be as readable as any file made here.
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(temporary, 0o666 & ~mask)
        os.replace(temporary, path)
        temporary = None
    except OSError as error:
        raise ResultsError(f"{path}: cannot write ({error.strerror or error})") from None
    finally:
        if temporary is not None:
            try:
                os.unlink(temporary)
            except OSError:
                pass  # the error that stopped the write is the one to say
    _sync_folder(path.parent)
    return path


def _sync_folder(folder: Path) -> None:
    """The renamed entry is durable only once its folder is synced too: best effort, since the
    data itself is already on disk."""
    try:
        descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


# ----------------------------------------------------------------------------
# As a pandas DataFrame

# The pandas type of each schema type: nullable, since a field may be null (or absent from a
# record written before it existed). Arrays (round_times_ms, doc_lens) stay Python lists.
_PANDAS_TYPES = {"integer": "Int64", "number": "Float64", "boolean": "boolean", "string": "string"}


def column_types(fields: Iterable[dict]) -> dict[str, str]:
    """The DataFrame's column types from the record schema the binary exports (name, type)."""
    types = {"run": "string"}
    for entry in fields:
        kind = str(entry["type"]).split("|")[0]
        if kind in _PANDAS_TYPES:
            types[entry["name"]] = _PANDAS_TYPES[kind]
    return types


def frame(runs: Iterable[Run]):
    """The rated records of these runs as one DataFrame: a row per record, a "run" column (the
    folder's name), each schema field's column of its type (column_types; nullable), the columns
    outside the schema (a merged run's shard and machine) as pandas infers them."""
    import pandas as pd  # only the DataFrame readers need pandas; the plots do not

    runs = list(runs)
    rows = [{"run": run.label, **case} for run in runs for case in run.cases]
    table = pd.DataFrame.from_records(rows)
    for column, kind in column_types(field for run in runs for field in run.fields).items():
        if column in table.columns:
            table[column] = table[column].astype(kind)
    return table


def load(folder: str | Path):
    """One results folder as a DataFrame, rated against its own peak checks (see `frame`); the
    manifest and the peak checks are in `.attrs["manifest"]` and `.attrs["peak_checks"]`."""
    run = load_run(folder)
    table = frame([run])
    table.attrs["manifest"] = run.manifest
    table.attrs["peak_checks"] = run.peak_checks
    return table


def require_distinct_labels(runs: Sequence[Run]) -> None:
    """Refuses runs whose folders share a name: each is shown by its name, so two such runs' rows
    and series would be one."""
    labels = [run.label for run in runs]
    if len(set(labels)) != len(labels):
        raise ResultsError(f"two folders share a name ({', '.join(labels)}): the run column "
                           "could not tell them apart")


def load_many(folders: Iterable[str | Path]):
    """Several folders as one DataFrame, for comparing runs: each folder's records rated against
    that folder's own checks, told apart by the "run" column (the folder's name);
    `.attrs["manifests"]` maps each run to its manifest."""
    runs = [load_run(folder) for folder in folders]
    require_distinct_labels(runs)
    table = frame(runs)
    table.attrs["manifests"] = {run.label: run.manifest for run in runs}
    return table
