"""`attnbench attend --backward` against an independent float64 numpy backward: dQ, dK, dV for
every CPU variant that declares a backward, GQA and seq_q != seq_kv, causal; float16 gradients
for float16 inputs; flash_cpu's bf16 backward on the amx_bf16 path (AMX where the CPU has it, and
its emulated tiles), also where one key takes each row's weight; and the one-line refusals of
mismatched or missing files."""

import json
import os

import numpy as np
import pytest

from binary import assert_usage_error, attnbench_binary, run_attnbench

BACKWARD_VARIANTS = [v["name"] for v in json.loads(run_attnbench("list", "--json").stdout or "[]")
                     if v["device"] == "cpu" and v["capabilities"].get("backward")] \
    if attnbench_binary().exists() else []

SHAPES = {
    "2d": ((9, 8), (9, 8), (9, 8)),
    "3d seq_q < seq_kv, d_k != d_v": ((3, 13, 16), (3, 29, 16), (3, 29, 8)),
    "4d gqa": ((2, 4, 19, 24), (2, 2, 19, 24), (2, 2, 19, 24)),
}


def reference_backward(q, k, v, dout, causal, scale):
    """float64 O and dQ, dK, dV of softmax(q k^T * scale + mask) v: the equations as written,
    independent of the C++ oracle. GQA: dK, dV summed over each key/value head's group."""
    q, k, v, dout = (np.asarray(x, dtype=np.float64) for x in (q, k, v, dout))
    group = q.shape[-3] // k.shape[-3] if q.ndim >= 3 else 1
    ke, ve = (np.repeat(x, group, axis=-3) if q.ndim >= 3 else x for x in (k, v))
    scores = np.einsum("...qd,...kd->...qk", q, ke) * scale
    seq_q, seq_kv = scores.shape[-2:]
    if causal:
        visible = np.arange(seq_kv)[None, :] <= np.arange(seq_q)[:, None] + (seq_kv - seq_q)
        scores = np.where(visible, scores, -np.inf)
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    o = p @ ve
    dv = np.swapaxes(p, -1, -2) @ dout
    dp = dout @ np.swapaxes(ve, -1, -2)
    ds = p * (dp - (dout * o).sum(axis=-1, keepdims=True))
    dq = ds @ ke * scale
    dk = np.swapaxes(ds, -1, -2) @ q * scale
    if q.ndim >= 3 and group > 1:
        fold = lambda x: x.reshape(*x.shape[:-3], x.shape[-3] // group, group, *x.shape[-2:]).sum(-3)
        dk, dv = fold(dk), fold(dv)
    return o, dq, dk, dv


def save_inputs(tmp_path, arrays):
    paths = {}
    for name, array in arrays.items():
        paths[name] = tmp_path / f"{name}.npy"
        np.save(paths[name], array)
    return paths


def attend_backward(tmp_path, variant, paths, *extra, check=True, **kwargs):
    return run_attnbench("attend", "--variant", variant, "--q", paths["q"], "--k", paths["k"], "--v",
                         paths["v"], "--dout", paths["dout"], "--dq", tmp_path / "dq.npy", "--dk",
                         tmp_path / "dk.npy", "--dv", tmp_path / "dv.npy", *extra, check=check,
                         **kwargs)


def rel_l2(got, expected):
    return np.linalg.norm(got - expected) / np.linalg.norm(expected)


def test_the_variants_of_the_backward_are_listed():
    assert {"naive", "blas", "flash_cpu"} <= set(BACKWARD_VARIANTS)


@pytest.mark.parametrize("variant", BACKWARD_VARIANTS)
@pytest.mark.parametrize("shape_name", sorted(SHAPES))
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_match_numpy_float64(tmp_path, variant, shape_name, causal):
    rng = np.random.default_rng(len(shape_name) + causal)
    q_shape, k_shape, v_shape = SHAPES[shape_name]
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in (q_shape, k_shape, v_shape))
    dout = rng.standard_normal(q_shape[:-1] + (v_shape[-1],)).astype(np.float32)
    paths = save_inputs(tmp_path, {"q": q, "k": k, "v": v, "dout": dout})
    scale = 0.3
    attend_backward(tmp_path, variant, paths, "--scale", scale, "--out", tmp_path / "o.npy",
                    *(["--causal"] if causal else []))
    o, dq, dk, dv = reference_backward(q, k, v, dout, causal, scale)
    assert rel_l2(np.load(tmp_path / "o.npy"), o) < 1e-5
    for name, expected, like in (("dq", dq, q), ("dk", dk, k), ("dv", dv, v)):
        got = np.load(tmp_path / f"{name}.npy")
        assert got.dtype == np.float32 and got.shape == like.shape, name
        assert rel_l2(got, expected) < 1e-4, name


def test_float16_inputs_give_float16_gradients(tmp_path):
    rng = np.random.default_rng(7)
    q, k, v, dout = (rng.standard_normal((2, 17, 16)).astype(np.float16) for _ in range(4))
    paths = save_inputs(tmp_path, {"q": q, "k": k, "v": v, "dout": dout})
    attend_backward(tmp_path, "naive", paths, "--causal")
    _, dq, dk, dv = reference_backward(q, k, v, dout, True, 1 / np.sqrt(16))
    for name, expected in (("dq", dq), ("dk", dk), ("dv", dv)):
        got = np.load(tmp_path / f"{name}.npy")
        assert got.dtype == np.float16, name
        assert rel_l2(got.astype(np.float64), expected) < 1e-2, name
    assert not (tmp_path / "o.npy").exists()  # --out is optional with the backward


def round_to_bf16(x):
    """float32 -> the nearest bf16 (ties to even), as float32: what --dtype bf16 does on load."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_flash_cpu_bf16_backward_on_emulated_tiles_matches_numpy_float64(tmp_path, layout):
    # GQA 4:1, causal, seq_q != seq_kv, d_k != d_v, and sequences that end inside a key block and a
    # query block; the reference reads the inputs as rounded to bf16.
    rng = np.random.default_rng(41)
    q = rng.standard_normal((2, 4, 150, 64)).astype(np.float32)
    k = rng.standard_normal((2, 1, 170, 64)).astype(np.float32)
    v = rng.standard_normal((2, 1, 170, 48)).astype(np.float32)
    dout = rng.standard_normal((2, 4, 150, 48)).astype(np.float32)
    paths = save_inputs(tmp_path, {"q": q, "k": k, "v": v, "dout": dout})
    result = attend_backward(tmp_path, "flash_cpu", paths, "--dtype", "bf16", "--causal", "--layout",
                             layout, check=False,
                             env={**os.environ, "ATTNBENCH_FLASH_CPU_ISA": "amx_bf16_emulated"})
    if result.returncode != 0 and "ATTNBENCH_FLASH_CPU_ISA" in result.stderr:
        pytest.skip(f"the emulated tiles do not run here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stderr
    _, dq, dk, dv = reference_backward(*(round_to_bf16(x) for x in (q, k, v, dout)), True,
                                       1 / np.sqrt(64))
    for name, expected, like in (("dq", dq, q), ("dk", dk, k), ("dv", dv, v)):
        got = np.load(tmp_path / f"{name}.npy")
        assert got.shape == like.shape, name
        # bf16's own budget: P and dS rounded to bf16 before their products, O stored in bf16.
        assert rel_l2(got.astype(np.float64), expected) < 2e-2, name


def test_a_dout_of_another_shape_is_refused_and_nothing_is_written(tmp_path):
    x = np.ones((2, 5, 8), dtype=np.float32)
    paths = save_inputs(tmp_path, {"q": x, "k": x, "v": x, "dout": np.ones((2, 5, 4), np.float32)})
    assert_usage_error(attend_backward(tmp_path, "naive", paths, check=False), "--dout", "[2, 5, 4]",
                     "[2, 5, 8]")
    assert not any((tmp_path / f"{n}.npy").exists() for n in ("dq", "dk", "dv"))


def test_a_missing_gradient_path_and_a_variant_without_backward_are_refused(tmp_path):
    x = np.ones((4, 8), dtype=np.float32)
    paths = save_inputs(tmp_path, {"q": x, "k": x, "v": x, "dout": x})
    result = run_attnbench("attend", "--variant", "naive", "--q", paths["q"], "--k", paths["k"], "--v",
                           paths["v"], "--dout", paths["dout"], "--dq", tmp_path / "dq.npy")
    assert_usage_error(result, "--dk", "--dv")
    without = [v["name"] for v in json.loads(run_attnbench("list", "--json").stdout)
               if v["device"] == "cpu" and not v["capabilities"]["backward"]]
    assert without, "every CPU variant has a backward: pick another refusal"
    assert_usage_error(attend_backward(tmp_path, without[0], paths, check=False), "backward")
    clash = run_attnbench("attend", "--variant", "naive", "--q", paths["q"], "--k", paths["k"], "--v",
                          paths["v"], "--dout", paths["dout"], "--dq", tmp_path / "g.npy", "--dk",
                          tmp_path / "g.npy", "--dv", tmp_path / "dv.npy")
    assert_usage_error(clash, "--dq and --dk name the same file")


def dominant_key_inputs(rng, heads, seq, d):
    """Q, K, V, dO where each query row is steered to one random key, which then takes nearly all
    of its weight (as the harness's dominant_key distribution does)."""
    q = (0.3 * rng.standard_normal((1, heads, seq, d))).astype(np.float32)
    k = rng.standard_normal((1, heads, seq, d)).astype(np.float32)
    v = rng.standard_normal((1, heads, seq, d)).astype(np.float32)
    dout = rng.standard_normal((1, heads, seq, d)).astype(np.float32)
    for h in range(heads):
        for i in range(seq):
            key = k[0, h, rng.integers(0, seq)]
            q[0, h, i] += 6.0 * np.sqrt(d) / np.linalg.norm(key) * key
    return q, k, v, dout


@pytest.mark.parametrize("isa", ["amx_bf16_emulated", "amx_bf16", "avx512_bf16_emulated",
                                 "avx512_bf16"])
@pytest.mark.parametrize("seed", [0, 3])
def test_flash_cpu_bf16_backward_with_a_dominant_key_matches_numpy_float64(tmp_path, isa, seed):
    # Where one key takes a row's weight, dS = P (dP - D) is the small residue of dP - D, so the
    # gradients show any error in O (D = rowsum(dO o O)) or in the log-sum-exp P is recomputed
    # from. The reference takes D from its O rounded to bf16, as the backward reads the O it was
    # handed: what is left is the kernel's own arithmetic.
    q, k, v, dout = (round_to_bf16(x) for x in dominant_key_inputs(np.random.default_rng(seed), 4,
                                                                    130, 32))
    paths = save_inputs(tmp_path, {"q": q, "k": k, "v": v, "dout": dout})
    result = attend_backward(tmp_path, "flash_cpu", paths, "--dtype", "bf16", check=False,
                             env={**os.environ, "ATTNBENCH_FLASH_CPU_ISA": isa})
    if result.returncode != 0 and "ATTNBENCH_FLASH_CPU_ISA" in result.stderr:
        pytest.skip(f"{isa} does not run here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stderr
    scale = 1 / np.sqrt(32)
    q64, k64, v64, dout64 = (x.astype(np.float64) for x in (q, k, v, dout))
    p = np.exp(np.einsum("...qd,...kd->...qk", q64, k64) * scale)
    p /= p.sum(axis=-1, keepdims=True)
    stored_o = round_to_bf16((p @ v64).astype(np.float32)).astype(np.float64)
    ds = p * (dout64 @ np.swapaxes(v64, -1, -2) - (dout64 * stored_o).sum(axis=-1, keepdims=True))
    expected = {"dq": ds @ k64 * scale, "dk": np.swapaxes(ds, -1, -2) @ q64 * scale,
                "dv": np.swapaxes(p, -1, -2) @ dout64}
    for name, reference in expected.items():
        got = np.load(tmp_path / f"{name}.npy").astype(np.float64)
        assert rel_l2(got, reference) < 2e-2, name
