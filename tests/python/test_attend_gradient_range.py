"""`attend --backward` on float16 inputs whose gradients outgrow float16: a GQA group's dV sums
its heads' and can pass 65504 with every input in range. Such a gradient is written in float32,
saying so, never as inf with exit 0; a gradient that overflows float32 itself names dO's size
beside Q's, K's and V's when dO is what is too large."""

import numpy as np
import pytest

from binary import assert_usage_error, run_attnbench


def write(folder, name, array):
    path = folder / f"{name}.npy"
    np.save(path, array)
    return path


def attend_backward(folder, variant, q, k, v, dout):
    paths = {name: write(folder, name, array) for name, array in
             (("q", q), ("k", k), ("v", v), ("dout", dout))}
    return run_attnbench("attend", "--variant", variant, "--q", paths["q"], "--k", paths["k"],
                         "--v", paths["v"], "--dout", paths["dout"], "--out", folder / "o.npy",
                         "--dq", folder / "dq.npy", "--dk", folder / "dk.npy", "--dv", folder / "dv.npy")


@pytest.mark.parametrize("variant", ["naive", "blas", "flash_cpu"])
def test_a_gqa_dv_past_float16_is_written_in_float32_and_said(tmp_path, variant):
    # Q = 0: every weight is 1/8, so dV of each key is the group's mean dO summed over 2 heads.
    q = np.zeros((1, 4, 8, 4), np.float16)
    rng = np.random.default_rng(5)
    k = rng.standard_normal((1, 2, 8, 4)).astype(np.float16)
    v = rng.standard_normal((1, 2, 8, 4)).astype(np.float16)
    dout = np.full((1, 4, 8, 4), 60000, np.float16)
    result = attend_backward(tmp_path, variant, q, k, v, dout)
    assert result.returncode == 0, result.stderr
    assert "dV written as float32" in result.stdout, result.stdout
    dv = np.load(tmp_path / "dv.npy")
    assert dv.dtype == np.float32 and np.all(np.isfinite(dv))
    np.testing.assert_allclose(dv, 120000, rtol=1e-2)
    # The gradients float16 holds stay float16, as the inputs are.
    assert np.load(tmp_path / "dq.npy").dtype == np.float16
    assert np.load(tmp_path / "dk.npy").dtype == np.float16


def test_gradients_within_float16_stay_float16_with_no_note(tmp_path):
    rng = np.random.default_rng(6)
    q, k, v, dout = (rng.standard_normal(shape).astype(np.float16)
                     for shape in ((1, 4, 8, 4), (1, 2, 8, 4), (1, 2, 8, 4), (1, 4, 8, 4)))
    result = attend_backward(tmp_path, "naive", q, k, v, dout)
    assert result.returncode == 0, result.stderr
    assert "float32" not in result.stdout
    assert all(np.load(tmp_path / f"{g}.npy").dtype == np.float16 for g in ("dq", "dk", "dv"))


def test_a_gradient_past_float32_names_do(tmp_path):
    q = np.zeros((1, 4, 8, 4), np.float32)
    rng = np.random.default_rng(7)
    k = rng.standard_normal((1, 2, 8, 4)).astype(np.float32)
    v = rng.standard_normal((1, 2, 8, 4)).astype(np.float32)
    dout = np.full((1, 4, 8, 4), 3e38, np.float32)
    result = attend_backward(tmp_path, "naive", q, k, v, dout)
    assert_usage_error(result, "|dO| 3e+38", prefixed=True)
    assert not (tmp_path / "dv.npy").exists()
