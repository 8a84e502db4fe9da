#!/usr/bin/env python3
"""Time PyTorch's torch.nn.functional.scaled_dot_product_attention on the shapes of an
attnbench sweep config, per SDPA backend, and write the numbers as an attnbench results
folder (manifest.json, cases.jsonl, summary.csv), so the plot, table and compare scripts
put them beside attnbench's own variants.

    python3 scripts/peers/torch_sdpa.py configs/gpu-scaling.toml --out results/h200-torch-gpu-scaling
    python3 scripts/peers/torch_sdpa.py configs/quick.toml --device cpu --set axes.seq_len=[64,128]

What it does, so the numbers can be compared fairly:
- The shapes are the config's axes expanded exactly as the C++ harness does (cartesian
  product, sequence length innermost, kv_heads inside it; tokens and model_dim in lockstep
  with seq_q and d_k; kv_heads defaults to heads, d_v to d_k); --set overrides a config key.
- One variant per backend: torch_math, torch_efficient (memory-efficient), torch_cudnn,
  torch_flash, each forced with torch.nn.attention.sdpa_kernel. Inputs are fp32, like
  attnbench's. TF32 is switched off (torch.backends.cuda.matmul.allow_tf32 and
  torch.backends.cudnn.allow_tf32 = False, float32 matmul precision "highest"); the values
  found are recorded in the manifest. flash and cudnn take only fp16/bf16, so on fp32 they
  are recorded as skipped with PyTorch's own reason.
- Causal: is_causal=True when seq_q == seq_kv. PyTorch's is_causal aligns the mask to the
  top-left; attnbench aligns it to the end (as FlashAttention does), so when seq_q < seq_kv
  an explicit boolean mask aligned to the end is passed instead (backends that take no mask
  are then skipped with the reason).
- GQA (kv_heads < heads): enable_gqa=True; a backend that refuses it gets K and V expanded
  with repeat_interleave before timing, and the record's reason says so.
- Timing: CUDA events around each call (perf_counter on the CPU), after warm-up runs; the
  median, min, max and coefficient of variation of at least --repeats runs and at least
  measure.min_time_s of them. FLOPs and bytes are counted as the harness counts them
  (causal: unmasked pairs only). workspace_bytes: the memory the call allocated beyond its
  inputs and output (torch.cuda.max_memory_allocated). % of peak is against an fp32 matrix
  product timed through torch.mm at the start, stored in the manifest.
- Accuracy: the output is compared with a float64 reference (all rows for small shapes,
  sampled rows for large ones), as the harness's oracle does.
- A case over measure.memory_cap_gb, or predicted over measure.case_budget_s, or out of
  memory, is recorded as skipped with the reason.

Exit status: 0 when every case is ok or skipped; 1 when a case failed; 2 on a bad config or
when torch cannot be imported (one line on stderr).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

# The fields of every record, in order: harness/record.cpp record_fields().
RECORD_FIELDS = (
    "case_index", "case_id", "variant", "device", "dtype", "precision", "batch", "heads",
    "kv_heads", "seq_q", "seq_kv", "d_k", "d_v", "causal", "status", "reason",
    "time_ms_median", "time_ms_min", "time_ms_max", "cv", "noisy", "iterations", "repetitions",
    "flops", "flop_convention", "gflops", "gbps", "bytes", "workspace_bytes", "peak_gflops",
    "percent_of_peak", "oracle_max_abs_err", "oracle_rel_l2_err", "oracle_sampled",
    "oracle_after_rel_l2_err", "threads", "distribution",
)
BACKENDS = ("math", "efficient", "cudnn", "flash")
NOISY_CV = 0.10  # harness/timing.h noisy_cv
MAX_AXIS_LENGTH = 10000  # harness/config.cpp
# The harness's fp32 tolerance is far tighter; SDPA's fp32 kernels reorder sums, so a case
# passes below this relative L2 error (tf32 would land near 1e-3).
REL_L2_TOLERANCE = 1e-4
# The matrix product the peak is measured with: n x n times n x n, fp32.
SGEMM_SIZE = {"cuda": 8192, "cpu": 2048}
SCRIPT = Path(__file__).name


class ConfigError(Exception):
    """A config the harness would refuse; the message is one line."""


# ----------------------------------------------------------------------------------------------
# Config and sweep expansion (harness/config.cpp and harness/sweep.cpp, in Python)


@dataclass(frozen=True)
class Shape:
    batch: int
    heads: int
    kv_heads: int
    seq_q: int
    seq_kv: int
    d_k: int
    d_v: int
    causal: bool


def _positive_integer(value, key: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"{key}: expected an integer")
    if value <= 0:
        raise ConfigError(f"{key}: must be positive, got {value}")
    return value


def parse_axis(value, key: str) -> list[int]:
    """An integer, a non-empty list of integers, or a range {from, to, mul|step}."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [_positive_integer(value, key)]
    if isinstance(value, list):
        if not value:
            raise ConfigError(f"{key}: axis is empty")
        return [_positive_integer(v, key) for v in value]
    if isinstance(value, dict):
        unknown = set(value) - {"from", "to", "mul", "step"}
        if unknown:
            raise ConfigError(f"{key}.{sorted(unknown)[0]}: unknown key (expected one of: from, to, mul, step)")
        if "from" not in value or "to" not in value:
            raise ConfigError(f"{key}: a range needs 'from' and 'to'")
        first = _positive_integer(value["from"], key + ".from")
        last = _positive_integer(value["to"], key + ".to")
        if last < first:
            raise ConfigError(f"{key}.to: 'to' ({last}) is below 'from' ({first})")
        if ("mul" in value) == ("step" in value):
            raise ConfigError(f"{key}: a range needs exactly one of 'mul' or 'step'")
        values = []
        if "mul" in value:
            factor = _positive_integer(value["mul"], key + ".mul")
            if factor < 2:
                raise ConfigError(f"{key}.mul: must be at least 2")
            v = first
            while v <= last and len(values) < MAX_AXIS_LENGTH:
                values.append(v)
                v *= factor
        else:
            step = _positive_integer(value["step"], key + ".step")
            values = list(range(first, last + 1, step))[:MAX_AXIS_LENGTH]
        return values
    raise ConfigError(f"{key}: expected an integer, an array of integers, or a range {{from, to, mul|step}}")


def parse_bool_axis(value, key: str) -> list[bool]:
    if isinstance(value, bool):
        return [value]
    if not isinstance(value, list):
        raise ConfigError(f"{key}: expected true, false or an array of them")
    if not value:
        raise ConfigError(f"{key}: axis is empty")
    if not all(isinstance(v, bool) for v in value):
        raise ConfigError(f"{key}: expected true or false")
    return list(value)


AXIS_KEYS = ("batch", "heads", "kv_heads", "seq_len", "seq_q", "seq_kv", "d_k", "d_v", "causal",
             "mask", "alibi", "softcap", "tokens", "model_dim")


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def causal_axis_of(axes: dict) -> list[bool]:
    """The causal axis: `causal`, or the none and causal values of `mask`. The peer times those
    only; the harness's other masks and the score modifiers are left out (see left_out())."""
    if "causal" in axes and "mask" in axes:
        raise ConfigError("axes.causal: give either causal or mask, not both")
    if "mask" not in axes:
        return parse_bool_axis(axes["causal"], "axes.causal") if "causal" in axes else [False]
    masks = _as_list(axes["mask"])
    if not masks or not all(isinstance(m, str) for m in masks):
        raise ConfigError("axes.mask: expected a mask name or an array of them")
    return [m == "causal" for m in masks if m in ("none", "causal")]


def left_out(axes: dict) -> list[str]:
    """The axis values of the config this peer does not time: masks other than none and causal,
    ALiBi and soft-capping (PyTorch's SDPA has no such arguments)."""
    values = [f"mask {m}" for m in _as_list(axes.get("mask", [])) if m not in ("none", "causal")]
    if True in _as_list(axes.get("alibi", [])):
        values.append("alibi")
    values += [f"softcap {c}" for c in _as_list(axes.get("softcap", [])) if c]
    return values


def validate(s: Shape) -> str:
    """harness/shape.cpp validate(): empty when the shape is possible."""
    for name in ("batch", "heads", "kv_heads", "seq_q", "seq_kv", "d_k", "d_v"):
        if getattr(s, name) <= 0:
            return f"{name} must be positive, got {getattr(s, name)}"
    if s.heads % s.kv_heads:
        return f"heads ({s.heads}) must be a multiple of kv_heads ({s.kv_heads})"
    if s.causal and s.seq_q > s.seq_kv:
        return f"causal attention needs seq_q <= seq_kv (got seq_q {s.seq_q} > seq_kv {s.seq_kv})"
    if s.batch * s.heads * s.seq_q * s.seq_kv > 1e15:
        return f"shape too large: {s.batch * s.heads * s.seq_q * s.seq_kv:.3g} score elements"
    return ""


def describe(s: Shape) -> str:
    """harness/shape.cpp describe(), as `attnbench check` prints it."""
    return (f"b{s.batch} h{s.heads}/{s.kv_heads} q{s.seq_q} kv{s.seq_kv} dk{s.d_k} dv{s.d_v}"
            + (" causal" if s.causal else ""))


def expand_shapes(axes: dict) -> list[Shape]:
    """The shapes of a sweep in the harness's order: tokens, batch, model_dim, heads, d_k, d_v,
    causal, (seq_q, seq_kv), then kv_heads innermost."""
    unknown = [k for k in axes if k not in AXIS_KEYS]
    if unknown:
        raise ConfigError(f"axes.{unknown[0]}: unknown key (expected one of: {', '.join(AXIS_KEYS)})")

    def axis(key, default=None):
        return parse_axis(axes[key], f"axes.{key}") if key in axes else default

    batch_axis = axis("batch", [1])
    heads_axis = axis("heads", [1])
    d_k_axis = axis("d_k", [64])
    d_v_axis = axis("d_v")
    kv_heads_axis = axis("kv_heads")
    tokens_axis = axis("tokens")
    model_dim_axis = axis("model_dim")
    causal_axis = causal_axis_of(axes)
    seq_len, seq_q, seq_kv = axis("seq_len"), axis("seq_q"), axis("seq_kv")
    if seq_len and (seq_q or seq_kv):
        raise ConfigError("axes.seq_len: give either seq_len or seq_q/seq_kv, not both")
    if not seq_len and not (seq_q and seq_kv):
        raise ConfigError("axes: needs seq_len, or both seq_q and seq_kv")
    if tokens_axis and "batch" in axes:
        raise ConfigError("axes.tokens: sets batch = tokens / seq_q: do not also give batch")
    if model_dim_axis and "heads" in axes:
        raise ConfigError("axes.model_dim: sets heads = model_dim / d_k: do not also give heads")
    seq_pairs = [(n, n) for n in seq_len] if seq_len else [(q, kv) for q in seq_q for kv in seq_kv]

    shapes = []
    for tokens in tokens_axis or [0]:
        for batch in [0] if tokens_axis else batch_axis:
            for model_dim in model_dim_axis or [0]:
                for heads_given in [0] if model_dim_axis else heads_axis:
                    for d_k in d_k_axis:
                        for d_v in d_v_axis or [d_k]:
                            for causal in causal_axis:
                                for q, kv in seq_pairs:
                                    if tokens_axis and tokens % q:
                                        raise ConfigError(f"axes.tokens: {tokens} is not a multiple of seq_q {q}")
                                    if model_dim_axis and model_dim % d_k:
                                        raise ConfigError(f"axes.model_dim: {model_dim} is not a multiple of d_k {d_k}")
                                    b = tokens // q if tokens_axis else batch
                                    h = model_dim // d_k if model_dim_axis else heads_given
                                    for kv_heads in kv_heads_axis or [h]:
                                        s = Shape(b, h, kv_heads, q, kv, d_k, d_v, causal)
                                        problem = validate(s)
                                        if problem:
                                            raise ConfigError(f"axes: impossible shape {describe(s)}: {problem}")
                                        shapes.append(s)
    return shapes


def apply_override(config: dict, assignment: str) -> None:
    """--set a.b=TOML-value, as `attnbench run --set` does."""
    path, equals, text = assignment.partition("=")
    if not equals or not path:
        raise ConfigError(f"--set {assignment}: expected key=value")
    try:
        value = tomllib.loads("value = " + text)["value"]
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"--set {path}: value is not valid TOML: {error}") from None
    table = config
    parts = path.split(".")
    for part in parts[:-1]:
        table = table.setdefault(part, {})
        if not isinstance(table, dict):
            raise ConfigError(f"--set {path}: {part} is not a table")
    table[parts[-1]] = value


def load_config(path: str, overrides: list[str]) -> tuple[dict, str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        raise ConfigError(f"{path}: cannot open config file") from None
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: TOML syntax error: {error}") from None
    for assignment in overrides:
        apply_override(config, assignment)
    if not isinstance(config.get("name"), str) or not config["name"]:
        raise ConfigError(f"{path}: name: missing (every run is named after its config)")
    if not isinstance(config.get("axes"), dict):
        raise ConfigError(f"{path}: axes: missing [axes] table")
    return config, text


# ----------------------------------------------------------------------------------------------
# Counting work and writing records (harness/work_count.cpp, harness/record.cpp)


def count_work(s: Shape) -> tuple[float, str, float]:
    """(FLOPs, convention, minimum bytes): the two matrix products over the unmasked pairs."""
    q, kv = float(s.seq_q), float(s.seq_kv)
    if s.causal:
        pairs = q * (kv - q + 1) + q * (q - 1) / 2
        convention = "causal: unmasked pairs only"
    else:
        pairs = q * kv
        convention = "full"
    flops = 2.0 * s.batch * s.heads * pairs * (s.d_k + s.d_v)
    elements = (s.batch * s.heads * s.seq_q * s.d_k + s.batch * s.kv_heads * s.seq_kv * s.d_k
                + s.batch * s.kv_heads * s.seq_kv * s.d_v + s.batch * s.heads * s.seq_q * s.d_v)
    return flops, convention, elements * 4.0


def case_id(variant: str, s: Shape) -> str:
    return (f"{variant}|b{s.batch}|h{s.heads}|kv{s.kv_heads}|q{s.seq_q}|k{s.seq_kv}|dk{s.d_k}"
            f"|dv{s.d_v}|{'causal' if s.causal else 'full'}")


@dataclass
class Timing:
    times_ms: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def cv(self) -> float:
        if len(self.times_ms) < 2:
            return 0.0
        return statistics.stdev(self.times_ms) / statistics.mean(self.times_ms)


def make_record(index: int, variant: str, device: str, shape: Shape, *, status: str = "ok",
                reason: str = "", timing: Timing | None = None, workspace_bytes: int | None = None,
                peak_gflops: float | None = None, oracle: dict | None = None, threads: int = 0,
                precision: str = "fp32", distribution: str = "normal") -> dict:
    """One case's record with every field of the harness's records, in the harness's order."""
    flops, convention, min_bytes = count_work(shape)
    timed = timing is not None and status == "ok"
    seconds = timing.median / 1e3 if timed else 0.0
    gflops = flops / seconds / 1e9 if timed and seconds > 0 else None
    record = {
        "case_index": index, "case_id": case_id(variant, shape), "variant": variant,
        "device": device, "dtype": "fp32", "precision": precision,
        "batch": shape.batch, "heads": shape.heads, "kv_heads": shape.kv_heads,
        "seq_q": shape.seq_q, "seq_kv": shape.seq_kv, "d_k": shape.d_k, "d_v": shape.d_v,
        "causal": shape.causal, "status": status, "reason": reason,
        "time_ms_median": timing.median if timed else None,
        "time_ms_min": min(timing.times_ms) if timed else None,
        "time_ms_max": max(timing.times_ms) if timed else None,
        "cv": timing.cv if timed else None,
        "noisy": timing.cv > NOISY_CV if timed else None,
        "iterations": 1 if timed else None,  # each run is timed on its own
        "repetitions": len(timing.times_ms) if timed else None,
        "flops": flops, "flop_convention": convention,
        "gflops": gflops,
        "gbps": min_bytes / seconds / 1e9 if timed and seconds > 0 else None,
        "bytes": min_bytes,
        "workspace_bytes": workspace_bytes,
        "peak_gflops": peak_gflops if peak_gflops else None,
        "percent_of_peak": 100.0 * gflops / peak_gflops if gflops and peak_gflops else None,
        "oracle_max_abs_err": oracle["max_abs_err"] if oracle else None,
        "oracle_rel_l2_err": oracle["rel_l2_err"] if oracle else None,
        "oracle_sampled": oracle["sampled"] if oracle else None,
        "oracle_after_rel_l2_err": None,  # checked once, before timing
        "threads": threads, "distribution": distribution,
    }
    assert tuple(record) == RECORD_FIELDS
    return record


def csv_field(value) -> str:
    """As the harness writes summary.csv: null empty, strings as they are, the rest as JSON."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


class ResultsWriter:
    """A results folder: manifest.json first, then one record appended and flushed per case,
    and summary.csv rewritten after each, so a killed run keeps everything it finished."""

    def __init__(self, folder: Path, manifest: dict):
        self.folder = Path(folder)
        if self.folder.exists() and any(self.folder.iterdir()):
            raise ConfigError(f"{self.folder}: already exists; choose another --out")
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        (self.folder / "cases.jsonl").write_text("")
        self.records: list[dict] = []

    def append(self, record: dict) -> None:
        with open(self.folder / "cases.jsonl", "a", encoding="utf-8") as records:
            records.write(json.dumps(record) + "\n")
            records.flush()
            os.fsync(records.fileno())
        self.records.append(record)
        self.write_summary()

    def write_summary(self) -> None:
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(RECORD_FIELDS)
        for record in sorted(self.records, key=lambda r: r["case_index"]):
            writer.writerow([csv_field(record.get(field)) for field in RECORD_FIELDS])
        temporary = self.folder / "summary.csv.tmp"
        temporary.write_text(text.getvalue())
        temporary.replace(self.folder / "summary.csv")


# ----------------------------------------------------------------------------------------------
# The machine and the manifest


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# ----------------------------------------------------------------------------------------------
# PyTorch: imported only when timing, so the rest is usable and testable without it


class Peer:
    def __init__(self, torch, device: str, config: dict):
        self.torch = torch
        self.device = device
        self.config = config
        measure = config.get("measure", {})
        oracle = config.get("oracle", {})
        self.warmup = int(measure.get("warmup", 1))
        self.min_time_s = float(measure.get("min_time_s", 0.1))
        self.case_budget_s = float(measure.get("case_budget_s", 10))
        self.memory_cap_bytes = float(measure.get("memory_cap_gb", 8)) * 2**30
        self.seed = int(measure.get("seed", 42))
        self.full_check_max_n = int(oracle.get("full_check_max_n", 512))
        self.sample_rows = int(oracle.get("sample_rows", 32))
        self.repeats = 10
        self.peak_gflops = 0.0  # measured by sgemm_gflops() before the cases
        self.last_ok: dict[str, tuple[float, float]] = {}  # variant -> (flops, seconds per run)
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.sdpa_kernel = sdpa_kernel
        self.backends = {"math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                         "flash": SDPBackend.FLASH_ATTENTION,
                         "cudnn": getattr(SDPBackend, "CUDNN_ATTENTION", None)}

    # -- settings and peaks ----------------------------------------------------------------------
    def tf32_settings(self) -> dict:
        """TF32 switches as found: the legacy ones and, from PyTorch 2.9, fp32_precision."""
        import warnings
        torch = self.torch
        readers = {
            "torch.backends.cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
            "torch.backends.cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
            "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision,
            "torch.backends.cuda.matmul.fp32_precision": lambda: torch.backends.cuda.matmul.fp32_precision,
            "torch.backends.cudnn.fp32_precision": lambda: torch.backends.cudnn.fp32_precision,
        }
        settings = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # 2.9+ warns that the legacy switches will go
            for name, read in readers.items():
                try:
                    value = read()
                    settings[name] = value if isinstance(value, (bool, str)) else str(value)
                except Exception as error:  # absent in this version, or refused
                    settings[name] = f"unavailable ({type(error).__name__})"
        return settings

    def strict_fp32(self) -> dict:
        """Switch TF32 off, so fp32 stays fp32 (PyTorch allows it for cuDNN by default); return
        the settings found and the ones used."""
        import warnings
        torch = self.torch
        found = self.tf32_settings()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # the 2.9+ switches
                switches = [(torch.backends.cuda.matmul, "fp32_precision", "ieee"),
                            (torch.backends.cudnn, "fp32_precision", "ieee")]
            else:
                switches = [(torch.backends.cuda.matmul, "allow_tf32", False),
                            (torch.backends.cudnn, "allow_tf32", False)]
            for owner, name, value in switches:
                try:
                    setattr(owner, name, value)
                except Exception as error:
                    print(f"{SCRIPT}: warning: cannot set {name}: {one_line(error)}", file=sys.stderr)
            try:
                torch.set_float32_matmul_precision("highest")
            except Exception as error:
                print(f"{SCRIPT}: warning: set_float32_matmul_precision: {one_line(error)}", file=sys.stderr)
        return {"found": found, "used": self.tf32_settings()}

    def synchronize(self):
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def time_calls(self, call, runs: int) -> list[float]:
        torch = self.torch
        times = []
        if self.device == "cuda":
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(runs)]
            for start, end in events:
                start.record()
                call()
                end.record()
            torch.cuda.synchronize()
            times = [start.elapsed_time(end) for start, end in events]
        else:
            for _ in range(runs):
                begin = time.perf_counter()
                call()
                times.append((time.perf_counter() - begin) * 1e3)
        return times

    def sgemm_gflops(self) -> float:
        """fp32 (no TF32) matrix product through torch.mm: the peak the records are against."""
        torch = self.torch
        n = SGEMM_SIZE[self.device]
        a = torch.randn(n, n, device=self.device)
        b = torch.randn(n, n, device=self.device)
        for _ in range(2):
            torch.mm(a, b)
        self.synchronize()
        median_ms = statistics.median(self.time_calls(lambda: torch.mm(a, b), 5))
        del a, b
        return 2.0 * n**3 / (median_ms / 1e3) / 1e9

    # -- one case -------------------------------------------------------------------------------
    def inputs(self, s: Shape, index: int):
        torch = self.torch
        generator = torch.Generator(device=self.device)
        generator.manual_seed(self.seed * 1000003 + index)
        def tensor(heads, seq, dim):
            return torch.randn(s.batch, heads, seq, dim, device=self.device, generator=generator)
        return tensor(s.heads, s.seq_q, s.d_k), tensor(s.kv_heads, s.seq_kv, s.d_k), tensor(s.kv_heads, s.seq_kv, s.d_v)

    def end_aligned_mask(self, s: Shape):
        """Row i sees keys 0 .. i + seq_kv - seq_q: the mask aligned to the end."""
        torch = self.torch
        rows = torch.arange(s.seq_q, device=self.device).unsqueeze(1)
        cols = torch.arange(s.seq_kv, device=self.device).unsqueeze(0)
        return cols <= rows + (s.seq_kv - s.seq_q)

    def reference_rows(self, s: Shape, q, k, v, picks):
        """float64 outputs of the given (batch, head, row) triples."""
        torch = self.torch
        group = s.heads // s.kv_heads
        scale = 1.0 / math.sqrt(s.d_k)
        rows = []
        for b, h, i in picks:
            scores = (k[b, h // group].double() @ q[b, h, i].double()) * scale
            if s.causal:
                scores[i + s.seq_kv - s.seq_q + 1:] = -math.inf
            rows.append(torch.softmax(scores, dim=0) @ v[b, h // group].double())
        return torch.stack(rows)

    def check(self, s: Shape, q, k, v, out) -> dict:
        torch = self.torch
        # Every row when the shape is small enough to hold a float64 reference of it whole.
        full = (s.seq_q <= self.full_check_max_n and s.seq_kv <= self.full_check_max_n
                and s.batch * s.heads * s.seq_q * s.seq_kv <= 2**26)
        if full:
            # Whole tensors at once, written out as the equation: not through SDPA, whose math
            # backend is one of the things being checked.
            group = s.heads // s.kv_heads
            qq, kk, vv = q.double(), k.double(), v.double()
            if group > 1:
                kk, vv = kk.repeat_interleave(group, dim=1), vv.repeat_interleave(group, dim=1)
            scores = (qq @ kk.transpose(-1, -2)) * (1.0 / math.sqrt(s.d_k))
            if s.causal:
                scores = scores.masked_fill(self.end_aligned_mask(s).logical_not(), -math.inf)
            reference = torch.softmax(scores, dim=-1) @ vv
            got = out.double()
        else:
            # Sampled (batch, head, row) triples, the first and last rows among them.
            generator = torch.Generator().manual_seed(self.seed)
            count = self.sample_rows
            bs = torch.randint(s.batch, (count,), generator=generator).tolist()
            hs = torch.randint(s.heads, (count,), generator=generator).tolist()
            rows = torch.randint(s.seq_q, (count,), generator=generator).tolist()
            rows[0], rows[-1] = 0, s.seq_q - 1
            picks = list(zip(bs, hs, rows))
            reference = self.reference_rows(s, q, k, v, picks)
            got = torch.stack([out[b, h, i].double() for b, h, i in picks])
        difference = got - reference
        norm = torch.linalg.vector_norm(reference).item()
        return {"max_abs_err": difference.abs().max().item(),
                "rel_l2_err": torch.linalg.vector_norm(difference).item() / norm if norm > 0 else math.inf,
                "sampled": not full,
                "finite": bool(torch.isfinite(got).all().item())}

    def predicted_seconds(self, variant: str, flops: float) -> float | None:
        if variant not in self.last_ok:
            return None
        seen_flops, per_run = self.last_ok[variant]
        per_run *= flops / seen_flops
        runs = max(self.repeats, self.min_time_s / per_run if per_run > 0 else self.repeats)
        return per_run * (self.warmup + 2 + runs)

    def run_case(self, index: int, backend: str, s: Shape) -> dict:
        torch = self.torch
        variant = f"torch_{backend}"
        threads = torch.get_num_threads() if self.device == "cpu" else 0
        def record(**fields):
            return make_record(index, variant, self.device, s, threads=threads,
                               distribution="normal", **fields)
        if self.device != "cuda" and backend != "math":
            return record(status="skipped", reason=f"the {backend} backend needs CUDA")
        if self.backends.get(backend) is None:
            return record(status="skipped", reason=f"this torch has no {backend} backend")
        flops, _, min_bytes = count_work(s)
        # The math backend materialises the scores, the weights and (causal) the mask.
        scores = float(s.batch * s.heads * s.seq_q * s.seq_kv) * 4
        needed = min_bytes + (3 * scores if backend == "math" else 0)
        if needed > self.memory_cap_bytes:
            return record(status="skipped",
                          reason=f"needs about {needed / 2**30:.1f} GiB, over memory_cap_gb "
                                 f"{self.memory_cap_bytes / 2**30:g}")
        predicted = self.predicted_seconds(variant, flops)
        if predicted is not None and predicted > self.case_budget_s:
            return record(status="skipped",
                          reason=f"predicted {predicted:.1f}s > case_budget_s {self.case_budget_s:g} "
                                 "(scaled from the previous case by FLOPs)")

        q = k = v = out = None
        try:
            q, k, v = self.inputs(s, index)
            call, note = self.sdpa_call(backend, s, q, k, v)
            if call is None:
                return record(status="skipped", reason=note)
            self.synchronize()
            if self.device == "cuda":
                torch.cuda.reset_peak_memory_stats()
                baseline = torch.cuda.memory_allocated()
            out = call()
            self.synchronize()
            workspace = None
            if self.device == "cuda":
                workspace = max(0, torch.cuda.max_memory_allocated() - baseline
                                - out.numel() * out.element_size())
            oracle = self.check(s, q, k, v, out)
            if not oracle["finite"] or not oracle["rel_l2_err"] <= REL_L2_TOLERANCE:
                return record(status="failed", oracle=oracle, workspace_bytes=workspace,
                              reason=f"oracle: rel L2 {oracle['rel_l2_err']:.2g} above {REL_L2_TOLERANCE:g}"
                                     + ("" if oracle["finite"] else " (NaN or Inf in the output)"))
            out = None
            for _ in range(max(0, self.warmup - 1)):
                call()
            first = statistics.median(self.time_calls(call, 3))
            runs = max(self.repeats, min(1000, math.ceil(self.min_time_s * 1e3 / max(first, 1e-3))))
            timing = Timing(self.time_calls(call, runs))
            self.last_ok[variant] = (flops, timing.median / 1e3)
            return record(timing=timing, workspace_bytes=workspace, oracle=oracle,
                          peak_gflops=self.peak_gflops, reason=note)
        except torch.cuda.OutOfMemoryError as error:
            return record(status="skipped", reason="out of memory: " + one_line(error))
        except RuntimeError as error:
            text = one_line(error)
            if "out of memory" in text.lower():
                return record(status="skipped", reason="out of memory: " + text)
            return record(status="failed", reason=text)
        finally:
            del q, k, v, out
            if self.device == "cuda":
                torch.cuda.empty_cache()

    def sdpa_call(self, backend: str, s: Shape, q, k, v):
        """(call, note): a no-argument function running this backend's SDPA on q, k, v, and
        how GQA and the mask were passed; (None, why) when the backend refuses the case."""
        import warnings
        torch = self.torch
        sdpa = torch.nn.functional.scaled_dot_product_attention
        kernel = self.backends[backend]
        if not s.causal:
            mask_args = {}
        elif s.seq_q == s.seq_kv:
            mask_args = {"is_causal": True}
        else:
            mask_args = {"attn_mask": self.end_aligned_mask(s)}  # is_causal would align top-left
        group = s.heads // s.kv_heads
        if group == 1:
            attempts = [("", lambda: (k, v, mask_args))]
        else:
            attempts = [("GQA through enable_gqa=True", lambda: (k, v, {**mask_args, "enable_gqa": True})),
                        ("GQA through K/V repeat_interleave (the backend refused enable_gqa)",
                         lambda: (k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1),
                                  mask_args))]
        reasons = []
        for how, arguments in attempts:
            kk, vv, extra = arguments()

            def call(kk=kk, vv=vv, extra=extra):
                with self.sdpa_kernel(kernel):
                    return sdpa(q, kk, vv, **extra)

            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    call()
                    self.synchronize()
                except RuntimeError as error:
                    if "out of memory" in str(error).lower():
                        raise
                    # PyTorch says why in warnings, then raises "No available kernel".
                    why = "; ".join(one_line(w.message) for w in caught) or one_line(error)
                    reasons.append(why)
                    continue
            notes = [how] if how else []
            if s.causal and s.seq_q != s.seq_kv:
                notes.append("causal as an explicit end-aligned boolean mask")
            return call, "; ".join(notes)
        return None, f"torch {backend} backend refused fp32 {describe(s)}: " + " | ".join(reasons)


def one_line(text) -> str:
    return " ".join(str(text).split())[:400]


def manifest_for(torch, args, config: dict, config_text: str, peer: Peer | None, settings: dict,
                 peak: float) -> dict:
    cuda = args.device == "cuda"
    gpu = None
    if cuda:
        properties = torch.cuda.get_device_properties(0)
        gpu = {"name": properties.name, "sm_count": properties.multi_processor_count,
               "compute_capability": properties.major * 10 + properties.minor,
               "memory_bytes": properties.total_memory,
               "driver_version": driver_version(),
               "runtime_version": torch.version.cuda,
               "sgemm_gflops": peak, "tf32_gemm_gflops": None, "copy_gbps": None}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    model = cpu_model()
    return {
        "name": f"torch-{config['name']}",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join([SCRIPT, *sys.argv[1:]]),
        "git_commit": git_commit(),
        "shard": "",
        "config": config,
        "config_text": config_text,
        "config_overrides": args.set,
        "build": {"compiler": f"PyTorch {torch.__version__}", "torch": torch.__version__,
                  "cuda": torch.version.cuda,
                  "cudnn": torch.backends.cudnn.version() if cuda else None,
                  "python": platform.python_version(), "flags": "", "build_type": "",
                  "cuda_architectures": ""},
        "machine": {"description": f"{model} ({cores} cores)", "cpu_model": model, "cores": cores,
                    "threads": torch.get_num_threads(), "hostname": platform.node()},
        "peaks": {"torch_sgemm_gflops": peak, "device": args.device},
        "gpu": gpu,
        "peer": {
            "library": "torch.nn.functional.scaled_dot_product_attention",
            "backends": args.backends,
            "inputs": "fp32, standard normal, [batch, heads, seq, dim] contiguous",
            "tf32_settings_found": settings["found"],
            "tf32_settings_used": settings["used"],
            "tf32": "off: fp32 stays fp32 (strict IEEE fp32 matrix products)",
            "fp32_backends": "math and efficient take fp32; flash and cudnn only fp16/bf16 "
                             "(recorded as skipped with PyTorch's reason)",
            "causal": "is_causal=True when seq_q == seq_kv; otherwise an explicit boolean mask "
                      "aligned to the end (PyTorch's is_causal aligns to the top-left)",
            "gqa": "enable_gqa=True; where a backend refuses it, K/V repeat_interleave'd before "
                   "timing (the record's reason says which)",
            "timing": ("CUDA events around each call" if cuda else "perf_counter around each call")
                      + f", after warm-up; at least {peer.repeats if peer else 10} runs and "
                        "measure.min_time_s; median, min, max, cv",
            "workspace": "torch.cuda.max_memory_allocated during one call, less inputs and output",
            "peak": f"torch.mm of two {SGEMM_SIZE[args.device]}-square fp32 matrices"
                    + (", TF32 off" if cuda else ""),
            "oracle_tolerance_rel_l2": REL_L2_TOLERANCE,
        },
    }


def driver_version() -> str | None:
    try:
        result = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=20)
        return result.stdout.strip().splitlines()[0] if result.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


# ----------------------------------------------------------------------------------------------
# Command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=SCRIPT, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="attnbench sweep config (TOML), e.g. configs/gpu-scaling.toml")
    parser.add_argument("--out", help="results folder (default: results/torch-<name>-<UTC time>)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cuda (default), or cpu: the math backend only, for testing")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help=f"comma-separated, of {', '.join(BACKENDS)} (default: all)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, as attnbench run --set does (repeatable)")
    parser.add_argument("--repeats", type=int, default=10, help="timed runs per case, at least (default 10)")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in args.backends if b not in BACKENDS]
    if unknown or not args.backends:
        parser.error(f"--backends: unknown backend {unknown[0] if unknown else '(none)'} (known: {', '.join(BACKENDS)})")
    try:
        config, config_text = load_config(args.config, args.set)
        shapes = expand_shapes(config["axes"])
        if left_out(config["axes"]):
            print(f"{SCRIPT}: note: leaves out {', '.join(left_out(config['axes']))} "
                  "(it times none and causal, without modifiers)", file=sys.stderr)
    except ConfigError as error:
        print(f"{SCRIPT}: error: {one_line(error)}", file=sys.stderr)
        return 2
    try:
        import torch
    except Exception as error:  # ImportError, or a broken install raising anything else
        print(f"{SCRIPT}: error: cannot import torch ({one_line(error)})", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"{SCRIPT}: error: torch {torch.__version__} sees no CUDA device (use --device cpu)",
              file=sys.stderr)
        return 2

    peer = Peer(torch, args.device, config)
    peer.repeats = max(1, args.repeats)
    settings = peer.strict_fp32()
    print(f"{SCRIPT}: torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{'GPU ' + torch.cuda.get_device_name(0) if args.device == 'cuda' else 'CPU'}; "
          f"TF32 settings found {settings['found']}, used {settings['used']}")
    peer.peak_gflops = peer.sgemm_gflops()
    print(f"{SCRIPT}: fp32 torch.mm peak {peer.peak_gflops:.0f} GFLOP/s")
    out = Path(args.out) if args.out else Path("results") / (
        f"torch-{config['name']}-{datetime.datetime.now(datetime.timezone.utc):%Y%m%d-%H%M%S}")
    try:
        writer = ResultsWriter(out, manifest_for(torch, args, config, config_text, peer, settings,
                                                 peer.peak_gflops))
    except (ConfigError, OSError) as error:
        print(f"{SCRIPT}: error: {one_line(error)}", file=sys.stderr)
        return 2
    total = len(shapes) * len(args.backends)
    print(f"{config['name']}: {total} cases ({len(args.backends)} backends x {len(shapes)} shapes) -> {out}")
    failed = 0
    index = 0
    for backend in args.backends:
        for shape in shapes:
            try:
                record = peer.run_case(index, backend, shape)
            except Exception as error:  # a bug or an API change: record it, go on
                record = make_record(index, f"torch_{backend}", args.device, shape, status="failed",
                                     reason=f"{type(error).__name__}: {one_line(error)}")
            writer.append(record)
            failed += record["status"] == "failed"
            timing = (f"{record['time_ms_median']:10.4g} ms {record['gflops']:10.1f} GFLOP/s"
                      if record["status"] == "ok" else record["reason"][:100])
            print(f"[{index + 1}/{total}] {record['variant']:<16} {describe(shape):<36} "
                  f"{record['status']:<7} {timing}", flush=True)
            index += 1
    counts = {s: sum(r["status"] == s for r in writer.records) for s in ("ok", "skipped", "failed")}
    print(f"{counts['ok']} ok, {counts['skipped']} skipped, {counts['failed']} failed -> {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
