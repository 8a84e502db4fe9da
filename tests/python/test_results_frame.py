"""attnbench.results as a notebook uses it: `load(DIR)` is a pandas DataFrame, one row per record,
typed columns, rated (percent_of_peak, peak_gflops, disturbed) as the C++ reporter rates them
in summary.csv; `load_many` puts runs side by side, each rated against its own peak checks."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pandas as pd
import pytest

import attnbench.results as r
from binary import REPO, run_attnbench
from conftest import sweep_toml
from results_factory import make_case, power_law_cases, write_run



@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A run the binary made here, with its summary.csv (the C++ reporter's rating)."""
    folder = tmp_path_factory.mktemp("frame")
    config = folder / "tiny.toml"
    config.write_text(sweep_toml("frame", variants=("openmp", "naive"), seq_len=(64, 128), d_k=(16,),
                                  causal=(False, True), repetitions=2, peaks="measure"))
    run_attnbench("run", config, "--out", folder / "run", check=True)
    return folder / "run"


def test_load_gives_a_row_per_record_with_typed_columns(measured):
    frame = r.load(measured)
    records = (measured / "cases.jsonl").read_text().splitlines()
    assert isinstance(frame, pd.DataFrame) and len(frame) == len(records) == 8
    assert frame["run"].unique().tolist() == ["run"]
    assert str(frame["seq_kv"].dtype) == "Int64" and str(frame["time_ms_median"].dtype) == "Float64"
    assert str(frame["causal"].dtype) == "boolean" and str(frame["variant"].dtype) == "string"
    assert str(frame["disturbed"].dtype) == "boolean"
    assert sorted(frame["variant"].unique()) == ["naive", "openmp"]
    assert frame.attrs["manifest"]["name"] == "frame" and frame.attrs["peak_checks"]
    # The seq sweep as a notebook reads it: the median time by variant and n.
    table = frame[~frame["causal"]].pivot_table(index="seq_kv", columns="variant",
                                                values="time_ms_median")
    assert table.shape == (2, 2) and (table > 0).all().all()


def test_load_rates_every_record_as_the_cpp_reporter_does(measured):
    frame = r.load(measured)
    with open(measured / "summary.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(frame)
    for (_, record), row in zip(frame.iterrows(), rows):
        assert record["case_id"] == row["case_id"]
        assert record["peak_gflops"] == pytest.approx(float(row["peak_gflops"]), rel=1e-6)
        assert record["percent_of_peak"] == pytest.approx(float(row["percent_of_peak"]), rel=1e-4)
        assert str(bool(record["disturbed"])).lower() == row["disturbed"]
        assert record["disturbed_reason"] == row["disturbed_reason"]
    # And as load_run's records (the plots' input) say, through the one rate_record.
    for (_, record), case in zip(frame.iterrows(), r.load_run(measured).cases):
        assert record["percent_of_peak"] == pytest.approx(case["percent_of_peak"])


def test_load_many_rates_each_run_against_its_own_checks(tmp_path):
    first = write_run(tmp_path / "first", power_law_cases("naive", 2.0, 1e-6, (256, 512, 1024)))
    second = write_run(tmp_path / "second", power_law_cases("naive", 2.0, 1e-6, (256, 512, 1024)))
    for folder, peak in ((first, 100.0), (second, 400.0)):
        (folder / "peaks.jsonl").write_text(json.dumps(
            {"when": "start", "cpu_fma_gflops": peak, "cpu_fma_sustained_gflops": peak}) + "\n")
    for folder in (first, second):  # records name the peak they are read against
        lines = [dict(json.loads(line), peak_name="cpu_fma_gflops")
                 for line in (folder / "cases.jsonl").read_text().splitlines()]
        (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in lines))
    both = r.load_many([first, second])
    assert both["run"].tolist() == ["first"] * 3 + ["second"] * 3
    peaks = both.groupby("run")["peak_gflops"].unique()
    assert peaks["first"].tolist() == [100.0] and peaks["second"].tolist() == [400.0]
    by_run = both.pivot_table(index="seq_kv", columns="run", values="percent_of_peak")
    assert (by_run["first"] / by_run["second"]).round(6).unique().tolist() == [4.0]
    assert set(both.attrs["manifests"]) == {"first", "second"}


def test_nulls_stay_nulls(tmp_path):
    cases = power_law_cases("naive", 2.0, 1e-6, (256, 512))
    cases.append(make_case("naive", seq=1024, status="skipped", reason="too large"))
    frame = r.load(write_run(tmp_path / "nulls", cases))
    skipped = frame[frame["status"] == "skipped"].iloc[0]
    assert skipped["time_ms_median"] is pd.NA and skipped["workspace_bytes"] is pd.NA
    assert skipped["reason"] == "too large"


def test_a_malformed_folder_is_a_results_error(tmp_path):
    with pytest.raises(r.ResultsError, match="not a results folder"):
        r.load(tmp_path / "absent")
    folder = write_run(tmp_path / "twice", power_law_cases("naive", 2.0, 1e-6, (256, 512)))
    with pytest.raises(r.ResultsError, match="share a name"):
        r.load_many([folder, folder])


def test_the_readme_line_works_from_anywhere(tmp_path):
    # As docs/plots.md gives it, after the set-up and from outside the tree: no sys.path edits.
    code = "import attnbench.results as r; print(r.load(%r).shape)" % str(REPO / "results" / "cpu-scaling")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    rows = len((REPO / "results" / "cpu-scaling" / "cases.jsonl").read_text().splitlines())
    assert result.stdout.startswith(f"({rows}, ")


def test_records_written_before_the_rename_read_their_isa_as_code_path():
    """results/cpu-bf16 was written when the record's code path field was called isa."""
    assert '"isa"' in (REPO / "results" / "cpu-bf16" / "cases.jsonl").read_text()
    table = r.load(REPO / "results" / "cpu-bf16")
    assert "isa" not in table.columns
    assert str(table["code_path"].dtype) == "string"
    assert set(table.loc[table["variant"] == "flash_cpu", "code_path"]) == {"avx512", "avx512+widened_bf16"}


def test_records_from_before_runs_per_sample_read_as_one_pass_a_sample(tmp_path, measured):
    # This binary's records carry the field: every CPU sample is one pass.
    assert (r.load(measured)["runs_per_sample"] == 1).all()
    timed, skipped, newer = (make_case("naive", seq=256), make_case("naive", seq=512, status="skipped"),
                             make_case("naive", seq=1024))
    for case in (timed, skipped):
        case.pop("runs_per_sample", None)
    newer["runs_per_sample"] = 40
    frame = r.load(write_run(tmp_path / "old", [newer, timed, skipped]))
    assert str(frame["runs_per_sample"].dtype) == "Int64"
    by_seq = dict(zip(frame["seq_kv"], frame["runs_per_sample"]))
    assert by_seq[256] == 1 and pd.isna(by_seq[512]) and by_seq[1024] == 40
