"""What the environment may ask of a run: an OpenMP thread count past the CPUs is held to them
(saying so, the manifest keeping both), one past any machine is one line and exit 2 (it used to
crash libgomp, or hold a run in its peak check for minutes); ATTNBENCH_LOADAVG naming a FIFO or
a device is never waited on or read without end."""

import json
import os
import subprocess

import numpy as np
import pytest

from binary import assert_usage_error, attnbench_binary, run_attnbench

CPUS = len(os.sched_getaffinity(0))


@pytest.fixture
def config(sweep_file):
    return sweep_file("small.toml", name="environment", seq_len=(16,))


def with_env(**variables):
    return {**os.environ, **variables}


@pytest.fixture
def npys(tmp_path):
    rng = np.random.default_rng(3)
    for name in "qkv":
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((1, 2, 8, 4)).astype(np.float32))
    return tmp_path


@pytest.mark.parametrize("threads", [100_000, 65 * CPUS])
@pytest.mark.parametrize("command", ["run", "check", "attend"])
def test_a_thread_count_past_any_machine_is_one_line(tmp_path, npys, config, threads, command):
    arguments = {"run": ["run", config, "--out", tmp_path / "run"], "check": ["check", config],
                 "attend": ["attend", "--variant", "naive", "--q", npys / "q.npy", "--k", npys / "k.npy",
                            "--v", npys / "v.npy", "--out", tmp_path / "o.npy"]}[command]
    result = run_attnbench(*arguments, env=with_env(OMP_NUM_THREADS=str(threads)), timeout=60)
    assert_usage_error(result, "OMP_NUM_THREADS", str(threads), prefixed=True)
    assert not (tmp_path / "run").exists() and not (tmp_path / "o.npy").exists()


def test_more_threads_than_cpus_are_held_to_the_cpus_and_recorded(tmp_path, config):
    result = run_attnbench("run", config, "--out", tmp_path / "run", timeout=120,
                           env=with_env(OMP_NUM_THREADS=str(CPUS + 3)))
    assert result.returncode == 0, result.stderr
    assert f"OMP_NUM_THREADS asks for {CPUS + 3} threads" in result.stderr
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert str(CPUS + 3) in json.dumps(manifest)  # the request, as the environment gave it
    records = [json.loads(line) for line in (tmp_path / "run" / "cases.jsonl").read_text().splitlines()]
    assert records and all(record["threads"] == CPUS for record in records)


@pytest.mark.parametrize("load_file", ["fifo", "/dev/zero", "folder"])
def test_a_load_average_file_that_is_no_file_is_not_read(tmp_path, config, load_file):
    path = {"fifo": tmp_path / "loadavg", "folder": tmp_path}.get(load_file, load_file)
    if load_file == "fifo":
        os.mkfifo(path)
    result = run_attnbench("run", config, "--out", tmp_path / "run", timeout=60,
                           env=with_env(ATTNBENCH_LOADAVG=str(path)))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("command", ["plan", "run"])
def test_a_low_address_space_limit_does_not_hang_at_exit(tmp_path, config, command):
    # Under `ulimit -v` of ~100 MB OpenBLAS's server thread cannot allocate its buffer and never
    # returns, and the library's exit handler joins it: every command, its work done and written,
    # spun a core at exit for ever. attnbench now leaves without the libraries' exit handlers.
    arguments = [str(attnbench_binary()), command, str(config)]
    if command == "run":
        arguments += ["--out", str(tmp_path / "run")]
    script = 'ulimit -v 120000 && exec "$@"'
    result = subprocess.run(["bash", "-c", script, "bash", *arguments], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    if command == "run":
        assert len((tmp_path / "run" / "cases.jsonl").read_text().splitlines()) >= 1
    else:
        assert "naive" in result.stdout, result.stdout
