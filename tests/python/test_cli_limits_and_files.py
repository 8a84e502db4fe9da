"""Hostile input, round two: memory limits the process is under (an address-space rlimit, a
cgroup), special files inside a results folder and as attend's outputs, control characters in
what an error quotes, JSON damage named by file and line, and the exit code and message of the
remaining bad-input cases. The promise stays the one of test_cli_hostile.py: bad input gets one
line naming the problem and exit status 2; nothing hangs; a case that cannot fit is skipped with
its reason, never killed."""

import json
import os
import re
import subprocess

import numpy as np
import pytest

from binary import run_attnbench

SMALL = """
name = "limits"
variants = ["naive"]
[axes]
heads = [2]
seq_len = [16, 24]
d_k = [8]
causal = [false]
[measure]
warmup = 0
repetitions = 1
min_time_s = 0.001
"""


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "small.toml"
    path.write_text(SMALL)
    return path


def error_lines(result):
    """stderr less the progress lines and warnings a run prints before its error."""
    return [line for line in result.stderr.strip().splitlines()
            if not re.match(r"\[\d+/\d+\] |attnbench: warning: ", line)]


def assert_usage_error(result, expected):
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("attnbench: error: "), lines[0]
    assert expected in lines[0], lines[0]


def save(tmp_path, name, array):
    path = tmp_path / name
    np.save(path, array)
    return path


def attend(*args, **kwargs):
    return run_attnbench("attend", "--variant", "naive", *args, **kwargs)


def records(folder):
    return [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines()]


# Exit codes and messages (issue 28, item 7).
def test_an_unknown_subcommand_is_named_with_the_valid_ones():
    result = run_attnbench("frobnicate")
    assert_usage_error(result, "unknown subcommand 'frobnicate'")
    assert "run" in result.stderr and "merge" in result.stderr and "attend" in result.stderr


@pytest.mark.parametrize("command", ["run", "check", "plan", "attend"])
def test_an_unknown_isa_override_is_refused_before_any_case_runs(tmp_path, config, command):
    x = save(tmp_path, "x.npy", np.ones((4, 8), np.float32))
    args = {"run": ["run", config, "--out", tmp_path / "run"],
            "check": ["check", config],
            "plan": ["plan", config],
            "attend": ["attend", "--variant", "flash_cpu", "--q", x, "--k", x, "--v", x,
                       "--out", tmp_path / "o.npy"]}[command]
    env = dict(os.environ, ATTNBENCH_FLASH_CPU_ISA="garbage")
    result = run_attnbench(*args, env=env)
    assert_usage_error(result, "ATTNBENCH_FLASH_CPU_ISA: 'garbage' is not one of")
    assert not (tmp_path / "run").exists() and not (tmp_path / "o.npy").exists()
    # --help still answers.
    assert run_attnbench(command, "--help", env=env).returncode == 0


def test_merge_over_an_existing_folder_does_not_suggest_resume(tmp_path, config):
    shard = tmp_path / "whole"
    run_attnbench("run", config, "--out", shard, check=True)
    existing = tmp_path / "existing"
    run_attnbench("run", config, "--out", existing, check=True)
    before = (existing / "cases.jsonl").read_text()
    result = run_attnbench("merge", shard, "--out", existing)
    assert_usage_error(result, "already exists")
    assert "--resume" not in result.stderr
    assert (existing / "cases.jsonl").read_text() == before


# One line, whatever an error quotes (issue 29, item 6).
def test_a_newline_in_a_config_path_stays_on_one_line(tmp_path):
    result = run_attnbench("check", str(tmp_path / "a\nattnbench: error: forged"))
    assert_usage_error(result, "a\\nattnbench: error: forged")


def test_a_control_character_in_an_environment_value_stays_on_one_line(config):
    env = dict(os.environ, ATTNBENCH_FLASH_CPU_ISA="x\nattnbench: error: forged\x1b[2J")
    result = run_attnbench("check", config, env=env)
    assert_usage_error(result, "x\\nattnbench: error: forged\\x1b[2J")


def test_a_newline_in_a_manifest_field_stays_on_one_line(tmp_path, config):
    out = tmp_path / "run"
    run_attnbench("run", config, "--out", out, check=True)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["shard"] = "0/2\nattnbench: error: forged"
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert_usage_error(run_attnbench("run", config, "--out", out, "--resume"),
                       "'0/2\\nattnbench: error: forged'")
