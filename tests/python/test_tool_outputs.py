"""The files the Python commands write, against a hostile user: outputs that are links (to the
run's own cases.jsonl), FIFOs or directories, a --out naming the run's data, a full disk, a
stdout that is full or closed, Ctrl-C, rates a log axis cannot show, control characters in a
name, and a binary that fails without a word. The promise: one line on stderr naming the problem
and exit status 2 (130 for an interrupt), never a traceback or a hang; a finished file is never
lost or changed, and a partial output is never left under the final name."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from commands import Command
from results_factory import power_law_cases, write_run

PLOT, TABLE, REPORT, COMPARE = Command("plot"), Command("table"), Command("report"), Command("compare")
COMPARE_VARIANTS, HEATMAP = Command("compare-variants"), Command("heatmap")
PACKAGE = Path(__file__).resolve().parents[2] / "python"
# A command that hangs is a failure here, not a test run that never ends.
HANG_S = 60


def two_variant_run(tmp_path: Path, name: str = "run", edit=None) -> Path:
    cases = power_law_cases("naive", 2.0, 1e-6) + power_law_cases("flash_cpu", 2.0, 5e-7)
    if edit:
        edit(cases)
    return write_run(tmp_path / name, cases)


def one_line_error(status: int, err: str, prog: str, *fragments: str) -> str:
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def tool(*argv, env=None, **kwargs) -> subprocess.CompletedProcess:
    """`python3 -m attnbench ARGV...` as its own process: for what a process alone shows (its
    standard streams, signals, file size limits, a hang)."""
    env = {**os.environ, "PYTHONPATH": str(PACKAGE), **(env or {})}
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([sys.executable, "-m", "attnbench", *map(str, argv)], env=env,
                          text=True, timeout=HANG_S, **kwargs)


def file_size_limit(limit_bytes: int):
    """A preexec_fn under which writes past limit_bytes fail with EFBIG, as on a full disk."""
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return apply


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if ".tmp" in p.name]


# 1. An output that is a link is refused, and the file it names is never written.
LINKED_OUTPUTS = {
    "table": (TABLE, lambda run, other: [run], "plots/results.md"),
    "report": (REPORT, lambda run, other: [run], "report.html"),
    "plot": (PLOT, lambda run, other: [run, "--only", "throughput"], "plots/throughput_cpu.png"),
    "compare": (COMPARE, lambda run, other: [other, run], "plots/compare_run_vs_other.md"),
    "compare-variants": (COMPARE_VARIANTS, lambda run, other: [run, "--baseline", "naive"],
                         "plots/ratio_vs_naive.md"),
}


@pytest.mark.parametrize("command", LINKED_OUTPUTS)
def test_an_output_that_is_a_link_to_the_records_is_refused(tmp_path, capsys, command):
    run, other = two_variant_run(tmp_path), two_variant_run(tmp_path, "other")
    records = (run / "cases.jsonl").read_bytes()
    tool_command, argv, output = LINKED_OUTPUTS[command]
    link = run / output
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(os.path.relpath(run / "cases.jsonl", link.parent))
    status = tool_command.main(argv(run, other))
    one_line_error(status, capsys.readouterr().err, tool_command.prog, str(link), "symbolic link")
    assert (run / "cases.jsonl").read_bytes() == records
    assert link.is_symlink()


@pytest.mark.parametrize("out", ["cases.jsonl", "plots/../manifest.json", "summary.csv"])
def test_a_report_out_naming_the_runs_own_data_is_refused(tmp_path, capsys, out):
    run = two_variant_run(tmp_path)
    (run / "plots").mkdir()
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    status = REPORT.main([run, "--out", run / out])
    one_line_error(status, capsys.readouterr().err, REPORT.prog, "a results folder's own data")
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


# 2. A FIFO under an output's name is refused before anything opens it (opening it would wait
# for a reader forever).
@pytest.mark.parametrize("command, output", [
    (["report", "{run}"], "report.html"),
    (["report", "{run}", "--out", "{run}/elsewhere.html"], "elsewhere.html"),
    (["table", "{run}"], "plots/results.md"),
    (["plot", "{run}"], "plots/results.md"),  # written first: refused before any plot is drawn
    (["plot", "{run}", "--only", "throughput"], "plots/throughput_cpu.png"),
])
def test_an_output_that_is_a_fifo_is_refused_not_waited_on(tmp_path, command, output):
    run = two_variant_run(tmp_path)
    (run / "plots").mkdir()
    os.mkfifo(run / output)
    result = tool(*(part.format(run=run) for part in command))
    line = one_line_error(result.returncode, result.stderr, f"attnbench-{command[0]}",
                          output.split("/")[-1], "is a FIFO, not a regular file")
    assert "cannot be drawn" not in line


def test_an_output_that_is_a_directory_is_one_line(tmp_path, capsys):
    run = two_variant_run(tmp_path)
    (run / "plots" / "throughput_cpu.png").mkdir(parents=True)
    status = PLOT.main([run, "--only", "throughput"])
    one_line_error(status, capsys.readouterr().err, PLOT.prog, "throughput_cpu.png",
                   "is a directory, not a regular file")


# 3 and 4. A full disk (a file size limit) keeps the old output whole, says one line, and leaves
# no temporary behind.
@pytest.mark.parametrize("command, output", [
    (["report", "{run}"], "report.html"),
    (["table", "{run}"], "plots/results.md"),
    (["plot", "{run}", "--only", "throughput"], "plots/throughput_cpu.png"),
])
def test_an_output_on_a_full_disk_keeps_the_old_file(tmp_path, command, output):
    run = two_variant_run(tmp_path)
    (run / "plots").mkdir()
    (run / output).write_bytes(b"old")
    result = tool(*(part.format(run=run) for part in command), preexec_fn=file_size_limit(1000))
    one_line_error(result.returncode, result.stderr, f"attnbench-{command[0]}",
                   f"{output.split('/')[-1]}: cannot write (File too large)")
    assert (run / output).read_bytes() == b"old"
    assert leftovers(run) == [] and leftovers(run / "plots") == []


def test_an_output_replaced_is_whole_and_readable(tmp_path):
    run = two_variant_run(tmp_path)
    (run / "report.html").write_text("old")
    result = tool("report", run)
    assert result.returncode == 0, result.stderr
    text = (run / "report.html").read_text()
    assert text.startswith("<!DOCTYPE html>") and text.endswith("</html>\n")
    mask = os.umask(0)
    os.umask(mask)
    assert (run / "report.html").stat().st_mode & 0o777 == 0o666 & ~mask
    assert leftovers(run) == []


# 4. Standard streams and signals.
def test_a_full_stdout_is_one_line_not_a_traceback(tmp_path):
    run = two_variant_run(tmp_path)
    with open("/dev/full", "w") as full:
        result = tool("table", run, stdout=full)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "attnbench-table: error: cannot write to standard output (No space left on device)"]


def test_a_closed_pipe_on_stdout_is_not_a_traceback(tmp_path):
    run = two_variant_run(tmp_path)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone: every write is EPIPE
    try:
        result = tool("table", run, stdout=write_end)
    finally:
        os.close(write_end)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.splitlines()) <= 1, result.stderr
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr


def test_an_interrupt_is_exit_130_and_one_line(tmp_path):
    run = two_variant_run(tmp_path)
    started = tmp_path / "started"
    slow = tmp_path / "slow-attnbench"  # the binary the tool waits on when Ctrl-C comes
    slow.write_text(f"#!/bin/sh\ntouch '{started}'\nexec sleep {HANG_S}\n")
    slow.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(PACKAGE), "ATTNBENCH_BINARY": str(slow)}
    process = subprocess.Popen([sys.executable, "-m", "attnbench", "table", str(run)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + HANG_S
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=HANG_S)
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert err.splitlines() == ["attnbench-table: interrupted"], err


# 5. What a figure cannot show is left out and said, with nothing from matplotlib on stderr.
def test_rates_of_zero_or_less_are_left_out_of_a_log_axis_and_said(tmp_path):
    def edit(cases):
        # (A negative rate the binary refuses at load.) 1.0 puts the rates decades apart.
        cases[0]["gflops"], cases[1]["gflops"], cases[2]["gflops"] = 0.0, 0.0, 1.0
    run = two_variant_run(tmp_path, edit=edit)
    result = tool("plot", run, "--only", "throughput")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    svg = (run / "plots" / "throughput_cpu.svg").read_text()
    assert "2 records with a rate of zero or less left out" in svg


def test_a_control_character_in_a_name_is_drawn_escaped_without_warnings(tmp_path):
    def edit(cases):
        for case in cases[6:]:
            case["variant"] = "fla\x01sh"
            case["case_id"] = case["case_id"].replace("flash_cpu", "fla%01sh")
    run = two_variant_run(tmp_path, edit=edit)
    result = tool("plot", run, "--only", "throughput")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    svg = (run / "plots" / "throughput_cpu.svg").read_text()
    assert "fla\\x01sh" in svg and "\x01" not in svg


# 6. Messages that name what is wrong.
@pytest.mark.parametrize("kind", ["directory", "FIFO"])
def test_heatmap_of_a_file_that_is_not_regular_says_what_it_is(tmp_path, capsys, kind):
    weights = tmp_path / "w.npy"
    weights.mkdir() if kind == "directory" else os.mkfifo(weights)
    status = HEATMAP.main([weights])
    one_line_error(status, capsys.readouterr().err, HEATMAP.prog, str(weights),
                   f"is a {kind}, not a regular file")


def test_a_binary_that_fails_silently_is_named(tmp_path, capsys, monkeypatch):
    run = two_variant_run(tmp_path)
    monkeypatch.setenv("ATTNBENCH_BINARY", "/bin/false")
    status = TABLE.main([run])
    one_line_error(status, capsys.readouterr().err, TABLE.prog, "/bin/false", "exit status 1")


def test_a_binary_named_with_a_leading_space_is_named_as_given(tmp_path, capsys, monkeypatch):
    run = two_variant_run(tmp_path)
    binary = " " + str(Path(sys.executable))  # names no file; the path without the space does
    monkeypatch.setenv("ATTNBENCH_BINARY", binary)
    status = TABLE.main([run])
    one_line_error(status, capsys.readouterr().err, TABLE.prog, repr(binary) + ": cannot run")
