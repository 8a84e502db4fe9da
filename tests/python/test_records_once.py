"""End-to-end: a finished record is written once and never changed. cases.jsonl only grows, by
whole lines, whatever kills the run and whatever a resumed session learns later; peak checks are
lines of peaks.jsonl, and every reader (summary.csv, the Python loader, merge) rates every record
against the best check of its folder (of its shard, in a merged run)."""

import csv
import json
import os
import signal
import subprocess
import time

from attnbench import results as ar
from binary import REPO, attnbench_binary, run_attnbench
from conftest import sweep_toml



def write_config(tmp_path):
    path = tmp_path / "once.toml"
    path.write_text(sweep_toml("once", seq_len=(16, 24, 32, 48), causal=(False, True), min_time_s=0.3,
                                peaks="measure"))
    return path


def lines_of(path):
    return path.read_text().splitlines() if path.exists() else []


def start(config, out, *args, env=None):
    return subprocess.Popen([str(attnbench_binary()), "run", str(config), "--out", str(out), *args],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def wait_for_records(out, count, process, timeout=180):
    """Polls until cases.jsonl holds `count` records; returns its bytes at that moment."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        path = out / "cases.jsonl"
        if path.exists():
            data = path.read_bytes()
            if data.count(b"\n") >= count:
                return data
        assert process.poll() is None, "the run ended before the records appeared"
        time.sleep(0.01)
    raise AssertionError(f"{out}: {count} records never appeared")


def kill(process):
    process.send_signal(signal.SIGKILL)
    process.wait()


def summary_rows(folder):
    with open(folder / "summary.csv", newline="") as summary:
        return list(csv.DictReader(summary))


def peak_checks(folder):
    return [json.loads(line) for line in lines_of(folder / "peaks.jsonl")]


def test_cases_jsonl_only_grows_through_the_end_and_a_kill_at_the_end(tmp_path):
    config = write_config(tmp_path)

    # A run to its end: the file after the first case is a byte prefix of the file at the end.
    whole = tmp_path / "whole"
    process = start(config, whole)
    after_first = wait_for_records(whole, 1, process)
    first_line = after_first[:after_first.index(b"\n") + 1]
    # summary.csv is written once, when the run ends, not after every case.
    assert not (whole / "summary.csv").exists()
    assert process.wait(timeout=300) == 0
    at_end = (whole / "cases.jsonl").read_bytes()
    assert at_end.startswith(first_line) and at_end.count(b"\n") == 8
    assert len(lines_of(whole / "summary.csv")) == 9
    assert [c["when"] for c in peak_checks(whole)][-1] == "end"

    # A run killed -9 after its last case (in its end check, before summary.csv): every record as
    # it was appended, and a resume adds nothing and changes nothing.
    killed = tmp_path / "killed"
    process = start(config, killed)
    after_first = wait_for_records(killed, 1, process)
    first_line = after_first[:after_first.index(b"\n") + 1]
    at_kill = wait_for_records(killed, 8, process)
    kill(process)
    on_disk = (killed / "cases.jsonl").read_bytes()
    assert on_disk == at_kill and on_disk.startswith(first_line)
    resumed = run_attnbench("run", config, "--out", killed, "--resume", check=True, timeout=300)
    assert "8 already done" in resumed.stdout
    assert (killed / "cases.jsonl").read_bytes() == on_disk
    assert len(lines_of(killed / "summary.csv")) == 9
    assert "resume" in [c["when"] for c in peak_checks(killed)]
    # Nothing derived is stored: the rating is the readers'.
    for line in lines_of(killed / "cases.jsonl"):
        record = json.loads(line)
        assert record["peak_gflops"] is None
        assert not {"percent_of_peak", "disturbed", "disturbed_reason"} & set(record)


def test_a_resume_with_a_higher_peak_rates_every_record_against_it_in_every_reader(tmp_path):
    """Issue 28.3: the first session runs on one thread pinned to one core, whose checks may
    measure less than the resumed session's, unpinned (a resume keeps the thread count and the
    environment: it is refused otherwise). Every record, the first session's too, is rated
    against the best check of the folder, and summary.csv, the loader and merge agree."""
    config = write_config(tmp_path)
    shard0, shard1 = tmp_path / "shard0", tmp_path / "shard1"
    core = min(os.sched_getaffinity(0))
    one_core = dict(os.environ, OMP_NUM_THREADS="1")
    process = subprocess.Popen(["taskset", "-c", str(core), str(attnbench_binary()), "run",
                                str(config), "--shard", "0/2", "--out", str(shard0)],
                               cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=one_core)
    wait_for_records(shard0, 2, process)
    kill(process)
    before = (shard0 / "cases.jsonl").read_bytes()
    finished_before = before.count(b"\n")
    assert 2 <= finished_before < 4, "the kill should land mid-sweep"
    first_session_best = max(c["cpu_fma_gflops"] for c in peak_checks(shard0))

    run_attnbench("run", config, "--shard", "0/2", "--out", shard0, "--resume", check=True,
                  timeout=300, env=one_core)
    assert (shard0 / "cases.jsonl").read_bytes().startswith(before)
    checks = peak_checks(shard0)
    assert [c["when"] for c in checks][:1] == ["start"] and "resume" in [c["when"] for c in checks]
    best = max(c["cpu_fma_gflops"] for c in checks)
    if best <= first_session_best:
        # The machine was too busy for both cores to beat one (other builds share it): a check
        # line stands in for the faster session, so the stale-peak path is still what is tested.
        best = 2 * first_session_best
        with open(shard0 / "peaks.jsonl", "a") as peaks:
            peaks.write(json.dumps({"when": "resume", "date": "", "cpu_fma_gflops": best,
                                    "cpu_fma_sustained_gflops": best}) + "\n")
        run_attnbench("run", config, "--shard", "0/2", "--out", shard0, "--resume", check=True,
                      timeout=300, env=one_core)  # summary.csv is written again, by the resume
        checks = peak_checks(shard0)
        best = max(c["cpu_fma_gflops"] for c in checks)
    assert best > first_session_best

    def fma_records(cases):
        return [c for c in cases if c["peak_name"] == "cpu_fma_gflops" and c["status"] == "ok"]

    # The Python loader.
    loaded = fma_records(ar.load_run(shard0).cases)
    assert len(loaded) == 4
    for case in loaded:
        assert case["peak_gflops"] == best
        assert case["percent_of_peak"] == 100 * case["gflops"] / best
    # summary.csv, written by the resumed session.
    rows = {r["case_id"]: r for r in summary_rows(shard0)}
    for case in loaded:
        row = rows[case["case_id"]]
        assert float(row["peak_gflops"]) == best
        assert float(row["percent_of_peak"]) == case["percent_of_peak"]
        assert row["disturbed_reason"] == case["disturbed_reason"]

    # merge: the other shard, on its own (here: the same) node, keeps its own checks.
    run_attnbench("run", config, "--shard", "1/2", "--out", shard1, check=True, timeout=300)
    best1 = max(c["cpu_fma_gflops"] for c in peak_checks(shard1))
    merged = tmp_path / "merged"
    run_attnbench("merge", shard0, shard1, "--out", merged, check=True)
    merged_checks = peak_checks(merged)
    assert {c["shard"] for c in merged_checks} == {"0/2", "1/2"}
    assert len(merged_checks) == len(checks) + len(peak_checks(shard1))
    merged_cases = ar.load_run(merged).cases
    merged_rows = {r["case_id"]: r for r in summary_rows(merged)}
    for case in fma_records(merged_cases):
        expected = best if case["shard"] == "0/2" else best1
        assert case["peak_gflops"] == expected
        assert float(merged_rows[case["case_id"]]["peak_gflops"]) == expected
        assert float(merged_rows[case["case_id"]]["percent_of_peak"]) == case["percent_of_peak"]
    by_id = {c["case_id"]: c for c in merged_cases}
    for case in loaded:
        assert by_id[case["case_id"]]["percent_of_peak"] == case["percent_of_peak"]


def test_a_kill_mid_move_of_failed_records_never_doubles_them_and_leftovers_go(tmp_path):
    """Issue 28.6: `--resume --retry-failed` moves failed records to failed_attempts.jsonl; a
    kill between that append and the rewrite of cases.jsonl leaves the records in both (and the
    move's journal). The next retry must not move them twice. Every temporary a killed write can
    leave (cases.jsonl.tmp.*, ...) is gone once the folder is opened again."""
    config = write_config(tmp_path)
    out = tmp_path / "run"
    fast = ("--set", "measure.min_time_s=0.001")
    run_attnbench("run", config, "--out", out, *fast, check=True, timeout=300)
    lines = lines_of(out / "cases.jsonl")
    # Two of the cases failed (as a case whose variant broke would be recorded).
    failed = []
    for index in (1, 5):
        record = json.loads(lines[index])
        record.update(status="failed", reason="oracle (normal inputs): made to fail by the test")
        failed.append(json.dumps(record))
    kept = [line for i, line in enumerate(lines) if i not in (1, 5)]
    (out / "cases.jsonl").write_text("\n".join(kept + failed) + "\n")
    # The state a kill leaves between the append and the rewrite.
    (out / "failed_attempts.jsonl").write_text("\n".join(failed) + "\n")
    (out / "failed_attempts.jsonl.moving").write_text("0\n")
    leftovers = ["cases.jsonl.tmp.Ab12Cd", "summary.csv.tmp.xY9z8w", "manifest.json.tmp.q1w2e3",
                 "failed_attempts.jsonl.moving.tmp.zzzzzz"]
    for name in leftovers:
        (out / name).write_text("{\"half a")

    result = run_attnbench("run", config, "--out", out, "--resume", "--retry-failed", *fast,
                           timeout=300)
    assert result.returncode == 0, result.stderr
    assert "retrying 2 failed case(s)" in result.stdout
    assert lines_of(out / "failed_attempts.jsonl") == failed  # once each
    after = lines_of(out / "cases.jsonl")
    assert after[:len(kept)] == kept  # byte for byte
    assert len(after) == 8 and len({json.loads(line)["case_id"] for line in after}) == 8
    for name in leftovers + ["failed_attempts.jsonl.moving"]:
        assert not (out / name).exists(), name

    # Again, with nothing failed: nothing moves, nothing changes.
    result = run_attnbench("run", config, "--out", out, "--resume", "--retry-failed", *fast,
                           timeout=300)
    assert result.returncode == 0 and "retrying 0 failed case(s)" in result.stdout
    assert lines_of(out / "failed_attempts.jsonl") == failed
    assert lines_of(out / "cases.jsonl") == after
