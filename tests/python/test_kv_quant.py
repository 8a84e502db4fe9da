"""The readers' side of a quantized KV cache (kv_dtype): records from before the axis load with
K and V in their dtype and no quantization error; the kv_quant plot places each quantized record
at its error and its speed-up over its unquantized twin; the PyTorch peer leaves quantized cases
out."""

from __future__ import annotations

import os
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


def test_the_plan_tells_the_peer_to_leave_quantized_cases_out(sweep_file):
    """Which cases the PyTorch peer leaves out is the plan's word (the axes table), not the peer's."""
    import json
    from binary import run_attnbench
    config = sweep_file("kv.toml", name="kv", variants=("naive",), seq_len=None, heads=(8,),
                        kv_heads=(2,), seq_q=(1,), seq_kv=(300,), d_k=(32,), dtype=("bf16",),
                        kv_dtype=("dtype", "int8"))
    plan = json.loads(run_attnbench("plan", config, "--json", check=True).stdout)
    reasons = {c["kv_dtype"]: c["peer_skip_reason"] for c in plan["cases"]}
    assert reasons["bf16"] == ""
    assert reasons["int8"].startswith("kv_dtype: PyTorch's SDPA reads no int8 or fp8 cache")


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
        if case["variant"] == "flash_cpu":  # the path names what it widens: the codes
            # A bf16 cache on the avx512_bf16 path takes its scores as vdpbf16ps products (d_k 32,
            # four rows per KV head here) and widens V alone.
            dot = case["kv_dtype"] == "bf16" and case["code_path"].startswith("avx512_bf16")
            suffix = "vdpbf16ps_scores_widened_bf16" if dot else f"widened_{case['kv_dtype']}"
            assert case["code_path"].endswith(f"+decode_{suffix}"), case["code_path"]


def attend_outputs(tmp_path, name, k, v, *extra):
    """attend's O for Q, K, V of a ragged batch (kv_lens 3 and 8) over a quantized cache."""
    from binary import run_attnbench
    import numpy as np
    folder = tmp_path / name
    folder.mkdir()
    q = np.random.default_rng(1).standard_normal((2, 4, 1, 16)).astype(np.float32)
    for tensor, array in (("q", q), ("k", k), ("v", v)):
        np.save(folder / f"{tensor}.npy", array)
    result = run_attnbench("attend", "--variant", "flash_cpu", "--q", folder / "q.npy", "--k",
                           folder / "k.npy", "--v", folder / "v.npy", "--kv-lens", "3,8",
                           "--out", folder / "o.npy", *extra)
    return result, (folder / "o.npy")


@pytest.mark.parametrize("kv_dtype", ["int8", "fp8_e4m3"])
def test_a_ragged_sequences_padding_never_moves_its_scales(tmp_path, kv_dtype):
    """What lies past a sequence's own keys in a contiguous file (attend takes any) is never read,
    and must not set the sequence's scale: the same O with the padding zero or huge."""
    import numpy as np
    rng = np.random.default_rng(2)
    k = rng.standard_normal((2, 2, 8, 16)).astype(np.float32)
    v = rng.standard_normal((2, 2, 8, 16)).astype(np.float32)
    outputs = []
    for name, padding in (("zero", 0.0), ("huge", 1e4)):
        kk, vv = k.copy(), v.copy()
        kk[0, :, 3:], vv[0, :, 3:] = padding, padding  # sequence 0 holds 3 keys
        result, out = attend_outputs(tmp_path, name, kk, vv, "--kv-dtype", kv_dtype)
        assert result.returncode == 0, result.stderr
        outputs.append(np.load(out))
    assert np.array_equal(outputs[0], outputs[1])


def test_a_value_the_dtype_cannot_hold_is_refused_by_name(tmp_path):
    import numpy as np
    k = np.ones((2, 2, 8, 16), dtype=np.float32)
    k[1, 0, 5, 2] = 1e6  # finite in fp32, infinite once rounded to fp16
    result, out = attend_outputs(tmp_path, "inf", k, np.ones_like(k), "--kv-dtype", "int8",
                                 "--dtype", "fp16")
    assert result.returncode != 0 and not out.exists()
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "K element" in lines[0] and "inf" in lines[0], lines


def e4m3_value(code):
    """The value of an OCP E4M3 code (bias 7; exponent field 0: subnormals)."""
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 0xF, code & 0x7
    if exponent == 0:
        return sign * 2.0 ** -6 * mantissa / 8
    return sign * 2.0 ** (exponent - 7) * (1 + mantissa / 8)


def every_code_at_scale_one(kv_dtype):
    """Every finite value a code holds, its largest magnitude among them, so the quantizer's scale
    is exactly 1 and each value its own code: int8's -127..127, E4M3's 254 (0x7F, 0xFF are NaN)."""
    import numpy as np
    if kv_dtype == "int8":
        return np.arange(-127, 128, dtype=np.float32)
    return np.array([e4m3_value(c) for c in range(256) if c & 0x7F != 0x7F], dtype=np.float32)


@pytest.mark.parametrize("kv_dtype", ["int8", "fp8_e4m3"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("kv_cache", ["contiguous", "paged:16"])
@pytest.mark.parametrize("isa", ["scalar", "avx2", "avx512", "avx512_bf16", "avx512_bf16_emulated"])
def test_decode_reads_every_code_exactly_on_every_path(tmp_path, kv_dtype, dtype, kv_cache, isa):
    """One key: its weight is exactly 1, so O is V's dequantized row, bit for bit, whatever way a
    path widens the codes (fp8 through fp16 on AVX-512 and AVX2, its 2^8 in the scale), E4M3's
    subnormals and largest values included; V's 254 or 255 columns end in a scalar tail."""
    import numpy as np
    from binary import run_attnbench
    from test_attend_large_values import runs_here
    if not runs_here(isa):
        pytest.skip(f"flash_cpu's {isa} path does not run on this CPU")
    v = every_code_at_scale_one(kv_dtype).reshape(1, 1, 1, -1)
    rng = np.random.default_rng(3)
    arrays = {"q": rng.standard_normal((1, 1, 1, 16)).astype(np.float32),
              "k": rng.standard_normal((1, 1, 1, 16)).astype(np.float32), "v": v}
    for name, array in arrays.items():
        np.save(tmp_path / f"{name}.npy", array)
    env = dict(os.environ, ATTNBENCH_FLASH_CPU_ISA=isa)
    result = run_attnbench("attend", "--variant", "flash_cpu", "--q", tmp_path / "q.npy", "--k",
                           tmp_path / "k.npy", "--v", tmp_path / "v.npy", "--kv-dtype", kv_dtype,
                           "--kv-cache", kv_cache, "--dtype", dtype, "--out", tmp_path / "o.npy",
                           env=env)
    assert result.returncode == 0, result.stderr
    assert np.array_equal(np.load(tmp_path / "o.npy").astype(np.float32), v)
