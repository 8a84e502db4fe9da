"""Hostile input, round two: memory limits the process is under (an address-space rlimit, a
cgroup), special files inside a results folder and as attend's outputs, control characters in
what an error quotes, JSON damage named by file and line, and the exit code and message of the
remaining bad-input cases. The promise stays the one of test_cli_hostile.py: bad input gets one
line naming the problem and exit status 2; nothing hangs; a case that cannot fit is skipped with
its reason, never killed."""

import json
import os

import numpy as np
import pytest

import binary
from binary import run_attnbench

@pytest.fixture
def config(sweep_file):
    return sweep_file("small.toml", name="limits", causal=(False,))


def assert_usage_error(result, expected):
    binary.assert_usage_error(result, expected, prefixed=True)


def save(tmp_path, name, array):
    path = tmp_path / name
    np.save(path, array)
    return path


def attend(*args, **kwargs):
    return run_attnbench("attend", "--variant", "naive", *args, **kwargs)


def records(folder):
    return [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines()]


# Exit codes and messages.
def test_an_unknown_subcommand_is_named_with_the_valid_ones():
    result = run_attnbench("frobnicate")
    assert_usage_error(result, "unknown subcommand 'frobnicate'")
    assert "run" in result.stderr and "merge" in result.stderr and "attend" in result.stderr


# Each said only "A subcommand is required".
@pytest.mark.parametrize("args, expected", [
    (["config", "zzz"], "unknown subcommand 'zzz' of config (the subcommands: reference)"),
    (["config"], "config needs a subcommand: one of reference"),
    ([], "attnbench needs a subcommand: one of list, run,"),
    (["-x"], "-x comes before any subcommand; the subcommands: list, run,"),
])
def test_a_missing_or_unknown_subcommand_is_named(args, expected):
    assert_usage_error(run_attnbench(*args), expected)


@pytest.mark.parametrize("command", ["run", "check", "plan", "attend"])
def test_an_unknown_isa_override_is_refused_before_any_case_runs(tmp_path, config, command):
    x = save(tmp_path, "x.npy", np.ones((4, 8), np.float32))
    args = {"run": ["run", config, "--out", tmp_path / "run"],
            "check": ["check", config],
            "plan": ["plan", config],
            "attend": ["attend", "--variant", "flash_cpu", "--q", x, "--k", x, "--v", x,
                       "--out", tmp_path / "o.npy"]}[command]
    env = dict(os.environ, ATTNBENCH_FLASH_CPU_ISA="garbage")
    result = run_attnbench(*args, env=env)
    assert_usage_error(result, "ATTNBENCH_FLASH_CPU_ISA: 'garbage' is not one of")
    assert not (tmp_path / "run").exists() and not (tmp_path / "o.npy").exists()
    # --help still answers.
    assert run_attnbench(command, "--help", env=env).returncode == 0


def test_merge_over_an_existing_folder_does_not_suggest_resume(tmp_path, config):
    shard = tmp_path / "whole"
    run_attnbench("run", config, "--out", shard, check=True)
    existing = tmp_path / "existing"
    run_attnbench("run", config, "--out", existing, check=True)
    before = (existing / "cases.jsonl").read_text()
    result = run_attnbench("merge", shard, "--out", existing)
    assert_usage_error(result, "already exists")
    assert "--resume" not in result.stderr
    assert (existing / "cases.jsonl").read_text() == before


# One line, whatever an error quotes.
def test_a_newline_in_a_config_path_stays_on_one_line(tmp_path):
    result = run_attnbench("check", str(tmp_path / "a\nattnbench: error: forged"))
    assert_usage_error(result, "a\\nattnbench: error: forged")


def test_a_control_character_in_an_environment_value_stays_on_one_line(config):
    env = dict(os.environ, ATTNBENCH_FLASH_CPU_ISA="x\nattnbench: error: forged\x1b[2J")
    result = run_attnbench("check", config, env=env)
    assert_usage_error(result, "x\\nattnbench: error: forged\\x1b[2J")


def test_a_newline_in_a_manifest_field_stays_on_one_line(tmp_path, config):
    out = tmp_path / "run"
    run_attnbench("run", config, "--out", out, check=True)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["shard"] = "0/2\nattnbench: error: forged"
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert_usage_error(run_attnbench("run", config, "--out", out, "--resume"),
                       "'0/2\\nattnbench: error: forged'")


# Special files inside a results folder: refused at once, never waited on.
def finished_run(tmp_path, config):
    out = tmp_path / "run"
    run_attnbench("run", config, "--out", out, check=True)
    return out


def commands_reading(folder, config, tmp_path):
    return {"resume": ["run", config, "--out", folder, "--resume"],
            "merge": ["merge", folder, "--out", tmp_path / "merged"],
            "append": ["append", folder]}


@pytest.mark.parametrize("command", ["resume", "merge", "append"])
@pytest.mark.parametrize("name", ["manifest.json", "cases.jsonl"])
def test_a_fifo_in_a_results_folder_is_refused_not_waited_on(tmp_path, config, command, name):
    out = finished_run(tmp_path, config)
    (out / name).unlink()
    os.mkfifo(out / name)
    result = run_attnbench(*commands_reading(out, config, tmp_path)[command], timeout=60,
                           input="")
    assert_usage_error(result, f"{name}: is a FIFO, not a regular file")


@pytest.mark.parametrize("command", ["resume", "merge", "append"])
def test_records_linked_to_dev_zero_are_refused(tmp_path, config, command):
    out = finished_run(tmp_path, config)
    (out / "cases.jsonl").unlink()
    (out / "cases.jsonl").symlink_to("/dev/zero")
    result = run_attnbench(*commands_reading(out, config, tmp_path)[command], timeout=60,
                           input="")
    # merge reads it (a device); resume and append would append to it, through a link.
    expected = ("cases.jsonl: is a character device, not a regular file" if command == "merge"
                else "cases.jsonl: a symbolic link: a run appends to it")
    assert_usage_error(result, expected)


def test_a_fifo_where_failed_records_are_set_aside_is_refused(tmp_path, config):
    out = finished_run(tmp_path, config)
    os.mkfifo(out / "failed_attempts.jsonl")
    result = run_attnbench("run", config, "--out", out, "--resume", "--retry-failed", timeout=60)
    assert_usage_error(result, "failed_attempts.jsonl: exists and is a FIFO, not a regular file")


def test_a_summary_that_is_a_fifo_is_not_replaced(tmp_path, config):
    out = finished_run(tmp_path, config)
    (out / "summary.csv").unlink()
    os.mkfifo(out / "summary.csv")
    result = run_attnbench("merge", out, "--out", tmp_path / "merged", timeout=60)
    assert_usage_error(result, "summary.csv: exists and is a FIFO")
    assert (out / "summary.csv").is_fifo()


# JSON damage named by file and line.
def test_an_unterminated_last_line_that_is_no_record_names_the_file_and_line(tmp_path, config):
    out = finished_run(tmp_path, config)
    with open(out / "cases.jsonl", "a") as f:
        f.write('{"case_id": 5}')
    for command in (["run", config, "--out", out, "--resume"],
                    ["merge", out, "--out", tmp_path / "merged"]):
        assert_usage_error(run_attnbench(*command), "cases.jsonl:3: malformed record: missing")


def test_an_unterminated_last_line_cut_short_is_still_dropped(tmp_path, config):
    out = finished_run(tmp_path, config)
    lines = (out / "cases.jsonl").read_text().splitlines()
    (out / "cases.jsonl").write_text(lines[0] + "\n" + lines[1][:40])
    run_attnbench("run", config, "--out", out, "--resume", check=True)
    assert len(records(out)) == 2


@pytest.mark.parametrize("plan, problem", [
    ({"case_ids": [1, 2]}, "'plan.case_ids[0]' is not a string"),
    ({"case_ids": "abc"}, "'plan.case_ids' is not an array"),
    ({"case_ids": [], "sweep_cases": "2"}, "'plan.sweep_cases' is not a count"),
])
def test_a_malformed_plan_in_a_manifest_names_the_file(tmp_path, config, plan, problem):
    out = finished_run(tmp_path, config)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["plan"] = plan
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert_usage_error(run_attnbench("merge", out, "--out", tmp_path / "merged"),
                       f"manifest.json: malformed manifest: {problem}")


def test_a_manifest_that_is_not_json_names_the_file_and_line(tmp_path, config):
    out = finished_run(tmp_path, config)
    text = (out / "manifest.json").read_text()
    (out / "manifest.json").write_text(text[:text.index('"config"')] + '"x": ,\n' +
                                       text[text.index('"config"'):])
    line = text[:text.index('"config"')].count("\n") + 1
    result = run_attnbench("run", config, "--out", out, "--resume")
    assert_usage_error(result, f"manifest.json:{line}: not valid JSON (syntax error")
    assert "json.exception" not in result.stderr


# attend's outputs.
@pytest.mark.parametrize("kind", ["stdout link", "device", "fifo"])
@pytest.mark.parametrize("output", ["--out", "--weights"])
def test_attend_refuses_outputs_that_are_not_regular_files(tmp_path, kind, output):
    x = save(tmp_path, "x.npy", np.ones((4, 8), np.float32))
    target = tmp_path / "target.npy"
    if kind == "stdout link":
        target.symlink_to("/proc/self/fd/1")
    elif kind == "device":
        target.symlink_to("/dev/null")
    else:
        os.mkfifo(target)
    args = ["--q", x, "--k", x, "--v", x]
    args += ["--out", target] if output == "--out" else ["--out", tmp_path / "o.npy",
                                                         "--weights", target]
    result = attend(*args, timeout=60)
    assert_usage_error(result, "target.npy: exists and is a")
    assert "not a regular file" in result.stderr
    assert target.is_symlink() or target.is_fifo()
    assert not (tmp_path / "o.npy").exists()


def test_attend_on_a_full_disk_while_writing_the_weights_keeps_both_old_files(tmp_path):
    import resource
    import signal

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (8000, 8000))

    x = save(tmp_path, "x.npy", np.ones((128, 4), np.float32))  # O: 2 KiB, W: 64 KiB
    out, weights = tmp_path / "o.npy", tmp_path / "w.npy"
    out.write_bytes(b"old O")
    weights.write_bytes(b"old W")
    result = attend("--q", x, "--k", x, "--v", x, "--out", out, "--weights", weights,
                    preexec_fn=limit)
    assert_usage_error(result, "w.npy: cannot write: File too large")
    assert out.read_bytes() == b"old O" and weights.read_bytes() == b"old W"
    assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]


# Memory limits: a case that cannot fit is skipped with the
# reason, whichever limit it meets; nothing is killed and nothing aborts.
def address_space_limit(limit_bytes):
    """A preexec_fn that puts the command under `ulimit -v`."""
    def apply():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    return apply


GiB = 1 << 30

BIG = """
name = "big"
variants = ["naive"]
[axes]
heads = [1]
seq_len = [16, 32768]
d_k = [8]
causal = [false]
[measure]
warmup = 0
repetitions = 1
min_time_s = 0.001
interleave = {interleave}
"""


@pytest.mark.parametrize("interleave", ["false", "true"])
def test_a_case_over_the_address_space_limit_is_skipped(tmp_path, interleave):
    # naive at n 32768 needs a 4 GiB score matrix: under 8 GiB of memory_cap_gb and the host's
    # memory, over a 3 GiB address space.
    config = tmp_path / "big.toml"
    config.write_text(BIG.format(interleave=interleave))
    out = tmp_path / "run"
    result = run_attnbench("run", config, "--out", out, preexec_fn=address_space_limit(3 * GiB),
                           timeout=300)
    assert result.returncode == 0, result.stderr
    by_n = {r["seq_kv"]: r for r in records(out)}
    assert by_n[16]["status"] == "ok"
    assert by_n[32768]["status"] == "skipped", by_n[32768]
    assert "RLIMIT_AS" in by_n[32768]["reason"] and "needs 4.0 GiB" in by_n[32768]["reason"]


def test_an_interleaved_group_whose_inputs_cannot_fit_is_skipped(tmp_path):
    # Q, K and V at n 16384, d 16384 are 3 GiB of float32, made before any case is prepared.
    config = tmp_path / "wide.toml"
    config.write_text(BIG.format(interleave="true").replace("seq_len = [16, 32768]",
                                                           "seq_len = [16384]")
                      .replace("d_k = [8]", "d_k = [16384]")
                      .replace('variants = ["naive"]', 'variants = ["naive", "chunked"]'))
    out = tmp_path / "run"
    result = run_attnbench("run", config, "--out", out, "--set", "measure.memory_cap_gb=100",
                           preexec_fn=address_space_limit(3 * GiB), timeout=300)
    assert result.returncode == 0, result.stderr
    assert [r["status"] for r in records(out)] == ["skipped", "skipped"]
    assert all("RLIMIT_AS" in r["reason"] for r in records(out)), records(out)


def test_check_skips_a_case_over_the_address_space_limit(tmp_path):
    config = tmp_path / "big.toml"
    config.write_text(BIG.format(interleave="false"))
    result = run_attnbench("check", config, "--json", preexec_fn=address_space_limit(3 * GiB),
                           timeout=300)
    assert result.returncode == 0, result.stderr
    statuses = [(r["seq_kv"], r["status"]) for r in json.loads(result.stdout)["records"]]
    # A record per input distribution checked; the skipped case once (its reason is the case's).
    assert statuses == [(16, "ok")] * 4 + [(32768, "skipped")]


WIDE_V = """
name = "wide"
variants = ["naive"]
[axes]
seq_len = [8]
d_k = [1]
d_v = [20000000]
[measure]
peaks = "skip"
warmup = 0
repetitions = 1
min_time_s = 0.001
memory_cap_gb = 1000
"""


def test_a_case_whose_oracle_cannot_fit_is_skipped_not_aborted(tmp_path):
    # 8 keys of d_v 2e7: the tensors fit in 2.9 GiB, the oracle's float64 rows (1.2 GiB a thread)
    # do not. Uncounted, the oracle's allocation threw inside its OpenMP loop and the process
    # aborted (std::terminate) with an empty cases.jsonl.
    config = tmp_path / "wide.toml"
    config.write_text(WIDE_V)
    # (2.9 GiB: under it the old estimate of 2.4 GiB passed the check and the process aborted.)
    result = run_attnbench("check", config, "--json",
                           preexec_fn=address_space_limit(3_050_000 * 1024), timeout=300)
    assert result.returncode == 0, result.stderr
    [record] = json.loads(result.stdout)["records"]
    assert record["status"] == "skipped" and "RLIMIT_AS" in record["reason"], record


def test_attend_refuses_a_problem_over_the_memory_limit_with_its_sizes(tmp_path):
    x = save(tmp_path, "x.npy", np.ones((60000, 8), np.float32))
    result = attend("--q", x, "--k", x, "--v", x, "--out", tmp_path / "o.npy",
                    preexec_fn=address_space_limit(3 * GiB), timeout=120)
    assert_usage_error(result, "q60000 kv60000 dk8 dv8 needs 13.4 GiB, but only")
    assert "RLIMIT_AS" in result.stderr and "workspace 13.4 GiB" in result.stderr
    assert not (tmp_path / "o.npy").exists()


def sparse_npy(path, shape):
    """A float32 .npy file whose header says `shape`, its data a hole (no disk space taken)."""
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {tuple(shape)}, }}".encode()
    header += b" " * ((64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header)
        f.truncate(f.tell() + 4 * int(np.prod(shape)))
    return path


def test_attend_refuses_a_problem_over_the_memory_limit_before_reading_its_inputs(tmp_path):
    # Three inputs of 1.6 GB each: read first, they filled a 3 GiB address space before the
    # problem's sizes were checked, and the error named a read instead of the problem.
    x = [sparse_npy(tmp_path / f"{name}.npy", (1, 4, 1000000, 100)) for name in "qkv"]
    result = run_attnbench("attend", "--variant", "flash_cpu", "--q", x[0], "--k", x[1], "--v",
                           x[2], "--out", tmp_path / "o.npy",
                           preexec_fn=address_space_limit(3 * GiB), timeout=120)
    assert_usage_error(result, "b1 h4/4 q1000000 kv1000000 dk100 dv100 needs 11.9 GiB, but only")
    assert "RLIMIT_AS" in result.stderr
    assert not (tmp_path / "o.npy").exists()


def data_limit_of(limit_bytes):
    """A preexec_fn that puts the command under `ulimit -d`."""
    def apply():
        import resource
        resource.setrlimit(resource.RLIMIT_DATA, (limit_bytes, limit_bytes))
    return apply


@pytest.mark.parametrize("limit, name", [(address_space_limit, "RLIMIT_AS"),
                                         (data_limit_of, "RLIMIT_DATA")])
def test_blas_under_a_mapping_limit_is_refused_not_left_spinning(tmp_path, limit, name):
    # 8 MiB of inputs and blas's 64 MiB of scores fit, but OpenBLAS maps its own buffers when
    # first called and, where it could not, spun for ever (killed by the timeout). What it maps
    # is counted against the limits before it is called.
    x = save(tmp_path, "x.npy", np.ones((4096, 64), np.float32))
    result = run_attnbench("attend", "--variant", "blas", "--q", x, "--k", x, "--v", x, "--out",
                           tmp_path / "o.npy", preexec_fn=limit(300_000 * 1024), timeout=60)
    assert_usage_error(result, "its library maps for itself, but only")
    assert name in result.stderr
    assert not (tmp_path / "o.npy").exists()


def test_attend_under_a_data_limit_refuses_before_reading(tmp_path):
    # A float16 Q of 98 MiB, widened on load, once ran out of memory in the read under a 400 MiB
    # data limit (the binary's own libraries take most of it). The problem's sizes come from the
    # headers now, so it is refused with them before any data is read.
    x = save(tmp_path, "x.npy", np.ones((64, 1024), np.float16))
    big = save(tmp_path, "big.npy", np.zeros((50000, 1024), np.float16))

    result = attend("--q", big, "--k", x, "--v", x, "--out", tmp_path / "o.npy",
                    preexec_fn=data_limit_of(400 << 20), timeout=120)
    assert_usage_error(result, "q50000 kv64 dk1024 dv1024 fp16 needs")
    assert "RLIMIT_DATA" in result.stderr and "bad_alloc" not in result.stderr


def test_resume_may_lower_memory_cap_gb_but_not_raise_it(tmp_path, config):
    out = tmp_path / "run"
    run_attnbench("run", config, "--out", out, check=True)
    lines = (out / "cases.jsonl").read_text().splitlines()
    (out / "cases.jsonl").write_text(lines[0] + "\n")
    result = run_attnbench("run", config, "--out", out, "--resume", "--set",
                           "measure.memory_cap_gb=100")
    assert_usage_error(result, "a resumed run may lower it, not raise it")
    run_attnbench("run", config, "--out", out, "--resume", "--set",
                  "measure.memory_cap_gb=0.5", check=True)
    assert len(records(out)) == 2


def memory_cgroup(limit_bytes):
    """A new memory cgroup (v2 or v1) below this process's own, limited to limit_bytes: returns
    the preexec_fn that moves a child into it and the folder to remove, or skips the test."""
    mounts = {}
    for line in open("/proc/self/mountinfo"):
        left, _, right = line.partition(" - ")
        fields, kinds = left.split(), right.split()
        if kinds[0] == "cgroup2":
            mounts.setdefault("v2", (fields[3], fields[4]))
        elif kinds[0] == "cgroup" and "memory" in kinds[2].split(","):
            mounts.setdefault("v1", (fields[3], fields[4]))
    for line in open("/proc/self/cgroup"):
        hierarchy, controllers, path = line.strip().split(":", 2)
        if hierarchy == "0" and "v2" in mounts:
            root, point = mounts["v2"]
            files = ("memory.max", "memory.current")
        elif "memory" in controllers.split(",") and "v1" in mounts:
            root, point = mounts["v1"]
            files = ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        relative = path[len(root):] if root != "/" and path.startswith(root) else path
        parent = os.path.join(point, relative.lstrip("/"))
        folder = os.path.join(parent, f"attnbench-test-{os.getpid()}")
        try:
            os.mkdir(folder)
        except OSError:
            continue
        try:
            with open(os.path.join(folder, files[0]), "w") as f:
                f.write(str(limit_bytes))
        except OSError:
            os.rmdir(folder)
            continue

        def enter(folder=folder):
            with open(os.path.join(folder, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        return enter, folder
    pytest.skip("cannot create a memory cgroup here (needs root and a writable cgroup mount)")


def test_a_case_over_the_cgroup_limit_is_skipped_not_killed(tmp_path):
    enter, folder = memory_cgroup(768 << 20)
    try:
        config = tmp_path / "big.toml"
        config.write_text(BIG.format(interleave="false").replace("32768", "16384"))
        out = tmp_path / "run"
        result = run_attnbench("run", config, "--out", out, preexec_fn=enter, timeout=300)
    finally:
        os.rmdir(folder)
    assert result.returncode == 0, (result.returncode, result.stderr)
    by_n = {r["seq_kv"]: r for r in records(out)}
    assert by_n[16]["status"] == "ok"
    assert by_n[16384]["status"] == "skipped", by_n[16384]
    assert "cgroup's memory limit 768.0 MiB" in by_n[16384]["reason"]
