"""A run whose standard streams fail: stderr closed or full, stdout a pipe that closes early, or
stdout closed. The records are the output: each case still runs and is recorded, and what cannot
be said on a stream costs that line, not the sweep (fmt::print(stderr) threw: a run stopped after
its first case at the progress line, an error printed to a full stderr aborted with status 134;
SIGPIPE ended `run | head -1` after one case, silently and with no summary.csv)."""

import subprocess

from binary import attnbench_binary, run_attnbench

SWEEP = ('name = "streams"\nvariants = ["naive"]\n[axes]\nseq_len = [8, 16, 24, 32]\n'
         '[measure]\nwarmup = 0\nrepetitions = 1\nmin_time_s = 0.001\npeaks = "skip"\n')


def write_sweep(tmp_path):
    config = tmp_path / "streams.toml"
    config.write_text(SWEEP)
    return config


def shell(command: str, tmp_path, **paths) -> subprocess.CompletedProcess:
    """`command` under bash, with $B the binary and each of `paths` as a variable."""
    env = {"B": str(attnbench_binary()), "PATH": "/usr/bin:/bin",
           **{name: str(path) for name, path in paths.items()}}
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env,
                          cwd=tmp_path)


def records(folder) -> int:
    return len((folder / "cases.jsonl").read_text().splitlines())


def test_a_run_with_stderr_closed_records_every_case(tmp_path):
    config, out = write_sweep(tmp_path), tmp_path / "out"
    result = shell('"$B" run "$C" --out "$O" 2>&-', tmp_path, C=config, O=out)
    assert result.returncode == 0, result.stdout
    assert records(out) == 4
    assert (out / "summary.csv").exists()


def test_a_run_with_stderr_on_a_full_disk_records_every_case(tmp_path):
    config, out = write_sweep(tmp_path), tmp_path / "out"
    result = shell('"$B" run "$C" --out "$O" 2>/dev/full', tmp_path, C=config, O=out)
    assert result.returncode == 0, result.stdout
    assert records(out) == 4


def test_an_error_said_to_a_full_stderr_exits_2_not_aborted(tmp_path):
    result = shell('"$B" plan missing.toml 2>/dev/full', tmp_path)
    assert result.returncode == 2


def test_a_run_piped_into_head_runs_every_case_then_says_stdout_failed(tmp_path):
    # 80 cases: their table rows pass stdout's buffer, so writes fail while cases still run.
    config, out = tmp_path / "many.toml", tmp_path / "out"
    config.write_text(SWEEP.replace("seq_len = [8, 16, 24, 32]", "seq_len = { from = 2, to = 160, step = 2 }"))
    result = shell('"$B" run "$C" --out "$O" | head -c 1 > /dev/null; echo "${PIPESTATUS[0]}"',
                   tmp_path, C=config, O=out)
    assert result.stdout.strip() == "2", result.stderr
    assert records(out) == 80
    assert (out / "summary.csv").exists()
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert errors == ["attnbench: error: cannot write to standard output: Broken pipe"], result.stderr


def test_a_closed_stdout_is_refused_and_nothing_takes_its_descriptor(tmp_path):
    config, out = write_sweep(tmp_path), tmp_path / "out"
    result = shell('"$B" run "$C" --out "$O" >&-', tmp_path, C=config, O=out)
    assert result.returncode == 2
    assert result.stderr.strip() == "attnbench: error: standard output is closed: nothing could be printed"
    assert not out.exists()


def test_the_folder_is_not_written_through_a_closed_stderr_descriptor(tmp_path):
    """With fd 2 closed, the folder's lock (or a record file) took it, and stderr's lines went
    there; now fd 2 is /dev/null before anything opens."""
    config, out = write_sweep(tmp_path), tmp_path / "out"
    assert shell('"$B" run "$C" --out "$O" 2>&-', tmp_path, C=config, O=out).returncode == 0
    assert run_attnbench("export", out).returncode == 0
    assert all(line.startswith("{") for line in (out / "cases.jsonl").read_text().splitlines())
