"""The readers' side of a quantized KV cache (kv_dtype): records from before the axis load with
K and V in their dtype and no quantization error; the kv_quant plot places each quantized record
at its error and its speed-up over its unquantized twin; the PyTorch peer leaves quantized cases
out."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from attnbench import results as ar
from attnbench.plots import kv_quant
from results_factory import make_case, write_run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "peers"))


def decode_case(kv_dtype: str | None, time_ms: float, error: float | None) -> dict:
    case = make_case("flash_cpu", seq_q=1, seq_kv=4096, heads=8, kv_heads=2, dtype="bf16",
                     time_ms=time_ms)
    if kv_dtype is not None:
        case["kv_dtype"] = kv_dtype
        case["kv_quant_rel_l2_err"] = error
        if error is not None:
            case["case_id"] += f"|kv_dtype:{kv_dtype}"
    return case


def test_old_records_read_as_unquantized(tmp_path):
    run = ar.load_run(write_run(tmp_path / "old", [decode_case(None, 2.0, None)]))
    assert run.cases[0]["kv_dtype"] == "bf16"
    assert run.cases[0]["kv_quant_rel_l2_err"] is None


def test_the_plot_pairs_each_quantized_record_with_its_twin(tmp_path):
    cases = [decode_case("bf16", 2.0, None), decode_case("int8", 1.25, 0.006),
             decode_case("fp8_e4m3", 1.0, 0.03)]
    run = ar.load_run(write_run(tmp_path / "q", cases))
    points = {c["kv_dtype"]: (c["kv_quant_rel_l2_err"], speedup)
              for c, speedup in kv_quant.trade_points(run)}
    assert points == {"int8": (0.006, pytest.approx(1.6)), "fp8_e4m3": (0.03, pytest.approx(2.0))}
    written = kv_quant.plot(run, tmp_path / "plots")
    assert {p.name for p in written} == {"kv_quant.png", "kv_quant.svg"}


def test_no_quantized_record_is_not_applicable(tmp_path):
    run = ar.load_run(write_run(tmp_path / "plain", [decode_case(None, 2.0, None)]))
    with pytest.raises(ar.NotApplicable):
        kv_quant.trade_points(run)


def test_the_peer_leaves_quantized_cases_out():
    import torch_sdpa
    assert torch_sdpa.quantized_cache({"dtype": "bf16", "kv_dtype": "int8"})
    assert not torch_sdpa.quantized_cache({"dtype": "bf16", "kv_dtype": "bf16"})
    assert not torch_sdpa.quantized_cache({"dtype": "fp32"})


def test_a_run_records_the_error_and_the_bytes_of_codes_and_scales(tmp_path, sweep_file):
    from binary import run_attnbench
    config = sweep_file("kv.toml", name="kv", variants=("naive", "flash_cpu"), seq_len=None,
                        heads=(8,), kv_heads=(2,), seq_q=(1,), seq_kv=(300,), d_k=(32,),
                        dtype=("bf16",), kv_dtype=("dtype", "int8", "fp8_e4m3"),
                        kv_cache=("contiguous", "paged:16"))
    run_attnbench("run", config, "--out", tmp_path / "kv", check=True)
    run = ar.load_run(tmp_path / "kv")
    assert len(run.cases) == 12 and all(c["status"] == "ok" for c in run.cases)
    q_and_o = 2 * 8 * 1 * 32 * 2                       # Q and O, bf16
    rows = 2 * 300                                      # (KV head, key) rows of the one sequence
    table = 4 * ((300 + 15) // 16)                      # int32 block table entries, paged:16
    # K and V: bf16 elements; or 1-byte codes plus a K and a V fp32 scale per row (int8) or per
    # (sequence, KV head) (fp8_e4m3).
    expected = {"bf16": rows * 64 * 2, "int8": rows * 64 + 2 * rows * 4,
                "fp8_e4m3": rows * 64 + 2 * 2 * 4}
    for case in run.cases:
        paged = case["kv_cache"] == "paged:16"
        assert case["bytes_moved"] == q_and_o + expected[case["kv_dtype"]] + (table if paged else 0)
        if case["kv_dtype"] == "bf16":
            assert case["kv_quant_rel_l2_err"] is None
        else:
            assert 1e-4 < case["kv_quant_rel_l2_err"] < 0.1
            assert case["oracle_rel_l2_err"] < case["oracle_rel_l2_tolerance"]
