#!/usr/bin/env python3
"""Time PyTorch's torch.nn.functional.scaled_dot_product_attention on the shapes of an
attnbench sweep config, per SDPA backend, and write the numbers as an attnbench results
folder (manifest.json, cases.jsonl, summary.csv), so the plot, table and compare scripts
put them beside attnbench's own variants.

    python3 scripts/peers/torch_sdpa.py configs/gpu-scaling.toml --out results/h200-torch-gpu-scaling
    python3 scripts/peers/torch_sdpa.py configs/quick.toml --device cpu --set axes.seq_len=[64,128]

Everything but the PyTorch calls is attnbench's own, so the peer holds no copy of its rules:
`attnbench plan CONFIG --json` gives the shapes (dtype, layout, mask, FLOPs, bytes, input seed;
which fields are the shape's, handed back to prepare and append as given; and which cases the
peer leaves out, and why);
`attnbench append --init` makes the results folder with the harness's manifest (machine, build,
config), the peer's description added; before each case `attnbench prepare` skips it as a sweep
would (measure.memory_cap_gb; measure.case_budget_s, predicted from the variant's last ok
record) or writes the inputs a sweep draws for it (measure.distribution, rounded to the dtype)
and each query row's visible keys; after it `attnbench append` runs the harness's float64
oracle on the output, with the harness's tolerance, and turns the measurement into a record
(GFLOP/s, % of peak, case id, every field), appended to cases.jsonl and summary.csv as soon as
the case finishes, so a killed run keeps what it finished. The binary is --attnbench, else
$ATTNBENCH_BINARY, else build/attnbench in this checkout.

What it does, so the numbers can be compared fairly:
- One variant per backend: torch_math, torch_efficient (memory-efficient), torch_cudnn,
  torch_flash, each forced with torch.nn.attention.sdpa_kernel, on every shape of the plan.
- dtype: each case runs in the plan's dtype (fp32, bf16 or fp16), on the inputs attnbench
  draws for it (already rounded to the dtype, so the conversion is exact). flash and cudnn take only bf16/fp16 on the
  GPU, so on fp32 they are recorded as skipped with PyTorch's own reason. On the CPU
  (--device cpu) every backend PyTorch accepts there is timed (math, and flash: PyTorch's CPU
  fused kernel); the others are recorded as skipped with PyTorch's reason.
- layout: bhsd tensors are [batch, heads, seq, dim] contiguous; bshd tensors are
  [batch, seq, heads, dim] contiguous and reach SDPA as .transpose(1, 2) views (no copy).
- TF32 is switched off (torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
  = False, or fp32_precision "ieee" from PyTorch 2.9; float32 matmul precision "highest"); the
  values found are recorded in the manifest.
- Causal: is_causal=True when seq_q == seq_kv. PyTorch's is_causal aligns the mask to the
  top-left; attnbench aligns it to the end (as FlashAttention does), so when seq_q < seq_kv
  an explicit boolean mask aligned to the end is passed instead (backends that take no mask
  are then skipped with the reason).
- Other masks (window:L, prefix:P, documents with the plan's doc_lens; harness/core/mask.h) go in
  as an explicit boolean attn_mask of the keys `attnbench prepare` says each row sees: SDPA computes every pair and masks
  afterwards, so its time does not follow the mask's density (that is the comparison).
- GQA (kv_heads < heads): enable_gqa=True; a backend that refuses it gets K and V expanded
  with repeat_interleave before timing, and the record's reason says so.
- Timing: CUDA events around each call (perf_counter on the CPU), after warm-up runs, under
  attnbench's stopping rule (stopping_rule.py: repetitions of measure.min_time_s, at least
  measure.repetitions of them and --repeats calls, more until the median's 95% interval is
  within measure.target_rel_ci or measure.max_time_s is spent; the record says whether it was).
- Interleaving (--interleave VARIANT): after each shape's PyTorch cases, attnbench times VARIANT
  on the same case (`attnbench run --cases I --resume` into the folder beside the peer's), so the
  two alternate case by case under the same noise; `attnbench-compare` then sets them side by
  side (the manifests name each other). workspace_bytes: the memory the call
  allocated beyond its inputs and output (torch.cuda.max_memory_allocated). A torch.mm in each
  dtype (fp32 with TF32 off, bf16, fp16) is timed at the start and kept in the manifest's peaks as
  torch_mm_<dtype>_gflops, and each record brings it; on the CPU, % of peak reads as every
  harness record's does, against the harness's checks that `append --init` took (one roof per
  dtype), so PyTorch and attnbench share one scale.
- Accuracy: the output (after one untimed call) goes to `attnbench append`, which checks it
  against the harness's float64 reference (all rows for small shapes, sampled rows for large
  ones) with the harness's tolerance (harness/core/tolerance.h); a case the oracle fails is
  recorded as failed.
- Cases the plan's peer_skip_reason names are left out, with a message (the axes table's peer
  column: ALiBi and soft-capping, which SDPA takes no argument for; quantized KV caches, which no
  SDPA kernel reads with their scales).
- Backward (pass bwd, fwd_bwd) and decode (seq_q < seq_kv, ragged kv_lens, paged kv_cache): see
  torch_backward.py (the forward untimed for bwd, gradients checked against PyTorch's float64
  math backend; ragged batches one call per sequence; paged caches read contiguous).
- A case attnbench skips (over measure.memory_cap_gb, counting the math backend's scores,
  weights and mask as its workspace; or predicted over measure.case_budget_s), or out of memory,
  is recorded as skipped with the reason.

Exit status: 0 when every case is ok or skipped; 1 when a case failed; 2 on a bad config, when
attnbench cannot be run or refuses a measurement, or when torch cannot be imported (one line on
stderr).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Beside this file: Python puts a script's own folder first on its path.
import stopping_rule
import torch_backward

BACKENDS = ("math", "efficient", "cudnn", "flash")
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
# The matrix product the peaks are measured with: n x n times n x n.
MM_SIZE = {"cuda": 8192, "cpu": 2048}
SCRIPT = Path(__file__).name
REPO = Path(__file__).resolve().parents[2]


class PeerError(Exception):
    """Something that stops the run before or between cases; the message is one line."""


def one_line(text) -> str:
    return " ".join(str(text).split())[:400]


def peak_name(dtype: str) -> str:
    """The manifest's peaks key that a case of this dtype is read against."""
    return f"torch_mm_{dtype}_gflops"


# ----------------------------------------------------------------------------------------------
# attnbench: the plan in, the records out


def default_binary() -> Path:
    return Path(os.environ.get("ATTNBENCH_BINARY") or REPO / "build" / "attnbench")


def run_binary(binary: Path, command: str, arguments: list[str], stdin: str = "", timeout=None) -> str:
    """`attnbench COMMAND ARGUMENTS` with `stdin`; its stdout, or PeerError with its one-line
    error."""
    try:
        result = subprocess.run([str(binary), command, *arguments], input=stdin, capture_output=True,
                                text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as error:
        raise PeerError(f"cannot run {binary} ({one_line(error)}); build it or pass --attnbench") from None
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or [f"exit {result.returncode}"]
        raise PeerError(f"attnbench {command}: " + lines[-1].removeprefix("attnbench: error: "))
    return result.stdout


def read_plan(binary: Path, config: str, overrides: list[str], variant: str = "naive") -> dict:
    """`attnbench plan CONFIG --json`, with the --set overrides. One variant is listed (naive:
    it takes every shape), so each (shape, dtype, layout) appears once, in sweep order, with the
    index `attnbench run --variants VARIANT --cases` knows it by."""
    arguments = [config, "--json", "--variants", variant]
    for assignment in overrides:
        arguments += ["--set", assignment]
    return json.loads(run_binary(binary, "plan", arguments, timeout=120))


@dataclasses.dataclass(frozen=True)
class Shape:
    """One case of the plan: its shape, dtype and layout, and what attnbench counted."""
    batch: int
    heads: int
    kv_heads: int
    seq_q: int
    seq_kv: int
    d_k: int
    d_v: int
    causal: bool
    dtype: str
    layout: str
    flops: float
    bytes: float
    description: str
    mask: str = "none"  # as attnbench writes it: none, causal, window:L, prefix:P, documents:K
    doc_lens: tuple | None = None  # documents: the lengths the plan drew
    seed: int = 0  # the seed attnbench draws the inputs from
    pass_: str = "fwd"  # the plan's "pass": fwd, bwd or fwd_bwd
    kv_cache: str = "contiguous"  # or paged:N
    kv_lens: tuple | None = None  # a ragged batch: each sequence's cache length
    index: int = 0  # the case's index in the plan (`attnbench run --cases`)
    # The case's shape fields as the plan gives them (shape_fields()); not part of equality.
    fields: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def shape_fields(self) -> dict:
        """The shape as `attnbench append` and `prepare` read it: the case's fields that the
        plan names as its shape's (`plan --json`'s shape_fields), as the plan gives them."""
        return dict(self.fields)

    @property
    def plain(self) -> bool:
        """No mask beyond what is_causal says: is_causal aligns top-left, attnbench's causal mask
        to the end of each sequence's cache, the same only where every sequence holds seq_q keys."""
        return self.mask == "none" or (
            self.mask == "causal" and self.seq_q == self.seq_kv and not self.kv_lens)


def shapes_of(plan: dict) -> list[Shape]:
    """The plan's cases the peer times. Which it leaves out, and why, is the plan's
    `peer_skip_reason` (the axes table's peer column: score modifiers SDPA has no argument for, a
    quantized KV cache it cannot read)."""
    names = [field.name for field in dataclasses.fields(Shape)]
    if "shape_fields" not in plan or any("peer_skip_reason" not in case for case in plan["cases"]):
        raise PeerError("the plan names no shape_fields or peer_skip_reason: attnbench is older "
                        "than this script (rebuild it: cmake --build build)")
    left_out = collections.Counter(case["peer_skip_reason"] for case in plan["cases"]
                                   if case["peer_skip_reason"])
    for reason, count in left_out.items():
        print(f"{SCRIPT}: leaving out {count} cases ({reason})", file=sys.stderr)
    shapes = []
    for case in plan["cases"]:
        if not case["peer_skip_reason"]:
            fields = {name: case.get(name) for name in names
                      if name not in ("pass_", "kv_cache", "kv_lens", "fields")}
            fields["pass_"] = torch_backward.pass_of(case)
            fields["kv_cache"] = case.get("kv_cache") or "contiguous"
            fields["kv_lens"] = tuple(case["kv_lens"]) if case.get("kv_lens") else None
            fields["mask"] = case.get("mask") or ("causal" if case["causal"] else "none")
            fields["doc_lens"] = tuple(case["doc_lens"]) if case.get("doc_lens") else None
            fields["fields"] = {name: case[name] for name in plan["shape_fields"]}
            shapes.append(Shape(**fields))
    return shapes


def measurement(index: int, variant: str, device: str, s: Shape, *, status: str = "ok",
                reason: str = "", times_ms: list[float] | None = None,
                workspace_bytes: int | None = None, peak_gflops: float | None = None,
                output: str | None = None, threads: int = 0, isa: str = "",
                distribution: str = "normal", target_rel_ci: float | None = None) -> dict:
    """What `attnbench append` makes a record of: one case's times (milliseconds per call) and
    its output, which append checks with the oracle; GFLOP/s, bytes and % of peak are the
    harness's to work out."""
    return {"index": index, "variant": variant, "device": device, **s.shape_fields(),
            "precision": "fp32", "status": status, "reason": reason, "times_ms": times_ms or [],
            "workspace_bytes": workspace_bytes, "peak_gflops": peak_gflops,
            "peak_name": peak_name(s.dtype), "output": output, "seed": s.seed, "threads": threads,
            "distribution": distribution, "code_path": isa,
            **({} if target_rel_ci is None else {"target_rel_ci": target_rel_ci})}


class Attnbench:
    """The results folder, through the binary: made with `append --init`, each case prepared with
    `prepare` and recorded with `append`, run once per measurement, so each record is on disk
    (synced) before the next case starts and a killed run keeps every case it finished."""

    def __init__(self, binary: Path, folder: Path):
        self.binary = binary
        self.folder = folder

    def init(self, config: str, overrides: list[str], device: str, description: dict) -> None:
        arguments = [str(self.folder), "--init", "--config", config, "--device", device]
        for assignment in overrides:
            arguments += ["--set", assignment]
        run_binary(self.binary, "append", arguments, json.dumps(description, allow_nan=False))

    def prepare(self, variant: str, s: Shape, workspace_bytes: float, inputs_dir: Path) -> dict:
        """{"skip_reason"} for a case attnbench skips; else also the paths of q, k, v (.npy) and
        "visible_keys": per sequence, each query row's [first, last) key range (null without a
        mask)."""
        request = {"variant": variant, **s.shape_fields(), "seed": s.seed, "workspace_bytes": workspace_bytes}
        return json.loads(run_binary(self.binary, "prepare", [str(self.folder), "--inputs-dir", str(inputs_dir)],
                                     json.dumps(request)))

    def append(self, measured: dict) -> dict:
        """The record attnbench made of a measurement."""
        lines = run_binary(self.binary, "append", [str(self.folder)],
                           json.dumps(measured, allow_nan=False) + "\n").strip().splitlines()
        if len(lines) != 1:
            raise PeerError(f"attnbench append: printed {len(lines)} records for one measurement")
        return json.loads(lines[0])


# ----------------------------------------------------------------------------------------------
# PyTorch: imported only when timing, so the rest is usable and testable without it


# The TF32 switches strict_fp32 turns off, each one assignment.
def ieee_matmul(torch):
    torch.backends.cuda.matmul.fp32_precision = "ieee"


def ieee_cudnn(torch):
    torch.backends.cudnn.fp32_precision = "ieee"


def no_tf32_matmul(torch):
    torch.backends.cuda.matmul.allow_tf32 = False


def no_tf32_cudnn(torch):
    torch.backends.cudnn.allow_tf32 = False


def cpu_capability(torch) -> str:
    """The code path PyTorch's CPU kernels chose at run time (e.g. AVX512): the record's isa."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except AttributeError:  # older PyTorch
        return ""


class Peer:
    def __init__(self, torch, device: str, plan: dict, repeats: int):
        self.torch = torch
        self.device = device
        measure = plan["measure"]
        self.warmup = int(measure["warmup"])
        self.rule = stopping_rule.StoppingRule.of_plan(plan, repeats)
        self.distribution = measure["distribution"]
        self.tolerances = plan.get("tolerances") or {}  # dtype -> {"rel_l2": ...}, as run applies
        self.repeats = max(1, repeats)
        self.threads = torch.get_num_threads() if device == "cpu" else 0
        self.isa = cpu_capability(torch) if device == "cpu" else ""
        self.peaks: dict[str, float] = {}  # dtype -> torch.mm GFLOP/s, from measure_peaks()
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.sdpa_kernel = sdpa_kernel
        self.backends = {"math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                         "flash": SDPBackend.FLASH_ATTENTION,
                         "cudnn": getattr(SDPBackend, "CUDNN_ATTENTION", None)}

    def torch_dtype(self, dtype: str):
        return getattr(self.torch, TORCH_DTYPES[dtype])

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
                switches = {"torch.backends.cuda.matmul.fp32_precision": ieee_matmul,
                            "torch.backends.cudnn.fp32_precision": ieee_cudnn}
            else:
                switches = {"torch.backends.cuda.matmul.allow_tf32": no_tf32_matmul,
                            "torch.backends.cudnn.allow_tf32": no_tf32_cudnn}
            for name, switch in switches.items():
                try:
                    switch(torch)
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

    def measure_peaks(self, dtypes) -> None:
        for dtype in dtypes:
            self.peaks[dtype] = self.mm_gflops(dtype)

    def mm_gflops(self, dtype: str) -> float:
        """A torch.mm in this dtype (fp32 without TF32): the peak its cases are read against."""
        torch = self.torch
        n = MM_SIZE[self.device]
        a = torch.randn(n, n, device=self.device).to(self.torch_dtype(dtype))
        b = torch.randn(n, n, device=self.device).to(self.torch_dtype(dtype))
        for _ in range(2):
            torch.mm(a, b)
        self.synchronize()
        median_ms = statistics.median(self.time_calls(lambda: torch.mm(a, b), 5))
        del a, b
        return 2.0 * n**3 / (median_ms / 1e3) / 1e9

    # -- one case -------------------------------------------------------------------------------
    def measured(self, index: int, variant: str, s: Shape, **fields) -> dict:
        """A measurement of one case on this machine, against its dtype's peak."""
        return measurement(index, variant, self.device, s, peak_gflops=self.peaks.get(s.dtype),
                           threads=self.threads, isa=self.isa, distribution=self.distribution, **fields)

    def run_case(self, index: int, backend: str, s: Shape, attnbench: Attnbench, scratch: Path) -> dict:
        """One backend on one case: prepared by attnbench (skipped, or its inputs written to
        `scratch`), called once untimed with its output saved there for append's oracle, then
        timed."""
        torch = self.torch
        variant = f"torch_{backend}"

        def result(**fields):
            return self.measured(index, variant, s, **fields)

        if self.backends.get(backend) is None:
            return result(status="skipped", reason=f"this torch has no {backend} backend")
        # The math backend materialises the scores, the weights and the mask, in fp32 at most.
        scores = float(s.batch * s.heads * s.seq_q * s.seq_kv) * 4
        prepared = attnbench.prepare(variant, s, 3 * scores if backend == "math" else 0, scratch)
        if prepared["skip_reason"]:
            return result(status="skipped", reason=prepared["skip_reason"])

        q = k = v = out = None
        try:
            q, k, v = (self.load_input(s, prepared[name]) for name in ("q", "k", "v"))
            masks = self.sequence_masks(s, prepared["visible_keys"])
            call, note = self.sdpa_call(backend, s, q, k, v, masks)
            if call is None:
                return result(status="skipped", reason=note)
            notes = [n for n in (note, *torch_backward.cache_notes(s.kv_cache, s.kv_lens)) if n]
            forward_output = call  # what append's oracle checks: the forward's output
            if s.kv_lens or s.pass_ != "fwd":
                forward = call.forward
                forward_output = lambda: torch_backward.per_sequence(torch, forward, q, k, v, s.kv_lens)
                call, verdict = self.pass_call(backend, s, forward, q, k, v, masks)
                if verdict:
                    return result(status="failed", reason=verdict)
                notes.append(torch_backward.PASS_NOTES[s.pass_])
            note = "; ".join(notes)
            self.synchronize()
            if self.device == "cuda":
                torch.cuda.reset_peak_memory_stats()
                baseline = torch.cuda.memory_allocated()
            out = call()  # the timed call's memory: the forward's, or the backward's
            self.synchronize()
            workspace = None
            if self.device == "cuda":
                workspace = max(0, torch.cuda.max_memory_allocated() - baseline
                                - torch_backward.result_bytes(out))
            out = forward_output() if forward_output is not call else out
            output = scratch / "o.npy"
            import numpy
            numpy.save(output, out.to(torch.float32).cpu().numpy())
            out = None
            for _ in range(max(0, self.warmup - 1)):
                call()
            times = self.rule.sample(lambda calls: self.time_calls(call, calls))
            return result(times_ms=times, workspace_bytes=workspace, output=str(output), reason=note,
                          target_rel_ci=self.rule.target_rel_ci)
        except torch.cuda.OutOfMemoryError as error:
            return result(status="skipped", reason="out of memory: " + one_line(error))
        except RuntimeError as error:
            text = one_line(error)
            if "out of memory" in text.lower():
                return result(status="skipped", reason="out of memory: " + text)
            return result(status="failed", reason=text)
        finally:
            del q, k, v, out
            if self.device == "cuda":
                torch.cuda.empty_cache()

    def pass_call(self, backend: str, s: Shape, forward, q, k, v, masks):
        """(call, verdict): the call to time for the case's pass over its ragged batch (see
        torch_backward.py), and "" or why its gradients fail the float64 check (masked by
        `masks`, sequence_masks', where is_causal does not say the mask)."""
        torch = self.torch

        def ragged(qq, kk, vv):
            return torch_backward.per_sequence(torch, forward, qq, kk, vv, s.kv_lens)

        call, gradients = torch_backward.timed_call(torch, ragged, q, k, v, s.pass_)
        if gradients is None:
            return call, ""

        def math64(qq, kk, vv):  # the float64 math backend, on the CPU, same GQA and mask
            group = s.heads // s.kv_heads
            mask = {} if s.plain else {"attn_mask": masks[kk.shape[-2]].to("cpu")}
            kk, vv = kk.repeat_interleave(group, dim=1), vv.repeat_interleave(group, dim=1)
            with self.sdpa_kernel(self.backends["math"]):
                return torch.nn.functional.scaled_dot_product_attention(
                    qq, kk, vv, is_causal=s.plain and s.mask == "causal", **mask)

        reference = torch_backward.reference_gradients(
            torch, lambda qq, kk, vv: torch_backward.per_sequence(torch, math64, qq, kk, vv, s.kv_lens), q, k, v)
        errors = torch_backward.gradient_errors(torch, gradients(), reference)
        tolerance = float(self.tolerances.get(s.dtype, {}).get("rel_l2", 1e-5))
        return call, torch_backward.gradient_verdict(errors, tolerance)

    def load_input(self, s: Shape, path: str):
        """One of Q, K, V from attnbench's .npy ([batch, heads, seq, dim] float32, already rounded
        to the dtype) as a tensor in the case's dtype. bshd ones are stored [batch, seq, heads,
        dim] and handed over as transposed views, so the kernels read that layout, as attnbench's
        bshd cases do."""
        import numpy
        torch = self.torch
        tensor = torch.from_numpy(numpy.load(path))
        if s.layout == "bshd":
            return tensor.transpose(1, 2).contiguous().to(self.device).to(self.torch_dtype(s.dtype)).transpose(1, 2)
        return tensor.to(self.device).to(self.torch_dtype(s.dtype))

    def attn_mask(self, keys: int, visible_keys):
        """[seq_q, keys] booleans from attnbench's [first, last) key range per query row."""
        torch = self.torch
        ranges = torch.tensor(visible_keys, device=self.device)
        columns = torch.arange(keys, device=self.device).unsqueeze(0)
        return (columns >= ranges[:, 0].unsqueeze(1)) & (columns < ranges[:, 1].unsqueeze(1))

    def sequence_masks(self, s: Shape, visible_keys) -> dict | None:
        """{cache length: [seq_q, length] booleans}: each sequence's mask from `attnbench
        prepare`'s key ranges (a ragged batch's sequences each align it to their own cache's end;
        sequences of one length see alike, and each is called on its own keys); None without a
        mask."""
        if visible_keys is None:
            return None
        lengths = s.kv_lens or (s.seq_kv,) * s.batch
        if len(visible_keys) != len(lengths) or any(len(rows) != s.seq_q for rows in visible_keys):
            raise ValueError(f"attnbench prepare gave key ranges for {len(visible_keys)} sequences; "
                             f"expected {len(lengths)} of {s.seq_q} rows each")
        masks = {}
        for length, rows in zip(lengths, visible_keys):
            masks.setdefault(length, self.attn_mask(length, rows))
        return masks

    def sdpa_call(self, backend: str, s: Shape, q, k, v, masks):
        """(call, note): a no-argument function running this backend's SDPA on q, k, v, and
        how GQA and the mask (`masks`: sequence_masks') were passed; (None, why) when the backend
        refuses the case. The call runs the whole batch (for a ragged batch only to see whether
        the backend takes the case: its .forward, called per sequence, is what is timed)."""
        import warnings
        torch = self.torch
        sdpa = torch.nn.functional.scaled_dot_product_attention
        kernel = self.backends[backend]
        if s.mask == "none":
            mask_args = {}
        elif s.plain:
            mask_args = {"is_causal": True}
        else:
            # is_causal would align top-left; the other masks have no flag at all.
            mask_args = {"attn_mask": masks[s.seq_kv]}
        group = s.heads // s.kv_heads
        if group == 1:
            attempts = [("", lambda k, v: (k, v, mask_args))]
        else:
            attempts = [("GQA through enable_gqa=True", lambda k, v: (k, v, {**mask_args, "enable_gqa": True})),
                        ("GQA through K/V repeat_interleave (the backend refused enable_gqa)",
                         lambda k, v: (k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1),
                                       mask_args))]
        reasons = []
        for how, arguments in attempts:
            kk, vv, extra = arguments(k, v)

            def forward(qq, kk_in, vv_in, arguments=arguments):
                """This attempt on other tensors (the backward's, the float64 check's)."""
                kk_, vv_, extra_ = arguments(kk_in, vv_in)
                if "attn_mask" in extra_:  # a ragged batch's sequence: the mask of its own cache
                    extra_ = {**extra_, "attn_mask": masks[kk_.shape[-2]]}
                with self.sdpa_kernel(kernel):
                    return sdpa(qq, kk_, vv_, **extra_)

            def call(kk=kk, vv=vv, extra=extra):
                with self.sdpa_kernel(kernel):
                    return sdpa(q, kk, vv, **extra)

            call.forward = forward

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
            if not s.plain:
                notes.append(f"{s.mask} as an explicit end-aligned boolean mask")
            return call, "; ".join(notes)
        return None, f"torch {backend} backend refused {s.description}: " + " | ".join(reasons)


def description_for(torch, args, plan: dict, peer: Peer, settings: dict) -> dict:
    """What `attnbench append --init` adds to the harness's manifest: the run's name, the
    torch.mm peaks the records are read against, and how PyTorch was called."""
    cuda = args.device == "cuda"
    return {
        "name": f"torch-{plan['name']}",
        "peaks": {peak_name(dtype): gflops for dtype, gflops in peer.peaks.items()},
        "peer": {
            "command": " ".join([SCRIPT, *args.argv]),
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if cuda else None,
            "python": platform.python_version(), "device": args.device,
            "threads": torch.get_num_threads(), "isa": peer.isa,
            "library": "torch.nn.functional.scaled_dot_product_attention",
            "backends": args.backends,
            "inputs": "attnbench prepare's (measure.distribution, rounded once to the case's dtype); "
                      "bhsd [batch, heads, seq, dim] contiguous, bshd [batch, seq, heads, dim] "
                      "contiguous passed as .transpose(1, 2) views",
            "tf32_settings_found": settings["found"],
            "tf32_settings_used": settings["used"],
            "tf32": "off: fp32 stays fp32 (strict IEEE fp32 matrix products)",
            "dtypes": "each case in its own dtype; on the GPU flash and cudnn take only bf16/fp16 "
                      "(fp32 cases recorded as skipped with PyTorch's reason)",
            "causal": "is_causal=True when seq_q == seq_kv; otherwise an explicit boolean mask "
                      "aligned to the end (PyTorch's is_causal aligns to the top-left)",
            "masks": "window, prefix and documents as an explicit boolean attn_mask of the keys "
                     "attnbench prepare gives per row (SDPA computes every pair); ALiBi and "
                     "soft-capping cases left out",
            "gqa": "enable_gqa=True; where a backend refuses it, K/V repeat_interleave'd before "
                   "timing (the record's reason says which)",
            "timing": ("CUDA events around each call" if cuda else "perf_counter around each call")
                      + f", after warm-up; attnbench's stopping rule ({peer.rule.describe()})",
            "workspace": "torch.cuda.max_memory_allocated during one call, less inputs and output",
            "peak": f"torch.mm of two {MM_SIZE[args.device]}-square matrices in each dtype"
                    + (", TF32 off" if cuda else "") + "; peaks torch_mm_<dtype>_gflops",
            "oracle": "attnbench append's, on the output of one untimed call",
        },
    }


# ----------------------------------------------------------------------------------------------
# Command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=SCRIPT, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="attnbench sweep config (TOML), e.g. configs/gpu-scaling.toml")
    parser.add_argument("--out", help="results folder (default: results/torch-<name>-<UTC time>)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cuda (default), or cpu: every backend PyTorch takes there (math, flash)")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help=f"comma-separated, of {', '.join(BACKENDS)} (default: all)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, as attnbench run --set does (repeatable)")
    parser.add_argument("--repeats", type=int, default=10, help="timed runs per case, at least (default 10)")
    parser.add_argument("--attnbench", type=Path, default=None,
                        help="the attnbench binary (default: $ATTNBENCH_BINARY, else build/attnbench)")
    parser.add_argument("--interleave", metavar="VARIANT",
                        help="after each shape's PyTorch cases, time attnbench's VARIANT on it "
                             "(attnbench run --cases I), alternating case by case under the same noise")
    parser.add_argument("--interleave-out", type=Path, metavar="DIR",
                        help="with --interleave: attnbench's folder (default: the peer's, -VARIANT added)")
    return parser


class InterleavedVariant:
    """attnbench's own variant on the peer's cases, one `attnbench run --cases I` after each
    shape's PyTorch cases: the first makes the folder (its start check), the rest resume it (a
    check each), so the two programs' timings alternate under the same load."""

    def __init__(self, binary: Path, config: str, overrides: list[str], variant: str, folder: Path):
        self.binary, self.config, self.overrides = binary, config, overrides
        self.variant, self.folder = variant, folder
        self.started = False

    def run(self, shape: Shape) -> None:
        command = [str(self.binary), "run", self.config, "--variants", self.variant, "--cases",
                   str(shape.index), "--out", str(self.folder)]
        for assignment in self.overrides:
            command += ["--set", assignment]
        if self.started:
            command.append("--resume")
        self.started = True
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode not in (0, 1):  # 1: the case failed, and its record says why
            raise PeerError(f"attnbench run --cases {shape.index}: "
                            f"{one_line(done.stderr or done.stdout)}")
        # The case's row of attnbench's table (it starts with the variant's name).
        rows = [line for line in done.stdout.splitlines() if line.startswith(f"{self.variant} ")]
        print(f"  {rows[-1] if rows else one_line(done.stdout)}", flush=True)


def run_cases(peer: Peer, attnbench: Attnbench, backends: list[str], shapes: list[Shape],
              scratch: Path, interleaved: InterleavedVariant | None = None) -> list[dict]:
    """Every backend on every shape, each record appended as its case finishes; `scratch` holds
    the current case's inputs and output. With `interleaved`, shape by shape: each shape's
    backends, then attnbench's variant on it."""
    records = []
    total = len(backends) * len(shapes)
    order = [(b, s) for b in range(len(backends)) for s in range(len(shapes))]
    if interleaved is not None:
        order = [(b, s) for s in range(len(shapes)) for b in range(len(backends))]
    for backend_number, shape_number in order:
        backend, shape = backends[backend_number], shapes[shape_number]
        index = backend_number * len(shapes) + shape_number
        try:
            result = peer.run_case(index, backend, shape, attnbench, scratch)
        except PeerError:
            raise
        except Exception as error:  # a bug or an API change: record it, go on
            result = peer.measured(index, f"torch_{backend}", shape, status="failed",
                                   reason=f"{type(error).__name__}: {one_line(error)}")
        record = attnbench.append(result)
        records.append(record)
        timing = (f"{record['time_ms_median']:10.4g} ms {record['gflops']:10.1f} GFLOP/s"
                  if record["status"] == "ok" else record["reason"][:100])
        print(f"[{index + 1}/{total}] {record['variant']:<16} {shape.description:<44} "
              f"{record['status']:<7} {timing}", flush=True)
        if interleaved is not None and backend_number == len(backends) - 1:
            interleaved.run(shape)
    return records


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in args.backends if b not in BACKENDS]
    if args.interleave_out and not args.interleave:
        parser.error("--interleave-out needs --interleave VARIANT")
    if unknown or not args.backends:
        parser.error(f"--backends: unknown backend {unknown[0] if unknown else '(none)'} (known: {', '.join(BACKENDS)})")
    binary = args.attnbench or default_binary()
    try:
        plan = read_plan(binary, args.config, args.set)
    except PeerError as error:
        print(f"{SCRIPT}: error: {one_line(error)}", file=sys.stderr)
        return 2
    try:
        import torch
    except Exception as error:  # ImportError, or a broken install raising anything else
        print(f"{SCRIPT}: error: cannot import torch ({one_line(error)})", file=sys.stderr)
        return 2
    try:
        import numpy  # noqa: F401  (the inputs and outputs travel as .npy files)
    except Exception as error:
        print(f"{SCRIPT}: error: cannot import numpy ({one_line(error)})", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"{SCRIPT}: error: torch {torch.__version__} sees no CUDA device (use --device cpu)",
              file=sys.stderr)
        return 2

    shapes = shapes_of(plan)
    peer = Peer(torch, args.device, plan, args.repeats)
    settings = peer.strict_fp32()
    print(f"{SCRIPT}: torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{'GPU ' + torch.cuda.get_device_name(0) if args.device == 'cuda' else 'CPU ' + peer.isa}; "
          f"TF32 settings found {settings['found']}, used {settings['used']}")
    peer.measure_peaks(dict.fromkeys(s.dtype for s in shapes))
    print(f"{SCRIPT}: torch.mm peaks " + ", ".join(f"{dtype} {gflops:.0f} GFLOP/s"
                                                   for dtype, gflops in peer.peaks.items()))
    out = Path(args.out) if args.out else Path("results") / (
        f"torch-{plan['name']}-{datetime.datetime.now(datetime.timezone.utc):%Y%m%d-%H%M%S}")
    print(f"{plan['name']}: {len(args.backends) * len(shapes)} cases ({len(args.backends)} backends x "
          f"{len(shapes)} shapes) -> {out}")
    attnbench = Attnbench(binary, out)
    interleaved = None
    description = description_for(torch, args, plan, peer, settings)
    try:
        if args.interleave:
            # Refused here, by name, before any case: a variant attnbench does not know.
            read_plan(binary, args.config, args.set, variant=args.interleave)
            folder = args.interleave_out or out.with_name(f"{out.name}-{args.interleave}")
            interleaved = InterleavedVariant(binary, args.config, args.set, args.interleave, folder)
            description["peer"]["interleaved_with"] = {"variant": args.interleave, "folder": str(folder)}
            print(f"interleaved case by case with attnbench's {args.interleave} -> {folder}")
        attnbench.init(args.config, args.set, args.device, description)
        with tempfile.TemporaryDirectory(prefix="torch_sdpa-") as scratch:
            records = run_cases(peer, attnbench, args.backends, shapes, Path(scratch), interleaved)
    except PeerError as error:
        print(f"{SCRIPT}: error: {one_line(error)}", file=sys.stderr)
        return 2
    counts = {s: sum(r["status"] == s for r in records) for s in ("ok", "skipped", "failed")}
    print(f"{counts['ok']} ok, {counts['skipped']} skipped, {counts['failed']} failed -> {out}")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
