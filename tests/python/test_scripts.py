"""Tests for the attnbench package's commands: each builds a small results folder in tmp_path
with synthetic timings (results_factory), runs a command in-process (commands.py), and
checks the files it writes and what they say. The SVGs keep their text as text
(svg.fonttype none), so a test can read a figure's legend and caption."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from attnbench import compare_runs, plotting as ap, results as ar
from attnbench.table import render as render_table
from commands import (plot_all, plot_heads_dk, plot_heatmap, plot_memory, plot_scaling, plot_speedup,
                      plot_throughput, results_table)
from commands import compare_runs as compare_command
from conftest import SCRIPTS_DIR
from results_factory import make_case, make_manifest, power_law_cases, write_run

SEQS = (128, 256, 512, 1024, 2048, 4096)


def svg_text(path) -> str:
    return path.read_text(encoding="utf-8")


def written_files(out_dir) -> set[str]:
    return {p.name for p in out_dir.iterdir()}


@pytest.fixture
def sweep_run(tmp_path):
    """naive: O(n^2) time and workspace; flash: O(n^2) time, O(n) workspace; a causal
    naive series; two head counts; one skipped and one failed case."""
    cases = []
    for heads in (4, 8):
        cases += power_law_cases("naive", 2.0, 1e-7 * heads, SEQS, workspace_exponent=2.0, heads=heads)
        cases += power_law_cases("flash", 2.0, 3e-8 * heads, SEQS, workspace_exponent=1.0, heads=heads)
    cases += power_law_cases("naive", 2.0, 5e-8, SEQS, causal=True, heads=8)
    cases.append(make_case("naive", seq=8192, heads=8, status="skipped",
                           reason="workspace 2.0 GiB exceeds the 1 GiB limit"))
    cases.append(make_case("flash", seq=8192, heads=8, status="failed",
                           reason="oracle rel L2 3e-2 above 1e-5"))
    return write_run(tmp_path / "sweep", cases)


# ---------------------------------------------------------------------------
# Fitting


@pytest.mark.parametrize("exponent", [2.0, 1.0])
def test_fitted_exponent_of_a_power_law_is_its_exponent(exponent):
    seqs = np.array(SEQS, dtype=float)
    # +-2% deterministic wobble, as timings have: the fit must still land within 0.05.
    wobble = 1 + 0.02 * np.array([1, -1, 1, -1, 1, -1])
    fit = ap.fit_power_law(seqs, 3e-6 * seqs ** exponent * wobble)
    assert fit is not None
    assert abs(fit.exponent - exponent) < 0.05
    assert (fit.x_low, fit.x_high) == (512, 4096)


def test_fit_range_is_the_large_cases_or_the_upper_half():
    assert ap.fit_range(SEQS) == [512, 1024, 2048, 4096]
    assert ap.fit_range([32, 64, 128, 256, 512, 1024]) == [256, 512, 1024]
    assert ap.fit_range([16, 32, 64, 128]) == [32, 64, 128]


def test_fit_ignores_the_small_cases_where_overheads_dominate():
    seqs = np.array([16, 32, 64, 128, 256, 512, 1024, 2048, 4096], dtype=float)
    times = 1e-4 + 1e-8 * seqs ** 2  # a fixed launch cost swamps the small sizes
    assert abs(ap.fit_power_law(seqs, times).exponent - 2.0) < 0.05
    assert abs(np.polyfit(np.log(seqs), np.log(times), 1)[0] - 2.0) > 0.5  # as a fit over all would


def test_constant_and_zero_series_fit_as_n0():
    assert ap.fit_power_law(SEQS, [0] * len(SEQS)).label() == "n^0"
    assert ap.fit_power_law(SEQS, [4096] * len(SEQS)).label() == "n^0"


def test_too_few_points_give_no_fit():
    assert ap.fit_power_law([512, 1024], [1.0, 4.0]) is None


# ---------------------------------------------------------------------------
# Each script writes its figures as PNG and SVG


@pytest.mark.parametrize("module, extra_args, stems", [
    (plot_scaling, [], ["scaling"]),
    (plot_throughput, [], ["throughput_cpu"]),
    (plot_memory, [], ["memory"]),
    (plot_speedup, ["--baseline", "naive"], ["speedup_vs_naive"]),
])
def test_sweep_scripts_write_png_and_svg(sweep_run, tmp_path, module, extra_args, stems):
    out_dir = tmp_path / "out"
    assert module.main([str(sweep_run), "--out", str(out_dir), *extra_args]) == 0
    for stem in stems:
        assert (out_dir / f"{stem}.png").stat().st_size > 0
        assert (out_dir / f"{stem}.svg").stat().st_size > 0


def test_default_output_folder_is_run_plots(sweep_run):
    assert plot_scaling.main([str(sweep_run)]) == 0
    assert {"scaling.png", "scaling.svg"} <= written_files(sweep_run / "plots")


def test_scaling_legend_shows_fitted_exponents_and_title_names_machine(tmp_path):
    cases = (power_law_cases("naive", 2.0, 1e-6, SEQS, workspace_exponent=2.0)
             + power_law_cases("linear", 1.0, 1e-3, SEQS, workspace_exponent=1.0))
    run = write_run(tmp_path / "fit", cases)
    out_dir = tmp_path / "out"
    assert plot_scaling.main([str(run), "--out", str(out_dir)]) == 0
    text = svg_text(out_dir / "scaling.svg")
    assert "naive  n^2.00" in text
    assert "linear  n^1.00" in text
    assert "fit 512-4096" in text
    assert "AMD EPYC (2 cores)" in text

    assert plot_memory.main([str(run), "--out", str(out_dir)]) == 0
    text = svg_text(out_dir / "memory.svg")
    assert "naive  n^2.00" in text and "linear  n^1.00" in text


def test_memory_plot_says_n0_for_a_variant_without_workspace(tmp_path):
    cases = (power_law_cases("naive", 2.0, 1e-6, SEQS, workspace_exponent=2.0)
             + power_law_cases("streaming", 2.0, 1e-6, SEQS))  # workspace 0 everywhere
    run = write_run(tmp_path / "zero", cases)
    assert plot_memory.main([str(run), "--out", str(tmp_path)]) == 0
    assert "streaming  n^0" in svg_text(tmp_path / "memory.svg")


def test_skipped_and_failed_cases_are_shown_not_dropped(sweep_run, tmp_path, capsys):
    out_dir = tmp_path / "out"
    for module in (plot_scaling, plot_throughput, plot_memory):
        assert module.main([str(sweep_run), "--out", str(out_dir)]) == 0
    for stem in ("scaling", "throughput_cpu", "memory"):
        text = svg_text(out_dir / f"{stem}.svg")
        assert "1 skipped, 1 failed" in text
        assert "workspace 2.0 GiB exceeds the 1 GiB limit" in text
        assert "failed (1)" in text  # the legend's key for the failed marker

    capsys.readouterr()
    assert results_table.main([str(sweep_run), "--out", str(out_dir)]) == 0
    table = capsys.readouterr().out
    assert "1 skipped, 1 failed" in table
    assert "skipped: workspace 2.0 GiB exceeds the 1 GiB limit" in table
    assert "failed: oracle rel L2 3e-2 above 1e-5" in table
    assert (out_dir / "results.md").read_text() == table


def test_disturbed_records_are_ringed_in_every_plot_and_named_in_the_table(tmp_path, capsys):
    cases = power_law_cases("naive", 2.0, 1e-4, SEQS)  # 20 GFLOP/s: well below the peak
    flagged = cases[2]
    flagged.update(disturbed=True, disturbed_reason="cpu_fma_gflops checks disagree: 114 (start) "
                                                    "to 235 (end) GFLOP/s, 106% apart")
    # Written before the flag existed: above 100% of the peak, and no "disturbed" key at all.
    old = cases[4]
    del old["disturbed"], old["disturbed_reason"]
    old["percent_of_peak"] = 176.0
    run = write_run(tmp_path / "noisy", cases)
    out_dir = tmp_path / "out"
    for module in (plot_scaling, plot_throughput):
        assert module.main([str(run), "--out", str(out_dir)]) == 0
    for stem in ("scaling", "throughput_cpu"):
        text = svg_text(out_dir / f"{stem}.svg")
        assert "disturbed (2)" in text  # the legend's key for the red ring
        # The caption counts them and points at the reasons, said once under results.md's table.
        assert "2 of 6 disturbed (ringed in red)" in text and "reasons [1]-[2]" in text
        assert "106% apart" not in text and "176% of the measured peak" not in text

    capsys.readouterr()
    assert results_table.main([str(run), "--out", str(out_dir)]) == 0
    table = capsys.readouterr().out
    assert table.count("106% apart") == 1 and table.count("176% of the measured peak") == 1
    assert "\n[1] cpu_fma_gflops checks disagree" in table  # a footnote under the table
    loaded = {case["case_id"]: case for case in ar.load_run(run).cases}
    assert ar.is_disturbed(loaded[old["case_id"]]) and ar.is_disturbed(loaded[flagged["case_id"]])
    assert not ar.is_disturbed(loaded[cases[0]["case_id"]])


def test_a_run_merged_from_two_machines_groups_by_machine(tmp_path):
    cases = []
    for machine, coefficient in (("CPU A (2 cores)", 1e-6), ("CPU B (64 cores)", 1e-7)):
        for case in power_law_cases("naive", 2.0, coefficient, SEQS):
            case["machine"] = machine
            case["case_id"] += "@" + machine  # two machines, one sweep each: distinct ids
            cases.append(case)
    run = write_run(tmp_path / "mixed", cases)
    out_dir = tmp_path / "out"
    assert plot_scaling.main([str(run), "--out", str(out_dir)]) == 0
    text = svg_text(out_dir / "scaling.svg")
    assert "naive on CPU A (2 cores)" in text and "naive on CPU B (64 cores)" in text
    assert "mixed: CPU A (2 cores); CPU B (64 cores)" in text
    table = render_table(ar.load_run(run))
    assert "| variant | machine |" in table and "| naive | CPU B (64 cores) |" in table


def test_causal_cases_get_their_own_series(sweep_run, tmp_path):
    assert plot_scaling.main([str(sweep_run), "--out", str(tmp_path)]) == 0
    assert "naive causal  n^2.00" in svg_text(tmp_path / "scaling.svg")


def test_dtypes_and_layouts_get_their_own_series_and_rows(tmp_path):
    cases = power_law_cases("flash", 2.0, 1e-6, SEQS)
    cases += power_law_cases("flash", 2.0, 3e-7, SEQS, dtype="bf16", layout="bshd")
    run = write_run(tmp_path / "typed", cases)
    assert plot_scaling.main([str(run), "--out", str(tmp_path)]) == 0
    text = svg_text(tmp_path / "scaling.svg")
    assert "flash fp32  n^2.00" in text and "flash bf16  n^2.00" in text
    table = render_table(ar.load_run(run))
    assert "| flash | cpu | fp32 | batch 1, heads 8, seq 1024x1024, d 64 |" in table
    assert "| flash | cpu | fp32 | batch 1, heads 8, seq 1024x1024, d 64, bf16, bshd |" in table


def test_records_from_before_typed_tensors_load_as_fp32_bhsd(tmp_path):
    cases = power_law_cases("naive", 2.0, 1e-6, SEQS)
    for case in cases:  # nor any field the scripts do not read
        for key in ("dtype", "layout", "element_bytes", "bytes", "gbps", "threads"):
            del case[key]
    run = ar.load_run(write_run(tmp_path / "old", cases))
    assert {(c["dtype"], c["layout"]) for c in run.cases} == {("fp32", "bhsd")}


def test_throughput_shows_measured_peak_and_percent_axis(sweep_run, tmp_path):
    assert plot_throughput.main([str(sweep_run), "--out", str(tmp_path)]) == 0
    text = svg_text(tmp_path / "throughput_cpu.svg")
    assert "measured FMA peak: 232 GFLOP/s" in text
    assert "% of measured FMA peak" in text


def test_cuda_cases_plot_in_tflops_and_title_names_the_gpu(tmp_path):
    cases = power_law_cases("naive", 2.0, 1e-6, SEQS)
    cases += power_law_cases("cuda_tiled", 2.0, 1e-8, SEQS, device="cuda")
    run = write_run(tmp_path / "gpu", cases, make_manifest("gpu", with_gpu=True))
    assert plot_throughput.main([str(run), "--out", str(tmp_path)]) == 0
    text = svg_text(tmp_path / "throughput_cuda.svg")
    assert "TFLOP/s" in text and "NVIDIA H200" in text
    assert "NVIDIA H200" not in svg_text(tmp_path / "throughput_cpu.svg")
    assert plot_speedup.main([str(run), "--out", str(tmp_path)]) == 0
    assert "cuda_tiled" in svg_text(tmp_path / "speedup_vs_naive.svg")


def test_heads_and_dk_plot(tmp_path):
    cases = [make_case(variant, seq=seq, heads=heads, d_k=d_k, time_ms=scale * heads * d_k * seq ** 2)
             for variant, scale in (("naive", 1e-9), ("flash", 3e-10))
             for heads in (1, 2, 4, 8) for d_k in (32, 64, 128) for seq in (512, 1024)]
    run = write_run(tmp_path / "hd", cases)
    assert plot_heads_dk.main([str(run), "--out", str(tmp_path)]) == 0
    text = svg_text(tmp_path / "heads_dk.svg")
    assert "at seq_kv=1024, d_k=128" in text and "at seq_kv=1024, heads=8" in text
    assert plot_heads_dk.main([str(run), "--out", str(tmp_path), "--seq", "512", "--d-k", "32"]) == 0
    assert "at seq_kv=512, d_k=32" in svg_text(tmp_path / "heads_dk.svg")


def test_heads_and_dk_plot_without_that_sweep_is_an_error(sweep_run, tmp_path, capsys):
    # sweep_run varies heads but not d_k: only the heads panel applies.
    assert plot_heads_dk.main([str(sweep_run), "--out", str(tmp_path)]) == 0
    single = write_run(tmp_path / "single", power_law_cases("naive", 2.0, 1e-6, SEQS))
    assert plot_heads_dk.main([str(single)]) == 2
    assert "neither heads nor d_k" in capsys.readouterr().err


def test_speedup_over_baseline(tmp_path):
    cases = power_law_cases("naive", 2.0, 4e-6, SEQS) + power_law_cases("flash", 2.0, 1e-6, SEQS)
    run = write_run(tmp_path / "speed", cases)
    assert plot_speedup.main([str(run), "--out", str(tmp_path)]) == 0
    assert "speed-up over naive" in svg_text(tmp_path / "speedup_vs_naive.svg")
    assert plot_speedup.main([str(run), "--out", str(tmp_path), "--baseline", "flash"]) == 0
    assert (tmp_path / "speedup_vs_flash.png").exists()


def test_speedup_with_unknown_baseline_is_an_error(sweep_run, capsys):
    assert plot_speedup.main([str(sweep_run), "--baseline", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "'nosuch' is not in this run" in err and err.count("\n") == 1


def test_plot_all_draws_every_plot_that_applies(sweep_run, capsys):
    assert plot_all.main([str(sweep_run)]) == 0
    assert written_files(sweep_run / "plots") == {
        f"{stem}.{ext}" for stem in ("scaling", "throughput_cpu", "memory", "heads_dk", "speedup_vs_naive")
        for ext in ("png", "svg")} | {"results.md", "scaling.md", "memory.md"}


def test_a_run_without_a_gpu_plots_its_skipped_cuda_cases(tmp_path, capsys):
    cases = power_law_cases("naive", 2.0, 1e-6, SEQS)
    cases += [make_case("cuda_tiled", seq=seq, device="cuda", status="skipped", reason="no CUDA device")
              for seq in SEQS]
    run = write_run(tmp_path / "nogpu", cases)
    assert plot_all.main([str(run)]) == 0
    assert "6 skipped" in svg_text(run / "plots" / "throughput_cuda.svg")
    assert "cuda_tiled at seq_kv 128, 256, 512, 1024, 2048, 4096: no CUDA device" in svg_text(
        run / "plots" / "scaling.svg")


def test_a_run_with_nothing_ok_still_plots(tmp_path):
    cases = [make_case("naive", seq=seq, status="failed", reason="oracle mismatch") for seq in SEQS]
    run = write_run(tmp_path / "allfailed", cases)
    for module in (plot_scaling, plot_throughput, plot_memory):
        assert module.main([str(run)]) == 0
    assert "6 failed" in svg_text(run / "plots" / "scaling.svg")


def test_plot_all_notes_the_plots_that_do_not_apply(tmp_path, capsys):
    run = write_run(tmp_path / "one", power_law_cases("naive", 2.0, 1e-6, SEQS))
    assert plot_all.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "no heads/d_k plot" in out and "no speed-up plot" in out
    assert {"scaling.svg", "memory.svg", "throughput_cpu.svg"} <= written_files(run / "plots")


# ---------------------------------------------------------------------------
# Malformed inputs: one line on stderr, exit code 2


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines))


def break_missing_manifest(run):
    (run / "manifest.json").unlink()
    return "no manifest.json"


def break_manifest_json(run):
    (run / "manifest.json").write_text('{"name": "x",\n  oops}')
    return "manifest.json:2: not valid JSON"


def break_manifest_keys(run):
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["peaks"], manifest["machine"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    return "manifest.json: not a manifest readers can show: missing 'machine'"


def break_case_json(run):
    lines = (run / "cases.jsonl").read_text().splitlines()
    lines[2] = lines[2][:40]  # a record cut short
    write_lines(run / "cases.jsonl", lines)
    return "cases.jsonl:3: malformed record (not JSON: "


def break_case_keys(run):
    lines = (run / "cases.jsonl").read_text().splitlines()
    record = json.loads(lines[1])
    del record["time_ms_median"], record["gflops"]
    lines[1] = json.dumps(record)
    write_lines(run / "cases.jsonl", lines)
    return "cases.jsonl:2: malformed record: missing 'time_ms_median'"


def break_case_status(run):
    lines = (run / "cases.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["status"] = "done"
    lines[0] = json.dumps(record)
    write_lines(run / "cases.jsonl", lines)
    return "cases.jsonl:1: malformed record: 'status' is 'done', not ok, skipped or failed"


def break_empty_cases(run):
    (run / "cases.jsonl").write_text("\n")
    return "cases.jsonl: no cases recorded"


def break_missing_folder(run):
    for path in run.iterdir():
        path.unlink()
    run.rmdir()
    return "not a results folder"


@pytest.mark.parametrize("break_run", [
    break_missing_folder, break_missing_manifest, break_manifest_json, break_manifest_keys,
    break_case_json, break_case_keys, break_case_status, break_empty_cases,
])
@pytest.mark.parametrize("module", [plot_scaling, plot_throughput, plot_memory, plot_heads_dk,
                                    plot_speedup, results_table, plot_all])
def test_malformed_results_give_one_line_and_exit_2(tmp_path, capsys, module, break_run):
    run = write_run(tmp_path / "bad", power_law_cases("naive", 2.0, 1e-6, SEQS))
    expected = break_run(run)
    assert module.main([str(run)]) == 2
    captured = capsys.readouterr()
    assert expected in captured.err
    assert captured.err.count("\n") == 1 and captured.err.startswith(module.prog + ": error:")


def test_malformed_run_from_the_command_line(tmp_path):
    run = write_run(tmp_path / "bad", power_law_cases("naive", 2.0, 1e-6, SEQS))
    break_case_keys(run)
    result = subprocess.run([sys.executable, "-m", "attnbench", "plot", str(run), "--only", "scaling"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"attnbench-plot: error: {run / 'cases.jsonl'}:2: malformed record: missing 'time_ms_median'"]


def test_a_bad_only_is_one_line_and_exit_2(sweep_run, capsys):
    assert plot_all.main([sweep_run, "--only", "scaling,nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnbench-plot: error: --only 'scaling,nosuch'") and err.count("\n") == 1


def console_commands() -> dict[str, str]:
    """The console commands pyproject.toml declares, and the function each one runs."""
    import tomllib  # Python 3.11; the package itself needs no TOML reader

    with open(SCRIPTS_DIR.parent / "python" / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["project"]["scripts"]


def test_every_command_is_a_console_command_of_the_installed_package():
    from importlib.metadata import entry_points

    declared = console_commands()
    assert set(declared) == {f"attnbench-{name}" for name in __import__("attnbench.cli").cli.COMMANDS}
    installed = {e.name: e.value for e in entry_points(group="console_scripts") if e.name in declared}
    assert installed == declared, "the installed package is older than python/pyproject.toml: " \
                                  "run pip install -e python (scripts/setup.sh does)"


def test_the_package_lists_its_commands():
    result = subprocess.run([sys.executable, "-m", "attnbench", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert all(f"    {name}" in result.stdout for name in __import__("attnbench.cli").cli.COMMANDS)


@pytest.mark.parametrize("command", sorted(__import__("attnbench.cli").cli.COMMANDS))
def test_every_command_has_help(command):
    result = subprocess.run([sys.executable, "-m", "attnbench", command, "--help"],
                            capture_output=True, text=True)
    assert result.returncode == 0 and f"usage: attnbench-{command}" in result.stdout


@pytest.mark.parametrize("shim", ["plot_all.py", "gpu_summary.py"])
def test_the_scripts_left_for_uninstalled_machines_run_this_checkouts_package(shim, sweep_run):
    # scripts/gpu_run.sh calls these on a GPU host where setup.sh has not installed the package.
    result = subprocess.run([sys.executable, str(SCRIPTS_DIR / shim), "--help"],
                            capture_output=True, text=True)
    assert result.returncode == 0 and "usage: attnbench-" in result.stdout, result.stderr


# ---------------------------------------------------------------------------
# Comparing runs


@pytest.fixture
def two_runs(tmp_path):
    baseline = power_law_cases("naive", 2.0, 1e-6, SEQS) + power_law_cases("flash", 2.0, 3e-7, SEQS)
    baseline.append(make_case("naive", seq=8192, status="skipped", reason="too large"))
    baseline.append(make_case("tiled", seq=1024, time_ms=2.0))
    candidate = power_law_cases("naive", 2.0, 1e-6, SEQS)      # identical
    candidate += power_law_cases("flash", 2.0, 6e-7, SEQS)     # 2x slower
    candidate.append(make_case("naive", seq=8192, time_ms=70.0))
    candidate.append(make_case("tiled", seq=1024, time_ms=1.0))  # 2x faster
    candidate.append(make_case("newvariant", seq=1024, time_ms=1.0))
    return (write_run(tmp_path / "before", baseline), write_run(tmp_path / "after", candidate))


def test_compare_marks_slower_faster_and_same(two_runs):
    comparisons, _ = compare_runs.compare(*map(ar.load_run, two_runs))
    verdicts = {(c.candidate or c.baseline)["variant"] + str((c.candidate or c.baseline)["seq_kv"]): c.verdict
                for c in comparisons}
    assert all(verdicts[f"naive{seq}"] == "same" for seq in SEQS)
    assert all(verdicts[f"flash{seq}"] == "slower" for seq in SEQS)
    assert verdicts["tiled1024"] == "faster"
    assert verdicts["naive8192"].startswith("not comparable: baseline skipped: too large")
    assert verdicts["newvariant1024"] == "only in candidate"


def test_compare_never_matches_a_bf16_case_with_an_fp32_one(tmp_path):
    old = power_law_cases("naive", 2.0, 1e-6, SEQS)
    for case in old:  # written before attnbench had dtypes and layouts: fp32, bhsd
        del case["dtype"], case["layout"]
    new = power_law_cases("naive", 2.0, 1e-6, SEQS) + power_law_cases("naive", 2.0, 1e-7, SEQS, dtype="bf16")
    new += power_law_cases("naive", 2.0, 1e-7, SEQS, layout="bshd")
    comparisons, _ = compare_runs.compare(ar.load_run(write_run(tmp_path / "old", old)),
                                          ar.load_run(write_run(tmp_path / "new", new)))
    verdicts = ar.group_by(comparisons, lambda c: (c.candidate["dtype"], c.candidate["layout"]))
    assert [c.verdict for c in verdicts[("fp32", "bhsd")]] == ["same"] * len(SEQS)
    assert [c.verdict for c in verdicts[("bf16", "bhsd")]] == ["only in candidate"] * len(SEQS)
    assert [c.verdict for c in verdicts[("fp32", "bshd")]] == ["only in candidate"] * len(SEQS)


def test_same_uses_the_measured_spread():
    base = make_case(time_ms=1.00, spread=0.05)
    assert compare_runs.within_noise(base, make_case(time_ms=1.06, spread=0.05))      # ranges overlap
    assert not compare_runs.within_noise(base, make_case(time_ms=1.20, spread=0.05))  # they do not
    no_range = dict(base, time_ms_min=None, time_ms_max=None, cv=0.02)
    assert compare_runs.within_noise(no_range, dict(no_range, time_ms_median=1.03))
    assert not compare_runs.within_noise(no_range, dict(no_range, time_ms_median=1.2))


def test_compare_runs_writes_table_and_plot(two_runs, tmp_path, capsys):
    before, after = two_runs
    out_dir = tmp_path / "cmp"
    assert compare_command.main([str(before), str(after), "--out", str(out_dir)]) == 0
    table = capsys.readouterr().out
    assert "| flash | cpu | fp32 | batch 1, heads 8, seq 1024x1024, d 64 |" in table
    assert "| 2.000 | slower |" in table and "| 1.000 | same |" in table and "| 0.500 | faster |" in table
    assert "13 compared: 1 faster, 6 slower, 6 same" in table
    assert written_files(out_dir) == {f"compare_after_vs_before.{ext}" for ext in ("md", "png", "svg")}
    assert "1 skipped" in svg_text(out_dir / "compare_after_vs_before.svg")


def test_compare_runs_pairs_a_peer_variant_with_ours_and_keeps_masks_apart(tmp_path, capsys):
    def masked(case, mask):
        return dict(case, mask=mask)
    peer = [masked(make_case("torch_flash", seq=1024, time_ms=10.0), "window:64"),
            masked(make_case("torch_flash", seq=1024, time_ms=10.0), "documents:4"),
            make_case("torch_flash", seq=2048, time_ms=40.0)]
    ours = [masked(make_case("flash_cpu", seq=1024, time_ms=1.0), "window:64"),
            masked(make_case("flash_cpu", seq=1024, time_ms=5.0), "documents:4"),
            make_case("flash_cpu", seq=2048, time_ms=40.0),
            make_case("naive", seq=2048, time_ms=400.0)]  # not in the pair: left out
    before = write_run(tmp_path / "peer", peer)
    after = write_run(tmp_path / "ours", ours)
    out_dir = tmp_path / "cmp"
    assert compare_command.main([str(before), str(after), "--out", str(out_dir),
                              "--pair", "torch_flash:flash_cpu"]) == 0
    table = capsys.readouterr().out
    assert "3 compared: 2 faster, 0 slower, 1 same" in table
    assert "| flash_cpu vs torch_flash | cpu | fp32 | batch 1, heads 8, seq 1024x1024, d 64, window:64 |" in table
    assert "| 0.100 | faster |" in table and "| 0.500 | faster |" in table
    assert "naive" not in table
    # The sides are named by the variants compared, each with its run, not by the runs alone.
    assert "| torch_flash (peer) median ms (interval) | flash_cpu (ours) median ms (interval) |" in table
    svg = svg_text(out_dir / "compare_ours_vs_peer.svg")
    assert "time ratio flash_cpu (ours) / torch_flash (peer)" in svg
    # Without --pair the variants differ, so nothing matches.
    assert compare_command.main([str(before), str(after), "--out", str(out_dir)]) == 0
    assert "0 compared" in capsys.readouterr().out
    # A pair naming a variant a run lacks is one line and exit 2.
    assert compare_command.main([str(before), str(after), "--pair", "torch_math:flash_cpu"]) == 2
    assert "no variant 'torch_math' to pair" in capsys.readouterr().err


def test_compare_runs_with_a_malformed_run(two_runs, capsys):
    before, after = two_runs
    break_case_json(after)
    assert compare_command.main([str(before), str(after)]) == 2
    assert "cases.jsonl:3: malformed record (not JSON: " in capsys.readouterr().err


# ---------------------------------------------------------------------------
# Heat map


@pytest.fixture
def weights_file(tmp_path):
    scores = np.random.default_rng(7).normal(size=(2, 3, 6, 6))
    weights = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)
    path = tmp_path / "weights.npy"
    np.save(path, weights.astype(np.float32))
    return path


def test_heatmap_without_tokens(weights_file, tmp_path):
    assert plot_heatmap.main([str(weights_file), "--out", str(tmp_path / "hm")]) == 0
    assert written_files(tmp_path / "hm") == {"heatmap_weights_b0_h0.png", "heatmap_weights_b0_h0.svg"}


def test_heatmap_with_tokens_labels_rows_and_columns(weights_file, tmp_path):
    assert plot_heatmap.main([str(weights_file), "--batch", "1", "--head", "2",
                              "--tokens", "The cat sat on the mat"]) == 0
    text = svg_text(tmp_path / "heatmap_weights_b1_h2.svg")
    assert all(f">{token}<" in text for token in ("The", "cat", "sat", "mat"))
    assert "batch 1, head 2" in text


def test_heatmap_tokens_from_a_file_and_2d_weights(tmp_path):
    weights = np.full((3, 4), 0.25, dtype=np.float32)  # seq_q < seq_kv: queries are the last 3
    np.save(tmp_path / "w2.npy", weights)
    (tmp_path / "tokens.txt").write_text("New York\nis\nbig\ntoday\n")
    assert plot_heatmap.main([str(tmp_path / "w2.npy"), "--tokens-file", str(tmp_path / "tokens.txt")]) == 0
    assert ">New York<" in svg_text(tmp_path / "heatmap_w2_b0_h0.svg")


@pytest.mark.parametrize("args, message", [
    (["--tokens", "too few"], "2 tokens given but the weights have seq_kv = 6"),
    (["--head", "3"], "--head 3 out of range: the file has 3 head(s)"),
    (["--batch", "2"], "--batch 2 out of range"),
])
def test_heatmap_bad_arguments(weights_file, capsys, args, message):
    assert plot_heatmap.main([str(weights_file), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_heatmap_bad_files(tmp_path, capsys):
    (tmp_path / "junk.npy").write_text("not numpy")
    np.save(tmp_path / "ints.npy", np.zeros((4, 4), dtype=np.int32))
    np.save(tmp_path / "flat.npy", np.zeros(4, dtype=np.float32))
    for name, message in (("junk.npy", "not a .npy file"), ("ints.npy", "expected floating-point"),
                          ("flat.npy", "expected shape"), ("absent.npy", "no such file")):
        assert plot_heatmap.main([str(tmp_path / name)]) == 2
        assert message in capsys.readouterr().err
