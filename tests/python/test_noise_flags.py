"""End-to-end: a run on a busy machine says so. The warning at the start comes from the load
average (a fake /proc/loadavg, so it is deterministic); the peak checks at the start and end
go into peaks.jsonl, and every reader rates the records against their best; and a bounded busy
loop, started by the test once the start check is done, gets the run's records flagged as
disturbed."""

import json
import os
import signal
import subprocess
import time

import csv

from attnbench import results as ar
from binary import REPO, attnbench_binary, run_attnbench
from conftest import sweep_toml

TINY = sweep_toml("noise-flags", variants=("openmp",), seq_len=(64,), d_k=(16,), repetitions=2,
                  peaks="measure")

# Cases of about a second each, so the busy loop runs through most of the sweep and the end check.
SLOW = """
name = "noise-busy"
variants = ["naive"]
[axes]
heads = [2]
seq_len = [256, 320, 384]
d_k = [32]
[measure]
warmup = 0
repetitions = 2
min_time_s = 0.4
"""


def write(path, text):
    path.write_text(text)
    return path


def peak_checks(folder):
    return [json.loads(line) for line in (folder / "peaks.jsonl").read_text().splitlines()]


def summary_rows(folder):
    with open(folder / "summary.csv", newline="") as summary:
        return list(csv.DictReader(summary))


def fake_loadavg(tmp_path, text):
    return dict(os.environ, ATTNBENCH_LOADAVG=str(write(tmp_path / "loadavg", text)))


def test_a_busy_load_average_warns_at_the_start(tmp_path):
    config = write(tmp_path / "tiny.toml", TINY)
    busy = run_attnbench("run", config, "--out", tmp_path / "busy", check=True,
                         env=fake_loadavg(tmp_path, "3.00 2.00 1.00 4/200 12345\n"))
    assert "attnbench: warning: load average 3.00 (1 min)" in busy.stderr
    checks = peak_checks(tmp_path / "busy")
    assert checks[0]["when"] == "start"
    assert checks[0]["load_1min"] == 3.0

    quiet = run_attnbench("run", config, "--out", tmp_path / "quiet", check=True,
                          env=fake_loadavg(tmp_path, "0.02 0.10 0.20 1/200 12345\n"))
    assert "warning: load average" not in quiet.stderr


def test_peaks_are_checked_at_the_start_and_end_and_records_read_against_the_best(tmp_path):
    config = write(tmp_path / "tiny.toml", TINY)
    result = run_attnbench("run", config, "--out", tmp_path / "run", check=True)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    checks = peak_checks(tmp_path / "run")
    assert [c["when"] for c in checks] == ["start", "end"]
    best = max(c["cpu_fma_gflops"] for c in checks)
    assert manifest["peaks"]["cpu_fma_gflops"] == best  # the manifest's summary
    assert all(0 < c["cpu_fma_sustained_gflops"] for c in checks)
    assert "peak checks, cpu_fma_gflops:" in result.stdout
    for stored in map(json.loads, (tmp_path / "run" / "cases.jsonl").read_text().splitlines()):
        assert stored["peak_gflops"] is None and "percent_of_peak" not in stored  # derived
    rows = summary_rows(tmp_path / "run")
    for record, row in zip(ar.load_run(tmp_path / "run").cases, rows):
        assert record["peak_gflops"] == best and float(row["peak_gflops"]) == best
        # Flagged exactly when the checks give a reason, or the record beats the peak.
        assert record["disturbed"] == bool(record["disturbed_reason"])
        assert record["disturbed"] == bool(manifest["peaks"]["disturbed_reason"]
                                           or record["percent_of_peak"] > 100)
        assert (row["disturbed"], row["disturbed_reason"]) == (
            str(record["disturbed"]).lower(), record["disturbed_reason"])


def test_a_busy_loop_during_the_run_flags_its_records(tmp_path):
    config = write(tmp_path / "slow.toml", SLOW)
    out = tmp_path / "run"
    run = subprocess.Popen([str(attnbench_binary()), "run", str(config), "--out", str(out)],
                           cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    busy = None
    try:
        # The manifest is written once the start check is done: only then start the loop, so it
        # is the end check that meets it.
        deadline = time.time() + 120
        while not (out / "manifest.json").exists() and time.time() < deadline:
            time.sleep(0.02)
        assert (out / "manifest.json").exists(), "the run never wrote its manifest"
        core = min(os.sched_getaffinity(0))
        # Bounded: it ends by itself even if this test is killed. Its own process group, so
        # that killing it below takes the loop too (killing `timeout` alone orphans its child).
        busy = subprocess.Popen(["timeout", "60", "taskset", "-c", str(core), "sh", "-c",
                                 "while :; do :; done"], start_new_session=True)
        stdout, stderr = run.communicate(timeout=300)
    finally:
        if busy is not None:
            os.killpg(busy.pid, signal.SIGKILL)
            busy.wait()
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, stderr
    manifest = json.loads((out / "manifest.json").read_text())
    end = peak_checks(out)[-1]
    assert end["when"] == "end"
    # Over all its trials the end check's loop shared a core with the busy loop: it sustained
    # well under the machine's rate (the best trial of any check), and that flags every record.
    machine = max(check["cpu_fma_gflops"] for check in peak_checks(out))
    assert end["cpu_fma_sustained_gflops"] < 0.9 * machine
    assert "other work ran during the end check" in manifest["peaks"]["disturbed_reason"]
    records = ar.load_run(out).cases
    assert len(records) == 3
    assert all(r["disturbed"] for r in records)
    assert all("end check" in r["disturbed_reason"] for r in records)
    assert "3 of 3 records flagged disturbed" in stdout
