"""`attend`'s outputs and inputs compared by where they land, not by how they are spelled: one
new file given twice (f.npy and ./f.npy, sub/../f.npy, an absolute path, a doubled slash) is
refused before anything is written, for every pair of outputs and every output over an input."""

import os

import numpy as np
import pytest

from binary import assert_usage_error, run_attnbench


@pytest.fixture
def inputs(tmp_path):
    rng = np.random.default_rng(7)
    paths = {}
    for name in ("q", "k", "v", "dout"):
        paths[name] = tmp_path / f"{name}.npy"
        np.save(paths[name], rng.standard_normal((1, 2, 8, 4)).astype(np.float32))
    (tmp_path / "sub").mkdir()
    return paths


def spellings(tmp_path, name):
    """Ways to name tmp_path/name other than `name` itself, run from tmp_path."""
    return [f"./{name}", f"sub/../{name}", str(tmp_path / name), f".//{name}"]


def attend(tmp_path, inputs, *outputs, backward=False):
    extra = ["--dout", "dout.npy"] if backward else []
    return run_attnbench("attend", "--variant", "naive", "--q", inputs["q"], "--k", inputs["k"],
                         "--v", inputs["v"], *extra, *outputs, cwd=tmp_path)


@pytest.mark.parametrize("spelling", range(4))
@pytest.mark.parametrize("first,second", [("--out", "--weights"), ("--weights", "--out")])
def test_one_new_file_named_twice_is_refused_before_anything_is_written(tmp_path, inputs, spelling,
                                                                        first, second):
    other = spellings(tmp_path, "f.npy")[spelling]
    result = attend(tmp_path, inputs, first, "f.npy", second, other)
    assert_usage_error(result, "name the same file")
    assert not (tmp_path / "f.npy").exists()


@pytest.mark.parametrize("spelling", range(4))
def test_two_gradients_in_one_new_file_are_refused(tmp_path, inputs, spelling):
    other = spellings(tmp_path, "x.npy")[spelling]
    result = attend(tmp_path, inputs, "--out", "o.npy", "--dq", "x.npy", "--dv", other, "--dk", "k2.npy",
                    backward=True)
    assert_usage_error(result, "name the same file")
    assert not (tmp_path / "x.npy").exists()


@pytest.mark.parametrize("spelling", range(4))
def test_an_output_over_an_input_under_another_spelling_is_refused(tmp_path, inputs, spelling):
    before = (tmp_path / "q.npy").read_bytes()
    result = attend(tmp_path, inputs, "--out", spellings(tmp_path, "q.npy")[spelling])
    assert_usage_error(result, "attend does not overwrite its inputs")
    assert (tmp_path / "q.npy").read_bytes() == before


def test_distinct_new_files_in_one_folder_are_written(tmp_path, inputs):
    result = attend(tmp_path, inputs, "--out", "./o.npy", "--weights", str(tmp_path / "w.npy"))
    assert result.returncode == 0, result.stderr
    assert np.load(tmp_path / "o.npy").shape == (1, 2, 8, 4)
    assert np.load(tmp_path / "w.npy").shape == (1, 2, 8, 8)


def test_same_name_in_two_folders_is_two_files(tmp_path, inputs):
    result = attend(tmp_path, inputs, "--out", "f.npy", "--weights", "sub/f.npy")
    assert result.returncode == 0, result.stderr
    assert os.path.exists(tmp_path / "f.npy") and os.path.exists(tmp_path / "sub" / "f.npy")
