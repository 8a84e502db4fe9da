"""`attnbench slurm` against a real one-node Slurm (slurmctld, slurmd and munged started by
slurm_cluster.py in a temporary folder, stopped afterwards): a 3-shard sweep merges to exactly
the unsharded case list, and after one shard's job is killed, --resume reruns only that shard.

Skipped, saying why and how to install it, only where slurm-wlm or munge is missing."""

import json
import time

import pytest

from binary import REPO, run_attnbench
from slurm_cluster import OneNodeSlurm, why_missing



@pytest.fixture(scope="module")
def cluster():
    why_not = why_missing()
    if why_not:
        pytest.skip(f"no Slurm to test against: {why_not}")
    slurm = OneNodeSlurm()
    try:
        slurm.start()
        yield slurm
    finally:
        slurm.stop()


@pytest.fixture
def config(tiny_sweep):
    return tiny_sweep


def case_ids(folder):
    return [json.loads(line)["case_id"] for line in (folder / "cases.jsonl").read_text().splitlines()]


def sweep_record(out):
    return json.loads((out / "slurm" / "sweep.json").read_text())


def submit(cluster, *args):
    result = run_attnbench("slurm", *args, env=cluster.env)
    assert result.returncode == 0, f"attnbench slurm failed:\n{result.stderr}\n{cluster.logs()}"
    return result


def wait_for_merge(cluster, out):
    cluster.wait_until_done(sweep_record(out)["merge_job"])
    merged = out / "merged"
    logs = "\n".join(f"--- {p.name}\n{p.read_text()}" for p in sorted((out / "slurm").glob("*.log")))
    assert (merged / "manifest.json").exists(), f"no merged folder; job logs:\n{logs}\n{cluster.logs()}"
    return merged


def test_a_three_shard_sweep_merges_to_the_unsharded_cases(cluster, config, tmp_path):
    out = cluster.root / "sweep"
    submit(cluster, config, "--shards", 3, "--out", out)
    whole = tmp_path / "whole"  # the same sweep unsharded, run here while the jobs run
    run_attnbench("run", config, "--out", whole, check=True)
    merged = wait_for_merge(cluster, out)

    assert case_ids(merged) == case_ids(whole)
    assert len(set(case_ids(merged))) == len(case_ids(merged)) == 8
    manifest = json.loads((merged / "manifest.json").read_text())
    assert sorted(source["shard"] for source in manifest["merged_from"]) == ["0/3", "1/3", "2/3"]
    for index in range(3):
        shard = json.loads((out / "shards" / str(index) / "manifest.json").read_text())
        assert shard["node"] == cluster.host
        assert shard["slurm"]["array_task_id"] == str(index)
    for line in (merged / "cases.jsonl").read_text().splitlines():
        assert json.loads(line)["node"] == cluster.host


def test_resume_reruns_only_the_shard_whose_job_was_killed(cluster, config):
    out = cluster.root / "killed"
    # Slow enough (about a second a case) that shard 1 is caught mid-run.
    slow = ["--set", "measure.min_time_s=1.0"]
    submit(cluster, config, "--shards", 3, "--out", out, *slow)
    array_job = sweep_record(out)["array_job"]
    shard1 = out / "shards" / "1"
    deadline = time.time() + 120
    while not (shard1 / "manifest.json").exists():
        assert time.time() < deadline, f"shard 1 never started\n{cluster.logs()}"
        time.sleep(0.1)
    cluster.run("scancel", f"{array_job}_1")
    cluster.wait_until_done(array_job)
    assert not (out / "merged").exists(), "the merge must wait for every shard to succeed"
    finished = {i: (out / "shards" / str(i) / "cases.jsonl").read_text() for i in (0, 2)}
    assert len(case_ids(shard1)) < 3, "the kill should land before shard 1 finished"

    result = submit(cluster, config, "--shards", 3, "--out", out, "--resume", *slow)
    assert "submitted shards 1 of 3" in result.stdout
    assert sweep_record(out)["submissions"][-1]["shards"] == "1"
    merged = wait_for_merge(cluster, out)

    ids = case_ids(merged)
    assert len(ids) == len(set(ids)) == 8
    for i in (0, 2):  # untouched: only shard 1 ran again
        assert (out / "shards" / str(i) / "cases.jsonl").read_text() == finished[i]
    rerun_logs = list((out / "slurm").glob(f"shard-1-job-{sweep_record(out)['array_job']}.log"))
    assert rerun_logs and "resuming" in rerun_logs[0].read_text()


def test_a_folder_with_spaces_quotes_and_percent_runs_and_merges(cluster, config):
    """sbatch reads the #SBATCH lines with rules of its own: the quoted --output must survive them
    whole, with the folder's %j left unexpanded, and nothing the folder name holds may run."""
    out = cluster.root / "a b" / "run%j $(touch pwned1) `touch pwned2` 'q\"#"
    submit(cluster, config, "--shards", 2, "--out", out, "--sbatch-arg=--comment=a b#c")
    merged = wait_for_merge(cluster, out)
    assert len(case_ids(merged)) == 8
    array_job = sweep_record(out)["array_job"]
    logs = sorted(p.name for p in (out / "slurm").glob("*.log"))
    assert logs == sorted([f"shard-0-job-{array_job}.log", f"shard-1-job-{array_job}.log",
                           f"merge-job-{sweep_record(out)['merge_job']}.log"])
    assert not [*cluster.root.rglob("pwned*"), *REPO.glob("pwned*")], "a folder name's command ran"
