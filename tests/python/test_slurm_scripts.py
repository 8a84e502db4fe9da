"""`attnbench slurm --dry-run`: the sbatch scripts a sweep on a cluster would submit, checked
without a cluster (tests/python/test_slurm_cluster.py submits them to a real one)."""

import json
import subprocess

import pytest

from binary import run_attnbench



@pytest.fixture
def config(tiny_sweep):
    return tiny_sweep


def dry_run(config, out, *extra):
    result = run_attnbench("slurm", config, "--shards", 3, "--out", out, "--dry-run", *extra, check=True)
    array, merge = result.stdout.split("# " + str(out) + "/slurm/merge.sbatch\n")
    return array, merge


def test_array_job_runs_one_shard_per_task_on_an_exclusive_node(tmp_path, config):
    array, merge = dry_run(config, tmp_path / "sweep", "--partition", "bench", "--time", "0:30:00",
                           "--sbatch-arg=--account=lab", "--set", "measure.seed=7")
    assert "#SBATCH --array=0-2\n" in array
    assert "#SBATCH --exclusive\n" in array
    assert "#SBATCH --partition=bench\n" in array and "#SBATCH --time=0:30:00\n" in array
    assert "#SBATCH --account=lab\n" in array
    assert "--gres" not in array, "a CPU-only sweep asks for no GPU"
    assert "planned=(3 3 2)" in array  # 8 cases: indices 0,3,6 / 1,4,7 / 2,5
    assert '--shard "$shard/3"' in array and "--set measure.seed=7" in array
    assert f"{tmp_path}/sweep/slurm/config.toml" in array, "the jobs read a frozen copy of the config"
    assert "--exclusive" not in merge
    assert f"merge {tmp_path}/sweep/shards/0 {tmp_path}/sweep/shards/1 {tmp_path}/sweep/shards/2" in merge
    assert f"--out {tmp_path}/sweep/merged" in merge
    assert "--dependency=afterok:<array job id>" in merge
    assert not (tmp_path / "sweep").exists(), "a dry run writes nothing"


def test_no_exclusive_and_allow_mixed(tmp_path, config):
    array, merge = dry_run(config, tmp_path / "sweep", "--no-exclusive", "--cpus-per-task", 2, "--allow-mixed")
    assert "--exclusive" not in array and "#SBATCH --cpus-per-task=2\n" in array
    assert merge.rstrip().endswith("--allow-mixed") or "--allow-mixed\n" in merge


def test_a_cuda_sweep_asks_for_gpus(tmp_path, config):
    if "fused" not in {v["name"] for v in json.loads(run_attnbench("list", "--json", check=True).stdout)}:
        pytest.skip("this binary was built without the CUDA variants")
    array, _ = dry_run(config, tmp_path / "sweep", "--variants", "naive,fused", "--gpus", 2)
    assert "#SBATCH --gres=gpu:2\n" in array


def test_scripts_are_valid_bash(tmp_path, config):
    array, merge = dry_run(config, tmp_path / "with space", "--set", "name=\"it's\"")
    for script in (array, merge):
        subprocess.run(["bash", "-n"], input=script, text=True, check=True)


@pytest.mark.parametrize("arguments, message", [
    (["--shards", "0"], "--shards 0: must be at least 1"),
    (["--shards", "9"], "--shards 9: the sweep has only 8 cases"),
    (["--shards", "2", "--variants", "nosuch"], "nosuch"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, config, arguments, message):
    result = run_attnbench("slurm", config, "--out", tmp_path / "sweep", "--dry-run", *arguments)
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_resume_needs_a_submitted_sweep(tmp_path, config):
    (tmp_path / "sweep").mkdir()
    result = run_attnbench("slurm", config, "--shards", 3, "--out", tmp_path / "sweep", "--resume", "--dry-run")
    assert result.returncode == 2 and "no sweep submitted" in result.stderr
