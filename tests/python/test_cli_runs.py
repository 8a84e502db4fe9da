"""End-to-end runs of the attnbench binary: results folders, resume after kill -9, shards and
merge, and `attend` against an independent float64 reference."""

import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest

from binary import attnbench_binary, run_attnbench, REPO



def records(folder):
    return [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines()]


@pytest.fixture
def config(sweep_file):
    return sweep_file("e2e.toml", name="e2e", seq_len=(16, 24, 32, 48), causal=(False, True),
                      repetitions=2)


def test_run_writes_manifest_records_and_csv(tmp_path, config):
    out = tmp_path / "run"
    result = run_attnbench("run", config, "--out", out, "--set", "measure.peaks=measure", check=True)
    assert "variant" in result.stdout and "median ms" in result.stdout  # the terminal table
    manifest = json.loads((out / "manifest.json").read_text())
    for key in ("config", "git_commit", "build", "machine", "peaks", "date"):
        assert key in manifest
    assert manifest["peaks"]["cpu_fma_gflops"] > 0
    rows = records(out)
    assert len(rows) == 8
    assert all(r["status"] == "ok" for r in rows)
    assert all(r["oracle_rel_l2_err"] < 1e-5 for r in rows)
    csv_lines = (out / "summary.csv").read_text().splitlines()
    assert len(csv_lines) == 9 and csv_lines[0].startswith("case_index,")


def test_version_names_the_source_its_commit_and_the_build():
    result = run_attnbench("--version")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnbench, source ")
    # The manifest's git_commit, from the same source checkout.
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode == 0:
        assert head.stdout.strip() in lines[0]
    assert " build" in lines[0]


def test_check_passes_and_writes_nothing(tmp_path, config):
    result = run_attnbench("check", config, check=True)
    assert "8 passed, 0 failed" in result.stdout


DISTRIBUTIONS = ("normal", "large_scores", "near_constant", "dominant_key")


def test_check_pairs_each_distribution_with_its_own_errors(tmp_path, sweep_file):
    """check tries every input distribution: each record and each printed line names one and
    carries that distribution's errors, the very ones `run` records when it times on it."""
    config = sweep_file("bf16.toml", seq_len=(24,), dtype=("bf16",))
    report = json.loads(run_attnbench("check", config, "--json", check=True).stdout)
    assert report["passed"] == 1 and report["failed"] == 0
    checked = {r["distribution"]: r for r in report["records"]}
    assert sorted(checked) == sorted(DISTRIBUTIONS) and len(report["records"]) == 4
    text = run_attnbench("check", config, check=True).stdout.splitlines()
    for distribution in DISTRIBUTIONS:
        out = tmp_path / distribution
        run_attnbench("run", config, "--out", out, "--set", f'measure.distribution="{distribution}"',
                      check=True)
        [timed] = records(out)
        assert timed["distribution"] == distribution
        assert checked[distribution]["oracle_rel_l2_err"] == timed["oracle_rel_l2_err"], distribution
        assert checked[distribution]["oracle_max_abs_err"] == timed["oracle_max_abs_err"], distribution
        [line] = [line for line in text if f" {distribution} " in line]
        assert f"rel L2 {timed['oracle_rel_l2_err']:.2g}," in line, line
    # Four different errors (bf16 inputs leave about 2^-9 on normal rows): a line or record that
    # showed another distribution's result could not match them all.
    assert len({r["oracle_rel_l2_err"] for r in checked.values()}) == 4
    assert checked["normal"]["oracle_rel_l2_err"] > 1e-4


def test_kill_and_resume_gives_every_case_exactly_once(tmp_path, config):
    out = tmp_path / "run"
    slow = ["--set", "measure.min_time_s=0.3", "--set", "measure.repetitions=1"]
    process = subprocess.Popen([str(attnbench_binary()), "run", str(config), "--out", str(out), *slow],
                               cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        if (out / "cases.jsonl").exists() and len((out / "cases.jsonl").read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished_before = len(records(out))
    assert 2 <= finished_before < 8, "the kill should land mid-sweep"

    result = run_attnbench("run", config, "--out", out, "--resume", *slow, check=True)
    assert f"{finished_before} already done" in result.stdout
    ids = [r["case_id"] for r in records(out)]
    assert len(ids) == 8 and len(set(ids)) == 8


def test_resume_refuses_a_different_config(tmp_path, config):
    out = tmp_path / "run"
    run_attnbench("run", config, "--out", out, check=True)
    result = run_attnbench("run", config, "--out", out, "--resume", "--set", "measure.repetitions=9")
    assert result.returncode != 0 and "different config" in result.stderr


def test_resume_refuses_other_threads_or_a_forced_code_path(tmp_path, config):
    # Accepted, they mixed 1- and 2-thread timings (or two code paths) in one folder under one
    # manifest's description.
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "ATTNBENCH_FLASH_CPU_ISA")}
    run_attnbench("run", config, "--out", out, "--cases", "0", check=True, env=env)
    for name, value in (("OMP_NUM_THREADS", "1"), ("ATTNBENCH_FLASH_CPU_ISA", "scalar")):
        result = run_attnbench("run", config, "--out", out, "--resume", env={**env, name: value})
        assert result.returncode == 2
        assert f'was run with {name} unset, this session has "{value}"' in result.stderr
    run_attnbench("run", config, "--out", out, "--resume", check=True, env=env)


def test_shards_merge_to_the_unsharded_case_set(tmp_path, config):
    shards = []
    for index in range(3):
        shard = tmp_path / f"shard{index}"
        run_attnbench("run", config, "--shard", f"{index}/3", "--out", shard, check=True)
        shards.append(shard)
    merged = tmp_path / "merged"
    run_attnbench("merge", *shards, "--out", merged, check=True)
    whole = tmp_path / "whole"
    run_attnbench("run", config, "--out", whole, check=True)
    assert [r["case_id"] for r in records(merged)] == [r["case_id"] for r in records(whole)]


INTERLEAVED = """name = "group"
variants = ["naive", "blocked", "flash_cpu"]
[axes]
seq_len = [24, 40]
d_k = [16]
[measure]
interleave = true
warmup = 0
repetitions = 1
min_time_s = 0.001
peaks = "skip"
"""


def test_an_interleaved_groups_inputs_do_not_depend_on_the_cases_a_run_selects(tmp_path):
    # A group times every variant on one set of inputs: they are the shape's, so the same whether
    # a run holds the whole group or, through --cases, a shard or a resume, some of it (they
    # were once drawn from the first selected case's index: a failure could vanish under --cases).
    config = tmp_path / "group.toml"
    config.write_text(INTERLEAVED)
    plan = json.loads(run_attnbench("plan", config, "--json", check=True).stdout)["cases"]
    seeds = {}
    for case in plan:
        seeds.setdefault(case["seq_kv"], set()).add(case["seed"])
    assert all(len(shape_seeds) == 1 for shape_seeds in seeds.values()), seeds
    assert len({next(iter(shape_seeds)) for shape_seeds in seeds.values()}) == 2

    def errors(folder):
        return {r["case_index"]: r["oracle_rel_l2_err"] for r in records(folder)}

    whole, part = tmp_path / "whole", tmp_path / "part"
    run_attnbench("run", config, "--out", whole, check=True)
    # Cases 3 and 5: blocked and flash_cpu at seq 40, without the group's first case (naive's, 1).
    run_attnbench("run", config, "--out", part, "--cases", "3,5", check=True)
    assert all(r["status"] == "ok" for r in records(whole) + records(part))
    assert errors(part) == {index: errors(whole)[index] for index in (3, 5)}

    # Without interleaving each case draws its own inputs, as before.
    plain = json.loads(run_attnbench("plan", config, "--json", "--set", "measure.interleave=false",
                                     check=True).stdout)["cases"]
    assert len({case["seed"] for case in plain}) == len(plain)


def test_merge_refuses_an_incomplete_set_of_shards(tmp_path, config):
    shard = tmp_path / "shard0"
    run_attnbench("run", config, "--shard", "0/3", "--out", shard, check=True)
    result = run_attnbench("merge", shard, "--out", tmp_path / "merged")
    assert result.returncode == 2
    assert "shards 1/3, 2/3" in result.stderr and "missing" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "merged").exists()


def test_list_names_the_variants(tmp_path):
    listing = json.loads(run_attnbench("list", "--json", check=True).stdout)
    names = {v["name"] for v in listing}
    assert {"naive", "blocked", "openmp", "chunked"} <= names
    naive = next(v for v in listing if v["name"] == "naive")
    assert naive["capabilities"]["causal"] and naive["runnable_here"]


def reference_attention(q, k, v, causal, scale):
    """float64 softmax(q k^T * scale + mask) v with numpy, independent of the C++ oracle."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    if q.ndim >= 3:  # query heads share their group's key/value head
        group = q.shape[-3] // k.shape[-3]
        k = np.repeat(k, group, axis=-3)
        v = np.repeat(v, group, axis=-3)
    scores = np.einsum("...qd,...kd->...qk", q, k) * scale
    seq_q, seq_kv = scores.shape[-2:]
    if causal:
        visible = np.arange(seq_kv)[None, :] <= np.arange(seq_q)[:, None] + (seq_kv - seq_q)
        scores = np.where(visible, scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


CPU_VARIANTS = [v["name"] for v in json.loads(run_attnbench("list", "--json").stdout or "[]")
                if v["device"] == "cpu"] if attnbench_binary().exists() else []

ODD_SHAPES = {
    "2d seq 1": ((1, 7), (1, 7), (1, 5)),
    "3d seq_q < seq_kv": ((3, 13, 17), (3, 41, 17), (3, 41, 9)),
    "4d gqa": ((2, 4, 19, 24), (2, 2, 19, 24), (2, 2, 19, 24)),
}


@pytest.mark.parametrize("variant", CPU_VARIANTS)
@pytest.mark.parametrize("shape_name", sorted(ODD_SHAPES))
@pytest.mark.parametrize("causal", [False, True])
def test_attend_matches_numpy_float64(tmp_path, variant, shape_name, causal):
    rng = np.random.default_rng()
    q_shape, k_shape, v_shape = ODD_SHAPES[shape_name]
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in (q_shape, k_shape, v_shape))
    paths = {}
    for name, array in (("q", q), ("k", k), ("v", v)):
        paths[name] = tmp_path / f"{name}.npy"
        np.save(paths[name], array)
    scale = 0.3
    run_attnbench("attend", "--variant", variant, "--q", paths["q"], "--k", paths["k"], "--v", paths["v"],
                  "--scale", scale, "--out", tmp_path / "o.npy", *(["--causal"] if causal else []), check=True)
    out = np.load(tmp_path / "o.npy")
    expected, _ = reference_attention(q, k, v, causal, scale)
    assert out.shape == q.shape[:-1] + (v.shape[-1],)
    assert np.linalg.norm(out - expected) / np.linalg.norm(expected) < 1e-5


def test_attend_writes_weights_for_the_heatmap(tmp_path):
    rng = np.random.default_rng()
    q = rng.standard_normal((2, 6, 8)).astype(np.float32)
    for name in ("q", "k", "v"):
        np.save(tmp_path / f"{name}.npy", q)
    run_attnbench("attend", "--variant", "naive", "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v",
                  tmp_path / "v.npy", "--causal", "--out", tmp_path / "o.npy", "--weights", tmp_path / "w.npy",
                  check=True)
    weights = np.load(tmp_path / "w.npy")
    _, expected = reference_attention(q, q, q, True, 1 / np.sqrt(8))
    assert weights.shape == (2, 6, 6)
    np.testing.assert_allclose(weights, expected, atol=1e-6)
    assert np.all(np.triu(weights, k=1) == 0)
