"""JSON nested deeper than attnbench's limit (64 levels) is refused where it is read, with one
line naming where: a producer's description on stdin (`append --init`), a measurement
(`append`), a case (`prepare`), and a record or manifest of a results folder (`export`,
`merge`). Before, a record with a field nested 80,000 levels deep crashed export and merge (the
JSON library's serializer recursed past the stack) and a 12 KB description became a 72 MB
manifest that no reader would open."""

import json
import shutil

import pytest

from binary import error_lines, run_attnbench


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def assert_one_line(result, *fragments):
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("depth")
    config = root / "tiny.toml"
    config.write_text('name = "tiny"\nvariants = ["naive"]\n[axes]\nseq_len = [8, 16]\nd_k = [4]\n'
                      '[measure]\npeaks = "skip"\n')
    run_attnbench("run", config, "--out", root / "run", check=True)
    return config, root / "run"


@pytest.fixture
def run_copy(tmp_path, finished_run):
    copy = tmp_path / "run"
    shutil.copytree(finished_run[1], copy)
    return copy


def test_a_description_nested_too_deep_is_refused_and_nothing_is_made(tmp_path, finished_run):
    config, _ = finished_run
    description = '{"peer": ' + nested(6000) + "}"
    result = run_attnbench("append", tmp_path / "new", "--init", "--config", config,
                           input=description, timeout=120)
    assert_one_line(result, "stdin: nested more than 64 levels deep (at byte 73)")
    assert not (tmp_path / "new").exists()


def test_a_description_within_the_depth_is_kept(tmp_path, finished_run):
    config, _ = finished_run
    description = '{"peer": ' + nested(60) + "}"
    result = run_attnbench("append", tmp_path / "new", "--init", "--config", config,
                           input=description, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "new" / "manifest.json").read_text())["peer"] == json.loads(nested(60))


def test_brackets_inside_strings_do_not_count(tmp_path, finished_run):
    config, _ = finished_run
    description = json.dumps({"peer": {"note": "[" * 500 + '\\" {' * 100}})
    result = run_attnbench("append", tmp_path / "new", "--init", "--config", config,
                           input=description, timeout=120)
    assert result.returncode == 0, result.stderr


def test_a_measurement_nested_too_deep_is_refused(run_copy):
    before = (run_copy / "cases.jsonl").read_bytes()
    result = run_attnbench("append", run_copy, input='{"variant": "peer", "extra": ' + nested(70000) + "}\n",
                           timeout=120)
    assert_one_line(result, "stdin line 1: nested more than 64 levels deep")
    assert (run_copy / "cases.jsonl").read_bytes() == before


def test_a_case_nested_too_deep_is_refused_by_prepare(tmp_path, run_copy):
    result = run_attnbench("prepare", run_copy, "--inputs-dir", tmp_path / "inputs",
                           input='{"index": 0, "x": ' + nested(70000) + "}", timeout=120)
    assert_one_line(result, "stdin: nested more than 64 levels deep")


def deepen_first_record(folder, depth):
    path = folder / "cases.jsonl"
    lines = path.read_text().splitlines()
    lines[0] = lines[0][:-1] + ', "zzz": ' + nested(depth) + "}"
    path.write_text("\n".join(lines) + "\n")


def test_export_and_merge_refuse_a_record_nested_too_deep_with_its_line(tmp_path, run_copy):
    deepen_first_record(run_copy, 80000)
    for command in (["export", run_copy], ["merge", run_copy, "--out", tmp_path / "merged"]):
        result = run_attnbench(*command, timeout=120)
        assert_one_line(result, "cases.jsonl:1: malformed record (nested more than 64 levels deep")
    assert not (tmp_path / "merged").exists()


def test_export_refuses_a_manifest_nested_too_deep_with_its_line(run_copy):
    manifest = json.loads((run_copy / "manifest.json").read_text())
    manifest["zzz"] = "placeholder"
    text = json.dumps(manifest, indent=2).replace('"placeholder"', nested(80000))
    (run_copy / "manifest.json").write_text(text)
    line = text[:text.index("[" * 100)].count("\n") + 1
    result = run_attnbench("export", run_copy, timeout=120)
    assert_one_line(result, f"manifest.json:{line}: nested more than 64 levels deep")
