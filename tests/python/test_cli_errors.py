"""Bad input to the attnbench binary: a one-line error naming the problem, a nonzero exit, and
no partial output."""

import json
import os
import subprocess

import numpy as np
import pytest

from binary import attnbench_binary, run_attnbench

GOOD_AXES = "[axes]\nseq_len = [16]\n"


def write_config(tmp_path, text, name="bad.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


CONFIG_ERRORS = {
    "syntax error": ('name = "x"\nvariants = ["naive"\n', "TOML syntax error"),
    "unknown key": ('name = "x"\nvariants = ["naive"]\n' + GOOD_AXES + "[measure]\nrepetitons = 2\n",
                    "bad.toml:6: measure.repetitons: unknown key"),
    "wrong type": ('name = "x"\nvariants = ["naive"]\n' + GOOD_AXES + "[measure]\nmin_time_s = \"fast\"\n",
                   'measure.min_time_s: must be a number in (0, 86400], got "fast"'),
    "empty axis": ('name = "x"\nvariants = ["naive"]\n[axes]\nseq_len = []\n', "axes.seq_len: axis is empty"),
    "zero size": ('name = "x"\nvariants = ["naive"]\n[axes]\nseq_len = [16]\nd_k = [0]\n',
                  "axes.d_k: must be positive, got 0"),
    "negative size": ('name = "x"\nvariants = ["naive"]\n[axes]\nseq_len = [-16]\n', "must be positive, got -16"),
    "heads not divisible by kv_heads": (
        'name = "x"\nvariants = ["naive"]\n[axes]\nseq_len = [16]\nheads = [6]\nkv_heads = [4]\n',
        "heads (6) must be a multiple of kv_heads (4)"),
    "unknown variant": ('name = "x"\nvariants = ["naive", "warp_speed"]\n' + GOOD_AXES,
                        "unknown variant 'warp_speed'"),
    "too large": ('name = "x"\nvariants = ["naive"]\n[axes]\nseq_len = [4000000000]\nheads = [1000]\n',
                  "too large"),
}


def assert_one_line_error(result, expected):
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0]


@pytest.mark.parametrize("case", sorted(CONFIG_ERRORS))
@pytest.mark.parametrize("command", ["run", "check"])
def test_config_errors(tmp_path, case, command):
    text, expected = CONFIG_ERRORS[case]
    config = write_config(tmp_path, text)
    out = tmp_path / "out"
    args = [command, config] + (["--out", out] if command == "run" else [])
    assert_one_line_error(run_attnbench(*args), expected)
    assert not out.exists(), "a failed run must leave no results folder"


def test_missing_config(tmp_path):
    assert_one_line_error(run_attnbench("run", tmp_path / "nope.toml", "--out", tmp_path / "o"),
                          "cannot open config file")


def test_unknown_variant_on_command_line(tmp_path):
    config = write_config(tmp_path, 'name = "x"\nvariants = ["naive"]\n' + GOOD_AXES)
    assert_one_line_error(run_attnbench("check", config, "--variants", "naive,nonesuch"), "unknown variant 'nonesuch'")


def test_bad_set_override(tmp_path):
    config = write_config(tmp_path, 'name = "x"\nvariants = ["naive"]\n' + GOOD_AXES)
    assert_one_line_error(run_attnbench("check", config, "--set", "measure.bogus=1"), "measure.bogus: unknown key")
    # A line break in the value smuggled a second key past the check of keys.
    assert_one_line_error(run_attnbench("check", config, "--set", "measure.repetitions=2\nbogus_key=1"),
                          "more than one TOML value")


def test_unwritable_output_folder(tmp_path):
    config = write_config(tmp_path, 'name = "x"\nvariants = ["naive"]\n' + GOOD_AXES)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert_one_line_error(run_attnbench("run", config, "--out", blocker / "out"), "cannot create the results folder")
    assert_one_line_error(run_attnbench("run", config, "--out", "/proc/attnbench/out"), "cannot create the results folder")


def test_existing_results_folder_is_refused(tmp_path):
    config = write_config(tmp_path, 'name = "x"\nvariants = ["naive"]\n' + GOOD_AXES)
    out = tmp_path / "run"
    out.mkdir()
    (out / "cases.jsonl").write_text("precious\n")
    assert_one_line_error(run_attnbench("run", config, "--out", out), "already exists")
    assert (out / "cases.jsonl").read_text() == "precious\n"


# "-0/2", "00/2" and "01/2" ran as 0/2 and 1/2, but a resume compared the manifest's text (refusing
# "0/2") while merge compared the numbers: only the plain spelling is taken.
@pytest.mark.parametrize("shard", ["4/4", "-0/2", "00/2", "01/2", "+1/2", "1/02", " 1/2", "1/2 "])
def test_bad_shard(tmp_path, shard):
    config = write_config(tmp_path, 'name = "x"\nvariants = ["naive"]\n' + GOOD_AXES)
    assert_one_line_error(run_attnbench("run", config, "--shard", shard, "--out", tmp_path / "o"),
                          f"--shard '{shard}'")
    assert not (tmp_path / "o").exists()


@pytest.fixture
def npy(tmp_path):
    """Writes an array to tmp_path/<name>.npy and returns the path."""
    def write(name, array):
        path = tmp_path / f"{name}.npy"
        np.save(path, array)
        return path
    return write


def attend(tmp_path, q, k, v, *extra):
    return run_attnbench("attend", "--variant", "naive", "--q", q, "--k", k, "--v", v, "--out",
                         tmp_path / "o.npy", *extra)


def test_npy_wrong_dtype(tmp_path, npy):
    x = np.ones((4, 8), dtype=np.float64)
    assert_one_line_error(attend(tmp_path, npy("q", x), npy("k", x), npy("v", x)), "not a float32 or float16 .npy")
    assert not (tmp_path / "o.npy").exists()


def test_npy_wrong_rank(tmp_path, npy):
    x = np.ones((1, 1, 1, 4, 8), dtype=np.float32)
    assert_one_line_error(attend(tmp_path, npy("q", x), npy("k", x), npy("v", x)), "rank 5")


def test_npy_mismatched_shapes(tmp_path, npy):
    q = np.ones((4, 8), dtype=np.float32)
    k = np.ones((5, 6), dtype=np.float32)
    assert_one_line_error(attend(tmp_path, npy("q", q), npy("k", k), npy("v", k)), "Q has d_k 8 but K has 6")


def test_npy_truncated(tmp_path, npy):
    x = np.ones((64, 8), dtype=np.float32)
    q = npy("q", x)
    truncated = tmp_path / "k.npy"
    truncated.write_bytes(q.read_bytes()[:-100])
    assert_one_line_error(attend(tmp_path, q, truncated, q), "truncated")


def test_npy_garbage_and_missing(tmp_path, npy):
    x = npy("x", np.ones((4, 8), dtype=np.float32))
    garbage = tmp_path / "garbage.npy"
    garbage.write_bytes(b"not an npy file at all")
    assert_one_line_error(attend(tmp_path, garbage, x, x), "garbage.npy")
    assert_one_line_error(attend(tmp_path, tmp_path / "missing.npy", x, x), "cannot open")


def test_attend_unsupported_feature_and_unknown_variant(tmp_path, npy):
    x = npy("x", np.ones((4, 8), dtype=np.float32))
    result = run_attnbench("attend", "--variant", "nonesuch", "--q", x, "--k", x, "--v", x, "--out", tmp_path / "o.npy")
    assert_one_line_error(result, "unknown variant 'nonesuch'")
    q = npy("q", np.ones((8, 8), dtype=np.float32))
    assert_one_line_error(attend(tmp_path, q, x, x, "--causal"), "see no key under the causal mask")


# A value that rounds to inf in the dtype asked for reached the variants as inf: one refused
# it as "too large for float32", another wrote a finite answer.
@pytest.mark.parametrize("dtype, value", [("fp16", 70000.0), ("bf16", 3.4e38)])
@pytest.mark.parametrize("variant", ["naive", "blas", "flash_cpu"])
def test_attend_refuses_an_input_that_rounds_past_the_dtypes_range(tmp_path, npy, dtype, value, variant):
    x = npy("x", np.ones((4, 8), dtype=np.float32))
    k_values = np.ones((4, 8), dtype=np.float32)
    k_values[2, 3] = value
    k = npy("k", k_values)
    result = run_attnbench("attend", "--variant", variant, "--q", x, "--k", k, "--v", x, "--dtype", dtype,
                           "--out", tmp_path / "o.npy")
    assert_one_line_error(result, f"K element 19 ({value:g}) rounds to inf in {dtype}")
    assert not (tmp_path / "o.npy").exists()


# |Q|, |K| ~ 1e19 under --scale 1e-30: the scaled scores are ~1e8, but q.k passes float32's range
# first, and openmp, chunked and blas wrote finite, wrong rows.
@pytest.mark.parametrize("variant", ["naive", "openmp", "chunked", "blas", "flash_cpu"])
def test_attend_refuses_inputs_whose_products_pass_float32(tmp_path, npy, variant):
    big = npy("big", np.full((4, 8), 1e19, dtype=np.float32))
    v = npy("v", np.ones((4, 8), dtype=np.float32))
    result = run_attnbench("attend", "--variant", variant, "--q", big, "--k", big, "--v", v, "--scale", "1e-30",
                           "--out", tmp_path / "o.npy")
    assert_one_line_error(result, "a product q.k in batch 0, KV head 0 can reach 8e+38")
    assert not (tmp_path / "o.npy").exists()


# The bound is per (batch, KV head) and by row lengths: large Q against small K in one batch and the
# reverse in the other has every q.k small, and is taken.
def test_attend_takes_large_and_small_inputs_whose_products_stay_in_range(tmp_path, npy):
    q = np.ones((2, 1, 4, 8), dtype=np.float32)
    k = np.ones((2, 1, 4, 8), dtype=np.float32)
    q[0] *= 1e20
    k[0] *= 1e-20
    q[1] *= 1e-20
    k[1] *= 1e20
    v = npy("v", np.ones((2, 1, 4, 8), dtype=np.float32))
    result = run_attnbench("attend", "--variant", "naive", "--q", npy("q", q), "--k", npy("k", k), "--v", v,
                           "--out", tmp_path / "o.npy")
    assert result.returncode == 0, result.stderr
    assert np.allclose(np.load(tmp_path / "o.npy"), 1.0)


# "010" was read as octal (case 8), "0x1" as hex and "" as case 0: each timed a case not asked for;
# "0,,1" and "0," lost their empty item (CLI11's delimiter drops it) and ran as 0,1 and 0.
@pytest.mark.parametrize("cases", ["4", "-1", "0,9", "two", "01", "0x1", "", "+1", "0,,1", "0,",
                                   ",1"])
def test_a_case_index_the_plan_does_not_hold_is_refused_before_any_folder(tmp_path, cases):
    config = write_config(tmp_path, 'name = "x"\nvariants = ["naive"]\n[axes]\nseq_len = [16, 32]\n'
                                    "causal = [false, true]\n", "cases.toml")
    out = tmp_path / "out"
    result = run_attnbench("run", config, "--cases", cases, "--out", out)
    assert_one_line_error(result, "--cases")
    assert not out.exists()


# "naive,,blocked" and "naive," lost their empty name (CLI11's delimiter drops it) and ran the rest.
@pytest.mark.parametrize("command", ["run", "check", "plan", "slurm"])
@pytest.mark.parametrize("variants", ["naive,,blocked", "naive,", ",naive"])
def test_an_empty_variant_name_is_refused_before_any_folder(tmp_path, command, variants):
    config = write_config(tmp_path, 'name = "x"\nvariants = ["naive"]\n[axes]\nseq_len = [16]\n', "v.toml")
    out = tmp_path / "out"
    extra = {"run": ["--out", out], "slurm": ["--shards", "1", "--out", out]}.get(command, [])
    result = run_attnbench(command, config, "--variants", variants, *extra)
    assert_one_line_error(result, "an empty variant name in")
    assert not out.exists()


def test_variants_given_twice_or_by_commas_are_read_name_by_name(tmp_path):
    config = write_config(tmp_path, 'name = "x"\nvariants = ["naive"]\n[axes]\nseq_len = [16]\n', "v.toml")
    for words in (["--variants", "naive,blocked"], ["--variants", "naive", "--variants", "blocked"]):
        result = run_attnbench("plan", config, *words, "--json")
        assert result.returncode == 0, result.stderr
        plan = json.loads(result.stdout)
        assert plan["config"]["variants"] == ["naive", "blocked"]
        assert [case["variant"] for case in plan["cases"]] == ["naive", "blocked"]


def test_cases_run_a_plan_a_few_at_a_time_into_one_folder(tmp_path):
    config = write_config(tmp_path, 'name = "x"\nvariants = ["naive"]\n[axes]\nseq_len = [16, 32]\n'
                                    "[measure]\npeaks = \"skip\"\nmin_time_s = 0.001\n", "cases.toml")
    out = tmp_path / "out"
    assert run_attnbench("run", config, "--cases", "1", "--out", out).returncode == 0
    assert run_attnbench("run", config, "--cases", "0,1", "--out", out, "--resume").returncode == 0
    lines = (out / "cases.jsonl").read_text().splitlines()
    assert [line.count('"seq_kv":32') + 2 * line.count('"seq_kv":16') for line in lines] == [1, 2]


# OpenMP warned about these and went on with its default, while the manifest kept the value.
@pytest.mark.parametrize("value, why", [
    ("abc", "needs a whole number"), ("0", "needs a whole number"), ("-1", "needs a whole number"),
    ("1.5", "needs a whole number"), ("", "needs a whole number"), ("2abc", "needs a whole number"),
    ("4,,2", "needs a whole number"), ("99999999999999999999", "more threads than any machine has"),
])
def test_a_malformed_omp_num_threads_is_refused(tmp_path, value, why):
    config = write_config(tmp_path, 'name = "x"\nvariants = ["naive"]\n' + GOOD_AXES)
    result = run_attnbench("plan", config, env={**os.environ, "OMP_NUM_THREADS": value})
    assert result.returncode == 2
    # libgomp's own warning, printed as the library loads, may come first.
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"attnbench: error: OMP_NUM_THREADS '{value}': {why}")


# What libgomp itself reads without a warning: spaces around a count, a '+', leading zeros, lists.
@pytest.mark.parametrize("value", [" 1", "1 ", "+1", "01", "1, 1", "1,1"])
def test_an_omp_num_threads_openmp_reads_is_taken(tmp_path, value):
    config = write_config(tmp_path, 'name = "x"\nvariants = ["naive"]\n' + GOOD_AXES)
    result = run_attnbench("plan", config, env={**os.environ, "OMP_NUM_THREADS": value})
    assert result.returncode == 0, result.stderr


def test_a_short_output_that_cannot_be_written_is_an_error():
    with open("/dev/full", "w") as full:
        result = subprocess.run([str(attnbench_binary()), "list"], stdout=full, stderr=subprocess.PIPE,
                                text=True)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "attnbench: error: cannot write to standard output: No space left on device"]
