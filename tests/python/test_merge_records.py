"""`attnbench merge` takes a shard's record as the case its id names only when it is that case:
one outside the shard's plan, or whose fields spell another case (seq_q 999 under a q32 id,
flash_cpu under a naive id), is refused with one line naming the folder and the case, and
nothing is written."""

import json
import subprocess
import time

import pytest

from binary import assert_usage_error, attnbench_binary, run_attnbench


@pytest.fixture
def shards(tmp_path, tiny_sweep):
    folders = []
    for index in range(2):
        folder = tmp_path / f"shard{index}"
        run_attnbench("run", tiny_sweep, "--shard", f"{index}/2", "--out", folder, check=True)
        folders.append(folder)
    return folders


def records_of(folder):
    return [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines()]


def rewrite(folder, records):
    (folder / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def merge(shards, out):
    return run_attnbench("merge", *shards, "--out", out)


def test_untouched_shards_merge(tmp_path, shards):
    result = merge(shards, tmp_path / "merged")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("field, value", [("seq_q", 999), ("seq_kv", 7), ("variant", "flash_cpu"),
                                          ("d_k", 16), ("causal", None), ("dtype", "bf16")])
def test_a_record_whose_fields_spell_another_case_is_refused(tmp_path, shards, field, value):
    records = records_of(shards[0])
    if field == "causal":
        value = not records[0]["causal"]
    records[0][field] = value
    rewrite(shards[0], records)
    result = merge(shards, tmp_path / "merged")
    assert_usage_error(result, str(shards[0]), f"the record of case {records[0]['case_id']}")
    assert not (tmp_path / "merged").exists()


def test_a_record_outside_the_shard_s_plan_is_refused(tmp_path, shards):
    stranger = records_of(shards[1])[0]
    rewrite(shards[0], records_of(shards[0]) + [stranger])
    result = merge(shards, tmp_path / "merged")
    assert_usage_error(result, str(shards[0]), stranger["case_id"], "is not in the shard's plan")
    assert not (tmp_path / "merged").exists()


def test_a_killed_merge_leaves_no_folder_under_its_name_but_a_whole_one(tmp_path, shards):
    # A merge killed part-way had left --out with a manifest and some of the records: a folder
    # that read as a finished run with cases missing. Merges now write under a staging name and
    # rename the folder whole, so --out is absent or complete, at whatever moment the kill lands.
    complete = len(records_of(shards[0])) + len(records_of(shards[1]))
    seen_absent = seen_whole = 0
    for attempt, delay in enumerate([0.0, 0.001, 0.002, 0.004, 0.006, 0.008, 0.012, 0.02, 0.05, 0.5]):
        out = tmp_path / f"merged{attempt}"
        process = subprocess.Popen([str(attnbench_binary()), "merge", *map(str, shards), "--out", str(out)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        process.kill()
        process.wait()
        if not out.exists():
            seen_absent += 1
            continue
        seen_whole += 1
        assert len(records_of(out)) == complete, f"killed after {delay} s"
        assert json.loads(run_attnbench("export", out, check=True).stdout)["records"]
    assert seen_whole >= 1  # the last, half a second on, has finished
    # What a kill leaves beside it is named for the merge, and a merge again to the same name works.
    for leftover in tmp_path.glob(".merged*.merging-*"):
        assert leftover.is_dir()
    if seen_absent:
        absent = next(tmp_path / f"merged{i}" for i in range(10) if not (tmp_path / f"merged{i}").exists())
        assert merge(shards, absent).returncode == 0
        assert len(records_of(absent)) == complete


def test_a_merge_into_an_existing_empty_folder_or_a_link_to_one_writes_into_it(tmp_path, shards):
    # An --out that exists (a folder made for the user, a mount point, a link to a bigger disk)
    # keeps being that folder: the merge is staged inside it, not beside it, and never replaces it.
    complete = len(records_of(shards[0])) + len(records_of(shards[1]))
    empty = tmp_path / "made-for-me"
    empty.mkdir()
    (empty / "cases.jsonl").write_text("")  # what a run killed as it started leaves
    (empty / "peaks.jsonl").write_text("")
    inode = empty.stat().st_ino
    assert merge(shards, empty).returncode == 0
    assert empty.stat().st_ino == inode and len(records_of(empty)) == complete
    disk = tmp_path / "other-disk"
    disk.mkdir()
    link = tmp_path / "link"
    link.symlink_to(disk)
    result = merge(shards, link)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and len(records_of(disk)) == complete
    assert not [p.name for p in (*disk.iterdir(), *empty.iterdir(), *tmp_path.iterdir())
                if ".merging-" in p.name]


def test_a_shard_still_being_run_is_named_as_such(tmp_path):
    """A merge while a shard's run was still writing it told the user to finish it with --resume,
    which that run's lock would refuse: it now says the shard is still being run."""
    config = tmp_path / "slow.toml"
    config.write_text('name = "slow"\nvariants = ["naive"]\n[axes]\nseq_len = [64, 96, 128, 160]\n'
                      '[measure]\nwarmup = 0\nrepetitions = 3\nmin_time_s = 0.3\npeaks = "skip"\n')
    first, second = tmp_path / "s0", tmp_path / "s1"
    run_attnbench("run", config, "--shard", "1/2", "--out", second, check=True)
    running = subprocess.Popen([str(attnbench_binary()), "run", str(config), "--shard", "0/2",
                                "--out", str(first)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                (first / "cases.jsonl").exists() and (first / "cases.jsonl").read_text()):
            time.sleep(0.05)
        result = run_attnbench("merge", first, second, "--out", tmp_path / "merged")
        assert_usage_error(result, f"{first} (shard 0/2) is still being run (1 of its 2 cases to go")
    finally:
        running.wait(timeout=60)
    assert not (tmp_path / "merged").exists()
    run_attnbench("merge", first, second, "--out", tmp_path / "merged", check=True)


def test_a_new_out_with_a_name_near_the_longest_merges(tmp_path, shards):
    """Its hidden staging folder .NAME.merging-PID passed a file name's 255 bytes at a valid
    250-byte name."""
    out = tmp_path / ("m" * 250)
    assert merge(shards, out).returncode == 0
    assert len(records_of(out)) == sum(len(records_of(s)) for s in shards)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
