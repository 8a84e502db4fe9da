"""Reading attnbench results folders: load and validate a run, rate every record against the
folder's peak checks, and give the records as dicts (`load_run`) or as a pandas DataFrame
(`load`, `load_many`).

A run folder is what `attnbench` writes: manifest.json (how and where the run was made),
cases.jsonl (one record per case, written once) and peaks.jsonl (one line per peak check,
every session's). Every reader goes through `load_run`, so a malformed folder fails the same
way everywhere (a `ResultsError` with a one-line message). `load_run` rates every record as the
harness's readers do (`rate_record`, the mirror of rate_record in
harness/results/peak_checks.cpp): peak_gflops, percent_of_peak, disturbed and disturbed_reason
are derived against the best peak check of the folder, never read from the record.

    >>> import attnbench.results as r
    >>> frame = r.load("results/cpu-scaling")        # one row per record, typed columns
    >>> both = r.load_many(["results/quick-before", "results/quick-after"])  # a "run" column
"""

from __future__ import annotations

import hashlib
import json
import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

MANIFEST_KEYS = (
    "name", "config", "config_text", "git_commit", "date", "build", "machine", "peaks", "gpu",
)
SIZE_AXES = ("batch", "heads", "kv_heads", "seq_q", "seq_kv", "d_k", "d_v")
# What tells two shapes apart, as the harness's Shape does: the sizes, the element type, the
# memory layout and the pass timed (a bf16 case is never the fp32 case of the same sizes, a
# backward case never the forward one).
SHAPE_AXES = (*SIZE_AXES, "dtype", "layout", "pass")
# Records from before typed tensors have no dtype or layout: they were fp32, bhsd; records from
# before the pass axis timed the forward.
SHAPE_DEFAULTS = {"dtype": "fp32", "layout": "bhsd", "pass": "fwd"}
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
# The pass a record timed (#23): records from before the backward pass timed the forward.
PASSES = ("fwd", "bwd", "fwd_bwd")
# Decode's fields (#24), as records from before them read: a contiguous cache in which every
# sequence holds seq_kv (kv_lens absent), nothing counted for bytes moved.
PASS_AND_CACHE_DEFAULTS = {"pass": "fwd", "saved_for_backward_bytes": None,
                           "kv_cache": "contiguous", "kv_lens": None, "bytes_moved": None,
                           "arithmetic_intensity": None, "kv_quant_rel_l2_err": None}
# The bandwidths each peaks.jsonl check measured (GB/s), per device: the CPU's read-only sum and
# STREAM triad on all threads, the GPU's device-to-device copy (harness/results/peak_checks.h).
# A device's roof is the best of them.
BANDWIDTH_CHECKS = {"cpu": ("cpu_read_gbps", "cpu_triad_gbps"), "cuda": ("gpu_copy_gbps",)}
DEVICE_ORDER = ("cpu", "cuda")
# What load reads at most: a results folder is refused past these, with one line, before it is
# parsed (the harness refuses a cases.jsonl or peaks.jsonl over 256 MiB; 100,000 records is
# ten times the largest sweep committed, and loads in a few seconds).
MAX_FILE_BYTES = 256 << 20
MAX_RECORDS = 100_000
# The largest JSON integer a record may hold: the harness reads integers as int64.
MAX_INTEGER = 2**63 - 1

# The record schema's version this loader reads (`schema_version` in `attnbench schema --json` and
# in each manifest; a test checks it against the binary): a folder of a newer version is refused,
# as the binary refuses it, since its fields may mean what this loader does not know; one without
# a version was written before it existed and reads as version 0.
SCHEMA_VERSION = 1

# Every record field and its JSON type, as `attnbench schema --json` lists them (a test checks
# this table against the binary): integer (a JSON integer, 0 to int64's max), number (finite),
# boolean, string, array ("|null": may be null). load_run checks each field a record holds
# against it, once, so a plot or a table never meets a value of the wrong kind.
RECORD_FIELD_TYPES = {
    "case_index": "integer", "case_id": "string", "variant": "string", "device": "string",
    "dtype": "string", "layout": "string", "pass": "string", "element_bytes": "integer",
    "precision": "string", "batch": "integer", "heads": "integer", "kv_heads": "integer",
    "seq_q": "integer", "seq_kv": "integer", "d_k": "integer", "d_v": "integer",
    "causal": "boolean", "mask": "string", "doc_lens": "array|null", "alibi": "boolean",
    "softcap": "number", "kv_cache": "string", "kv_lens": "array|null", "kv_dtype": "string",
    "status": "string",
    "reason": "string", "time_ms_median": "number|null", "time_ms_min": "number|null",
    "time_ms_max": "number|null", "cv": "number|null", "noisy": "boolean|null",
    "ci_low_ms": "number|null", "ci_high_ms": "number|null", "rel_ci_half_width": "number|null",
    "target_rel_ci": "number|null", "target_reached": "boolean|null",
    "iterations": "integer|null", "repetitions": "integer|null",
    "runs_per_sample": "integer|null", "interleaved": "boolean|null",
    "round_times_ms": "array|null", "flops": "number", "flop_convention": "string",
    "dense_flops": "number", "density": "number", "gflops": "number|null",
    "gbps": "number|null", "bytes": "number", "bytes_moved": "number",
    "arithmetic_intensity": "number", "workspace_bytes": "integer|null",
    "saved_for_backward_bytes": "integer|null", "peak_gflops": "number|null",
    "peak_name": "string", "percent_of_peak": "number|null", "unrated_reason": "string", "peak_gbps": "number|null",
    "bandwidth_name": "string",
    "ridge_intensity": "number|null", "percent_of_bandwidth": "number|null",
    "disturbed": "boolean", "disturbed_reason": "string", "oracle_max_abs_err": "number|null",
    "oracle_rel_l2_err": "number|null", "oracle_rel_l2_tolerance": "number|null",
    "oracle_sampled": "boolean|null", "oracle_after_rel_l2_err": "number|null",
    "kv_quant_rel_l2_err": "number|null", "threads": "integer", "distribution": "string", "code_path": "string",
}
# Fields the harness adds outside the schema: a merged run's shard and machine, and older
# records' name for code_path.
EXTRA_FIELD_TYPES = {"shard": "string", "machine": "string", "isa": "string"}
# What an array field holds.
ARRAY_ELEMENT_TYPES = {"doc_lens": "integer", "kv_lens": "integer", "round_times_ms": "number"}



class ResultsError(Exception):
    """A results folder or input file that cannot be used; the message is one line."""


class NotApplicable(Exception):
    """This plot has nothing to show for this run (e.g. the axis it needs was not swept)."""


def _refuse_constant(name: str):
    raise ResultsError(f"{name} is not a JSON number (the harness writes none)")


def parse_json(text: str):
    """JSON as the harness's reader takes it: NaN and Infinity are refused (ResultsError). A
    number past a double's range (1e400) reads as inf here; the record check, or
    non_finite_number for the manifest and peak checks, refuses it."""
    return json.loads(text, parse_constant=_refuse_constant)


def non_finite_number(value, where: str = "") -> str:
    """Where in a parsed JSON value a number past a double's range is ("" when none is)."""
    if isinstance(value, float) and not math.isfinite(value):
        return where or "a number"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**1023:
        return where or "a number"
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return ""
    for key, item in items:
        found = non_finite_number(item, f"{where}.{key}" if where else str(key))
        if found:
            return found
    return ""


def read_capped_text(path: Path, what: str) -> str:
    """A file's text, refused (ResultsError) when it is over MAX_FILE_BYTES."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ResultsError(f"{path}: {size} bytes, more than the {MAX_FILE_BYTES >> 20} MiB "
                               f"a {what} may hold")
        with open(path, encoding="utf-8") as file:
            return file.read(MAX_FILE_BYTES + 1)
    except (OSError, UnicodeDecodeError) as error:
        raise ResultsError(f"{path}: cannot be read ({error})") from None


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
    text = read_capped_text(path, "peak checks file")
    checks = []
    lines = text.split("\n")
    if len(lines) - 1 > MAX_RECORDS:
        raise ResultsError(f"{path}: more than {MAX_RECORDS} lines, more than load reads")
    for line_number, line in enumerate(lines[:-1], start=1):  # the last piece has no newline
        if not line.strip():
            continue
        try:
            check = parse_json(line)
        except json.JSONDecodeError as error:
            raise ResultsError(f"{path}: line {line_number}: not valid JSON ({error.msg})") from None
        except ResultsError as error:
            raise ResultsError(f"{path}: line {line_number}: {error}") from None
        if not isinstance(check, dict):
            raise ResultsError(f"{path}: line {line_number}: expected a JSON object")
        if found := non_finite_number(check):
            raise ResultsError(f"{path}: line {line_number}: {found!r} is past the range of a double")
        checks.append(check)
    return checks


def _load_manifest(path: Path) -> dict:
    if not path.is_file():
        raise ResultsError(f"{path}: missing (is {path.parent} a results folder?)")
    text = read_capped_text(path, "manifest")
    try:
        manifest = parse_json(text)
    except json.JSONDecodeError as error:
        raise ResultsError(f"{path}: line {error.lineno}: not valid JSON ({error.msg})") from None
    except ResultsError as error:
        raise ResultsError(f"{path}: {error}") from None
    if not isinstance(manifest, dict):
        raise ResultsError(f"{path}: expected a JSON object")
    if found := non_finite_number(manifest):
        raise ResultsError(f"{path}: {found!r} is past the range of a double")
    _require_keys(manifest, MANIFEST_KEYS, f"{path}")
    version = manifest.get("schema_version", 0)
    if not (isinstance(version, int) and not isinstance(version, bool) and version >= 0):
        raise ResultsError(f"{path}: 'schema_version' must be a version number, got {version!r}")
    if version > SCHEMA_VERSION:
        raise ResultsError(
            f"{path}: written with record schema version {version}, newer than this loader reads "
            f"(up to {SCHEMA_VERSION}): read it with a newer attnbench")
    if not isinstance(manifest["name"], str):
        raise ResultsError(f"{path}: 'name' must be a string, got {manifest['name']!r}")
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
    lines = read_capped_text(path, "records file").splitlines()
    if len(lines) > MAX_RECORDS and sum(1 for line in lines if line.strip()) > MAX_RECORDS:
        raise ResultsError(f"{path}: more than {MAX_RECORDS} records, more than load reads")
    for line_number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(cases) == MAX_RECORDS:
            raise ResultsError(f"{path}: more than {MAX_RECORDS} records, more than load reads")
        where = f"{path}: line {line_number}"
        try:
            case = parse_json(line)
        except json.JSONDecodeError as error:
            raise ResultsError(f"{where}: not valid JSON ({error.msg})") from None
        except ResultsError as error:
            raise ResultsError(f"{where}: {error}") from None
        if not isinstance(case, dict):
            raise ResultsError(f"{where}: expected a JSON object")
        _require_keys(case, REQUIRED_CASE_KEYS, where)
        _check_field_types(case, where)
        _check_case_values(case, where)
        case = {**SHAPE_DEFAULTS, **PASS_AND_CACHE_DEFAULTS, **case}
        if "runs_per_sample" not in case:  # records from before: a sample was one pass
            case["runs_per_sample"] = None if case["time_ms_median"] is None else 1
        if not case.get("mask"):  # records from before the mask axis: their causal flag says it
            case["mask"] = "causal" if case["causal"] else "none"
        if not case.get("kv_dtype"):  # records from before the axis: K and V in the case's dtype
            case["kv_dtype"] = case["dtype"]
        if "isa" in case and "code_path" not in case:  # the field's name in older records
            case["code_path"] = case.pop("isa")
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


def _type_problem(value, kind: str) -> str:
    """What is wrong with `value` as a field of this schema type (without "|null"), or ""."""
    if kind == "integer":
        if not _is_int(value):
            return "must be an integer"
        if not 0 <= value <= MAX_INTEGER:
            return f"must be an integer from 0 to {MAX_INTEGER}"
    elif kind == "number":
        if not is_number(value):
            return "must be a number"
        if abs(value) > 2**1023 if isinstance(value, int) else not math.isfinite(value):
            return "is past the range of a double"
    elif kind == "boolean" and not isinstance(value, bool):
        return "must be true or false"
    elif kind == "string" and not isinstance(value, str):
        return "must be a string"
    elif kind == "array" and not isinstance(value, list):
        return "must be an array"
    return ""


# Fields the schema never leaves null (a record from before such a field lacks it instead).
_NOT_NULL = {name for name, kind in RECORD_FIELD_TYPES.items() if not kind.endswith("|null")}
# Each field's type without "|null", for the check below.
_FIELD_KINDS = {name: kind.split("|")[0]
                for name, kind in {**RECORD_FIELD_TYPES, **EXTRA_FIELD_TYPES}.items()}


def _has_kind(value, kind: str) -> bool:
    """_type_problem(value, kind) == "", fast: JSON gives exactly int, float, bool, str, list and
    dict (100,000 records load in a few seconds)."""
    kind_of = type(value)
    if kind == "integer":
        return kind_of is int and 0 <= value <= MAX_INTEGER
    if kind == "number":
        # value - value is 0 for a finite float, nan for inf (1e400 read past a double's range).
        return (kind_of is float and value - value == 0.0) or (
            kind_of is int and -(2**1023) <= value <= 2**1023)
    if kind == "string":
        return kind_of is str
    if kind == "boolean":
        return kind_of is bool
    return kind_of is list


def _check_field_types(case: dict, where: str) -> None:
    """Every field the record holds against RECORD_FIELD_TYPES: the rule of the whole package
    (no reader checks a type again). A null is taken where the schema says "|null"; a field
    absent (a record from before it existed) is taken; fields outside the schema are left as
    they are."""
    for key, value in case.items():
        kind = _FIELD_KINDS.get(key)
        if kind is None:
            continue
        if value is None:
            if key in _NOT_NULL:
                raise ResultsError(f"{where}: {key!r} is null; the schema says {kind}")
            continue
        problem = "" if _has_kind(value, kind) else _type_problem(value, kind)
        if not problem and key in ARRAY_ELEMENT_TYPES:
            problem = next((f"element {index} {p}" for index, element in enumerate(value)
                            if (p := _type_problem(element, ARRAY_ELEMENT_TYPES[key]))), "")
        if problem:
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            raise ResultsError(f"{where}: {key!r} {problem}, got {shown}")


def _check_case_values(case: dict, where: str) -> None:
    if case["status"] not in STATUSES:
        raise ResultsError(f"{where}: status {case['status']!r} is not one of {', '.join(STATUSES)}")
    for axis in SIZE_AXES:
        if not _is_int(case[axis]) or case[axis] < 1:
            raise ResultsError(f"{where}: {axis!r} must be a positive integer, got {case[axis]!r}")
    if case.get("pass", "fwd") not in PASSES:
        raise ResultsError(f"{where}: pass {case['pass']!r} is not one of {', '.join(PASSES)}")
    if not isinstance(case["causal"], bool):
        raise ResultsError(f"{where}: 'causal' must be true or false, got {case['causal']!r}")
    for key in ("variant", "device"):
        if not isinstance(case[key], str) or not case[key]:
            raise ResultsError(f"{where}: {key!r} must be a non-empty string")
    if case["status"] == "ok":
        median = case["time_ms_median"]
        if not is_number(median) or not median > 0:
            raise ResultsError(f"{where}: status ok but time_ms_median is {median!r}")
        # The harness writes an ok record's rate; every plot and table reads it.
        if not is_number(case["gflops"]) or case["gflops"] < 0:
            raise ResultsError(f"{where}: status ok but gflops is {case['gflops']!r}")
    for key in ("time_ms_min", "time_ms_max", "cv", "gflops", "workspace_bytes", "peak_gflops",
                "percent_of_peak", "oracle_max_abs_err", "oracle_rel_l2_err", "saved_for_backward_bytes",
                "bytes_moved", "arithmetic_intensity"):
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
    """As the C++ readers: a check whose FMA loop sustained well under the best trial of any check
    (the machine's rate) saw other work."""
    machine = max((_peak_value(check, "cpu_fma_gflops") for check in checks), default=0)
    parts = []
    for check in checks:
        best = _peak_value(check, "cpu_fma_gflops")
        sustained = _peak_value(check, "cpu_fma_sustained_gflops")
        if best <= 0 or sustained <= 0 or sustained >= (1 - PEAK_DISAGREEMENT_LIMIT) * machine:
            continue
        parts.append(f"other work ran during the {check.get('when', '')} check: the FMA loop "
                     f"sustained {sustained:.4g} of the best {machine:.4g} GFLOP/s "
                     f"({100 * sustained / machine:.0f}%)")
    return "; ".join(parts)


def peak_doubts(checks: Sequence[dict], name: str) -> str:
    return "; ".join(text for text in (peak_disagreement(checks, name), busy_checks(checks)) if text)


def cpu_roof(checks: Sequence[dict], dtype: str) -> str:
    """As PeakChecks::cpu_roof: the CPU's compute roof for a dtype, one per folder: for bf16 the
    highest of the FMA, vdpbf16ps and AMX checks, for every other dtype the FMA loop's."""
    roof = "cpu_fma_gflops"
    if dtype != "bf16":
        return roof
    for name in ("cpu_bf16_dot_gflops", "cpu_amx_bf16_gflops"):
        if best_peak(checks, name) > best_peak(checks, roof):
            roof = name
    return roof


def rate_record(case: dict, checks: Sequence[dict]) -> dict:
    """The record as readers show it: peak_name, for a CPU record in a folder with CPU checks,
    its dtype's roof (cpu_roof: one per dtype, whatever the record stored); peak_gflops the best
    check of it (of its own shard, in a merged run), else the peak the record brought
    (`attnbench append` to a folder without checks, or written before peaks.jsonl); percent_of_peak against it; disturbed_reason from the checks' doubts
    (CPU records) and a record above 100% of its peak. A record written before peaks.jsonl (it
    stores percent_of_peak) in a folder that kept no checks keeps the rating it was written with."""
    shard = case.get("shard") if isinstance(case.get("shard"), str) else ""
    checks = [c for c in checks if not c.get("shard") or c.get("shard") == shard]
    name = case.get("peak_name") if isinstance(case.get("peak_name"), str) else ""
    if case.get("device") == "cpu" and best_peak(checks, "cpu_fma_gflops") > 0:
        # Its dtype's roof as the folder's checks stand now, whoever wrote it and when.
        name = cpu_roof(checks, str(case.get("dtype")))
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
    unrated = ""
    if timed and percent is None:
        # As rate_record in harness/results/peak_checks.cpp: why a timed record has no rating.
        unrated = (f"no peak check in this folder (a run with measure.peaks = skip takes none): "
                   f"{name} unknown" if not checks else f"no peak check measured {name}")
    return {**case, "peak_name": name, "peak_gflops": peak if peak > 0 else None,
            "percent_of_peak": percent, "disturbed": bool(reason), "disturbed_reason": reason,
            "unrated_reason": unrated, **rate_bandwidth(case, checks, peak)}


def bandwidth_roof(checks: Sequence[dict], device: str) -> tuple[float, str]:
    """(GB/s, peaks.jsonl key): the best bandwidth check of a device in the run, over the keys
    BANDWIDTH_CHECKS names (the first named wins a tie); (0, "") when no check measured one."""
    best = (0.0, "")
    for check in checks:
        for key in BANDWIDTH_CHECKS.get(device, ()):
            value = check.get(key)
            if is_number(value) and value > best[0]:
                best = (float(value), key)
    return best



def rate_bandwidth(case: dict, checks: Sequence[dict], peak_gflops: float) -> dict:
    """peak_gbps (the best bandwidth check of the record's device) and bandwidth_name (which
    check that is: bandwidth_roof), ridge_intensity (the FMA
    peak over it: FLOPs per byte where the two roofs meet) and percent_of_bandwidth: achieved
    bytes_moved per second against peak_gbps, for a record below the ridge point only (above
    it the compute roof bounds the case, and percent_of_peak says how close it came)."""
    bandwidth, name = bandwidth_roof(checks, str(case.get("device")))
    ridge = peak_gflops / bandwidth if bandwidth > 0 and peak_gflops > 0 else None
    intensity, moved, median = (case.get("arithmetic_intensity"), case.get("bytes_moved"),
                                case.get("time_ms_median"))
    percent = None
    below_ridge = is_number(intensity) and (ridge is None or intensity < ridge)
    if bandwidth > 0 and below_ridge and is_number(moved) and is_number(median) and median > 0:
        percent = 100 * moved / (median * 1e6) / bandwidth
    return {"peak_gbps": bandwidth or None, "bandwidth_name": name, "ridge_intensity": ridge,
            "percent_of_bandwidth": percent}


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


def worst_check(checks: Sequence[dict]) -> str:
    """The peak check that read lowest against the folder's best (its FMA loop's sustained rate,
    else its best trial): the check other work disturbed most, in one sentence; '' for none."""
    machine = max((_peak_value(c, "cpu_fma_gflops") for c in checks), default=0.0)
    if machine <= 0:
        return ""
    def rate(check: dict) -> float:
        return _peak_value(check, "cpu_fma_sustained_gflops") or _peak_value(check, "cpu_fma_gflops")
    measured = [c for c in checks if rate(c) > 0]
    if not measured:
        return ""
    worst = min(measured, key=rate)
    return (f"worst check: the {worst.get('when', '')} check's FMA loop sustained "
            f"{rate(worst):.3g} of the best {machine:.3g} GFLOP/s ({100 * rate(worst) / machine:.0f}%)")


def disturbance_summary(cases: Sequence[dict], checks: Sequence[dict]) -> list[str]:
    """The run-level note: how many records are disturbed, the worst check, then the footnotes.
    Empty when no record is."""
    notes = Disturbances(cases)
    if not notes.count:
        return []
    head = f"{notes.count} of {len(ok_cases(cases))} ok records disturbed by other work on the machine"
    worst = worst_check(checks)
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
    path = Path(path)
    make_output_dir(path.parent)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise ResultsError(f"{path}: cannot write ({error.strerror})") from None
    return path



# ----------------------------------------------------------------------------
# As a pandas DataFrame

# The DataFrame's column types: RECORD_FIELD_TYPES's integer, number, boolean and string as
# pandas's nullable types (every column may hold a null: a record from before a field existed).
# Columns a record has and that table lacks keep the type pandas infers; arrays (round_times_ms,
# doc_lens) stay Python lists.
_PANDAS_TYPES = {"integer": "Int64", "number": "Float64", "boolean": "boolean", "string": "string"}
COLUMN_TYPES = {name: _PANDAS_TYPES[kind.split("|")[0]]
                for name, kind in {"run": "string", **RECORD_FIELD_TYPES,
                                   **EXTRA_FIELD_TYPES}.items()
                if kind.split("|")[0] in _PANDAS_TYPES}


def frame(runs: Iterable[Run]):
    """The rated records of these runs as one DataFrame: a row per record, a "run" column (the
    folder's name), the columns typed as COLUMN_TYPES says (nullable where a field may be null)."""
    import pandas as pd  # only the DataFrame readers need pandas; the plots do not

    rows = [{"run": run.label, **case} for run in runs for case in run.cases]
    table = pd.DataFrame.from_records(rows)
    for column, kind in COLUMN_TYPES.items():
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


def load_many(folders: Iterable[str | Path]):
    """Several folders as one DataFrame, for comparing runs: each folder's records rated against
    that folder's own checks, told apart by the "run" column (the folder's name);
    `.attrs["manifests"]` maps each run to its manifest."""
    runs = [load_run(folder) for folder in folders]
    labels = [run.label for run in runs]
    if len(set(labels)) != len(labels):
        raise ResultsError(f"two folders share a name ({', '.join(labels)}): the run column "
                           "could not tell them apart")
    table = frame(runs)
    table.attrs["manifests"] = {run.label: run.manifest for run in runs}
    return table
