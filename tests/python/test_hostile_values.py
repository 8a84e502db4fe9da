"""Hostile values end to end: repeated axis values (which made two cases share one id, so the
end-of-run rewrite lost records), soft-caps outside float32, document lengths whose sum wraps
int64. Each is one line on stderr and exit status 2, before anything is written."""

import json

import numpy as np
import pytest

from binary import run_attnbench, assert_usage_error

@pytest.fixture
def config(sweep_file):
    return sweep_file("tiny.toml", name="values", variants=("naive", "flash_cpu"), heads=(1,),
                      seq_len=(16,))


@pytest.mark.parametrize("assignment, expected", [
    ('axes.mask=["window:4", "window:4"]', "axes.mask: 'window:4' is given twice"),
    ('axes.mask=["window:4", "window:004"]', "axes.mask: 'window:4' is given twice"),
    ("axes.softcap=[64, 64.0]", "axes.softcap: 64 is given twice"),
    ("axes.seq_len=[16, 16]", "axes.seq_len: 16 is given twice"),
    ("axes.causal=[true, true]", "axes.causal: true is given twice"),
    ('axes.dtype=["fp32", "fp32"]', "axes.dtype: fp32 is given twice"),
])
def test_a_repeated_axis_value_is_refused_before_the_run(tmp_path, config, assignment, expected):
    result = run_attnbench("run", config, "--out", tmp_path / "run", "--set", assignment)
    assert_usage_error(result, expected)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("assignment, expected", [
    ('axes.kv_cache=["paged:4", "paged:04"]', "axes.kv_cache: 'paged:4' is given twice"),
    ('axes.kv_lens=["8,32,4", "08,32,4"]', "axes.kv_lens: '8,32,4' is given twice"),
])
def test_one_cache_spelled_twice_is_refused_naming_key_and_line(tmp_path, sweep_file, assignment,
                                                                expected):
    config = sweep_file("ragged.toml", name="ragged", seq_len=None, seq_q=(1,), heads=(1,))
    result = run_attnbench("run", config, "--out", tmp_path / "run", "--set", assignment)
    assert_usage_error(result, expected)
    assert "internal error" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_tokens_that_do_not_divide_name_the_line(tmp_path, sweep_file):
    config = sweep_file("tokens.toml", name="tokens", heads=(1,), seq_len=(64,), tokens=(100,))
    result = run_attnbench("check", config)
    assert_usage_error(result, f"{config}:", "axes.tokens: 100 is not a multiple of seq_len 64")


def test_empty_kv_lens_in_attend_is_refused(tmp_path):
    rng = np.random.default_rng(1)
    for name in "qkv":
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((1, 2, 8, 4)).astype(np.float32))
    result = run_attnbench("attend", "--variant", "naive", "--q", tmp_path / "q.npy", "--k",
                           tmp_path / "k.npy", "--v", tmp_path / "v.npy", "--out", tmp_path / "o.npy",
                           "--kv-lens", "")
    assert_usage_error(result, "--kv-lens")
    assert not (tmp_path / "o.npy").exists()


def test_every_case_of_a_run_keeps_its_record(tmp_path, config):
    """What the repeated mask used to lose: with distinct values every case id is distinct, and
    each of the run's cases is in cases.jsonl once after the end-of-run rewrite."""
    run_attnbench("run", config, "--out", tmp_path / "run", "--set", 'axes.mask=["window:4", "window:8"]',
                  check=True)

    records = [json.loads(line) for line in (tmp_path / "run" / "cases.jsonl").read_text().splitlines()]
    assert sorted(r["case_index"] for r in records) == [0, 1, 2, 3]
    assert len({r["case_id"] for r in records}) == 4


@pytest.mark.parametrize("cap", ["1e300", "5e-324", "1e-40", "3e38", "inf", "nan"])
def test_a_softcap_float32_cannot_hold_is_refused_in_a_config(tmp_path, config, cap):
    result = run_attnbench("run", config, "--out", tmp_path / "run", "--set", f"axes.softcap=[{cap}]")
    assert_usage_error(result, "axes.softcap: must be")
    assert not (tmp_path / "run").exists()


def save(tmp_path, name, array):
    path = tmp_path / name
    np.save(path, array)
    return path


@pytest.mark.parametrize("cap", ["1e300", "5e-324", "1e-40", "-1"])
def test_a_softcap_float32_cannot_hold_is_refused_by_attend(tmp_path, cap):
    x = save(tmp_path, "x.npy", np.ones((1, 1, 16, 8), np.float32))
    result = run_attnbench("attend", "--variant", "naive", "--q", x, "--k", x, "--v", x,
                           "--out", tmp_path / "o.npy", f"--softcap={cap}")
    assert_usage_error(result, f"--softcap {float(cap):g}" if cap != "5e-324" else "--softcap 5e-324")
    assert "a normal float32 value" in result.stderr
    assert not (tmp_path / "o.npy").exists()


@pytest.mark.parametrize("lengths, expected", [
    ("9223372036854775807,9223372036854775807,18", "a document length is 9223372036854775807, outside 1..seq (16)"),
    ("17,1", "a document length is 17, outside 1..seq (16)"),
    ("8,8,8", "sum to more than seq 16"),
    # Read as decimal numbers: CLI11's own reading took "-2", "010" (octal: 8) and "0x10" (16),
    # and dropped the empty item of "8,,8".
    ("-2,18", "a document length is a decimal number, got '-2'"),
    ("010,8", "a document length is a decimal number, got '010'"),
    ("0x10", "a document length is a decimal number, got '0x10'"),
    ("8,,8", "got '' (an empty item in '8,,8')"),
])
def test_document_lengths_that_wrap_or_leave_the_sequence_are_refused(tmp_path, lengths, expected):
    x = save(tmp_path, "x.npy", np.ones((1, 1, 16, 8), np.float32))
    result = run_attnbench("attend", "--variant", "naive", "--q", x, "--k", x, "--v", x,
                           "--out", tmp_path / "o.npy", "--mask", "documents", f"--doc-lens={lengths}")
    assert_usage_error(result, expected)
    assert not (tmp_path / "o.npy").exists()


def test_a_ragged_batch_of_130000_sequences_plans_in_linear_time(tmp_path, sweep_file):
    """The work count had copied the list of lengths once per sequence: minutes for this plan."""
    lengths = ",".join(str(1 + i % 7) for i in range(130_000))
    config = sweep_file("ragged.toml", name="ragged", seq_len=None, seq_q=(1,), heads=(1,),
                        kv_lens=(lengths,))
    plan = run_attnbench("plan", config, "--json", "--variants", "naive", timeout=60, check=True)
    case, = json.loads(plan.stdout)["cases"]
    assert case["batch"] == 130_000


def test_the_sweep_cap_counts_cases_not_shapes(tmp_path, sweep_file):
    config = sweep_file("wide.toml", name="wide", heads=(1,), seq_len=tuple(range(1, 60_001, 1)),
                        variants=("naive", "flash_cpu"))
    result = run_attnbench("plan", config, timeout=60)
    assert_usage_error(result, "120000 cases (60000 shapes x 2 variants)", "100000 allowed")
