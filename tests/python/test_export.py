"""`attnbench export DIR`: a folder's records rated by the binary's one rater, as JSON or as
summary.csv's rows; it reads the folder and changes nothing. The Python loader is that export
(test_python_hostile.py shows it rates nothing itself); committed folders of every release still
load and rate as the release before the switch rated them."""

import json
import math
import re

from binary import REPO, error_lines, run_attnbench
from conftest import sweep_toml

from attnbench import results


def measured_folder(tmp_path):
    config = tmp_path / "sweep.toml"
    config.write_text(sweep_toml("export", peaks="measure", causal=(False, True)))
    folder = tmp_path / "run"
    run_attnbench("run", config, "--out", folder, check=True)
    return folder


def test_export_json_is_every_record_rated_in_case_order_and_agrees_with_the_python_loader(tmp_path):
    folder = measured_folder(tmp_path)
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    exported = json.loads(run_attnbench("export", folder, check=True).stdout)
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before, "export wrote"

    assert exported["manifest"] == json.loads((folder / "manifest.json").read_text())
    schema = json.loads(run_attnbench("schema", "--json", check=True).stdout)
    assert exported["schema_version"] == schema["schema_version"]
    assert exported["manifest"]["schema_version"] == schema["schema_version"]
    assert [field["name"] for field in exported["fields"]] == [
        field["name"] for field in schema["fields"]]
    records = exported["records"]
    assert len(records) == len((folder / "cases.jsonl").read_text().splitlines()) == 4
    assert [r["case_index"] for r in records] == sorted(r["case_index"] for r in records)
    checks = [json.loads(line) for line in (folder / "peaks.jsonl").read_text().splitlines()]
    assert exported["peak_checks"] == checks
    summary = exported["peak_check_summary"]
    assert summary["best"]["cpu_fma_gflops"] == max(check["cpu_fma_gflops"] for check in checks)
    assert summary["worst_check"].startswith("worst check: the ")
    for record in records:
        assert record["status"] == "ok"
        assert record["percent_of_peak"] is not None and record["percent_of_peak"] > 0
        assert record["peak_gflops"] == summary["best"][record["peak_name"]]


def test_export_csv_is_summary_csv(tmp_path):
    folder = measured_folder(tmp_path)
    assert run_attnbench("export", folder, "--csv", check=True).stdout == (
        folder / "summary.csv").read_text()


def test_export_of_a_missing_or_broken_folder_is_one_line_and_exit_2(tmp_path):
    missing = run_attnbench("export", tmp_path / "nowhere")
    assert missing.returncode == 2
    assert len(error_lines(missing)) == 1 and "nowhere" in error_lines(missing)[0]
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{not json")
    result = run_attnbench("export", broken)
    assert result.returncode == 2
    assert len(error_lines(result)) == 1 and "manifest.json" in error_lines(result)[0]


def test_a_case_recorded_twice_is_refused_naming_the_file_and_line(tmp_path):
    """Every reader counted a duplicated line twice (export, the loader, run --resume)."""
    folder = measured_folder(tmp_path)
    records = folder / "cases.jsonl"
    lines = records.read_text().splitlines()
    records.write_text("\n".join(lines + [lines[0]]) + "\n")
    result = run_attnbench("export", folder)
    assert result.returncode == 2
    assert len(error_lines(result)) == 1
    assert f"cases.jsonl:{len(lines) + 1}: case " in error_lines(result)[0]
    assert "recorded twice (first at line 1)" in error_lines(result)[0]


def test_a_folder_of_a_newer_record_schema_is_refused_in_one_line(tmp_path):
    folder = measured_folder(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    version = json.loads(run_attnbench("schema", "--json", check=True).stdout)["schema_version"]
    manifest["schema_version"] = version + 1
    (folder / "manifest.json").write_text(json.dumps(manifest))
    for command in (("export", folder),
                    ("run", tmp_path / "sweep.toml", "--out", folder, "--resume")):
        result = run_attnbench(*command)
        assert result.returncode == 2
        [line] = error_lines(result)
        assert f"record schema version {version + 1}, newer than this attnbench reads" in line


def test_every_committed_folder_exports_and_loads():
    root = REPO / "results"
    folders = sorted(m.parent for m in root.rglob("manifest.json") if (m.parent / "cases.jsonl").exists())
    assert len(folders) >= 40
    for folder in folders:
        exported = json.loads(run_attnbench("export", folder, check=True).stdout)["records"]
        assert len(exported) == len((folder / "cases.jsonl").read_text().splitlines()), folder
        assert [case["case_id"] for case in results.load_run(folder).cases] == [
            record["case_id"] for record in exported], folder


def bandwidth_disagreement(case: dict) -> str:
    """The bandwidth checks' disagreement that ends a record's disturbed_reason, or ""."""
    reason = case.get("disturbed_reason") or ""
    found = re.search(r"(cpu_read|cpu_triad|gpu_copy)_gbps checks disagree: [^;]*$", reason)
    return found.group(0) if found and case.get("percent_of_bandwidth") is not None else ""


def bandwidth_disagreement_removed(case: dict) -> str:
    """The record's disturbed_reason without that disagreement: the reasons a release before it
    gave."""
    reason = case.get("disturbed_reason") or ""
    doubt = bandwidth_disagreement(case)
    return reason[: len(reason) - len(doubt)].removesuffix("; ") if doubt else reason


def test_folders_of_earlier_releases_rate_as_the_release_before_the_export_did():
    """The committed fixture: eight folders written by releases since the first (before
    peaks.jsonl, schema version 0, `isa` before `code_path`, percent_of_peak stored, disturbed
    records, the AMX roof, decode), with each record's upgraded and rated fields as the last
    Python loader with a rater of its own gave them. The binary's upgrade and rating, read through
    the loader, must give the same."""
    fixture = json.loads((REPO / "tests/python/data/rated_by_release_before_export.json").read_text())
    fields = fixture["fields"]
    for folder, expected in fixture["folders"].items():
        loaded = {case["case_id"]: case for case in results.load_run(REPO / folder).cases}
        assert sorted(loaded) == sorted(expected), folder
        for case_id, values in expected.items():
            bandwidth_doubt = bandwidth_disagreement(loaded[case_id])
            for field, value in zip(fields, values):
                got = loaded[case_id].get(field)
                # One rule came later: a record left of the ridge whose bandwidth checks disagree
                # by over 10% is disturbed, that disagreement after the reasons the release gave.
                if bandwidth_doubt and field == "disturbed_reason":
                    got = bandwidth_disagreement_removed(loaded[case_id])
                if bandwidth_doubt and field == "disturbed":
                    assert got is True, (folder, case_id)
                    got = bool(bandwidth_disagreement_removed(loaded[case_id]))
                if isinstance(value, float):
                    assert math.isclose(got, value, rel_tol=1e-12), (folder, case_id, field)
                else:
                    assert got == value, (folder, case_id, field, got, value)
