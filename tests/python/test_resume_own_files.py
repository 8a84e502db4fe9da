"""A resumed run appends to its folder's cases.jsonl and peaks.jsonl: only to files of its own. A
symbolic link made it append into the file the link names (another run's records grew by this
run's, and this run took that run's records as its finished cases), a second hard link (a snapshot
made with `cp -al`) into every copy at once. Both are refused with one line, nothing appended."""

import os
import shutil
import subprocess

import pytest

from binary import assert_usage_error, run_attnbench

SWEEP = ('name = "own"\nvariants = ["naive"]\n[axes]\nseq_len = [8, 16, 24]\n'
         '[measure]\nwarmup = 0\nrepetitions = 1\nmin_time_s = 0.001\npeaks = "skip"\n')


@pytest.fixture
def started(tmp_path):
    """A run of one of three cases, to resume, and its config."""
    config = tmp_path / "own.toml"
    config.write_text(SWEEP)
    out = tmp_path / "run"
    run_attnbench("run", config, "--out", out, "--cases", "0", check=True)
    return config, out


@pytest.mark.parametrize("name", ["cases.jsonl", "peaks.jsonl"])
def test_a_resume_refuses_a_records_file_that_is_a_symbolic_link(tmp_path, started, name):
    config, out = started
    other = tmp_path / "other.jsonl"
    shutil.copy(out / name, other)
    before = other.read_bytes()
    (out / name).unlink()
    (out / name).symlink_to(other)
    result = run_attnbench("run", config, "--out", out, "--resume")
    assert_usage_error(result, f"{name}: a symbolic link")
    assert other.read_bytes() == before


def test_a_resume_refuses_a_records_file_with_a_second_hard_link(tmp_path, started):
    config, out = started
    snapshot = tmp_path / "snapshot"
    subprocess.run(["cp", "-al", str(out), str(snapshot)], check=True)
    before = (snapshot / "cases.jsonl").read_bytes()
    result = run_attnbench("run", config, "--out", out, "--resume")
    assert_usage_error(result, "cases.jsonl: 2 hard links")
    assert (snapshot / "cases.jsonl").read_bytes() == before
    # A real copy resumes.
    shutil.rmtree(snapshot)
    assert os.stat(out / "cases.jsonl").st_nlink == 1
    run_attnbench("run", config, "--out", out, "--resume", check=True)
    assert len((out / "cases.jsonl").read_text().splitlines()) == 3


def test_a_new_run_into_an_empty_folder_holding_a_link_refuses_it(tmp_path):
    """The fresh run measured peaks and ran its first case before its append through the link
    failed, leaving a manifest behind."""
    config = tmp_path / "own.toml"
    config.write_text(SWEEP)
    out, target = tmp_path / "run", tmp_path / "elsewhere.jsonl"
    out.mkdir()
    target.write_text("")
    (out / "cases.jsonl").symlink_to(target)
    result = run_attnbench("run", config, "--out", out)
    assert_usage_error(result, "cases.jsonl: a symbolic link")
    assert not (out / "manifest.json").exists()
    assert target.read_text() == ""
