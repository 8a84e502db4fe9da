"""How a run sizes its peak checks: measure.peaks = skip (no checks, no rating, said so), the
bandwidth measured only in runs with a CPU case left of the ridge, and the manifest's account of
how each check was sized; and a run loads no library it does not use."""

import json
import os

import pytest

from binary import assert_usage_error, run_attnbench

DECODE = """
name = "decode-small"
variants = ["flash_cpu"]
[axes]
heads = [4]
seq_q = [1]
seq_kv = [256]
d_k = [64]
[measure]
warmup = 0
repetitions = 2
min_time_s = 0.001
"""

# seq 4096, d 64: 1024 FLOP/byte, right of the ridge estimate (the compute peak over an assumed
# 2 GB/s a thread) on every host we run on. seq 1024's 256 was not: 2 Zen 5 cores' vdpbf16ps
# peak, 1,005-1,078 GFLOP/s from run to run, puts the estimate at 251-270.
PREFILL = DECODE.replace('name = "decode-small"', 'name = "prefill-large"').replace(
    "seq_q = [1]\nseq_kv = [256]", "seq_len = [4096]").replace("heads = [4]", "heads = [1]")


def write(tmp_path, name, text):
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_planned_intensities_straddle_the_ridge(tmp_path):
    decode = json.loads(run_attnbench("plan", write(tmp_path, "d", DECODE), "--json", check=True).stdout)
    prefill = json.loads(run_attnbench("plan", write(tmp_path, "p", PREFILL), "--json", check=True).stdout)

    def intensities(plan):  # forward FLOPs over the fewest bytes, as records count them
        return [c["flops"] / c["bytes"] for c in plan["cases"]]

    assert max(intensities(decode)) < 2
    assert min(intensities(prefill)) >= 1024


def test_decode_run_measures_the_bandwidth_and_says_how(tmp_path):
    out = tmp_path / "decode"
    run_attnbench("run", write(tmp_path, "d", DECODE), "--out", out, check=True)
    manifest = json.loads((out / "manifest.json").read_text())
    sizing = manifest["peak_sizing"]
    for loop in ("fma_one_thread", "fma_all_threads", "sgemm"):
        assert sizing[loop]["trials"] >= 2 and sizing[loop]["budget_ms"] > 0
    assert sizing["sgemm"]["n"] > 0
    # The start check is retaken while disturbed (start_peaks.h): how many attempts, and whether
    # one ran alone, with the account when it took more than one.
    assert 1 <= sizing["start_attempts"] <= 3 and isinstance(sizing["start_clean"], bool)
    assert ("start_note" in sizing) == (sizing["start_attempts"] > 1 or not sizing["start_clean"])
    triad = sizing["triad"]
    assert triad["measured"] is True and "left of" in triad["reason"]
    assert 0 < triad["array_bytes"] <= 64 << 20 and triad["trials"] >= 5 and triad["sizing"]
    assert manifest["peaks"]["cpu_triad_gbps"] > 0
    checks = lines(out / "peaks.jsonl")
    assert [c["when"] for c in checks] == ["start", "end"]
    assert all(c["cpu_triad_gbps"] > 0 and c["sizing"]["triad"]["measured"] for c in checks)
    # The read-only roof beside the triad, on the same arrays: both in every check.
    assert manifest["peaks"]["cpu_read_gbps"] > 0
    assert triad["read_trials"] >= 5 and triad["read_budget_ms"] > 0
    assert all(c["cpu_read_gbps"] > 0 for c in checks)
    record = lines(out / "cases.jsonl")[0]
    assert "percent_of_peak" not in record  # derived when read, never stored
    from attnbench import results as ar
    [rated] = ar.load_run(out).cases
    assert rated["percent_of_peak"] > 0 and rated["unrated_reason"] == ""
    best = {name: max(c[name] for c in checks) for name in ("cpu_read_gbps", "cpu_triad_gbps")}
    assert rated["bandwidth_name"] == max(best, key=best.get)
    assert rated["peak_gbps"] == max(best.values())


def test_prefill_run_leaves_the_bandwidth_out_and_says_why(tmp_path):
    out = tmp_path / "prefill"
    run_attnbench("run", write(tmp_path, "p", PREFILL), "--out", out, check=True)
    manifest = json.loads((out / "manifest.json").read_text())
    triad = manifest["peak_sizing"]["triad"]
    assert triad["measured"] is False and "right of" in triad["reason"]
    assert "array_bytes" not in triad
    assert manifest["peaks"]["cpu_triad_gbps"] == 0
    checks = lines(out / "peaks.jsonl")
    assert checks and all(c["cpu_triad_gbps"] is None and "cpu_read_gbps" not in c for c in checks)
    assert all(c["cpu_fma_gflops"] > 0 for c in checks)


def test_skip_takes_no_checks_and_rates_nothing(tmp_path):
    out = tmp_path / "skipped"
    result = run_attnbench("run", write(tmp_path, "d", DECODE), "--out", out, "--set",
                           "measure.peaks=skip", check=True)
    assert "measuring this machine's peaks" not in result.stdout
    assert "measure.peaks = skip" in result.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert "measure.peaks = skip" in manifest["peaks"]["skipped"]
    assert "peak_sizing" not in manifest
    assert not (out / "peaks.jsonl").exists() or lines(out / "peaks.jsonl") == []
    header, row = (out / "summary.csv").read_text().splitlines()[:2]
    values = dict(zip(header.split(","), row.split(",")))
    assert values["percent_of_peak"] == "" and values["peak_gflops"] == ""
    # The Python loader reads it as the C++ readers do: no rating.
    from attnbench import results as ar
    run = ar.load_run(out)
    assert all(c["percent_of_peak"] is None and "measure.peaks = skip" in c["unrated_reason"]
               for c in run.cases)
    assert "measure.peaks = skip" in values["unrated_reason"]


@pytest.mark.parametrize("value", ["maybe", "'sometimes'"])
def test_an_invalid_peaks_value_is_one_line_naming_the_choices(tmp_path, value):
    result = run_attnbench("run", write(tmp_path, "d", DECODE), "--out", tmp_path / "bad", "--set",
                           f"measure.peaks={value}")
    assert_usage_error(result, "measure.peaks", "measure, skip")
    assert not (tmp_path / "bad").exists()


def test_a_cpu_run_never_loads_cublas(tmp_path):
    """cuBLAS (150 MB resident once mapped) is opened only by what calls it: the dynamic loader's
    own account of a CPU run lists every library it maps, at start-up and by dlopen."""
    config = write(tmp_path, "decode", DECODE.replace("min_time_s = 0.001",
                                                      'min_time_s = 0.001\npeaks = "skip"'))
    result = run_attnbench("run", config, "--out", tmp_path / "out", check=True,
                           env={**os.environ, "LD_DEBUG": "libs"})
    assert "calling init:" in result.stderr, "LD_DEBUG gave no account of the libraries loaded"
    loaded = [line for line in result.stderr.splitlines() if "calling init:" in line]
    assert not [line for line in loaded if "libcublas" in line], loaded
