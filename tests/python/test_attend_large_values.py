"""V near float32's largest values through `attend`: O, a convex combination of V's rows, fits in
float32, though an online softmax's unnormalised sum of p V does not (flash_cpu and chunked then
compute the block again with P scaled by 2^-64; they refused it as "too large for float32"). Every
CPU variant, against a float64 reference; flash_cpu on each of its paths that runs here."""

import os

import numpy as np
import pytest

from binary import run_attnbench


def reference(q, k, v, causal):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True)) @ v


def to_bf16(x):
    """float32 rounded to bfloat16 (nearest, ties to even), as float32."""
    bits = x.astype(np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def runs_here(isa):
    """Whether flash_cpu's path `isa` runs on this CPU: the emulated ones wherever AVX2 does."""
    needed = "avx2" if isa.endswith("_emulated") else isa
    return needed in run_attnbench("list", "--isas", check=True).stdout.split()


def attend(tmp_path, paths, variant, isa, *options):
    """O from `attend` (float64), flash_cpu on path `isa` where one is named; skips a path this
    CPU does not run."""
    if isa and not runs_here(isa):
        pytest.skip(f"flash_cpu's {isa} path does not run on this CPU")
    env = dict(os.environ, ATTNBENCH_FLASH_CPU_ISA=isa) if isa else None
    out = tmp_path / "o.npy"
    result = run_attnbench("attend", "--variant", variant, "--q", paths["q"], "--k", paths["k"],
                           "--v", paths["v"], *options, "--out", out, env=env)
    assert result.returncode == 0, result.stderr
    return np.load(out).astype(np.float64)


@pytest.fixture
def large_v(tmp_path):
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, 2, 160, 40)).astype(np.float32) for _ in range(3))
    # As tests/large_values.h makes them: scores near 0 (weights near 1) and V of one sign in
    # [2^124, 2^125] (exact in bf16 too), so that a row of 16 keys or more sums p V past 2^128.
    q = np.ldexp(q, -2).astype(np.float32)
    v = np.ldexp(to_bf16(1 + np.abs(v) / (1 + np.abs(v))), 124).astype(np.float32)
    paths = {}
    for name, array in (("q", q), ("k", k), ("v", v)):
        paths[name] = tmp_path / f"{name}.npy"
        np.save(paths[name], array)
    return paths, (q, k, v)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("variant, isa", [("naive", None), ("blas", None), ("blocked", None),
                                          ("openmp", None), ("chunked", None),
                                          ("flash_cpu", "scalar"), ("flash_cpu", "avx2"),
                                          ("flash_cpu", "avx512_bf16_emulated"),
                                          ("flash_cpu", "amx_bf16_emulated")])
def test_o_is_written_where_v_nears_float32s_largest_values(tmp_path, large_v, variant, isa, causal):
    paths, (q, k, v) = large_v
    got = attend(tmp_path, paths, variant, isa, *(["--causal"] if causal else []))
    want = reference(q, k, v, causal)
    assert np.isfinite(got).all()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-5


# Not blas: its GEMM sums P V inside the library, where weights that round to a hair over 1 in sum
# pass float's largest value; it refuses such inputs (one line, docs/bad-input.md).
@pytest.mark.parametrize("seq_q", [1, 100])  # decode (flash_cpu's decode pass) and prefill
@pytest.mark.parametrize("variant, isa", [("naive", None), ("blocked", None),
                                          ("openmp", None), ("chunked", None),
                                          ("flash_cpu", "scalar"), ("flash_cpu", "avx2")])
def test_o_is_written_where_v_is_float32s_largest_value(tmp_path, variant, isa, seq_q):
    # V at +-3.4028235e38 under 1000 keys of equal weight: O is V's value, but the online
    # softmax's two rounded sums can divide to a hair past it (flash_cpu and chunked wrote inf,
    # refused as "too large for float32").
    largest = np.finfo(np.float32).max
    rng = np.random.default_rng(9)
    q = np.zeros((1, 2, seq_q, 8), np.float32)
    k = rng.random((1, 2, 1000, 8)).astype(np.float32)
    v = np.full((1, 2, 1000, 8), largest, np.float32)
    v[..., 1::2] = -largest
    paths = {}
    for name, array in (("q", q), ("k", k), ("v", v)):
        paths[name] = tmp_path / f"{name}.npy"
        np.save(paths[name], array)
    got = attend(tmp_path, paths, variant, isa)
    assert np.isfinite(got).all()
    want = np.broadcast_to(v[:, :, :1].astype(np.float64), got.shape)
    assert np.abs(got - want).max() <= 1e-4 * largest  # 1000 weights, each rounded


@pytest.mark.parametrize("variant, isa", [("naive", None), ("flash_cpu", "scalar"),
                                          ("flash_cpu", "avx2"),
                                          ("flash_cpu", "avx512_bf16_emulated"),
                                          ("flash_cpu", "amx_bf16_emulated")])
def test_o_is_written_where_bf16_v_nears_its_largest_values(tmp_path, large_v, variant, isa):
    paths, (q, k, v) = large_v
    got = attend(tmp_path, paths, variant, isa, "--dtype", "bf16")
    want = reference(to_bf16(q), to_bf16(k), to_bf16(v), False)
    assert np.isfinite(got).all()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1.2e-2


# Scores past 2^31 (q.k = 7.2e9 at d_k 8; the score check takes them) with every key tied: the
# second pass's 2^-64 once went into the max, where max + 64 rounds back to max, and overflowed
# again. O is V's row, 1e38 (bf16: 9.96921e37).
@pytest.mark.parametrize("dtype, expected", [("fp32", 1e38), ("bf16", 9.96921e37)])
@pytest.mark.parametrize("isa", ["scalar", "avx2", "avx512_bf16_emulated", "amx_bf16_emulated"])
def test_o_is_written_where_tied_scores_pass_2_to_the_31(tmp_path, isa, dtype, expected):
    paths = {}
    for name, value in (("q", 3e4), ("k", 3e4), ("v", 1e38)):
        paths[name] = tmp_path / f"{name}.npy"
        np.save(paths[name], np.full((1, 1, 64, 8), value, np.float32))
    got = attend(tmp_path, paths, "flash_cpu", isa, "--dtype", dtype, "--causal")
    assert np.allclose(got, expected, rtol=1e-5)
