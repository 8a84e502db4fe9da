"""`attnbench append` given measurements that contradict the record schema: each is refused with
the line that holds it and exit status 2, and nothing of the input is written (not even the valid
lines before it); a line longer than 1 MiB fails as it is read, so `append < /dev/zero` ends at
once. The streaming use (the PyTorch peer, one line then its record) is
tests/python/test_torch_peer.py."""

import json
import subprocess
import time

import pytest

from binary import attnbench_binary, run_attnbench
from conftest import sweep_toml



@pytest.fixture(scope="module")
def run_and_plan(tmp_path_factory):
    """A finished run of the naive variant and the plan of its cases."""
    root = tmp_path_factory.mktemp("append")
    config = root / "tiny.toml"
    config.write_text(sweep_toml("appendable", heads=(1,), seq_len=(16,),
                                  mask=("none", "causal", "documents:3"), dtype=("fp32", "bf16")))
    run_attnbench("run", config, "--out", root / "run", check=True)
    plan = json.loads(run_attnbench("plan", config, "--json", check=True).stdout)
    return root / "run", plan["cases"]


@pytest.fixture
def folder(tmp_path, run_and_plan):
    """A fresh copy of the run to append to."""
    source, _ = run_and_plan
    copy = tmp_path / "run"
    subprocess.run(["cp", "-r", str(source), str(copy)], check=True)
    return copy


@pytest.fixture
def cases(run_and_plan):
    return run_and_plan[1]


def measurement(case, **changes):
    shape_keys = ("batch", "heads", "kv_heads", "seq_q", "seq_kv", "d_k", "d_v", "causal", "mask",
                  "doc_lens", "alibi", "softcap", "dtype", "layout")
    m = {"index": case["index"], "variant": "peer", "device": "cpu", **{k: case[k] for k in shape_keys},
         "precision": "fp32", "status": "ok", "reason": "", "times_ms": [1.0, 2.0, 3.0],
         "workspace_bytes": 0, "peak_gflops": 10.0, "peak_name": "cpu_fma_gflops",
         "oracle": {"max_abs_err": 1e-7, "rel_l2_err": 1e-7, "rel_l2_tolerance": 1e-5, "sampled": False},
         "threads": 2, "distribution": "normal", "code_path": ""}
    m.update(changes)
    return m


def append(folder, *lines, **kwargs):
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    return run_attnbench("append", folder, input=text, timeout=60, **kwargs)


def assert_refused(result, line, expected):
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"attnbench: error: stdin line {line}: "), lines[0]
    assert expected in lines[0], lines[0]


def folder_files(folder):
    return {name: (folder / name).read_bytes() for name in ("cases.jsonl", "summary.csv", "manifest.json")}


def test_valid_measurements_become_records(folder, cases):
    before = (folder / "cases.jsonl").read_text().splitlines()
    result = append(folder, measurement(cases[0]), "", measurement(cases[1], variant="peer2"))
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["case_id"] for r in records] == ["peer|" + cases[0]["id"].split("|", 1)[1],
                                               "peer2|" + cases[1]["id"].split("|", 1)[1]]
    after = [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines()]
    # append prints each record rated, as readers show it; the file keeps the facts only.
    # (its peak_gflops is the folder's best check of that peak, the measurement's own is kept).
    derived = ("percent_of_peak", "peak_gbps", "bandwidth_name", "ridge_intensity", "percent_of_bandwidth",
               "disturbed", "disturbed_reason", "unrated_reason", "peak_gflops")
    def facts(r):
        return {key: value for key, value in r.items() if key not in derived}
    assert after[:len(before)] == [json.loads(line) for line in before]
    assert [facts(r) for r in after[len(before):]] == [facts(r) for r in records]
    assert [r["peak_gflops"] for r in after[len(before):]] == [10.0, 10.0]


def test_the_code_path_is_read_under_its_old_name_too(folder, cases):
    """A peer written before the field was renamed sends "isa"; its record says code_path."""
    old = measurement(cases[0], code_path=None)
    del old["code_path"]
    old["isa"] = "AVX512"
    result = append(folder, old, measurement(cases[1], code_path="AVX2"))
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["code_path"] for r in records] == ["AVX512", "AVX2"]
    assert all("isa" not in r for r in records)


BAD = [
    ({"times_ms": [-5]}, "'times_ms' holds -5: every time must be a finite number of at least 1e-06 ms"),
    ({"times_ms": [1.0, 0]}, "'times_ms' holds 0: every time must be a finite number of at least 1e-06 ms"),
    ({"times_ms": [5e-324]}, "every time must be a finite number of at least 1e-06 ms"),
    ({"status": "skipped", "reason": "not run"}, "a skipped measurement has no 'times_ms'"),
    ({"times_ms": [1.0, "2"]}, "'times_ms' holds a value that is not a number"),
    ({"times_ms": 3}, "'times_ms' is not an array"),
    ({"times_ms": []}, "an ok measurement needs 'times_ms'"),
    ({"workspace_bytes": -1}, "'workspace_bytes' must be between 0 and"),
    ({"workspace_bytes": 1.5}, "'workspace_bytes' is not an integer"),
    ({"device": "tpu"}, "'device' is 'tpu', not cpu or cuda"),
    ({"device": 1}, "'device' is not a string"),
    ({"precision": "int8"}, "'precision' is 'int8', not fp32 or tf32"),
    ({"status": "great"}, "'status' is 'great', not ok, skipped or failed"),
    ({"index": 1.5}, "'index' is not an integer"),
    ({"index": -1}, "'index' must be between 0 and"),
    ({"index": "1"}, "'index' is not an integer"),
    ({"threads": -2}, "'threads' must be between 0 and"),
    ({"peak_gflops": -1}, "'peak_gflops' must be a finite number, 0 or more"),
    ({"oracle": {"rel_l2_err": -1}}, "'oracle.rel_l2_err' must be a finite number"),
    ({"oracle": {"sampled": "no"}}, "'oracle.sampled' is not true/false"),
    ({"oracle": 7}, "'oracle' is not an object"),
    ({"distribution": "uniform"}, "'distribution' is 'uniform'"),
    ({"variant": ""}, "'variant' missing"),
    ({"variant": "a|b1"}, "'variant' holds '|' or a control character"),
    ({"variant": "a\nb"}, "'variant' holds '|' or a control character"),
    ({"status": "failed", "reason": "x\x1b[2Jcleared"}, "'reason' holds a control character"),
    ({"status": "skipped", "reason": "two\nlines", "times_ms": []}, "'reason' holds a control character"),
    ({"device": "cuda\nattnbench: error: forged"}, "'device' is 'cuda\\x0aattnbench: error: forged'"),
    ({"seq_q": 0}, "seq_q must be positive"),
    ({"softcap": 1e300}, "softcap must be 0 (off) or between"),
]


@pytest.mark.parametrize("changes, expected", BAD, ids=[str(c) for c, _ in BAD])
def test_a_measurement_that_contradicts_the_schema_is_refused(folder, cases, changes, expected):
    before = folder_files(folder)
    # A valid line first: it must not be written either.
    result = append(folder, measurement(cases[0]), measurement(cases[1], **changes))
    assert_refused(result, 2, expected)
    assert result.stdout == ""
    assert folder_files(folder) == before


def test_tf32_is_only_for_fp32_tensors(folder, cases):
    bf16 = next(c for c in cases if c["dtype"] == "bf16")
    fp32 = next(c for c in cases if c["dtype"] == "fp32")
    assert_refused(append(folder, measurement(bf16, precision="tf32")), 1,
                   "'precision' tf32 is only for fp32 tensors, not bf16")
    assert append(folder, measurement(fp32, precision="tf32", device="cuda")).returncode == 0


def test_document_lengths_that_wrap_are_refused(folder, cases):
    documents = next(c for c in cases if c["mask"] == "documents:3")
    huge = 9223372036854775807
    assert_refused(append(folder, measurement(documents, doc_lens=[huge, huge, 18])), 1,
                   "a document length is 9223372036854775807, outside 1..seq (16)")


def test_a_case_recorded_twice_is_refused(folder, cases):
    before = folder_files(folder)
    # Twice in the input.
    assert_refused(append(folder, measurement(cases[0]), measurement(cases[1]), measurement(cases[0])), 3,
                   "is given twice in the input")
    # Already in the folder (one appended before).
    assert folder_files(folder) == before
    assert append(folder, measurement(cases[0])).returncode == 0
    assert_refused(append(folder, measurement(cases[0])), 1, "is already recorded in")


def test_lines_that_are_not_json_objects(folder, cases):
    before = folder_files(folder)
    beyond_double = json.dumps(measurement(cases[1])).replace('"peak_gflops": 10.0', '"peak_gflops": 1e999')
    result = append(folder, measurement(cases[0]), beyond_double)
    assert result.returncode == 2 and "stdin line 2: " in result.stderr, result.stderr
    assert_refused(append(folder, measurement(cases[0]), "{not json"), 2, "not valid JSON")
    assert_refused(append(folder, "[1, 2]"), 1, "a measurement must be a JSON object")
    assert_refused(append(folder, '{"variant": "x"}'), 1, "missing or not an integer")
    assert folder_files(folder) == before


def test_a_line_over_one_mib_fails_as_it_is_read(folder, cases):
    before = folder_files(folder)
    long_line = json.dumps(measurement(cases[0], reason="x" * (1 << 20)))
    assert_refused(append(folder, measurement(cases[1]), long_line), 2, "longer than 1048576 bytes")
    assert folder_files(folder) == before
    started = time.monotonic()
    with open("/dev/zero", "rb") as zeros:
        result = subprocess.run([str(attnbench_binary()), "append", str(folder)], stdin=zeros,
                                capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 30
    assert_refused(result, 1, "longer than 1048576 bytes")
    assert folder_files(folder) == before


@pytest.mark.parametrize("variant", ["naive", "flash_cpu", "blas"])
@pytest.mark.parametrize("status", ["ok", "skipped", "failed"])
def test_a_record_of_attnbench_s_own_variant_needs_an_output_to_check(folder, cases, variant, status):
    """A naive record taken on the producer's word (a fake 123-second time) would have counted
    its case done for `run --resume` and steered the case-budget predictor."""
    before = folder_files(folder)
    fake = measurement(cases[3], variant=variant, status=status,
                       times_ms=[] if status == "skipped" else [123000.0])
    assert_refused(append(folder, fake), 1, f"'variant' {variant} is one of attnbench's own")
    assert folder_files(folder) == before


def test_a_number_past_a_double_is_named_without_the_library_s_own_prefix(folder, cases):
    line = json.dumps(measurement(cases[0])).replace('"times_ms": [1.0, 2.0, 3.0]', '"times_ms": [1e400]')
    assert "1e400" in line
    result = append(folder, line)
    assert_refused(result, 1, "number overflow parsing '1e400'")
    assert "json.exception" not in result.stderr
