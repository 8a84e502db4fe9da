"""A run stopped by Ctrl-C (SIGINT) or a scheduler (SIGTERM) ended without a word. It now says
that its finished cases are kept and how to finish the run, and still ends by the signal (a shell
loop around it sees the interruption); the command it gives resumes the run."""

import shlex
import signal
import subprocess
import time

import pytest

from binary import REPO, attnbench_binary

SWEEP = ('name = "stopped"\nvariants = ["naive"]\n[axes]\nseq_len = [64, 96, 128, 160]\n'
         '[measure]\nwarmup = 0\nrepetitions = 3\nmin_time_s = 0.2\npeaks = "skip"\n')


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_says_how_to_finish_it(tmp_path, signal_number):
    config, out = tmp_path / "stopped.toml", tmp_path / "out dir"  # a space: the command is quoted
    config.write_text(SWEEP)
    process = subprocess.Popen([str(attnbench_binary()), "run", str(config), "--out", str(out)],
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (
            (out / "cases.jsonl").exists() and (out / "cases.jsonl").read_text()):
        time.sleep(0.05)
    process.send_signal(signal_number)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == -signal_number
    last = stderr.strip().splitlines()[-1]
    prefix = f"attnbench: interrupted; the finished cases are kept in {out}: finish the run with "
    assert last.startswith(prefix), stderr
    command = shlex.split(last[len(prefix):])
    assert command[-3:] == ["--out", str(out), "--resume"]
    kept = len((out / "cases.jsonl").read_text().splitlines())
    assert 1 <= kept < 4
    finished = subprocess.run([str(attnbench_binary()), *command[1:]], cwd=REPO, capture_output=True,
                              text=True)
    assert finished.returncode == 0, finished.stderr
    assert len((out / "cases.jsonl").read_text().splitlines()) == 4
