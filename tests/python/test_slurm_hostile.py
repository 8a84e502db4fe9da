"""`attnbench slurm` given hostile values: every value that reaches a generated script is refused
when it holds a control character (one line naming the option, exit 2, nothing made or
submitted), and quoted otherwise, for bash and for sbatch's own #SBATCH reader. The scripts are
submitted to a fake `sbatch` on PATH and then run under bash as Slurm would run them: nothing a
value smuggles in executes, and the sweep still runs and merges. A failed submission leaves a
folder `--resume` finishes. (tests/python/test_slurm_cluster.py runs a hostile folder name on a
real one-node Slurm.)"""

import json
import os
import subprocess

import pytest

from binary import REPO, attnbench_binary, run_attnbench
from conftest import TINY_SWEEP


# Each would run `touch` (in the folder bash runs in) if it reached bash or sbatch unquoted.
HOSTILE = "a b/run%j/$(touch pwned1)/`touch pwned2`/';touch pwned3;'/\";touch pwned4;\"/#x"

FAKE_SBATCH = """#!/bin/bash
# Records each submission (its arguments, NUL-separated, and a copy of the script) and prints a
# job id, or fails when FAKE_SBATCH_FAIL names this submission's number.
log="$FAKE_SLURM_DIR/submissions"
count=$(( $(ls "$FAKE_SLURM_DIR" | grep -c '^script-') + 1 ))
if [ "${FAKE_SBATCH_FAIL:-}" = "$count" ] || [ "${FAKE_SBATCH_FAIL:-}" = "all" ]; then
  echo "sbatch: error: Batch job submission failed: fake failure" >&2
  exit 1
fi
printf '%s\\0' "$@" >> "$log"; printf '\\n' >> "$log"
cp "${@: -1}" "$FAKE_SLURM_DIR/script-$count"
echo $(( 1000 + count ))
"""


@pytest.fixture
def config(tiny_sweep):
    return tiny_sweep


@pytest.fixture
def fake_slurm(tmp_path):
    """A PATH with a fake sbatch (and no squeue: every job counts as finished)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(FAKE_SBATCH)
    sbatch.chmod(0o755)
    records = tmp_path / "fake-slurm"
    records.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_SLURM_DIR": str(records)}
    return env, records


def submitted_scripts(records):
    return sorted(records.glob("script-*"), key=lambda p: int(p.name.split("-")[1]))


def sbatch_directives(script):
    """The options sbatch 22.05 reads from a script's #SBATCH lines, as its reader splits them
    (src/sbatch/opt.c): words end at unquoted whitespace, '\\' escapes the next character
    (whitespace excepted), "..." and '...' quote, an unquoted '#' ends the line; the first line
    that is neither a comment nor blank ends the directives."""
    options = []
    for line in script.splitlines()[1:]:
        if not line.strip():
            continue
        if not line.startswith("#"):
            break
        if not line.startswith("#SBATCH"):
            continue
        rest, i = line[len("#SBATCH"):], 0
        while True:
            while i < len(rest) and rest[i].isspace():
                i += 1
            if i >= len(rest):
                break
            word, quote, escape = "", None, False
            while i < len(rest) and (quote or not rest[i].isspace()):
                c = rest[i]
                i += 1
                if escape:
                    escape = False
                elif c == "\\":
                    escape = True
                    continue
                elif quote:
                    if c == quote:
                        quote = None
                        continue
                elif c in "\"'":
                    quote = c
                    continue
                elif c == "#":
                    i = len(rest)
                    break
                word += c
            assert quote is None, f"unmatched quote in {line!r}"
            if word:
                options.append(word)
    return options


@pytest.mark.parametrize("option, value", [
    ("--out", "sweep\ntouch PWNED\n"),
    ("--out", "sweep\rx"),
    ("--partition", "debug\ntouch PWNED"),
    ("--time", "1:00:00\ntouch PWNED"),
    ("--sbatch-arg", "--account=abc\ntouch PWNED"),
    ("--sbatch-arg", "--comment=a\x1bb"),
    ("--set", "measure.seed=7\ntouch PWNED"),
    ("--variants", "naive\ntouch PWNED"),
])
@pytest.mark.parametrize("dry_run", [True, False])
def test_a_control_character_in_any_value_is_refused(tmp_path, config, fake_slurm, option, value, dry_run):
    env, records = fake_slurm
    arguments = ["slurm", config, "--shards", 2, "--out", tmp_path / "sweep"]
    if option == "--out":
        arguments[-1] = tmp_path / value
    else:
        arguments += [f"{option}={value}"]
    result = run_attnbench(*arguments, *(["--dry-run"] if dry_run else []), env=env)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"attnbench: error: {option}: holds a control character ("), result.stderr
    assert result.stdout == ""
    assert not submitted_scripts(records)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "fake-slurm", "tiny.toml"]


def test_a_control_character_in_the_config_path_is_refused(tmp_path, fake_slurm):
    env, records = fake_slurm
    path = tmp_path / "tiny\ntouch PWNED.toml"
    path.write_text(TINY_SWEEP)
    result = run_attnbench("slurm", path, "--shards", 2, "--out", tmp_path / "sweep", env=env)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "the config path: holds a control character (\\n at byte" in result.stderr
    assert not submitted_scripts(records) and not (tmp_path / "sweep").exists()


def test_a_relative_out_in_a_folder_named_with_a_newline_is_refused(tmp_path, config, fake_slurm):
    env, records = fake_slurm
    here = tmp_path / "odd\ntouch PWNED"
    here.mkdir()
    result = subprocess.run([str(attnbench_binary()), "slurm", str(config), "--shards", "2", "--out", "sweep"],
                            cwd=here, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "--out (made absolute): holds a control character (\\n at byte" in result.stderr
    assert not submitted_scripts(records) and list(here.iterdir()) == []


def test_a_backslash_in_the_folder_is_refused_saying_why(tmp_path, config, fake_slurm):
    env, records = fake_slurm
    result = run_attnbench("slurm", config, "--shards", 2, "--out", tmp_path / "a\\b", env=env)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "a backslash in the folder cannot go into an #SBATCH --output log path" in result.stderr
    assert not submitted_scripts(records) and not (tmp_path / "a\\b").exists()


def test_hostile_values_are_quoted_and_nothing_they_hold_runs(tmp_path, config, fake_slurm):
    env, records = fake_slurm
    out = tmp_path / HOSTILE
    work = tmp_path / "work"  # where the commands run: a `touch` would land here
    work.mkdir()
    result = run_attnbench("slurm", config, "--shards", 2, "--out", out,
                           "--partition", "p q;touch pwned5", "--time", "1:00:00 $(touch pwned6)",
                           "--sbatch-arg=--comment=a b#c'd\"e\\f", "--set", "measure.seed=7",
                           "--set", "oracle.sample_rows=4", env=env)
    assert result.returncode == 0, result.stderr
    array, merge = submitted_scripts(records)

    # sbatch reads each #SBATCH value back whole: a space, quote or '#' neither splits nor cuts it,
    # and the % of the folder is doubled so sbatch's log-name patterns leave it alone.
    log_folder = str(out / "slurm").replace("%", "%%")
    for script, log in ((array, "shard-%a-job-%A.log"), (merge, "merge-job-%j.log")):
        options = sbatch_directives(script.read_text())
        assert f"--output={log_folder}/{log}" in options, options
        assert "--partition=p q;touch pwned5" in options
        assert "--time=1:00:00 $(touch pwned6)" in options
        assert "--comment=a b#c'd\"e\\f" in options
    assert "--array=0-1" in sbatch_directives(array.read_text())
    submissions = (records / "submissions").read_text().split("\n")
    assert submissions[1].split("\0")[:3] == ["--parsable", "--dependency=afterok:1001", str(out / "slurm" / "merge.sbatch")]

    # Run the jobs as Slurm would: each array task, then the merge.
    for shard in (0, 1):
        task = subprocess.run(["bash", str(array)], cwd=work, capture_output=True, text=True,
                              env={**env, "SLURM_ARRAY_TASK_ID": str(shard)}, timeout=300)
        assert task.returncode == 0, task.stdout + task.stderr
        assert (out / "shards" / str(shard) / "manifest.json").exists()
    joined = subprocess.run(["bash", str(merge)], cwd=work, capture_output=True, text=True, env=env, timeout=300)
    assert joined.returncode == 0, joined.stdout + joined.stderr
    assert len((out / "merged" / "cases.jsonl").read_text().splitlines()) == 8
    assert list(work.iterdir()) == []
    assert not [p for p in [*tmp_path.rglob("pwned*"), *REPO.glob("pwned*")]], "a value's command ran"


def test_a_failed_array_submission_leaves_a_folder_resume_finishes(tmp_path, config, fake_slurm):
    env, records = fake_slurm
    out = tmp_path / "sweep"
    failed = run_attnbench("slurm", config, "--shards", 2, "--out", out, env={**env, "FAKE_SBATCH_FAIL": "1"})
    assert failed.returncode == 2
    message = failed.stderr.strip().splitlines()[-1]
    assert "failed (exit status 1" in message and "--resume" in message, message
    assert json.loads((out / "slurm" / "sweep.json").read_text())["array_job"] == ""

    again = run_attnbench("slurm", config, "--shards", 2, "--out", out, env=env)
    assert again.returncode == 2 and "pass --resume" in again.stderr
    resumed = run_attnbench("slurm", config, "--shards", 2, "--out", out, "--resume", env=env)
    assert resumed.returncode == 0, resumed.stderr
    record = json.loads((out / "slurm" / "sweep.json").read_text())
    assert (record["array_job"], record["merge_job"]) == ("1001", "1002")
    assert "--array=0-1" in sbatch_directives(submitted_scripts(records)[0].read_text())


def test_a_failed_merge_submission_keeps_the_array_job_for_resume(tmp_path, config, fake_slurm):
    env, records = fake_slurm
    out = tmp_path / "sweep"
    failed = run_attnbench("slurm", config, "--shards", 2, "--out", out, env={**env, "FAKE_SBATCH_FAIL": "2"})
    assert failed.returncode == 2 and "--resume" in failed.stderr
    record = json.loads((out / "slurm" / "sweep.json").read_text())
    assert (record["array_job"], record["merge_job"]) == ("1001", "")

    # The array ran (here: run by hand) and the merge was never submitted: --resume submits it.
    array = submitted_scripts(records)[0]
    for shard in (0, 1):
        subprocess.run(["bash", str(array)], cwd=tmp_path, check=True, capture_output=True,
                       env={**env, "SLURM_ARRAY_TASK_ID": str(shard)}, timeout=300)
    resumed = run_attnbench("slurm", config, "--shards", 2, "--out", out, "--resume", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "every shard is complete" in resumed.stdout
    record = json.loads((out / "slurm" / "sweep.json").read_text())
    assert record["merge_job"] == "1002" and record["array_job"] == ""
    assert len(submitted_scripts(records)) == 2


def test_a_percent_in_the_folder_reaches_the_logs_unexpanded(tmp_path, config):
    result = run_attnbench("slurm", config, "--shards", 2, "--out", tmp_path / "run%j %a", "--dry-run", check=True)
    array, merge = result.stdout.split(f"# {tmp_path}/run%j %a/slurm/merge.sbatch\n")
    assert f"--output={tmp_path}/run%%j %%a/slurm/shard-%a-job-%A.log" in sbatch_directives(array)
    assert f"--output={tmp_path}/run%%j %%a/slurm/merge-job-%j.log" in sbatch_directives(merge)


# Dropped from the scripts without a word (a CUDA sweep then asked for no GPU), or written as a
# directive sbatch would misread or one that takes the shards' array.
@pytest.mark.parametrize("option, message", [
    ("--gpus=-1", "--gpus: must be 0 (no --gres line: give your own with --sbatch-arg) or more"),
    ("--cpus-per-task=0", "--cpus-per-task: must be 1 or more"),
    ("--cpus-per-task=-4", "--cpus-per-task: must be 1 or more"),
    ("--sbatch-arg=notadash", "--sbatch-arg 'notadash': must be an sbatch option"),
    ("--sbatch-arg=--array=0-5", "--sbatch-arg '--array=0-5': the shards' job array is the sweep's"),
    ("--sbatch-arg=--arr=0-3", "--sbatch-arg '--arr=0-3': the shards' job array is the sweep's"),
])
def test_a_resource_value_sbatch_cannot_take_is_refused(tmp_path, config, fake_slurm, option, message):
    env, records = fake_slurm
    result = run_attnbench("slurm", config, "--shards", 2, "--out", tmp_path / "sweep", option, "--dry-run",
                           env=env)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert message in result.stderr
    assert not submitted_scripts(records)


def test_an_sbatch_that_prints_no_job_id_is_refused(tmp_path, config):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sbatch = bin_dir / "sbatch"
    sbatch.write_text("#!/bin/sh\necho 'garbage output'\n")
    sbatch.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    result = run_attnbench("slurm", config, "--shards", 2, "--out", tmp_path / "sweep", env=env)
    assert result.returncode == 2, result.stderr
    assert "printed 'garbage output' where sbatch --parsable prints a job id" in result.stderr
