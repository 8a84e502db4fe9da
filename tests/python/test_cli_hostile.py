"""The reproductions of a hostile user's attempts on the attnbench binary (full disk, overflowing
sizes, absurd counts, two runs on one folder, outputs over inputs, damaged records, non-finite
numbers, odd files as configs). The promise they check: bad input gets one line naming the
problem and exit status 2; a finished record is never lost or changed; a partial output is never
left under the final name."""

import json
import os
import resource
import signal
import subprocess
import time

import numpy as np
import pytest

from binary import REPO, attnbench_binary, run_attnbench, assert_usage_error

@pytest.fixture
def config(sweep_file):
    return sweep_file("small.toml", name="hostile", causal=(False, True))


def file_size_limit(limit_bytes):
    """A preexec_fn under which writes past limit_bytes fail with EFBIG, as on a full disk."""
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return apply


def save(tmp_path, name, array):
    path = tmp_path / name
    np.save(path, array)
    return path


def attend(*args, **kwargs):
    return run_attnbench("attend", "--variant", "naive", *args, **kwargs)


# 1. A full disk: no success, and nothing partial under the final name.
@pytest.mark.parametrize("output", ["--out", "--weights"])
def test_attend_on_a_full_disk_fails_and_leaves_the_old_file(tmp_path, output):
    # The output named is the large one (64 KiB); the limit is 8000 bytes.
    shape = (8, 2048) if output == "--out" else (128, 4)
    x = save(tmp_path, "x.npy", np.ones(shape, np.float32))
    out, weights = tmp_path / "o.npy", tmp_path / "w.npy"
    target = out if output == "--out" else weights
    target.write_bytes(b"old")
    args = ["--q", x, "--k", x, "--v", x, "--out", out, "--weights", weights]
    result = attend(*args, preexec_fn=file_size_limit(8000))
    assert_usage_error(result, f"{target.name}: cannot write: File too large")
    assert target.read_bytes() == b"old"
    assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]


# 2. Element counts past int64.
def test_npy_header_with_an_overflowing_shape(tmp_path):
    x = save(tmp_path, "x.npy", np.ones((4, 8), np.float32))
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 1, 4611686018427387904), }"
    header += b" " * (64 - (10 + len(header) + 1) % 64) + b"\n"
    huge = tmp_path / "huge.npy"
    huge.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + bytes(64))
    assert_usage_error(attend("--q", huge, "--k", x, "--v", x, "--out", tmp_path / "o.npy"),
                       "more elements than can be counted")


def test_sizes_whose_product_overflows(config):
    assert_usage_error(run_attnbench("check", config, "--set", "axes.d_k=[4611686018427387904]",
                                     "--set", "axes.heads=[4]"), "shape too large")


# 3. Counts that would abort inside Google Benchmark.
def test_absurd_repetitions_are_refused_before_anything_is_written(tmp_path, config):
    out = tmp_path / "run"
    assert_usage_error(run_attnbench("run", config, "--set", "measure.repetitions=4294967296",
                                     "--out", out), "measure.repetitions: must be an integer in [1, 100000], got 4294967296")
    assert_usage_error(run_attnbench("run", config, "--set", "measure.warmup=9999999999999",
                                     "--out", out), "measure.warmup: must be an integer in [0, 1000000], got 9999999999999")
    assert not out.exists()


# 4. Two runs on one folder.
def test_a_second_run_on_a_folder_in_use_is_refused(tmp_path, config):
    out = tmp_path / "run"
    slow = ["--set", "measure.min_time_s=0.4"]
    first = subprocess.Popen([str(attnbench_binary()), "run", str(config), "--out", str(out), *slow],
                             cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not (out / "manifest.json").exists():
        time.sleep(0.05)
    second = run_attnbench("run", config, "--out", out, "--resume", *slow)
    assert first.wait(timeout=120) == 0, first.stderr.read()
    assert_usage_error(second, "in use by another attnbench run")
    ids = [json.loads(line)["case_id"] for line in (out / "cases.jsonl").read_text().splitlines()]
    assert len(ids) == 4 and len(set(ids)) == 4


# 5. Outputs over inputs, and over each other.
def test_attend_never_overwrites_its_inputs(tmp_path):
    x = save(tmp_path, "x.npy", np.ones((4, 8), np.float32))
    before = x.read_bytes()
    assert_usage_error(attend("--q", x, "--k", x, "--v", x, "--out", x), "is also --q")
    assert_usage_error(attend("--q", x, "--k", x, "--v", x, "--out", tmp_path / "o.npy",
                              "--weights", tmp_path / "o.npy"), "name the same file")
    assert x.read_bytes() == before
    assert not (tmp_path / "o.npy").exists()


def test_attend_leaves_someone_elses_tmp_file_alone(tmp_path):
    x = save(tmp_path, "x.npy", np.ones((4, 8), np.float32))
    (tmp_path / "o.npy.tmp").write_text("not ours")
    attend("--q", x, "--k", x, "--v", x, "--out", tmp_path / "o.npy", check=True)
    assert (tmp_path / "o.npy.tmp").read_text() == "not ours"


# 7. Resuming with other variants.
def test_resume_with_other_variants_is_refused(tmp_path, config):
    out = tmp_path / "run"
    run_attnbench("run", config, "--out", out, check=True)
    before = (out / "cases.jsonl").read_text()
    result = run_attnbench("run", config, "--out", out, "--resume", "--variants", "naive,chunked")
    assert_usage_error(result, "different config")
    assert (out / "cases.jsonl").read_text() == before


# 8. Records that are JSON but not records.
@pytest.mark.parametrize("line, problem", [
    ('{"foo":1}', "missing 'case_index'"),
    ("[1,2]", "a record must be a JSON object"),
    (None, "missing 'variant'"),
    (None, "missing 'flops'"),
])
def test_damaged_records_name_the_file_and_line(tmp_path, config, line, problem):
    out = tmp_path / "run"
    run_attnbench("run", config, "--out", out, check=True)
    lines = (out / "cases.jsonl").read_text().splitlines()
    if line is None:  # an ok record with a key removed
        record = json.loads(lines[0])
        del record[problem.split("'")[1]]
        line = json.dumps(record)
    lines[1] = line
    (out / "cases.jsonl").write_text("\n".join(lines) + "\n")
    result = run_attnbench("run", config, "--out", out, "--resume")
    assert_usage_error(result, f"cases.jsonl:2: malformed record: {problem}")


# 9. A full disk while writing the manifest.
def test_a_folder_whose_manifest_write_failed_can_be_used_again(tmp_path, config):
    out = tmp_path / "run"
    result = run_attnbench("run", config, "--out", out, preexec_fn=file_size_limit(1000))
    assert_usage_error(result, "manifest.json: cannot write: File too large")
    assert not [p.name for p in out.iterdir() if ".tmp" in p.name]
    run_attnbench("run", config, "--out", out, check=True)
    assert len((out / "cases.jsonl").read_text().splitlines()) == 4


@pytest.mark.parametrize("limit", [6000, 9000, 12000])
def test_a_full_disk_mid_run_keeps_whole_records_only(tmp_path, config, limit):
    out = tmp_path / "run"
    result = run_attnbench("run", config, "--out", out, preexec_fn=file_size_limit(limit))
    if result.returncode != 0:
        assert_usage_error(result, "File too large")
    assert not [p.name for p in out.iterdir() if ".tmp" in p.name]
    for line in (out / "cases.jsonl").read_text().splitlines():
        json.loads(line)
    finished = len((out / "cases.jsonl").read_text().splitlines())
    if (out / "manifest.json").exists():  # resumable, keeping every finished record
        run_attnbench("run", config, "--out", out, "--resume", check=True)
        assert len((out / "cases.jsonl").read_text().splitlines()) == 4 >= finished


# 10. Non-finite numbers.
@pytest.mark.parametrize("scale", ["nan", "inf", "-inf", "1e39"])
def test_non_finite_scale_is_refused(tmp_path, scale):
    x = save(tmp_path, "x.npy", np.ones((4, 8), np.float32))
    assert_usage_error(attend("--q", x, "--k", x, "--v", x, "--out", tmp_path / "o.npy", "--scale", scale),
                       "must be a finite float32 value")
    assert not (tmp_path / "o.npy").exists()


def test_inputs_that_overflow_float32_are_refused(tmp_path):
    big = save(tmp_path, "big.npy", np.full((4, 8), 3e38, np.float32))
    assert_usage_error(attend("--q", big, "--k", big, "--v", big, "--out", tmp_path / "o.npy"),
                       "too large for float32 attention")
    nan = save(tmp_path, "nan.npy", np.full((4, 8), np.nan, np.float32))
    assert_usage_error(attend("--q", nan, "--k", big, "--v", big, "--out", tmp_path / "o.npy"),
                       "inputs must be finite")
    assert not (tmp_path / "o.npy").exists()


def test_a_scale_that_overflows_the_scores_is_named_not_the_inputs(tmp_path):
    # Inputs of about 2 under --scale 1e38: the scores pass float32's range through the scale
    # alone; the error said the inputs were too large and to scale them down.
    x = save(tmp_path, "x.npy", np.full((4, 8), 0.7, np.float32))
    result = attend("--q", x, "--k", x, "--v", x, "--out", tmp_path / "o.npy", "--scale", "1e38")
    assert_usage_error(result, "the scale 1e+38 is too large for these inputs", "--scale")
    assert not (tmp_path / "o.npy").exists()
    # Without --scale, 1/sqrt(d_k) (d_k 1: times log2 e, past 1) is not the user's to shrink: a
    # score past float32's range there is the inputs'.
    edge = save(tmp_path, "edge.npy", np.full((1, 1), 1.8e19, np.float32))
    result = attend("--q", edge, "--k", edge, "--v", edge, "--out", tmp_path / "o.npy")
    assert_usage_error(result, "the inputs are too large for float32 attention", "scale them down")
    # The largest scale the inputs allow still runs.
    ok = attend("--q", x, "--k", x, "--v", x, "--out", tmp_path / "o.npy", "--scale", "1e36")
    assert ok.returncode == 0, ok.stderr


# 11. Range axes.
@pytest.mark.parametrize("axis, expected", [
    ("{from=1,to=20000,step=1}", "more than 10000 values"),
    ("{from=3,to=9223372036854775807,mul=3}", "shape too large"),
])
def test_range_axes_never_cut_or_wrap(config, axis, expected):
    result = run_attnbench("check", config, "--set", f"axes.seq_len={axis}")
    assert_usage_error(result, expected)
    assert "-" not in result.stderr.split("shape")[-1].split(":")[0]


# 12. Odd files as configs, odd names.
def test_odd_files_as_config(tmp_path):
    assert_usage_error(run_attnbench("check", tmp_path), "is a directory")
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    assert_usage_error(run_attnbench("check", fifo, timeout=30), "not a regular file")
    assert_usage_error(run_attnbench("check", "/dev/zero", timeout=30), "not a regular file")


def test_name_with_a_nul_byte(tmp_path, config):
    result = run_attnbench("run", config, "--set", 'name="a\\u0000b"')
    assert_usage_error(result, "name: must be non-empty with no spaces, slashes or control")


def test_invalid_utf8_in_an_environment_value_is_one_line(tmp_path, config):
    # An unknown override is refused before any case runs (it used to fail every case).
    out = tmp_path / "run"
    env = dict(os.environ, ATTNBENCH_FLASH_CPU_ISA="\udcff")  # one byte 0xff
    result = subprocess.run([str(attnbench_binary()), "run", str(config), "--out", str(out),
                             "--variants", "flash_cpu"], cwd=REPO, capture_output=True, env=env)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert b"ATTNBENCH_FLASH_CPU_ISA" in result.stderr and not out.exists()


def mark_failed(out, variant):
    """Rewrites the folder's records of `variant` as failed, as a case whose oracle failed is."""
    rows = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    for row in rows:
        if row["variant"] == variant:
            row["status"], row["reason"] = "failed", "oracle: made to fail by the test"
    (out / "cases.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


# 13. Smaller ones.
def test_bad_out_is_reported_before_the_peaks_are_measured(tmp_path, config):
    existing = tmp_path / "a-file"
    existing.write_text("x")
    for out in (existing, tmp_path / ("a" * 5000), "/proc/attnbench/out"):
        result = run_attnbench("run", config, "--out", out)
        assert result.returncode == 2 and "measuring" not in result.stdout, result.stdout


@pytest.mark.parametrize("args", [["run"], ["attend", "--bogus"], ["nonesuch"], ["check", "--set"]])
def test_command_line_parse_errors_exit_2(args):
    result = run_attnbench(*args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_help_still_exits_0():
    assert run_attnbench("run", "--help").returncode == 0


def test_shard_out_of_int64_range(tmp_path, config):
    assert_usage_error(run_attnbench("run", config, "--shard", "0/99999999999999999999", "--out",
                                     tmp_path / "o"), "--shard '0/99999999999999999999'")


def test_resume_of_a_folder_with_failed_cases_is_not_a_success(tmp_path, config):
    out = tmp_path / "run"
    run_attnbench("run", config, "--out", out, "--variants", "flash_cpu", check=True)
    mark_failed(out, "flash_cpu")
    before = (out / "cases.jsonl").read_text()
    resumed = run_attnbench("run", config, "--out", out, "--resume", "--variants", "flash_cpu")
    assert resumed.returncode == 1
    assert "4 case(s) failed in an earlier attempt" in resumed.stderr
    assert (out / "cases.jsonl").read_text() == before


def test_resume_with_retry_failed_runs_the_failed_cases_again_and_keeps_their_records(
        tmp_path, config):
    out = tmp_path / "run"
    both = ("--variants", "naive,flash_cpu")
    run_attnbench("run", config, "--out", out, *both, check=True)
    mark_failed(out, "flash_cpu")
    records = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    failed = [r for r in records if r["status"] == "failed"]
    finished = [r for r in records if r["status"] != "failed"]
    assert failed and finished and all(r["variant"] == "flash_cpu" for r in failed)

    resumed = run_attnbench("run", config, "--out", out, "--resume", "--retry-failed", *both)
    assert resumed.returncode == 0, resumed.stderr
    assert f"retrying {len(failed)} failed case(s)" in resumed.stdout
    after = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    # The cases that had finished are untouched; the failed ones ran again and are ok now.
    assert after[:len(finished)] == finished
    retried = after[len(finished):]
    assert sorted(r["case_id"] for r in retried) == sorted(r["case_id"] for r in failed)
    assert all(r["status"] == "ok" for r in retried)
    # The failed records are kept, not lost.
    attempts = [json.loads(line)
                for line in (out / "failed_attempts.jsonl").read_text().splitlines()]
    assert attempts == failed
    assert len((out / "summary.csv").read_text().splitlines()) == 1 + len(records)


def test_retry_failed_without_resume_is_a_usage_error(tmp_path, config):
    assert_usage_error(run_attnbench("run", config, "--out", tmp_path / "o", "--retry-failed"),
                       "--retry-failed needs --resume")


# 14. Found by a later audit.
@pytest.mark.parametrize("line", [
    "axes.{} = [1]", "[axes.{}]", "x = {{ {} = 1 }}", "x = [1,\n {{ b = 1, {} = 1 }}]",
    "[ axes . {} ]",
    # A multi-line literal string whose text holds a quote and a line-ending backslash, then the key.
    "s = '''\n\"\\\n''' # \\\n{} = 1",
])
def test_a_key_of_tens_of_thousands_of_parts_is_refused_not_a_crash(tmp_path, config, line):
    # toml++ descends once per part of a dotted key: 50,000 parts (100 KB) overflowed the stack.
    deep = tmp_path / "deep.toml"
    deep.write_text(config.read_text() + "\n" + line.format(".".join(["a"] * 50000)) + "\n")
    assert_usage_error(run_attnbench("plan", deep), "deep.toml:", "a key of more than 1001 dotted")


def test_dots_in_values_and_quoted_keys_are_not_parts(tmp_path, config):
    # Values' dots come after '=' (a long array of floats), and a quoted key's dots are its text.
    floats = ", ".join(["1.5"] * 2000)
    path = tmp_path / "values.toml"
    path.write_text(config.read_text() + f'\n[extra]\n"{"." * 2000}" = [{floats}]\n'
                    f'b = [\n{floats}\n]\nc = """\n{"." * 2000}\n"""\nd = \'\'\'{"." * 2000}\'\'\'\n')
    assert_usage_error(run_attnbench("plan", path), "extra: unknown key")


@pytest.mark.parametrize("args", [
    ["run", "{config}", "--out", ""],
    ["plan", "{config}", "--set", ""],
    ["attend", "--variant", "naive", "--q", "{x}", "--k", "{x}", "--v", "{x}", "--out", "{o}",
     "--scale", ""],
    ["attend", "--variant", "naive", "--q", "{x}", "--k", "{x}", "--v", "{x}", "--out", "{o}",
     "--mask", ""],
    ["attend", "--variant", "naive", "--q", "{x}", "--k", "{x}", "--v", "{x}", "--out", "{o}",
     "--dtype", ""],
])
def test_an_empty_value_is_refused_by_its_option(tmp_path, config, args):
    # CLI11 reads '' as a number's default and as empty text: a value given and not used.
    x = save(tmp_path, "x.npy", np.ones((4, 8), np.float32))
    filled = [a.format(config=config, x=x, o=tmp_path / "o.npy") for a in args]
    option = next(a for a, b in zip(filled, filled[1:] + ["?"]) if b == "")
    assert_usage_error(run_attnbench(*filled), f"{option}: an empty value", prefixed=True)
    assert not (tmp_path / "o.npy").exists() and not list(REPO.glob("results/hostile-*"))


@pytest.mark.parametrize("command", [["config", "reference"], ["export", "{out}"]])
def test_an_unknown_isa_override_is_refused_by_config_and_export(tmp_path, config, command):
    out = tmp_path / "run"
    run_attnbench("run", config, "--out", out, check=True)
    env = dict(os.environ, ATTNBENCH_FLASH_CPU_ISA="bogus")
    result = run_attnbench(*[c.format(out=out) for c in command], env=env)
    assert_usage_error(result, "ATTNBENCH_FLASH_CPU_ISA", "bogus", prefixed=True)


def test_a_case_outside_the_shard_names_the_shards_cases(tmp_path, config):
    result = run_attnbench("run", config, "--shard", "0/2", "--cases", "1", "--out", tmp_path / "o")
    assert_usage_error(result, "no case 1 in this plan (its indices: 0, 2")


@pytest.mark.parametrize("args, expected", [
    (["run", "{config}", "--cases", "99999999999999999999"], "case index 99999999999999999999 is past"),
    (["slurm", "{config}", "--shards", "99999999999999999999", "--out", "{out}"],
     "--shards: 99999999999999999999 is past int64"),
    # CLI11 reads integers as strtoll's base 0 does: a sign, spaces, 0x and a leading 0 (octal).
    (["slurm", "{config}", "--shards", "+99999999999999999999", "--out", "{out}"],
     "--shards: must be a decimal number"),
    (["slurm", "{config}", "--shards", "010", "--out", "{out}"], "--shards: must be a decimal number"),
    (["slurm", "{config}", "--shards", "2", "--cpus-per-task", "010", "--out", "{out}"],
     "--cpus-per-task: must be 1 or more"),
    (["slurm", "{config}", "--shards", "2", "--gpus", "0x1", "--out", "{out}"],
     "--gpus: must be 0 (no --gres line"),
    # Said "must be a whole number, 1 or more".
    (["run", "{config}", "--set", 'axes.kv_lens=["99999999999999999999"]', "--out", "{out}"],
     "cache length '99999999999999999999' is past int64"),
    (["run", "{config}", "--set", 'axes.kv_cache=["paged:99999999999999999999"]', "--out", "{out}"],
     "the page size P is past int64"),
])
def test_counts_past_int64_are_named_as_given(tmp_path, config, args, expected):
    # CLI11 read them as the largest int64 ("no case 9223372036854775807").
    filled = [a.format(config=config, out=tmp_path / "o") for a in args]
    assert_usage_error(run_attnbench(*filled), expected, prefixed=True)
    assert not (tmp_path / "o").exists()


# --json was a flag with no value of its own: `--json=false` printed JSON (export's --csv=false and
# run's --resume=false always did what they say).
@pytest.mark.parametrize("command", [["plan", "{config}"], ["check", "{config}"], ["list"], ["schema"]])
def test_json_false_prints_the_table(tmp_path, config, command):
    args = [str(config) if arg == "{config}" else arg for arg in command]
    table = run_attnbench(*args, "--json=false", check=True).stdout
    as_json = run_attnbench(*args, "--json", check=True).stdout
    assert table.lstrip()[0] not in "[{", table[:200]
    assert as_json.lstrip()[0] in "[{", as_json[:200]
