"""Tests for scripts/peers/torch_sdpa.py and for the attnbench commands it stands on: `plan`,
`check` and `schema` as JSON, and `append`. Most need no PyTorch: the peer reads its shapes from
`attnbench plan`, and a measurement goes through `attnbench append` into a record that loads
through attnbench_results. The timing code runs here on a numpy stand-in for torch; where
PyTorch is installed, the last tests time tiny cases for real on the CPU (and on the GPU where
there is one)."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import types
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from attnbench import results as ar
from binary import REPO, attnbench_binary, error_lines, run_attnbench
from commands import Command
from conftest import SCRIPTS_DIR

PEER_PATH = SCRIPTS_DIR / "peers" / "torch_sdpa.py"
spec = importlib.util.spec_from_file_location("torch_sdpa", PEER_PATH)
peer = importlib.util.module_from_spec(spec)
sys.modules["torch_sdpa"] = peer
spec.loader.exec_module(peer)

TORCH_MISSING = "PyTorch is not installed here: the peer's real timing tests need it (pip install torch)"
TYPED = ["--set", 'axes.dtype=["fp32", "bf16"]', "--set", 'axes.layout=["bhsd", "bshd"]']


@pytest.fixture(scope="module")
def binary() -> Path:
    """An absolute path: the peer runs it from wherever it is started."""
    return attnbench_binary().resolve()


def plan_json(*args) -> dict:
    return json.loads(run_attnbench("plan", *args, "--json", check=True).stdout)


def schema_names(csv_only: bool = False) -> list[str]:
    """The record's fields; with csv_only, the columns of summary.csv (some fields, e.g. the
    per-round times, live in cases.jsonl only)."""
    fields = json.loads(run_attnbench("schema", "--json", check=True).stdout)["fields"]
    return [field["name"] for field in fields if field["in_csv"] or not csv_only]


def shape(dtype="fp32", layout="bhsd", mask=None, kv_lens=None, **sizes) -> peer.Shape:
    """A Shape as the plan would give it (the work counts do not matter where this is used)."""
    values = {**dict(batch=1, heads=4, kv_heads=4, seq_q=3, seq_kv=5, d_k=8, d_v=8, causal=False), **sizes}
    mask = mask or ("causal" if values["causal"] else "none")
    fields = {**values, "dtype": dtype, "layout": layout, "mask": mask, "kv_lens": list(kv_lens) if kv_lens else None}
    return peer.Shape(**values, dtype=dtype, layout=layout, flops=1.0, bytes=1.0, description="test shape",
                      mask=mask, kv_lens=tuple(kv_lens) if kv_lens else None, fields=fields)


# ---------------------------------------------------------------------------
# attnbench plan, check and schema as JSON: what the peer and the scripts read


def test_plan_lists_every_case_with_its_dtype_layout_and_work():
    plan = plan_json("configs/quick.toml", "--variants", "naive", "--set", "axes.seq_len=[64, 128]", *TYPED)
    cases = plan["cases"]
    assert len(cases) == 2 * 2 * 2 * 2  # seq_len, causal, dtype, layout
    assert [c["index"] for c in cases] == list(range(len(cases)))
    assert {(c["dtype"], c["layout"]) for c in cases} == {
        ("fp32", "bhsd"), ("fp32", "bshd"), ("bf16", "bhsd"), ("bf16", "bshd")}
    for c in cases:
        n, element_bytes = c["seq_q"], {"fp32": 4, "bf16": 2}[c["dtype"]]
        mask = "causal" if c["causal"] else "full"
        assert c["id"] == f"naive|b1|h8|kv8|q{n}|k{n}|dk64|dv64|{mask}|{c['dtype']}|{c['layout']}"
        assert c["element_bytes"] == element_bytes
        assert c["bytes"] == element_bytes * 4 * 1 * 8 * n * 64  # Q, K, V read and O written once
        if not c["causal"]:
            assert c["flops"] == 4 * 1 * 8 * n**2 * 64 and c["flop_convention"] == "full"
    assert plan["name"] == "quick" and plan["config"]["axes"]["seq_len"] == [64, 128]
    assert set(plan["measure"]) == {"warmup", "repetitions", "min_time_s", "case_budget_s",
                                    "memory_cap_gb", "cold", "distribution", "seed"}
    assert set(plan["oracle"]) == {"full_check_max_n", "sample_rows", "sample_seed"}


def test_plan_refuses_a_bad_config_with_one_line_and_exit_2():
    result = run_attnbench("plan", "configs/quick.toml", "--json", "--set", "axes.seq_len=[0]")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "axes.seq_len: must be positive, got 0" in result.stderr


def test_schema_names_the_fields_of_a_record_that_run_writes(tmp_path):
    schema = json.loads(run_attnbench("schema", "--json", check=True).stdout)
    assert isinstance(schema["schema_version"], int) and schema["schema_version"] >= 1
    assert all(set(field) == {"name", "type", "description", "in_csv", "derived"}
               and field["description"] for field in schema["fields"])
    run_attnbench("run", "configs/quick.toml", "--out", tmp_path / "run", "--variants", "naive",
                  "--set", "axes.seq_len=[16]", "--set", "axes.causal=[false]",
                  "--set", "measure.min_time_s=0.001", "--set", "measure.repetitions=1",
                  "--set", "measure.warmup=0", check=True, timeout=300)
    [line] = (tmp_path / "run" / "cases.jsonl").read_text().splitlines()
    # A record stores its facts; the rating against the folder's peak checks is derived by readers.
    derived = [field["name"] for field in schema["fields"] if field["derived"]]
    assert derived == ["percent_of_peak", "peak_gbps", "bandwidth_name", "ridge_intensity", "percent_of_bandwidth",
                       "disturbed", "disturbed_reason", "unrated_reason"]
    assert [field["name"] for field in schema["fields"] if not field["derived"]] == list(json.loads(line))
    with open(tmp_path / "run" / "summary.csv", newline="") as summary:
        assert next(csv.reader(summary)) == [field["name"] for field in schema["fields"] if field["in_csv"]]


def test_check_json_passes_naive_on_bf16_bshd():
    result = run_attnbench("check", "configs/quick.toml", "--json", "--variants", "naive",
                           "--set", "axes.seq_len=[16, 33]", "--set", 'axes.dtype=["bf16"]',
                           "--set", 'axes.layout=["bshd"]', check=True, timeout=300)
    report = json.loads(result.stdout)  # the progress lines go to stderr
    assert (report["config"], report["passed"], report["failed"], report["skipped"]) == ("quick", 4, 0, 0)
    assert report["device_lost"] is False
    records = report["records"]
    # A record per case and input distribution, each named.
    assert len(records) == 4 * 4 and all(list(r) == schema_names() for r in records)
    assert {r["distribution"] for r in records} == {"normal", "large_scores", "near_constant",
                                                    "dominant_key"}
    for r in records:
        assert (r["status"], r["dtype"], r["layout"], r["element_bytes"]) == ("ok", "bf16", "bshd", 2)
        assert r["oracle_rel_l2_err"] <= r["oracle_rel_l2_tolerance"]
        assert r["time_ms_median"] is None  # checked, not timed


# ---------------------------------------------------------------------------
# The plan, as the peer reads it (no torch)


def test_the_peer_takes_each_shape_once_in_plan_order(binary):
    overrides = ["axes.seq_q=[1, 37]", "axes.d_k=[40]", "axes.d_v=[72]", 'axes.dtype=["fp32", "bf16"]',
                 'axes.layout=["bshd"]']
    # gpu-edge.toml names the CUDA variants, which a CPU build has not: the shapes come anyway.
    plan = peer.read_plan(binary, "configs/gpu-edge.toml", overrides)
    shapes = peer.shapes_of(plan)
    assert len(shapes) == 2 * 2 * 2 * 2 * 2 == len(set(shapes))  # kv_heads, seq_q, seq_kv, causal, dtype
    assert [s.description for s in shapes] == [c["description"] for c in plan["cases"]]
    # The shape reaches prepare and append as the plan gives it: every field the plan names.
    assert shapes[0].shape_fields() == {name: plan["cases"][0][name] for name in plan["shape_fields"]}
    assert {"batch", "seq_kv", "mask", "alibi", "softcap", "kv_dtype", "pass"} <= set(plan["shape_fields"])
    assert {k: shapes[0].shape_fields()[k] for k in ("batch", "seq_q", "seq_kv", "d_v", "layout", "kv_dtype")} == \
        dict(batch=2, seq_q=1, seq_kv=130, d_v=72, layout="bshd", kv_dtype="fp32")
    assert shapes[0].flops == plan["cases"][0]["flops"] and shapes[0].bytes == plan["cases"][0]["bytes"]
    assert {s.dtype for s in shapes} == {"fp32", "bf16"}
    assert plan["oracle"]["full_check_max_n"] == 512


def test_a_config_error_from_plan_is_one_line(binary):
    with pytest.raises(peer.PeerError, match=r"^attnbench plan: configs/quick.toml \(--set\): axes.seq_len: "
                                              r"must be positive, got 0$"):
        peer.read_plan(binary, "configs/quick.toml", ["axes.seq_len=[0]"])


# ---------------------------------------------------------------------------
# Measurements into records, through attnbench append (no torch)


SMALL = ["axes.seq_len=[16]", 'axes.dtype=["bf16"]', 'axes.layout=["bshd"]']
DESCRIPTION = {"name": "torch-quick", "peaks": {"torch_mm_bf16_gflops": 100.0},
               "peer": {"torch": "0.0-test", "tf32_settings_found": {"torch.backends.cuda.matmul.allow_tf32": False}}}


def init_folder(folder: Path, config: str, overrides: list[str], description=DESCRIPTION, device="cpu"):
    """`attnbench append --init`: the subprocess result, for the tests of its refusals."""
    sets = [arg for assignment in overrides for arg in ("--set", assignment)]
    return run_attnbench("append", folder, "--init", "--config", config, "--device", device, *sets,
                         input=json.dumps(description), timeout=120)


@pytest.fixture
def results_folder(tmp_path, binary):
    """A fresh results folder for the quick config's bf16 bshd shapes at n = 16, and its plan."""
    plan = peer.read_plan(binary, "configs/quick.toml", SMALL)
    folder = tmp_path / "run"
    peer.Attnbench(binary, folder).init("configs/quick.toml", SMALL, "cpu", DESCRIPTION)
    return folder, plan


def test_append_init_writes_the_harness_manifest_with_the_peer_description(results_folder):
    folder, plan = results_folder
    manifest = json.loads((folder / "manifest.json").read_text())
    # The harness's own: machine, build, config as given, the CPU peaks it measured.
    assert manifest["machine"]["cores"] >= 1 and manifest["machine"]["cpu_model"]
    assert manifest["build"] and manifest["git_commit"] is not None
    assert manifest["config"]["axes"] == plan["config"]["axes"] and manifest["config_overrides"] == SMALL
    assert manifest["config_text"] == (REPO / "configs/quick.toml").read_text()
    assert manifest["peaks"]["cpu_fma_gflops"] > 0
    # The peer's: its name, its peak beside the harness's, its description as given.
    assert manifest["name"] == "torch-quick"
    assert manifest["peaks"]["torch_mm_bf16_gflops"] == 100.0
    assert manifest["peer"] == DESCRIPTION["peer"]
    assert (folder / "cases.jsonl").read_text() == ""
    assert len((folder / "peaks.jsonl").read_text().splitlines()) == 1


@pytest.mark.parametrize("overrides, description, message", [
    (["axes.seq_len=[0]"], DESCRIPTION, "axes.seq_len: must be positive, got 0"),
    (SMALL, {"name": "x", "colour": "red"}, "stdin: unknown key 'colour' (known: name, peaks, peer)"),
    (SMALL, {"peaks": {"torch_mm_bf16_gflops": -1}}, "'peaks.torch_mm_bf16_gflops' must be a finite number"),
    (SMALL, {"peaks": {"cpu_fma_gflops": 1.0}}, "stdin: peak 'cpu_fma_gflops' is one the harness measures"),
])
def test_append_init_refuses_bad_input_with_one_line_and_makes_nothing(tmp_path, overrides, description, message):
    result = init_folder(tmp_path / "run", "configs/quick.toml", overrides, description)
    assert result.returncode == 2 and result.stdout == ""
    # One line of error (a peak the harness measures is found once it has measured them: after a
    # busy machine's warnings, if any).
    assert len(error_lines(result)) == 1 and message in error_lines(result)[0], result.stderr
    assert not (tmp_path / "run").exists()


def test_append_init_refuses_a_folder_that_holds_anything(results_folder, tmp_path, binary):
    folder, _ = results_folder
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    result = init_folder(folder, "configs/quick.toml", SMALL)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "already exists and is not an empty folder; choose another" in result.stderr
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert init_folder(other, "configs/quick.toml", SMALL).returncode == 2
    assert [path.name for path in other.iterdir()] == ["notes.txt"]
    with pytest.raises(peer.PeerError, match=r"^attnbench append: .*already exists and is not an empty folder"):
        peer.Attnbench(binary, folder).init("configs/quick.toml", SMALL, "cpu", DESCRIPTION)


def test_plan_gives_each_case_its_seed_and_the_tolerances_run_applies(tmp_path):
    plan = plan_json("configs/quick.toml", "--variants", "naive", "--set", "axes.seq_len=[16]", *TYPED)
    seeds = [c["seed"] for c in plan["cases"]]
    assert len(set(seeds)) == len(seeds)  # every case its own inputs
    reseeded = plan_json("configs/quick.toml", "--variants", "naive", "--set", "axes.seq_len=[16]",
                         "--set", "measure.seed=7", *TYPED)
    assert all(a["seed"] != b["seed"] for a, b in zip(plan["cases"], reseeded["cases"]))
    assert set(plan["tolerances"]) == {"fp32", "bf16", "fp16"}
    # What `run` records as the tolerance applied on these (standard normal) inputs.
    run_attnbench("run", "configs/quick.toml", "--out", tmp_path / "run", "--variants", "naive",
                  "--set", "axes.seq_len=[16]", *TYPED, "--set", "measure.min_time_s=0.001",
                  "--set", "measure.repetitions=1", "--set", "measure.warmup=0", check=True, timeout=300)
    records = ar.load_run(tmp_path / "run").cases
    assert len(records) == len(plan["cases"]) and all(r["status"] == "ok" for r in records)
    assert {r["dtype"]: r["oracle_rel_l2_tolerance"] for r in records} == {
        dtype: plan["tolerances"][dtype]["rel_l2"] for dtype in ("fp32", "bf16")}
    # naive on the inputs `prepare` draws from a case's seed, checked by `append`, has the errors
    # `run` recorded for that case: the same inputs, so the same seed.
    overrides = ["axes.seq_len=[16]", *TYPED[1::2]]
    assert init_folder(tmp_path / "peer", "configs/quick.toml", overrides).returncode == 0
    recorded = {r["case_id"]: r for r in records}
    for s, case in list(zip(peer.shapes_of(plan), plan["cases"]))[:4]:
        record = recorded[case["id"]]
        prepared = prepare(None, tmp_path / "peer", {"variant": "naive", **s.shape_fields(), "seed": s.seed},
                           tmp_path / "in")
        out = tmp_path / "o.npy"
        run_attnbench("attend", "--variant", "naive", *(f"--{x}={prepared[x]}" for x in "qkv"),
                      "--mask", s.mask, "--dtype", s.dtype, "--layout", s.layout, "--out", out, check=True)
        appended = peer.Attnbench(attnbench_binary(), tmp_path / "peer").append(
            peer.measurement(case["index"], "naive", "cpu", s, times_ms=[1.0], output=str(out)))
        assert appended["case_id"] == record["case_id"]
        assert appended["oracle_rel_l2_err"] == record["oracle_rel_l2_err"] > 0


def prepare(binary, folder, request: dict, inputs_dir: Path) -> dict:
    return json.loads(run_attnbench("prepare", folder, "--inputs-dir", inputs_dir, input=json.dumps(request),
                                    check=True).stdout)


def test_prepare_writes_the_inputs_and_append_checks_the_output_against_them(results_folder, binary, tmp_path):
    folder, plan = results_folder
    causal = peer.shapes_of(plan)[1]
    assert causal.causal and causal.dtype == "bf16"
    prepared = prepare(binary, folder, {"variant": "torch_flash", **causal.shape_fields(), "seed": causal.seed},
                       tmp_path / "in")
    assert prepared["skip_reason"] == ""
    q, k, v = (np.load(prepared[name]) for name in ("q", "k", "v"))
    assert q.shape == (1, 8, 16, 64) and q.dtype == np.float32
    assert np.array_equal(round_to_bf16(q), q)  # already rounded to the dtype
    # causal, seq_q = seq_kv; one list per sequence (batch 1)
    assert prepared["visible_keys"] == [[[0, row + 1] for row in range(16)]]
    # The harness's naive variant on the same files: its output passes append's oracle.
    out = tmp_path / "o.npy"
    run_attnbench("attend", "--variant", "naive", "--q", prepared["q"], "--k", prepared["k"], "--v", prepared["v"],
                  "--causal", "--dtype", "bf16", "--out", out, check=True)
    appender = peer.Attnbench(binary, folder)
    ok = appender.append(peer.measurement(0, "torch_flash", "cpu", causal, times_ms=[2.0, 1.0, 3.0],
                                          peak_gflops=100.0, output=str(out), threads=2, isa="AVX2"))
    assert ok["status"] == "ok" and ok["oracle_rel_l2_err"] < 2**-8
    assert ok["oracle_rel_l2_tolerance"] == plan["tolerances"]["bf16"]["rel_l2"]
    # Checked against another case's inputs (another seed), the same output fails.
    other = dataclasses.replace(causal, seed=causal.seed + 1)
    failed = appender.append(peer.measurement(1, "torch_math", "cpu", other, times_ms=[1.0], output=str(out)))
    assert failed["status"] == "failed" and failed["reason"].startswith("oracle: relative L2 error")
    assert failed["oracle_rel_l2_err"] > failed["oracle_rel_l2_tolerance"]


def test_prepare_skips_as_the_sweep_would(results_folder, binary, tmp_path):
    folder, plan = results_folder
    full, causal = peer.shapes_of(plan)[:2]
    request = {"variant": "torch_math", **full.shape_fields(), "seed": full.seed}
    huge = prepare(binary, folder, {**request, "workspace_bytes": 2**50}, tmp_path / "in")
    assert huge["skip_reason"].startswith("needs ") and "over memory_cap_gb" in huge["skip_reason"]
    assert not (tmp_path / "in").exists()
    # After an ok record of the variant that took 10 s a run, its next case is predicted over budget.
    appender = peer.Attnbench(binary, folder)
    appender.append(peer.measurement(0, "torch_math", "cpu", full, status="skipped", reason="not this one"))
    assert prepare(binary, folder, request, tmp_path / "in")["skip_reason"] == ""
    slow = appender.append(peer.measurement(1, "torch_math", "cpu", causal, times_ms=[1e4], peak_gflops=1.0))
    assert slow["status"] == "ok"
    predicted = prepare(binary, folder, request, tmp_path / "in2")["skip_reason"]
    assert predicted.startswith("predicted ") and "> case_budget_s" in predicted
    other_variant = prepare(binary, folder, {**request, "variant": "torch_flash"}, tmp_path / "in3")
    assert other_variant["skip_reason"] == ""


def test_prepare_takes_a_case_as_plan_json_prints_it(results_folder, tmp_path):
    """A case copied whole from `plan --json` was refused at its first derived key (element_bytes):
    every key the plan prints is taken, and the inputs are the shape's and seed's alone."""
    folder, plan = results_folder
    case = plan["cases"][0]
    s = peer.shapes_of(plan)[0]
    whole = prepare(None, folder, case, tmp_path / "whole")
    fields = prepare(None, folder, {"variant": case["variant"], **s.shape_fields(), "seed": s.seed},
                     tmp_path / "fields")
    assert whole["skip_reason"] == fields["skip_reason"] == ""
    for name in ("q", "k", "v"):
        assert np.array_equal(np.load(whole[name]), np.load(fields[name]))


@pytest.mark.parametrize("change, message", [
    ({"seed": -1}, "'seed' must be an integer"),
    ({"variant": ""}, "'variant' missing"),
    ({"seq_q": 0}, "seq_q"),
    # Past int64's range: read as int64 it wrapped, and the message named a negative seq_q.
    ({"seq_q": 2**63}, "'seq_q' is 9223372036854775808, past the largest integer"),
    # A misspelt key was ignored: the case was prepared as if it were not there.
    ({"workspace_byte": 1e13}, "unknown key 'workspace_byte'"),
])
def test_prepare_refuses_a_bad_case_with_one_line(results_folder, tmp_path, change, message):
    folder, plan = results_folder
    s = peer.shapes_of(plan)[0]
    request = {"variant": "torch_math", **s.shape_fields(), "seed": s.seed, **change}
    result = run_attnbench("prepare", folder, "--inputs-dir", tmp_path / "in", input=json.dumps(request))
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr


def test_a_measurement_becomes_a_record_as_soon_as_it_is_appended(results_folder, binary):
    folder, plan = results_folder
    causal = peer.shapes_of(plan)[1]
    appender = peer.Attnbench(binary, folder)
    ok = appender.append(peer.measurement(0, "torch_flash", "cpu", causal, times_ms=[2.0, 1.0, 3.0],
                                          peak_gflops=100.0, threads=2, isa="AVX2"))
    # On disk once append returns: a run killed now keeps this case. It stores the facts, its own
    # peak among them; append prints it rated, as every reader shows it: against the roof the
    # harness's checks in the folder give its dtype (append --init took one), not its own.
    derived = ("percent_of_peak", "peak_gbps", "bandwidth_name", "ridge_intensity", "percent_of_bandwidth",
               "disturbed", "disturbed_reason", "unrated_reason", "peak_name", "peak_gflops")
    [stored] = [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines()]
    assert stored == {**{key: value for key, value in ok.items() if key not in derived},
                      "peak_name": "torch_mm_bf16_gflops", "peak_gflops": 100.0}
    skipped = appender.append(peer.measurement(1, "torch_efficient", "cpu", causal, status="skipped",
                                               reason='refused, "quoted" | piped'))
    assert ok["case_id"] == "torch_flash|b1|h8|kv8|q16|k16|dk64|dv64|causal|bf16|bshd"
    assert list(ok) == schema_names()
    assert ok["flops"] == causal.flops == 2 * 8 * (16 * 17 // 2) * (64 + 64)  # unmasked pairs only
    assert ok["time_ms_median"] == 2.0 and ok["time_ms_min"] == 1.0 and ok["time_ms_max"] == 3.0
    assert ok["gflops"] == pytest.approx(causal.flops / 2e-3 / 1e9)
    # bf16's roof: the highest of the FMA, vdpbf16ps and AMX checks (the FMA loop's on a tie).
    best = ar.load_run(folder).peak_check_summary["best"]
    roof = max((name for name in ("cpu_fma_gflops", "cpu_bf16_dot_gflops", "cpu_amx_bf16_gflops")
                if name in best), key=best.get)
    assert ok["peak_name"] == roof and ok["peak_gflops"] == best[roof] > 0
    assert ok["percent_of_peak"] == pytest.approx(100 * ok["gflops"] / ok["peak_gflops"])
    assert (ok["element_bytes"], ok["code_path"], ok["threads"]) == (2, "AVX2", 2)
    assert skipped["reason"] == 'refused, "quoted" | piped'
    assert all(skipped[key] is None for key in ("time_ms_median", "gflops", "percent_of_peak", "oracle_rel_l2_err"))

    run = ar.load_run(folder)
    assert run.name == "torch-quick" and run.gpu_name is None
    assert [(c["variant"], c["status"], c["dtype"], c["layout"]) for c in run.cases] == [
        ("torch_flash", "ok", "bf16", "bshd"), ("torch_efficient", "skipped", "bf16", "bshd")]
    with open(folder / "summary.csv", newline="") as summary:
        rows = list(csv.reader(summary))
    assert rows[0] == schema_names(csv_only=True) and len(rows) == 3


@pytest.mark.parametrize("change, message", [
    ({"times_ms": []}, "an ok measurement needs 'times_ms'"),
    ({"output": "o.npy", "seed": None}, "'output' needs the 'seed' its inputs were drawn from"),
    ({"output": "o.npy", "oracle": {"rel_l2_err": 0}}, "give 'output' or 'oracle', not both"),
    ({"output": "o.npy", "status": "skipped", "times_ms": []},
     "a skipped measurement has no 'output' to check"),
    ({"status": "skipped"}, "a skipped measurement has no 'times_ms'"),
    ({"output": "absent.npy"}, "absent.npy"),
    ({"output": "o.npy", "distribution": "large_scores"}, "the folder's inputs are drawn normal"),
])
def test_append_refusing_a_measurement_is_one_line(results_folder, binary, tmp_path, change, message):
    folder, plan = results_folder
    np.save(tmp_path / "o.npy", np.zeros((1, 8, 16, 64), np.float32))
    measured = {**peer.measurement(0, "torch_math", "cpu", peer.shapes_of(plan)[0], times_ms=[1.0]), **change}
    if "output" in change and change["output"]:
        measured["output"] = str(tmp_path / change["output"])
    with pytest.raises(peer.PeerError, match=r"^attnbench append: stdin line 1: .*" + re.escape(message)):
        peer.Attnbench(binary, folder).append(measured)
    assert (folder / "cases.jsonl").read_text() == ""


# ---------------------------------------------------------------------------
# The command line (no torch)


def run_peer(*args, python_path: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(python_path)) if python_path is not None else None
    return subprocess.run([sys.executable, str(PEER_PATH), *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=600)


def test_help():
    result = run_peer("--help")
    assert result.returncode == 0 and "usage:" in result.stdout
    assert "attnbench plan" in result.stdout and "is_causal" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["configs/absent.toml"], "attnbench plan: configs/absent.toml: cannot open config file"),
    (["configs/quick.toml", "--set", "axes.seq_len=[0]"], "axes.seq_len: must be positive, got 0"),
])
def test_bad_config_exits_2_with_one_line(binary, args, message):
    result = run_peer(*args, "--attnbench", binary)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("torch_sdpa.py: error: attnbench plan: ")
    assert message in result.stderr


def test_without_the_binary_it_exits_2_with_one_line(tmp_path):
    result = run_peer("configs/quick.toml", "--attnbench", tmp_path / "absent")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"torch_sdpa.py: error: cannot run {tmp_path / 'absent'} (")


def test_without_torch_it_exits_2_with_one_line(tmp_path, binary):
    broken = tmp_path / "site" / "torch"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('no torch in this test')\n")
    result = run_peer("configs/quick.toml", "--device", "cpu", "--out", tmp_path / "out", "--attnbench", binary,
                      python_path=tmp_path / "site")
    assert result.returncode == 2
    assert result.stderr == "torch_sdpa.py: error: cannot import torch (no torch in this test)\n"
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------
# The timing code, on a stand-in for torch (numpy underneath), so that it is exercised here too:
# the stand-in's math backend computes SDPA as PyTorch documents it (is_causal aligned to the
# top-left) in float64 and rounds the output to the inputs' dtype; every other backend takes
# bf16 and fp16 only and refuses fp32 with a warning, as PyTorch's flash and cuDNN do on the GPU.


def round_to_bf16(values):
    """Round-to-nearest-even to bf16's 8 significant bits, kept in fp32 storage."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return rounded.view(np.float32)


class FakeDType:
    def __init__(self, name, itemsize, rounding):
        self.name, self.itemsize, self.rounding = name, itemsize, rounding


FLOAT32 = FakeDType("float32", 4, lambda a: np.asarray(a, dtype=np.float32))
BFLOAT16 = FakeDType("bfloat16", 2, round_to_bf16)
FLOAT16 = FakeDType("float16", 2, lambda a: np.asarray(a, dtype=np.float16).astype(np.float32))
FLOAT64 = FakeDType("float64", 8, lambda a: np.asarray(a, dtype=np.float64))


class FakeTensor:
    def __init__(self, array, dtype=None):
        self.a = np.asarray(array)
        self.dtype = dtype or (FLOAT64 if self.a.dtype == np.float64 else FLOAT32)

    @property
    def shape(self):
        return self.a.shape

    def to(self, dtype_or_device):
        if isinstance(dtype_or_device, str):  # a device: numpy has one
            return self
        return FakeTensor(dtype_or_device.rounding(self.a), dtype_or_device)

    def contiguous(self):
        return FakeTensor(np.ascontiguousarray(self.a), self.dtype)

    def cpu(self):
        return self

    def numpy(self):
        return self.a

    def double(self):
        return FakeTensor(self.a.astype(np.float64), FLOAT64)

    def repeat_interleave(self, repeats, dim):
        return FakeTensor(np.repeat(self.a, repeats, axis=dim), self.dtype)

    def unsqueeze(self, dim):
        return FakeTensor(np.expand_dims(self.a, dim), self.dtype)

    def __getitem__(self, index):
        return FakeTensor(self.a[index], self.dtype)

    def __setitem__(self, index, value):
        self.a[index] = value

    def __matmul__(self, other):
        return FakeTensor(self.a @ other.a)

    def __mul__(self, factor):
        return FakeTensor(self.a * factor)

    def __add__(self, other):
        return FakeTensor(self.a + (other.a if isinstance(other, FakeTensor) else other))

    def __sub__(self, other):
        return FakeTensor(self.a - (other.a if isinstance(other, FakeTensor) else other))

    def __le__(self, other):
        return FakeTensor(self.a <= (other.a if isinstance(other, FakeTensor) else other))

    def __ge__(self, other):
        return FakeTensor(self.a >= (other.a if isinstance(other, FakeTensor) else other))

    def __lt__(self, other):
        return FakeTensor(self.a < (other.a if isinstance(other, FakeTensor) else other))

    def __eq__(self, other):
        return FakeTensor(self.a == (other.a if isinstance(other, FakeTensor) else other))

    def __and__(self, other):
        return FakeTensor(self.a & other.a)

    def __or__(self, other):
        return FakeTensor(self.a | other.a)

    def abs(self):
        return FakeTensor(np.abs(self.a))

    def transpose(self, first, second):
        return FakeTensor(np.swapaxes(self.a, first, second), self.dtype)

    def masked_fill(self, mask, value):
        return FakeTensor(np.where(mask.a, value, self.a))

    def logical_not(self):
        return FakeTensor(np.logical_not(self.a))

    def max(self):
        return FakeTensor(self.a.max())

    def all(self):
        return FakeTensor(self.a.all())

    def item(self):
        return self.a.item()

    def tolist(self):
        return self.a.tolist()

    def numel(self):
        return self.a.size

    def element_size(self):
        return self.dtype.itemsize


class FakeEvent:
    def __init__(self, enable_timing=False):
        self.when = None

    def record(self):
        self.when = time.perf_counter()

    def elapsed_time(self, end):
        return (end.when - self.when) * 1e3


def fake_cuda():
    properties = SimpleNamespace(name="Stand-in GPU", multi_processor_count=1, major=9, minor=0,
                                 total_memory=2**30)
    return SimpleNamespace(
        is_available=lambda: True, OutOfMemoryError=type("OutOfMemoryError", (RuntimeError,), {}),
        Event=FakeEvent, synchronize=lambda: None, reset_peak_memory_stats=lambda: None,
        memory_allocated=lambda: 4096, max_memory_allocated=lambda: 4096 + 10**6,
        empty_cache=lambda: None, get_device_properties=lambda index: properties,
        get_device_name=lambda index: properties.name)


def make_fake_torch(new_tf32_api=False):
    state = SimpleNamespace(backend=None, refuse_gqa=False, corrupt=False, calls=0)
    backend = SimpleNamespace(MATH="MATH", EFFICIENT_ATTENTION="EFFICIENT", FLASH_ATTENTION="FLASH",
                              CUDNN_ATTENTION="CUDNN")

    @contextlib.contextmanager
    def sdpa_kernel(which):
        previous, state.backend = state.backend, which
        try:
            yield
        finally:
            state.backend = previous

    def sdpa(q, k, v, attn_mask=None, is_causal=False, enable_gqa=False):
        state.calls += 1
        if state.backend != backend.MATH and q.dtype is FLOAT32:
            warnings.warn(f"stand-in: {state.backend} takes fp16 and bf16 only")
            raise RuntimeError("No available kernel. Aborting execution.")
        keys, values = k.a.astype(np.float64), v.a.astype(np.float64)
        if keys.shape[1] != q.a.shape[1]:
            if not enable_gqa or state.refuse_gqa:
                warnings.warn("stand-in: no GQA here")
                raise RuntimeError("No available kernel. Aborting execution.")
            group = q.a.shape[1] // keys.shape[1]
            keys, values = np.repeat(keys, group, axis=1), np.repeat(values, group, axis=1)
        scores = q.a.astype(np.float64) @ keys.swapaxes(-1, -2) / np.sqrt(q.a.shape[-1])
        seq_q, seq_kv = scores.shape[-2:]
        mask = np.tril(np.ones((seq_q, seq_kv), bool)) if is_causal else (
            None if attn_mask is None else attn_mask.a)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        out = (weights / weights.sum(axis=-1, keepdims=True)) @ values
        return FakeTensor(out + (1.0 if state.corrupt else 0.0)).to(q.dtype)

    class Generator:
        def __init__(self, device=None):
            self.rng = np.random.default_rng(0)

        def manual_seed(self, seed):
            self.rng = np.random.default_rng(seed)
            return self

    def randn(*shape, device=None, generator=None):
        return FakeTensor((generator or Generator()).rng.standard_normal(shape).astype(np.float32))

    def softmax(x, dim):
        e = np.exp(x.a - x.a.max(axis=dim, keepdims=True))
        return FakeTensor(e / e.sum(axis=dim, keepdims=True))

    torch = types.ModuleType("torch")
    matmul = SimpleNamespace(allow_tf32=True)
    if new_tf32_api:
        matmul.fp32_precision = "tf32"
    torch.__dict__.update(
        __version__="0.0-stand-in", version=SimpleNamespace(cuda=None), Generator=Generator, randn=randn,
        float32=FLOAT32, bfloat16=BFLOAT16, float16=FLOAT16,
        randint=lambda high, size, generator: FakeTensor(generator.rng.integers(0, high, size)),
        arange=lambda n, device=None: FakeTensor(np.arange(n)), softmax=softmax,
        tensor=lambda values, device=None: FakeTensor(np.asarray(values)),
        from_numpy=lambda array: FakeTensor(array),
        stack=lambda tensors: FakeTensor(np.stack([t.a for t in tensors])),
        cat=lambda tensors: FakeTensor(np.concatenate([t.a for t in tensors])),
        isfinite=lambda x: FakeTensor(np.isfinite(x.a)), mm=lambda a, b: FakeTensor(a.a @ b.a),
        linalg=SimpleNamespace(vector_norm=lambda x: FakeTensor(np.linalg.norm(x.a.ravel()))),
        get_num_threads=lambda: 1, get_float32_matmul_precision=lambda: "high",
        set_float32_matmul_precision=lambda value: None,
        backends=SimpleNamespace(cuda=SimpleNamespace(matmul=matmul),
                                 cudnn=SimpleNamespace(allow_tf32=True, version=lambda: None),
                                 cpu=SimpleNamespace(get_cpu_capability=lambda: "STAND-IN")),
        cuda=SimpleNamespace(is_available=lambda: False,
                             OutOfMemoryError=type("OutOfMemoryError", (RuntimeError,), {})),
        fake_state=state)
    attention = types.ModuleType("torch.nn.attention")
    attention.SDPBackend, attention.sdpa_kernel = backend, sdpa_kernel
    nn = types.ModuleType("torch.nn")
    nn.attention, nn.functional = attention, SimpleNamespace(scaled_dot_product_attention=sdpa)
    torch.nn = nn
    return torch, {"torch": torch, "torch.nn": nn, "torch.nn.attention": attention}


@pytest.fixture
def fake_torch_module(monkeypatch):
    torch, modules = make_fake_torch()
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setitem(peer.MM_SIZE, "cpu", 64)  # numpy underneath: keep the peaks quick
    monkeypatch.setitem(peer.MM_SIZE, "cuda", 64)
    return torch


EDGE_TINY = ["--set", "axes.seq_q=[1, 5]", "--set", "axes.seq_kv=[5, 33]", "--set", "axes.d_k=[8]",
             "--set", "axes.d_v=[12]", "--set", "oracle.full_check_max_n=16",
             "--set", 'axes.dtype=["fp32", "bf16"]', "--set", 'axes.layout=["bshd"]',
             "--set", "measure.min_time_s=0.001", "--repeats", "2"]


def test_stand_in_run_checks_masks_gqa_sampled_rows_and_dtypes(fake_torch_module, tmp_path, binary, capsys):
    out = tmp_path / "edge"
    code = peer.main(["configs/gpu-edge.toml", "--device", "cpu", "--out", str(out), "--attnbench", str(binary),
                      *EDGE_TINY])
    assert code == 0, capsys.readouterr()
    run = ar.load_run(out)
    by_variant = ar.group_by(run.cases, lambda c: c["variant"])
    math_cases = by_variant["torch_math"]
    assert len(math_cases) == 2 * 2 * 2 * 2 * 2  # seq pairs, causal, kv_heads, dtype
    # The end-aligned mask for seq_q < seq_kv agrees with the float64 reference; so does GQA; bf16
    # passes its own tolerance against a reference from the rounded inputs.
    assert all(c["status"] == "ok" and c["oracle_rel_l2_err"] < 1e-6 for c in math_cases if c["dtype"] == "fp32")
    bf16 = [c for c in math_cases if c["dtype"] == "bf16"]
    assert bf16 and all(c["status"] == "ok" and c["oracle_rel_l2_err"] < 2**-8 for c in bf16)
    tolerances = peer.read_plan(binary, "configs/gpu-edge.toml", [])["tolerances"]
    assert {(c["dtype"], c["oracle_rel_l2_tolerance"]) for c in math_cases} == {
        (dtype, tolerances[dtype]["rel_l2"]) for dtype in ("fp32", "bf16")}
    # Rated by the harness's rule against the harness's checks in the folder: one roof per dtype.
    best = run.peak_check_summary["best"]
    bf16_roof = max((name for name in ("cpu_fma_gflops", "cpu_bf16_dot_gflops",
                                       "cpu_amx_bf16_gflops") if name in best), key=best.get)
    assert {(c["dtype"], c["peak_name"]) for c in math_cases} == {
        ("fp32", "cpu_fma_gflops"), ("bf16", bf16_roof)}
    assert {c["oracle_sampled"] for c in math_cases} == {True, False}  # seq_kv 33 > 16: sampled
    assert any(c["causal"] and c["seq_q"] < c["seq_kv"] for c in math_cases)
    gqa = [c for c in math_cases if c["kv_heads"] != c["heads"]]
    assert gqa and all("enable_gqa=True" in c["reason"] for c in gqa)
    masked = [c for c in math_cases if c["causal"] and c["seq_q"] != c["seq_kv"]]
    assert all("end-aligned boolean mask" in c["reason"] for c in masked)
    # The other backends: refused in fp32 with the stand-in's reason, timed in bf16.
    for variant, backend in (("torch_flash", "FLASH"), ("torch_efficient", "EFFICIENT"), ("torch_cudnn", "CUDNN")):
        cases = by_variant[variant]
        assert all(c["status"] == "skipped" and f"stand-in: {backend} takes fp16 and bf16 only" in c["reason"]
                   for c in cases if c["dtype"] == "fp32")
        assert all(c["status"] == "ok" for c in cases if c["dtype"] == "bf16")
    assert all(c["code_path"] == "STAND-IN" and c["layout"] == "bshd" for c in run.cases)
    assert {"torch_mm_fp32_gflops", "torch_mm_bf16_gflops", "cpu_fma_gflops"} <= set(run.manifest["peaks"])
    assert run.manifest["peer"]["tf32_settings_found"]["torch.backends.cuda.matmul.allow_tf32"] is True
    assert run.manifest["peer"]["tf32_settings_used"]["torch.backends.cuda.matmul.allow_tf32"] is False
    assert run.manifest["peer"]["torch"] == "0.0-stand-in" and run.name == "torch-gpu-edge"
    assert run.manifest["config_overrides"] == [arg for arg in EDGE_TINY[:-2] if arg != "--set"]


MASKS_TINY = ["--set", "axes.seq_len=[40]", "--set", "axes.d_k=[8]", "--set", "axes.heads=[2]",
              "--set", 'axes.mask=["window:5", "prefix:7", "documents:4", "causal"]',
              "--set", "axes.alibi=[false, true]", "--set", "axes.softcap=[0]",
              "--set", "oracle.full_check_max_n=16",
              "--set", "measure.min_time_s=0.001", "--repeats", "2", "--backends", "math"]


def test_stand_in_times_window_prefix_and_documents_as_boolean_masks(fake_torch_module, tmp_path,
                                                                       binary, capsys):
    out = tmp_path / "masks"
    code = peer.main(["configs/masks.toml", "--device", "cpu", "--out", str(out), "--attnbench",
                      str(binary), *MASKS_TINY])
    assert code == 0, capsys.readouterr()
    assert "leaving out 4 cases (alibi: PyTorch's SDPA takes no ALiBi bias)" in capsys.readouterr().err
    cases = ar.load_run(out).cases
    assert sorted(c["mask"] for c in cases) == ["causal", "documents:4", "prefix:7", "window:5"]
    # Each mask reaches SDPA built by mask.h's rule: the float64 reference (sampled rows, masked
    # by the same rule) agrees, and the record keeps the mask, the lengths and the density.
    assert all(c["status"] == "ok" and c["oracle_rel_l2_err"] < 1e-6 for c in cases)
    documents = next(c for c in cases if c["mask"] == "documents:4")
    assert len(documents["doc_lens"]) == 4 and sum(documents["doc_lens"]) == 40
    window = next(c for c in cases if c["mask"] == "window:5")
    assert "window:5 as an explicit end-aligned boolean mask" in window["reason"]
    assert window["density"] < 0.2 and window["flops"] < window["dense_flops"]


@pytest.fixture
def stand_in_folder(tmp_path, binary):
    """A folder for prepare: the edge config's plan and attnbench's results folder for it."""
    plan = peer.read_plan(binary, "configs/gpu-edge.toml", [])
    folder = peer.Attnbench(binary, tmp_path / "run")
    folder.init("configs/gpu-edge.toml", [], "cpu", {})
    return plan, folder


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_stand_in_loads_attnbench_inputs_in_the_dtype_and_bshd_as_a_view(fake_torch_module, stand_in_folder,
                                                                       tmp_path, dtype):
    plan, folder = stand_in_folder
    timer = peer.Peer(fake_torch_module, "cpu", plan, 2)
    rounding = {"fp32": FLOAT32, "bf16": BFLOAT16, "fp16": FLOAT16}[dtype].rounding
    for layout in ("bshd", "bhsd"):
        case = shape(dtype, layout, kv_heads=2, d_v=6)
        prepared = folder.prepare("torch_math", case, 0, tmp_path / layout)
        q, k, v = (timer.load_input(case, prepared[name]) for name in ("q", "k", "v"))
        assert (q.a.shape, k.a.shape, v.a.shape) == ((1, 4, 3, 8), (1, 2, 5, 8), (1, 2, 5, 6))
        for tensor, name in ((q, "q"), (k, "k"), (v, "v")):
            assert np.array_equal(tensor.a, np.load(prepared[name]))  # exactly attnbench's values
            assert np.array_equal(rounding(tensor.a), tensor.a)
            contiguous = np.swapaxes(tensor.a, 1, 2) if layout == "bshd" else tensor.a
            assert contiguous.flags.c_contiguous and tensor.a.flags.c_contiguous == (layout == "bhsd")


def test_stand_in_mask_is_the_keys_attnbench_gives(fake_torch_module, stand_in_folder, tmp_path):
    plan, folder = stand_in_folder
    timer = peer.Peer(fake_torch_module, "cpu", plan, 2)
    case = shape(causal=True, seq_q=3, seq_kv=5)  # end-aligned: row 0 sees keys 0..2
    prepared = folder.prepare("torch_math", case, 0, tmp_path / "in")
    assert timer.sequence_masks(case, prepared["visible_keys"])[5].a.tolist() == [
        [True, True, True, False, False], [True, True, True, True, False], [True] * 5]


@pytest.mark.parametrize("mask", ["causal", "window:2"])
def test_prepare_gives_each_sequence_of_a_ragged_batch_its_own_keys(fake_torch_module, stand_in_folder,
                                                                     tmp_path, mask):
    plan, folder = stand_in_folder
    case = shape(causal=mask == "causal", seq_q=3, seq_kv=32, batch=2, mask=mask, kv_lens=(8, 32))
    prepared = folder.prepare("torch_math", case, 0, tmp_path / "in")
    short, long = prepared["visible_keys"]
    # Each mask ends at its own sequence's last key: row 2 of the 8-key sequence sees key 7, not 31.
    first = {"causal": lambda end: 0, "window:2": lambda end: end - 3}[mask]
    assert short == [[first(end), end] for end in (6, 7, 8)]
    assert long == [[first(end), end] for end in (30, 31, 32)]
    masks = peer.Peer(fake_torch_module, "cpu", plan, 2).sequence_masks(case, prepared["visible_keys"])
    assert masks[8].a.shape == (3, 8) and masks[32].a.shape == (3, 32)
    with pytest.raises(ValueError, match="key ranges for 1 sequences; expected 2"):
        peer.Peer(fake_torch_module, "cpu", plan, 2).sequence_masks(case, [short])


def test_stand_in_ragged_batches_pass_the_oracle_under_every_mask(fake_torch_module, tmp_path, binary):
    """A ragged batch through the peer: each sequence called on its own keys with its own
    end-aligned mask (is_causal would align top-left), and append's oracle agrees."""
    out = tmp_path / "ragged"
    assert peer.main(["configs/decode.toml", "--device", "cpu", "--out", str(out), "--backends", "math",
                      "--set", "axes.seq_q=[4]", "--set", 'axes.kv_lens=["8,32"]', "--set", "axes.heads=[2]",
                      "--set", "axes.kv_heads=[1]", "--set", "axes.d_k=[8]", "--set", 'axes.dtype=["fp32"]',
                      "--set", 'axes.kv_cache=["contiguous"]', "--set", 'axes.mask=["none", "causal", "window:2"]',
                      "--set", "measure.min_time_s=0.001", "--repeats", "2", "--attnbench", str(binary)]) == 0
    cases = ar.load_run(out).cases
    assert sorted(c["mask"] for c in cases) == ["causal", "none", "window:2"]
    assert all(c["status"] == "ok" and c["oracle_rel_l2_err"] < 1e-6 for c in cases), cases


def test_stand_in_falls_back_to_repeat_interleave_and_reports_refusals(fake_torch_module, stand_in_folder,
                                                                       tmp_path):
    plan, folder = stand_in_folder
    timer = peer.Peer(fake_torch_module, "cpu", plan, 2)
    case = shape(kv_heads=2)
    prepared = folder.prepare("torch_math", case, 0, tmp_path / "in")
    q, k, v = (timer.load_input(case, prepared[name]) for name in ("q", "k", "v"))
    fake_torch_module.fake_state.refuse_gqa = True
    call, note = timer.sdpa_call("math", case, q, k, v, prepared["visible_keys"])
    assert call is not None and "repeat_interleave" in note
    assert call().a.shape == (1, 4, 3, 8)
    call, reason = timer.sdpa_call("efficient", case, q, k, v, prepared["visible_keys"])
    assert call is None and reason.startswith("torch efficient backend refused test shape: ")
    assert "stand-in: EFFICIENT takes fp16 and bf16 only" in reason


def test_stand_in_wrong_output_fails_the_oracle(fake_torch_module, tmp_path, binary):
    fake_torch_module.fake_state.corrupt = True
    out = tmp_path / "bad"
    assert peer.main(["configs/quick.toml", "--device", "cpu", "--out", str(out), "--backends", "math",
                      "--set", "axes.seq_len=[4]", "--set", "axes.causal=[false]", "--repeats", "2",
                      "--attnbench", str(binary)]) == 1
    [case] = ar.load_run(out).cases
    # Timed, then failed by append's oracle with the harness's fp32 tolerance.
    assert case["status"] == "failed" and case["reason"].startswith("oracle: relative L2 error")
    assert case["oracle_rel_l2_err"] > case["oracle_rel_l2_tolerance"] == 1e-5
    assert case["time_ms_median"] > 0


def test_stand_in_gpu_path_times_with_events_and_counts_workspace(fake_torch_module, tmp_path, binary):
    fake_torch_module.cuda = fake_cuda()
    fake_torch_module.version.cuda = "13.0"
    out = tmp_path / "gpu"
    assert peer.main(["configs/gpu-scaling.toml", "--out", str(out), "--set", "axes.seq_len=[8, 16]",
                      "--set", "axes.d_k=[8]", "--set", "axes.heads=[2]", "--set", "axes.causal=[false]",
                      "--set", 'axes.dtype=["fp32", "bf16"]', "--repeats", "3",
                      "--set", "measure.min_time_s=0.001", "--attnbench", str(binary)]) == 0
    run = ar.load_run(out)
    # The GPU block is the harness's own (none in a build or machine without CUDA); the torch.mm
    # peaks are the peer's.
    assert run.manifest["peaks"]["torch_mm_fp32_gflops"] > 0 and run.manifest["peaks"]["torch_mm_bf16_gflops"] > 0
    assert run.manifest["peer"]["timing"].startswith("CUDA events")
    math_cases = [c for c in run.cases if c["variant"] == "torch_math"]
    assert len(math_cases) == 4 and all(c["status"] == "ok" for c in math_cases)
    # 10^6 bytes above the baseline at the peak, less the output's bytes.
    assert [c["workspace_bytes"] for c in math_cases] == [
        10**6 - c["element_bytes"] * 2 * c["seq_q"] * 8 for c in math_cases]
    assert {c["element_bytes"] for c in math_cases} == {4, 2}
    assert all(c["threads"] == 0 and c["device"] == "cuda" and c["code_path"] == "" for c in run.cases)
    flash = [c for c in run.cases if c["variant"] == "torch_flash"]
    assert all(c["status"] == "skipped" and "FLASH takes fp16 and bf16 only" in c["reason"]
               for c in flash if c["dtype"] == "fp32")
    assert all(c["status"] == "ok" for c in flash if c["dtype"] == "bf16")


def test_stand_in_with_the_new_tf32_switches(monkeypatch, binary):
    edge_plan = peer.read_plan(binary, "configs/gpu-edge.toml", [])
    torch, modules = make_fake_torch(new_tf32_api=True)
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    settings = peer.Peer(torch, "cpu", edge_plan, 2).strict_fp32()
    assert settings["found"]["torch.backends.cuda.matmul.fp32_precision"] == "tf32"
    assert settings["used"]["torch.backends.cuda.matmul.fp32_precision"] == "ieee"


# ---------------------------------------------------------------------------
# With PyTorch (the GPU machine may have it; CI does not)


TINY = ["--set", "axes.seq_len=[16, 33]", "--set", "axes.heads=[2]", "--set", "axes.d_k=[8]",
        "--set", "measure.min_time_s=0.001", "--set", "measure.warmup=1", "--repeats", "3", *TYPED]


def test_cpu_run_times_every_backend_pytorch_takes_on_the_cpu(tmp_path, binary):
    pytest.importorskip("torch", reason=TORCH_MISSING)
    result = run_peer("configs/quick.toml", "--device", "cpu", "--out", tmp_path / "cpu", "--attnbench", binary,
                      *TINY)
    assert result.returncode == 0, result.stdout + result.stderr
    run = ar.load_run(tmp_path / "cpu")
    by_variant = ar.group_by(run.cases, lambda c: c["variant"])
    # math, and flash (PyTorch's CPU fused kernel), in every dtype and layout.
    for variant in ("torch_math", "torch_flash"):
        cases = by_variant[variant]
        assert len(cases) == 2 * 2 * 2 * 2  # seq_len, causal, dtype, layout
        assert all(c["status"] == "ok" and c["oracle_rel_l2_err"] <= c["oracle_rel_l2_tolerance"] for c in cases)
        assert {(c["dtype"], c["layout"]) for c in cases} == {
            ("fp32", "bhsd"), ("fp32", "bshd"), ("bf16", "bhsd"), ("bf16", "bshd")}
    # The rest are refused by PyTorch on the CPU, with its reason.
    others = by_variant["torch_efficient"] + by_variant["torch_cudnn"]
    assert others and all(c["status"] == "skipped" and "backend refused" in c["reason"] for c in others)
    assert {"torch_mm_fp32_gflops", "torch_mm_bf16_gflops"} <= set(run.manifest["peaks"])


def test_gpu_run_times_flash_and_cudnn_in_bf16(tmp_path, binary):
    torch = pytest.importorskip("torch", reason=TORCH_MISSING)
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    result = run_peer("configs/gpu-scaling.toml", "--out", tmp_path / "gpu", "--attnbench", binary,
                      "--set", "axes.seq_len=[64, 128]", "--set", "axes.heads=[2]", "--set", "axes.d_k=[64]",
                      "--set", "measure.min_time_s=0.001", "--repeats", "3", *TYPED)
    assert result.returncode == 0, result.stdout + result.stderr
    run = ar.load_run(tmp_path / "gpu")
    by_variant = ar.group_by(run.cases, lambda c: c["variant"])
    assert set(by_variant) == {"torch_math", "torch_efficient", "torch_cudnn", "torch_flash"}
    assert all(c["status"] == "ok" for c in by_variant["torch_math"])
    flash = by_variant["torch_flash"]
    assert all(c["status"] == "skipped" and c["reason"] for c in flash if c["dtype"] == "fp32")
    assert all(c["status"] == "ok" for c in flash if c["dtype"] == "bf16")
    assert all(c["status"] in ("ok", "skipped") for c in by_variant["torch_cudnn"])
    gpu = run.manifest["gpu"]
    assert gpu["sgemm_gflops"] > 0 and gpu["bf16_gemm_gflops"] > 0


# -- the stopping rule and interleaving ------------------------------------------------------------

stopping_rule = sys.modules["stopping_rule"]  # imported by the peer, from beside it


@pytest.mark.parametrize("count", [1, 5, 6, 7, 30, 101])
def test_the_stopping_rule_reads_the_interval_attnbench_records(stand_in_folder, count):
    """The peer stops on the same interval `attnbench append` records (statistics.cpp): for skewed
    samples of every size, from too few for an interval up."""
    plan, folder = stand_in_folder
    rng = np.random.default_rng(count)
    times = list(1.0 + rng.exponential(0.2, count))
    measured = peer.measurement(count, "torch_math", "cpu", shape(), times_ms=times,
                                target_rel_ci=0.05)
    record = folder.append(measured)
    ours = stopping_rule.median_rel_half_width(times)
    if count < 6:
        assert ours == float("inf") and not record["rel_ci_half_width"]
        assert record["target_reached"] is False
    else:
        assert ours == pytest.approx(record["rel_ci_half_width"], rel=1e-12)
        assert record["target_reached"] == (ours <= 0.05)
    assert record["target_rel_ci"] == 0.05


def test_the_peer_samples_until_the_target_or_the_time_limit():
    """Repetitions of min_time_s (calls set by a probe), at least `repetitions` of them; then more
    until the interval reaches the target, or max_time_s is spent."""
    def rule(target, max_time_s=10.0):
        return stopping_rule.StoppingRule(repetitions=3, min_time_s=0.01, target_rel_ci=target,
                                          max_time_s=max_time_s, min_calls=2)

    calls = []

    def timer(values):
        def time_calls(n):
            calls.append(n)
            return [next(values) for _ in range(n)]
        return time_calls

    steady = iter([1.0] * 10_000)
    samples = rule(0).sample(timer(steady))
    assert calls == [1, 10, 10, 10] and len(samples) == 30  # probe, then 3 x ceil(10 ms / 1 ms)

    calls.clear()
    rng = np.random.default_rng(7)
    noisy = iter(1.0 + rng.exponential(0.5, 100_000))
    samples = rule(0.01).sample(timer(noisy))
    assert len(calls) > 4  # past the 3 repetitions: the interval was still wider than ±1%
    assert stopping_rule.median_rel_half_width(samples) <= 0.01
    assert stopping_rule.median_rel_half_width(samples[:-10]) > 0.01  # and not one more than needed

    calls.clear()
    samples = rule(1e-6, max_time_s=0.2).sample(timer(iter(1.0 + rng.exponential(0.5, 100_000))))
    assert 0.2 <= sum(samples) / 1e3 < 0.2 + 0.02  # gave up once 0.2 s of calls were spent


def test_the_peer_interleaves_attnbench_case_by_case_and_compare_says_so(fake_torch_module, tmp_path,
                                                                         binary, capsys):
    out = tmp_path / "torch-quick"
    assert peer.main(["configs/quick.toml", "--device", "cpu", "--out", str(out), "--backends", "math",
                      "--set", "axes.seq_len=[16, 32]", "--set", "measure.min_time_s=0.001",
                      "--set", "measure.peaks=skip", "--interleave", "flash_cpu",
                      "--attnbench", str(binary)]) == 0
    printed = capsys.readouterr().out.splitlines()
    ours = out.with_name("torch-quick-flash_cpu")
    torch_run, attnbench_run = ar.load_run(out), ar.load_run(ours)
    assert [c["variant"] for c in attnbench_run.cases] == ["flash_cpu"] * 4
    assert [c["seq_kv"] for c in attnbench_run.cases] == [c["seq_kv"] for c in torch_run.cases]
    assert torch_run.manifest["peer"]["interleaved_with"] == {"variant": "flash_cpu", "folder": str(ours)}
    # Alternating: every PyTorch case is followed by attnbench's run of the same case.
    steps = [line for line in printed if line.startswith("[") or line.startswith("  flash_cpu ")]
    assert [s.startswith("[") for s in steps] == [True, False] * 4
    assert all(c["status"] == "ok" for c in torch_run.cases + attnbench_run.cases)

    assert Command("compare").main([out, ours, "--pair", "torch_math:flash_cpu"]) == 0
    assert "taken interleaved case by case" in capsys.readouterr().out


def test_interleave_refuses_an_unknown_variant_before_any_case(fake_torch_module, tmp_path, binary, capsys):
    code = peer.main(["configs/quick.toml", "--device", "cpu", "--out", str(tmp_path / "t"),
                      "--set", "axes.seq_len=[16]", "--interleave", "no_such_variant",
                      "--attnbench", str(binary)])
    assert code == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1 and "no_such_variant" in error
    assert not (tmp_path / "t").exists() and not (tmp_path / "t-no_such_variant").exists()
