"""`attnbench export DIR`: a folder's records rated by the binary's one rater, as JSON or as
summary.csv's rows; it reads the folder and changes nothing. The Python loader's rating of the
same folder must agree with it, record for record, until the loader reads the export itself."""

import json
import math

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
    loaded = {case["case_id"]: case for case in results.load_run(folder).cases}
    for record in records:
        assert record["status"] == "ok"
        assert record["percent_of_peak"] is not None and record["percent_of_peak"] > 0
        python = loaded[record["case_id"]]
        for key in ("gflops", "peak_gflops", "percent_of_peak", "disturbed"):
            if isinstance(record[key], float):
                assert math.isclose(record[key], python[key], rel_tol=1e-12), key
            else:
                assert record[key] == python[key], key


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


def test_every_committed_folder_exports_as_the_python_loader_reads_it():
    """The committed folders were written by every release since the first: records without a
    dtype, a mask, a pass or the serving fields, `isa` before `code_path`, folders rated from the
    manifest before peaks.jsonl. The binary's upgrade and rating (export) and the Python loader's
    must give the same record, field for field, for each of them."""
    root = REPO / "results"
    folders = sorted(m.parent for m in root.rglob("manifest.json") if (m.parent / "cases.jsonl").exists())
    assert len(folders) >= 40
    for folder in folders:
        exported = json.loads(run_attnbench("export", folder, check=True).stdout)["records"]
        loaded = {case["case_id"]: case for case in results.load_run(folder).cases}
        assert sorted(loaded) == sorted(record["case_id"] for record in exported), folder
        for record in exported:
            python = loaded[record["case_id"]]
            assert set(record) == set(python), (folder, set(record) ^ set(python))
            for key, value in record.items():
                if isinstance(value, float) and isinstance(python[key], (int, float)):
                    assert math.isclose(value, python[key], rel_tol=1e-9, abs_tol=1e-12), (folder, key)
                else:
                    assert value == python[key], (folder, record["case_id"], key)
