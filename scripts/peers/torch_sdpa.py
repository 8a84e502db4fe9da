#!/usr/bin/env python3
"""Time PyTorch's torch.nn.functional.scaled_dot_product_attention on the shapes of an
attnbench sweep config, per SDPA backend, and write the numbers as an attnbench results
folder (manifest.json, cases.jsonl, summary.csv), so the plot, table and compare scripts
put them beside attnbench's own variants.

    python3 scripts/peers/torch_sdpa.py configs/gpu-scaling.toml --out results/h200-torch-gpu-scaling
    python3 scripts/peers/torch_sdpa.py configs/quick.toml --device cpu --set axes.seq_len=[64,128]

The config is read by attnbench itself, not here: `attnbench plan CONFIG --json` gives the
shapes (with their dtype and layout), the measure and oracle settings, FLOPs and bytes; each
measurement goes to `attnbench append`, which turns it into a record as the harness does
(GFLOP/s, % of peak, case id, every field) and appends it to cases.jsonl and summary.csv as
soon as the case finishes, so a killed run keeps what it finished. The binary is --attnbench,
else $ATTNBENCH_BINARY, else build/attnbench in this checkout.

What it does, so the numbers can be compared fairly:
- One variant per backend: torch_math, torch_efficient (memory-efficient), torch_cudnn,
  torch_flash, each forced with torch.nn.attention.sdpa_kernel, on every shape of the plan.
- dtype: each case runs in the plan's dtype (fp32, bf16 or fp16): the inputs are drawn in fp32
  (standard normal) and rounded to the dtype once. flash and cudnn take only bf16/fp16 on the
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
  as an explicit boolean attn_mask built from the same rule: SDPA computes every pair and masks
  afterwards, so its time does not follow the mask's density (that is the comparison). Cases with
  ALiBi or soft-capping are left out (SDPA has no soft-capping).
- GQA (kv_heads < heads): enable_gqa=True; a backend that refuses it gets K and V expanded
  with repeat_interleave before timing, and the record's reason says so.
- Timing: CUDA events around each call (perf_counter on the CPU), after warm-up runs; at least
  --repeats runs and at least measure.min_time_s of them. workspace_bytes: the memory the call
  allocated beyond its inputs and output (torch.cuda.max_memory_allocated). % of peak is
  against a torch.mm in the case's dtype (fp32 with TF32 off, bf16, fp16), timed at the start
  and stored in the manifest's peaks as torch_mm_<dtype>_gflops.
- Accuracy: the output is compared with a float64 reference computed from the rounded inputs
  (all rows for small shapes, sampled rows for large ones), as the harness's oracle does.
  It passes below a relative L2 error of 1e-4 in fp32 (SDPA's fp32 kernels reorder sums; TF32
  would land near 1e-3), and of 3u in bf16 and fp16, the harness's rule
  (harness/core/tolerance.h), u the dtype's unit roundoff (2^-8 bf16, 2^-11 fp16): the output is
  stored in the dtype (at most u) and a kernel may round the softmax weights to it (at most u).
- A case over measure.memory_cap_gb, or predicted over measure.case_budget_s, or out of
  memory, is recorded as skipped with the reason.

Exit status: 0 when every case is ok or skipped; 1 when a case failed; 2 on a bad config, when
attnbench cannot be run or refuses a measurement, or when torch cannot be imported (one line on
stderr).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

BACKENDS = ("math", "efficient", "cudnn", "flash")
# The relative L2 error a case passes below, by dtype (see the docstring).
REL_L2_TOLERANCE = {"fp32": 1e-4, "bf16": 3 * 2.0**-8, "fp16": 3 * 2.0**-11}
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


def read_plan(binary: Path, config: str, overrides: list[str]) -> dict:
    """`attnbench plan CONFIG --json`, with the --set overrides. Only the naive variant is
    listed: it takes every shape, so each (shape, dtype, layout) appears once, in sweep order."""
    command = [str(binary), "plan", config, "--json", "--variants", "naive"]
    for assignment in overrides:
        command += ["--set", assignment]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as error:
        raise PeerError(f"cannot run {binary} ({one_line(error)}); build it or pass --attnbench") from None
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or [f"exit {result.returncode}"]
        raise PeerError("attnbench plan: " + lines[-1].removeprefix("attnbench: error: "))
    return json.loads(result.stdout)


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

    def shape_fields(self) -> dict:
        """The shape as `attnbench append` reads it."""
        fields = {key: getattr(self, key) for key in ("batch", "heads", "kv_heads", "seq_q",
                                                      "seq_kv", "d_k", "d_v", "causal", "dtype",
                                                      "layout", "mask")}
        fields["doc_lens"] = list(self.doc_lens) if self.doc_lens else None
        return fields

    @property
    def plain(self) -> bool:
        """No mask beyond what is_causal says (causal aligned to the end needs seq_q == seq_kv)."""
        return self.mask == "none" or (self.mask == "causal" and self.seq_q == self.seq_kv)


def timed_by_sdpa(case: dict) -> bool:
    """SDPA is timed on every mask (as a boolean attn_mask) but on no score modifier: ALiBi and
    soft-capping are attnbench's own axes."""
    return not case.get("alibi", False) and not case.get("softcap", 0)


def shapes_of(plan: dict) -> list[Shape]:
    names = [field.name for field in dataclasses.fields(Shape)]
    left_out = [case["description"] for case in plan["cases"] if not timed_by_sdpa(case)]
    if left_out:
        print(f"{SCRIPT}: leaving out {len(left_out)} cases with score modifiers SDPA is not "
              f"timed on here (e.g. {left_out[0]})", file=sys.stderr)
    shapes = []
    for case in plan["cases"]:
        if timed_by_sdpa(case):
            fields = {name: case.get(name) for name in names}
            fields["mask"] = case.get("mask") or ("causal" if case["causal"] else "none")
            fields["doc_lens"] = tuple(case["doc_lens"]) if case.get("doc_lens") else None
            shapes.append(Shape(**fields))
    return shapes


def measurement(index: int, variant: str, device: str, s: Shape, *, status: str = "ok",
                reason: str = "", times_ms: list[float] | None = None,
                workspace_bytes: int | None = None, peak_gflops: float | None = None,
                oracle: dict | None = None, threads: int = 0, isa: str = "") -> dict:
    """What `attnbench append` makes a record of: one case's times (milliseconds per call) and
    oracle errors; GFLOP/s, bytes and % of peak are the harness's to work out."""
    return {"index": index, "variant": variant, "device": device, **s.shape_fields(),
            "precision": "fp32", "status": status, "reason": reason, "times_ms": times_ms or [],
            "workspace_bytes": workspace_bytes, "peak_gflops": peak_gflops,
            "peak_name": peak_name(s.dtype), "oracle": oracle, "threads": threads,
            "distribution": "normal", "isa": isa}


class RecordAppender:
    """`attnbench append FOLDER`, run once per measurement: each becomes a record, appended to
    cases.jsonl (and synced) before it comes back, so a killed run keeps every case it finished.
    (append checks all its input before writing any, so one run per record is what keeps each
    record as it is measured.)"""

    def __init__(self, binary: Path, folder: Path):
        self.binary = binary
        self.folder = folder

    def append(self, measured: dict) -> dict:
        """The record attnbench made of a measurement."""
        try:
            done = subprocess.run([str(self.binary), "append", str(self.folder)],
                                  input=json.dumps(measured, allow_nan=False) + "\n",
                                  capture_output=True, text=True)
        except OSError as error:
            raise PeerError(f"cannot run {self.binary} ({one_line(error)}); build it or pass --attnbench") from None
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or len(lines) != 1:
            errors = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
            raise PeerError("attnbench append: " + errors[-1].removeprefix("attnbench: error: "))
        return json.loads(lines[0])

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()


def create_results_folder(folder: Path, manifest: dict) -> None:
    """manifest.json and an empty cases.jsonl: the folder `attnbench append` appends to."""
    if folder.exists() and any(folder.iterdir()):
        raise PeerError(f"{folder}: already exists; choose another --out")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        (folder / "cases.jsonl").write_text("")
    except OSError as error:
        raise PeerError(f"{folder}: cannot write ({error.strerror})") from None


# ----------------------------------------------------------------------------------------------
# The machine


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
                              cwd=REPO, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def driver_version() -> str | None:
    try:
        result = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=20)
        return result.stdout.strip().splitlines()[0] if result.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def cpu_capability(torch) -> str:
    """The code path PyTorch's CPU kernels chose at run time (e.g. AVX512): the record's isa."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except AttributeError:  # older PyTorch
        return ""


# ----------------------------------------------------------------------------------------------
# PyTorch: imported only when timing, so the rest is usable and testable without it


class Peer:
    def __init__(self, torch, device: str, plan: dict, repeats: int):
        self.torch = torch
        self.device = device
        measure, oracle = plan["measure"], plan["oracle"]
        self.warmup = int(measure["warmup"])
        self.min_time_s = float(measure["min_time_s"])
        self.case_budget_s = float(measure["case_budget_s"])
        self.memory_cap_bytes = float(measure["memory_cap_gb"]) * 2**30
        self.seed = int(measure["seed"])
        self.full_check_max_n = int(oracle["full_check_max_n"])
        self.sample_rows = int(oracle["sample_rows"])
        self.sample_seed = int(oracle["sample_seed"])
        self.repeats = max(1, repeats)
        self.threads = torch.get_num_threads() if device == "cpu" else 0
        self.isa = cpu_capability(torch) if device == "cpu" else ""
        self.peaks: dict[str, float] = {}  # dtype -> torch.mm GFLOP/s, from measure_peaks()
        self.last_ok: dict[tuple, tuple[float, float]] = {}  # (variant, dtype) -> (flops, s per run)
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
                           threads=self.threads, isa=self.isa, **fields)

    def predicted_seconds(self, variant: str, s: Shape) -> float | None:
        """How long the case would take, scaled by FLOPs from this variant's last ok case of the
        same dtype; None before there is one."""
        if (variant, s.dtype) not in self.last_ok:
            return None
        seen_flops, per_run = self.last_ok[(variant, s.dtype)]
        per_run *= s.flops / seen_flops
        runs = max(self.repeats, self.min_time_s / per_run if per_run > 0 else self.repeats)
        return per_run * (self.warmup + 2 + runs)

    def run_case(self, index: int, backend: str, s: Shape) -> dict:
        torch = self.torch
        variant = f"torch_{backend}"

        def result(**fields):
            return self.measured(index, variant, s, **fields)

        if self.backends.get(backend) is None:
            return result(status="skipped", reason=f"this torch has no {backend} backend")
        # The math backend materialises the scores, the weights and (causal) the mask, in fp32
        # at most.
        scores = float(s.batch * s.heads * s.seq_q * s.seq_kv) * 4
        needed = s.bytes + (3 * scores if backend == "math" else 0)
        if needed > self.memory_cap_bytes:
            return result(status="skipped",
                          reason=f"needs about {needed / 2**30:.1f} GiB, over memory_cap_gb "
                                 f"{self.memory_cap_bytes / 2**30:g}")
        predicted = self.predicted_seconds(variant, s)
        if predicted is not None and predicted > self.case_budget_s:
            return result(status="skipped",
                          reason=f"predicted {predicted:.1f}s > case_budget_s {self.case_budget_s:g} "
                                 "(scaled from the previous case by FLOPs)")

        q = k = v = out = None
        try:
            q, k, v = self.inputs(s, index)
            call, note = self.sdpa_call(backend, s, q, k, v)
            if call is None:
                return result(status="skipped", reason=note)
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
            if oracle is None or oracle["rel_l2_err"] > oracle["rel_l2_tolerance"]:
                reason = ("oracle: NaN or Inf in the output or its errors" if oracle is None else
                          f"oracle: rel L2 {oracle['rel_l2_err']:.2g} above {oracle['rel_l2_tolerance']:.2g}")
                return result(status="failed", reason=reason, oracle=oracle, workspace_bytes=workspace)
            out = None
            for _ in range(max(0, self.warmup - 1)):
                call()
            first = statistics.median(self.time_calls(call, 3))
            runs = max(self.repeats, min(1000, math.ceil(self.min_time_s * 1e3 / max(first, 1e-3))))
            times = self.time_calls(call, runs)
            self.last_ok[(variant, s.dtype)] = (s.flops, statistics.median(times) / 1e3)
            return result(times_ms=times, workspace_bytes=workspace, oracle=oracle, reason=note)
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

    def inputs(self, s: Shape, index: int):
        """Q, K, V as [batch, heads, seq, dim] tensors in the case's dtype: drawn in fp32 and
        rounded once. bshd ones are stored [batch, seq, heads, dim] and handed over as transposed
        views, so the kernels read that layout, as attnbench's bshd cases do."""
        torch = self.torch
        dtype = self.torch_dtype(s.dtype)
        generator = torch.Generator(device=self.device)
        generator.manual_seed(self.seed * 1000003 + index)

        def tensor(heads, seq, dim):
            if s.layout == "bshd":
                stored = torch.randn(s.batch, seq, heads, dim, device=self.device, generator=generator)
                return stored.to(dtype).transpose(1, 2)
            return torch.randn(s.batch, heads, seq, dim, device=self.device, generator=generator).to(dtype)

        return tensor(s.heads, s.seq_q, s.d_k), tensor(s.kv_heads, s.seq_kv, s.d_k), tensor(s.kv_heads, s.seq_kv, s.d_v)

    def visible(self, s: Shape):
        """[seq_q, seq_kv] booleans, true where query row i sees key j, for any mask but none:
        harness/core/mask.h's rule, aligned to the end (row i sits at key p = i + seq_kv - seq_q)."""
        torch = self.torch
        kind, _, length = s.mask.partition(":")
        keys = torch.arange(s.seq_kv, device=self.device).unsqueeze(0)
        position = torch.arange(s.seq_q, device=self.device).unsqueeze(1) + (s.seq_kv - s.seq_q)
        causal = keys <= position
        if kind == "window":
            return causal & (keys >= position - int(length))
        if kind == "prefix":
            return causal | (keys < int(length))
        if kind == "documents":
            document = torch.tensor([index for index, length in enumerate(s.doc_lens)
                                     for _ in range(length)], device=self.device)
            return causal & (document.unsqueeze(1) == document.unsqueeze(0))
        return causal

    def reference_rows(self, s: Shape, q, k, v, picks):
        """float64 outputs of the given (batch, head, row) triples."""
        torch = self.torch
        group = s.heads // s.kv_heads
        scale = 1.0 / math.sqrt(s.d_k)
        visible = self.visible(s)
        rows = []
        for b, h, i in picks:
            scores = (k[b, h // group].double() @ q[b, h, i].double()) * scale
            if s.mask != "none":
                scores = scores.masked_fill(visible[i].logical_not(), -math.inf)
            rows.append(torch.softmax(scores, dim=0) @ v[b, h // group].double())
        return torch.stack(rows)

    def check(self, s: Shape, q, k, v, out) -> dict | None:
        """The oracle's errors against a float64 reference from the same (rounded) inputs, as
        `attnbench append` reads them; None when the output or an error is not finite."""
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
            if s.mask != "none":
                scores = scores.masked_fill(self.visible(s).logical_not(), -math.inf)
            reference = torch.softmax(scores, dim=-1) @ vv
            got = out.double()
        else:
            # attnbench's rule: the first and last row of every (batch, head), and sample_rows
            # seeded random (batch, head, row) triples on top, each compared once.
            generator = torch.Generator().manual_seed(self.sample_seed)
            count = self.sample_rows
            bs = torch.randint(s.batch, (count,), generator=generator).tolist()
            hs = torch.randint(s.heads, (count,), generator=generator).tolist()
            rows = torch.randint(s.seq_q, (count,), generator=generator).tolist()
            edges = [(b, h, i) for b in range(s.batch) for h in range(s.heads)
                     for i in (0, s.seq_q - 1)]
            picks = sorted(set(edges) | set(zip(bs, hs, rows)))
            reference = self.reference_rows(s, q, k, v, picks)
            got = torch.stack([out[b, h, i].double() for b, h, i in picks])
        difference = got - reference
        norm = torch.linalg.vector_norm(reference).item()
        oracle = {"max_abs_err": difference.abs().max().item(),
                  "rel_l2_err": torch.linalg.vector_norm(difference).item() / norm if norm > 0 else math.inf,
                  "rel_l2_tolerance": REL_L2_TOLERANCE[s.dtype],
                  "sampled": not full}
        finite = bool(torch.isfinite(got).all().item()) and all(
            math.isfinite(oracle[key]) for key in ("max_abs_err", "rel_l2_err"))
        return oracle if finite else None

    def sdpa_call(self, backend: str, s: Shape, q, k, v):
        """(call, note): a no-argument function running this backend's SDPA on q, k, v, and
        how GQA and the mask were passed; (None, why) when the backend refuses the case."""
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
            mask_args = {"attn_mask": self.visible(s)}
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
            if not s.plain:
                notes.append(f"{s.mask} as an explicit end-aligned boolean mask")
            return call, "; ".join(notes)
        return None, f"torch {backend} backend refused {s.description}: " + " | ".join(reasons)


def manifest_for(torch, args, plan: dict, config_text: str, peer: Peer, settings: dict) -> dict:
    cuda = args.device == "cuda"
    peaks = {peak_name(dtype): gflops for dtype, gflops in peer.peaks.items()}
    gpu = None
    if cuda:
        properties = torch.cuda.get_device_properties(0)
        gpu = {"name": properties.name, "sm_count": properties.multi_processor_count,
               "compute_capability": properties.major * 10 + properties.minor,
               "memory_bytes": properties.total_memory,
               "driver_version": driver_version(),
               "runtime_version": torch.version.cuda,
               "sgemm_gflops": peer.peaks.get("fp32"), "tf32_gemm_gflops": None,
               "bf16_gemm_gflops": peer.peaks.get("bf16"), "fp16_gemm_gflops": peer.peaks.get("fp16"),
               "copy_gbps": None}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    model = cpu_model()
    return {
        "name": f"torch-{plan['name']}",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join([SCRIPT, *args.argv]),
        "git_commit": git_commit(),
        "shard": "",
        "config": plan["config"],
        "config_text": config_text,
        "config_overrides": args.set,
        "build": {"compiler": f"PyTorch {torch.__version__}", "torch": torch.__version__,
                  "cuda": torch.version.cuda,
                  "cudnn": torch.backends.cudnn.version() if cuda else None,
                  "python": platform.python_version(), "flags": "", "build_type": "",
                  "cuda_architectures": ""},
        "machine": {"description": f"{model} ({cores} cores)", "cpu_model": model, "cores": cores,
                    "threads": torch.get_num_threads(), "isa": peer.isa, "hostname": platform.node()},
        "peaks": {**peaks, "device": args.device},
        "gpu": gpu,
        "peer": {
            "library": "torch.nn.functional.scaled_dot_product_attention",
            "backends": args.backends,
            "inputs": "standard normal drawn in fp32, rounded once to the case's dtype; bhsd "
                      "[batch, heads, seq, dim] contiguous, bshd [batch, seq, heads, dim] contiguous "
                      "passed as .transpose(1, 2) views",
            "tf32_settings_found": settings["found"],
            "tf32_settings_used": settings["used"],
            "tf32": "off: fp32 stays fp32 (strict IEEE fp32 matrix products)",
            "dtypes": "each case in its own dtype; on the GPU flash and cudnn take only bf16/fp16 "
                      "(fp32 cases recorded as skipped with PyTorch's reason)",
            "causal": "is_causal=True when seq_q == seq_kv; otherwise an explicit boolean mask "
                      "aligned to the end (PyTorch's is_causal aligns to the top-left)",
            "masks": "window, prefix and documents as an explicit boolean attn_mask by "
                     "harness/core/mask.h's rule (SDPA computes every pair); ALiBi and "
                     "soft-capping cases left out",
            "gqa": "enable_gqa=True; where a backend refuses it, K/V repeat_interleave'd before "
                   "timing (the record's reason says which)",
            "timing": ("CUDA events around each call" if cuda else "perf_counter around each call")
                      + f", after warm-up; at least {peer.repeats} runs and measure.min_time_s",
            "workspace": "torch.cuda.max_memory_allocated during one call, less inputs and output",
            "peak": f"torch.mm of two {MM_SIZE[args.device]}-square matrices in each dtype"
                    + (", TF32 off" if cuda else "") + "; peaks torch_mm_<dtype>_gflops",
            "oracle": "float64 reference from the rounded inputs",
            "oracle_tolerance_rel_l2": REL_L2_TOLERANCE,
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
    return parser


def run_cases(peer: Peer, appender: RecordAppender, backends: list[str], shapes: list[Shape]) -> list[dict]:
    """Every backend on every shape, each record appended as its case finishes."""
    records = []
    total = len(backends) * len(shapes)
    for backend_number, backend in enumerate(backends):
        for shape_number, shape in enumerate(shapes):
            index = backend_number * len(shapes) + shape_number
            try:
                result = peer.run_case(index, backend, shape)
            except Exception as error:  # a bug or an API change: record it, go on
                result = peer.measured(index, f"torch_{backend}", shape, status="failed",
                                       reason=f"{type(error).__name__}: {one_line(error)}")
            record = appender.append(result)
            records.append(record)
            timing = (f"{record['time_ms_median']:10.4g} ms {record['gflops']:10.1f} GFLOP/s"
                      if record["status"] == "ok" else record["reason"][:100])
            print(f"[{index + 1}/{total}] {record['variant']:<16} {shape.description:<44} "
                  f"{record['status']:<7} {timing}", flush=True)
    return records


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in args.backends if b not in BACKENDS]
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
    config_text = Path(args.config).read_text(encoding="utf-8", errors="replace")
    print(f"{plan['name']}: {len(args.backends) * len(shapes)} cases ({len(args.backends)} backends x "
          f"{len(shapes)} shapes) -> {out}")
    try:
        create_results_folder(out, manifest_for(torch, args, plan, config_text, peer, settings))
        with RecordAppender(binary, out) as appender:
            records = run_cases(peer, appender, args.backends, shapes)
    except PeerError as error:
        print(f"{SCRIPT}: error: {one_line(error)}", file=sys.stderr)
        return 2
    counts = {s: sum(r["status"] == s for r in records) for s in ("ok", "skipped", "failed")}
    print(f"{counts['ok']} ok, {counts['skipped']} skipped, {counts['failed']} failed -> {out}")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
