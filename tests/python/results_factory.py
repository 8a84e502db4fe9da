"""Builds small attnbench results folders with synthetic timings, in the format the
harness writes (manifest.json, cases.jsonl, summary.csv), for the script tests."""

from __future__ import annotations

import csv
import json
from pathlib import Path

CPU_FMA_PEAK_GFLOPS = 232.0
CUDA_SGEMM_PEAK_GFLOPS = 51000.0
ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def make_manifest(name: str = "synthetic", with_gpu: bool = False) -> dict:
    return {
        "name": name,
        "config": {"variants": ["naive"], "seq": [256, 512]},
        "config_text": 'variants = ["naive"]\n',
        "git_commit": "0123456789abcdef",
        "date": "2025-01-02T03:04:05Z",
        "build": {"compiler": "GNU 12.2", "flags": "-O3", "build_type": "Release",
                  "cuda_architectures": "80;90"},
        "machine": {"description": "AMD EPYC (2 cores)", "cpu_model": "AMD EPYC 9R14",
                    "cores": 2, "threads": 2, "omp_schedule": "static"},
        "peaks": {"cpu_fma_gflops": CPU_FMA_PEAK_GFLOPS, "cpu_sgemm_gflops": 205.0},
        "gpu": {"name": "NVIDIA H200", "sm_count": 132, "driver_version": "580.0",
                "runtime_version": "13.0", "memory_bytes": 150 * 2**30,
                "sgemm_gflops": CUDA_SGEMM_PEAK_GFLOPS, "tf32_gemm_gflops": 400000.0,
                "copy_gbps": 4000.0} if with_gpu else None,
    }


def _unmasked_pairs(seq_q: int, seq_kv: int, causal: bool) -> int:
    if not causal:
        return seq_q * seq_kv
    # The mask aligns to the end: query i sees keys 0 .. seq_kv - seq_q + i.
    return sum(min(seq_kv, seq_kv - seq_q + i + 1) for i in range(seq_q))


def make_case(variant: str = "naive", *, seq: int = 1024, seq_q: int | None = None,
              seq_kv: int | None = None, heads: int = 8, kv_heads: int | None = None,
              batch: int = 1, d_k: int = 64, d_v: int | None = None, causal: bool = False,
              device: str = "cpu", precision: str = "fp32", dtype: str = "fp32",
              layout: str = "bhsd", status: str = "ok", reason: str = "", time_ms: float = 1.0,
              spread: float = 0.02, workspace_bytes: int = 0) -> dict:
    seq_q = seq if seq_q is None else seq_q
    seq_kv = seq if seq_kv is None else seq_kv
    kv_heads = heads if kv_heads is None else kv_heads
    d_v = d_k if d_v is None else d_v
    peak = CPU_FMA_PEAK_GFLOPS if device == "cpu" else CUDA_SGEMM_PEAK_GFLOPS
    flops = 2 * batch * heads * _unmasked_pairs(seq_q, seq_kv, causal) * (d_k + d_v)
    element_bytes = ELEMENT_BYTES[dtype]
    moved = element_bytes * batch * (heads * seq_q * (d_k + d_v) + kv_heads * seq_kv * (d_k + d_v))
    ok = status == "ok"
    gflops = flops / (time_ms * 1e6) if ok else None
    sizes = f"b{batch}|h{heads}|kv{kv_heads}|q{seq_q}|k{seq_kv}|dk{d_k}|dv{d_v}"
    return {
        "case_id": f"{variant}|{sizes}|{'causal' if causal else 'full'}|{dtype}|{layout}",
        "variant": variant, "device": device, "dtype": dtype, "layout": layout,
        "element_bytes": element_bytes, "precision": precision,
        "batch": batch, "heads": heads, "kv_heads": kv_heads, "seq_q": seq_q,
        "seq_kv": seq_kv, "d_k": d_k, "d_v": d_v, "causal": causal,
        "status": status, "reason": reason,
        "time_ms_median": time_ms if ok else None,
        "time_ms_min": time_ms * (1 - spread) if ok else None,
        "time_ms_max": time_ms * (1 + spread) if ok else None,
        "cv": spread / 2 if ok else None,
        "repetitions": 5 if ok else None,
        "interleaved": False if ok else None,
        "round_times_ms": [time_ms] * 5 if ok else None,
        "flops": flops,
        "flop_convention": "causal: unmasked pairs only" if causal else "full",
        "gflops": gflops,
        "gbps": moved / (time_ms * 1e6) if ok else None,
        "bytes": moved,
        "workspace_bytes": workspace_bytes if ok else None,
        "peak_gflops": peak,
        "percent_of_peak": 100 * gflops / peak if ok else None,
        "disturbed": False,
        "disturbed_reason": "",
        "oracle_max_abs_err": 1e-7 if ok else None,
        "oracle_rel_l2_err": 2e-8 if ok else None,
        "oracle_sampled": seq_q > 1024 if ok else None,
        "threads": 2,
    }


def power_law_cases(variant: str, exponent: float, coefficient: float,
                    seqs=(128, 256, 512, 1024, 2048, 4096), workspace_exponent: float | None = None,
                    **shape) -> list[dict]:
    """One case per seq with time = coefficient * seq**exponent (ms)."""
    cases = []
    for seq in seqs:
        workspace = 0 if workspace_exponent is None else int(4 * seq ** workspace_exponent)
        cases.append(make_case(variant, seq=seq, time_ms=coefficient * seq ** exponent,
                               workspace_bytes=workspace, **shape))
    return cases


def _mask_in_case_id(case: dict) -> dict:
    """A case given a mask after make_case (window:64, documents:4, ...) carries it in its
    case_id, as the harness writes it: two cases differing only in their mask are two cases,
    and a folder holding one id twice is refused by every reader."""
    mask = case.get("mask")
    parts = case["case_id"].split("|")
    if mask and mask not in ("none", "causal") and len(parts) > 8 and parts[8] in ("full", "causal"):
        parts[8] = mask
        return {**case, "case_id": "|".join(parts)}
    return case


def _distinct_case_ids(cases: list[dict]) -> list[dict]:
    """Cases a test made differ only in a field the id does not spell (precision tf32 against
    fp32) get its value appended, so that the folder holds each id once, as the harness's do."""
    seen: set[str] = set()
    distinct = []
    for case in cases:
        case_id = case["case_id"]
        if case_id in seen:
            case_id += f"|precision:{case.get('precision')}"
        suffix = 1
        while case_id in seen:
            suffix += 1
            case_id = f"{case['case_id']}|{suffix}"
        seen.add(case_id)
        distinct.append({**case, "case_id": case_id})
    return distinct


def write_run(folder: Path, cases: list[dict], manifest: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    manifest = make_manifest(folder.name) if manifest is None else manifest
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    cases = _distinct_case_ids([_mask_in_case_id(case) for case in cases])
    with open(folder / "cases.jsonl", "w") as records:
        for index, case in enumerate(cases):
            # Every record the harness writes holds its place in the sweep.
            records.write(json.dumps({"case_index": index, **case}) + "\n")
    with open(folder / "summary.csv", "w", newline="") as summary:
        writer = csv.DictWriter(summary, fieldnames=list(cases[0]))
        writer.writeheader()
        for case in cases:
            writer.writerow({k: "" if v is None else v for k, v in case.items()})
    return folder
