"""The readers' side of the backward pass (#23) and decode (#24): old records load with the
defaults, new ones with their fields, percent_of_bandwidth derived against the best bandwidth
check of the run (below the ridge point only), and the backward and roofline plots on synthetic
runs whose numbers are known (time ratios, memory exponents, points under the roofs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.markers import MarkerStyle

from attnbench import results as ar
from attnbench.plots import backward, roofline
from commands import Command
from results_factory import CPU_FMA_PEAK_GFLOPS, make_case, write_run

plot_backward = Command("plot", "backward")
plot_roofline = Command("plot", "roofline")
ROOT = Path(__file__).resolve().parents[2]
SEQS = (256, 512, 1024, 2048)
TRIAD_GBPS = 20.0


def write_bandwidth_checks(folder: Path, *gbps: float) -> None:
    with open(folder / "peaks.jsonl", "w") as lines:
        for when, value in zip(("start", "end", "later"), gbps):
            lines.write(json.dumps({"when": when, "cpu_triad_gbps": value}) + "\n")


def pass_case(variant: str, seq: int, pass_: str, time_ms: float, saved: int | None) -> dict:
    case = make_case(variant, seq=seq, time_ms=time_ms)
    case["pass"] = pass_
    case["saved_for_backward_bytes"] = saved
    case["case_id"] += f"|{pass_}"
    return case


def backward_run(tmp_path) -> Path:
    """naive keeps P (4 n^2 bytes per head) and its bwd takes 3x the fwd; flash_cpu keeps the
    log-sum-exp (4 n bytes) and its bwd takes 2x."""
    cases = []
    for variant, ratio, saved in (("naive", 3.0, lambda n: 4 * 8 * n * n),
                                  ("flash_cpu", 2.0, lambda n: 4 * 8 * n)):
        for seq in SEQS:
            fwd_ms = 2e-4 * seq * seq  # under the peak: no record reads disturbed
            cases.append(pass_case(variant, seq, "fwd", fwd_ms, saved(seq)))
            cases.append(pass_case(variant, seq, "bwd", ratio * fwd_ms, saved(seq)))
            cases.append(pass_case(variant, seq, "fwd_bwd", (1 + ratio) * fwd_ms, saved(seq)))
    return write_run(tmp_path / "bwd", cases)


def decode_case(variant: str, seq_kv: int, gflops: float, intensity: float, seq_q: int = 1,
                dtype: str = "fp32", kv_cache: str = "paged:16",
                peak: tuple[str, float] = ("cpu_fma_gflops", CPU_FMA_PEAK_GFLOPS)) -> dict:
    """A record at a known intensity and rate, rated against `peak` (name, GFLOP/s): with no
    check of that name in peaks.jsonl, readers keep the record's own peak_gflops."""
    case = make_case(variant, seq_q=seq_q, seq_kv=seq_kv, time_ms=1.0, dtype=dtype)
    case["gflops"] = gflops
    case["flops"] = gflops * 1e6  # at 1 ms
    case["bytes_moved"] = case["flops"] / intensity
    case["arithmetic_intensity"] = intensity
    case["kv_cache"] = kv_cache
    case["case_id"] += f"|{kv_cache}"  # contiguous and paged twins stay two records
    case["kv_lens"] = [seq_kv, seq_kv // 2]
    case["peak_name"], case["peak_gflops"] = peak
    case["percent_of_peak"] = 100 * gflops / peak[1]
    return case


def test_old_records_load_with_the_defaults(tmp_path):
    folder = write_run(tmp_path / "old", [make_case("naive", seq=s) for s in SEQS])
    for case in ar.load_run(folder).cases:
        assert case["pass"] == "fwd" and case["kv_cache"] == "contiguous"
        assert case["kv_lens"] is None and case["saved_for_backward_bytes"] is None
        assert case["percent_of_bandwidth"] is None and case["peak_gbps"] is None


def test_new_fields_load_and_type(tmp_path):
    folder = backward_run(tmp_path)
    table = ar.load(folder)
    assert set(table["pass"]) == {"fwd", "bwd", "fwd_bwd"}
    assert str(table["saved_for_backward_bytes"].dtype) == "Int64"
    assert str(table["pass"].dtype) == "string"


def test_an_unknown_pass_is_a_one_line_error(tmp_path):
    case = make_case("naive")
    case["pass"] = "sideways"
    folder = write_run(tmp_path / "bad", [case])
    with pytest.raises(ar.ResultsError, match="malformed record: 'pass' is 'sideways', not fwd, bwd or fwd_bwd"):
        ar.load_run(folder)


def test_percent_of_bandwidth_against_the_best_check_below_the_ridge(tmp_path):
    ridge = CPU_FMA_PEAK_GFLOPS / TRIAD_GBPS  # 11.6 FLOP/byte
    low = decode_case("flash_cpu", 4096, gflops=10.0, intensity=1.0)   # 10 GB/s moved
    high = decode_case("flash_cpu", 8192, gflops=150.0, intensity=50.0)
    folder = write_run(tmp_path / "dec", [low, high])
    write_bandwidth_checks(folder, 16.0, TRIAD_GBPS, 18.0)
    rated = {c["seq_kv"]: c for c in ar.load_run(folder).cases}
    assert rated[4096]["peak_gbps"] == TRIAD_GBPS
    assert rated[4096]["ridge_intensity"] == pytest.approx(ridge)
    assert rated[4096]["percent_of_bandwidth"] == pytest.approx(100 * 10.0 / TRIAD_GBPS)
    assert rated[8192]["percent_of_bandwidth"] is None  # above the ridge: compute bound
    assert rated[4096]["kv_lens"] == [4096, 2048] and rated[4096]["kv_cache"] == "paged:16"
    assert rated[4096]["bandwidth_name"] == "cpu_triad_gbps"


def test_percent_of_bandwidth_against_the_read_roof_where_it_is_higher(tmp_path):
    """Decode only reads: the read-only check is its roof where it beats the triad (each check
    may have both; the best of all, by name, as the harness rates it)."""
    case = decode_case("flash_cpu", 4096, gflops=10.0, intensity=1.0)  # 10 GB/s moved
    folder = write_run(tmp_path / "dec", [case])
    with open(folder / "peaks.jsonl", "w") as lines:
        lines.write(json.dumps({"when": "start", "cpu_triad_gbps": 20.0, "cpu_read_gbps": 25.0}) + "\n")
        lines.write(json.dumps({"when": "end", "cpu_triad_gbps": 22.0, "cpu_read_gbps": None}) + "\n")
    [rated] = ar.load_run(folder).cases
    assert rated["peak_gbps"] == 25.0 and rated["bandwidth_name"] == "cpu_read_gbps"
    assert rated["percent_of_bandwidth"] == pytest.approx(40.0)
    assert rated["ridge_intensity"] == pytest.approx(CPU_FMA_PEAK_GFLOPS / 25.0)


def test_bwd_fwd_ratios_pair_the_same_case(tmp_path):
    run = ar.load_run(backward_run(tmp_path))
    ratios = backward.bwd_fwd_ratios(run.cases)
    assert len(ratios) == 2 * len(SEQS)
    by_variant = ar.group_by(ratios, lambda c: c["variant"])
    assert [c["bwd_fwd_ratio"] for c in by_variant["naive"]] == pytest.approx([3.0] * len(SEQS))
    assert [c["bwd_fwd_ratio"] for c in by_variant["flash_cpu"]] == pytest.approx([2.0] * len(SEQS))


def test_backward_plots_show_each_pass_and_the_memory_exponents(tmp_path):
    out = tmp_path / "out"
    assert plot_backward.main([backward_run(tmp_path), "--out", out]) == 0
    for stem in ("pass_time", "bwd_fwd_ratio", "saved_for_backward"):
        assert (out / f"{stem}.png").stat().st_size > 0
    time_svg = (out / "pass_time.svg").read_text()
    assert "naive bwd" in time_svg and "flash_cpu fwd_bwd" in time_svg
    assert "naive bwd  n^2.00 ± 0.00" in time_svg and ">n²</text>" in time_svg  # the reference
    saved_svg = (out / "saved_for_backward.svg").read_text()
    assert "n^2.00 ± 0.00" in saved_svg and "n^1.00 ± 0.00" in saved_svg
    assert ">n²</text>" not in saved_svg  # a reference for time, not for memory
    fits = (out / "backward.md").read_text()
    assert "| naive bwd | n^2.00 ± 0.00 | 512-2048 | 3 |" in fits
    assert "| flash_cpu | n^1.00 ± 0.00 | 512-2048 | 3 |" in fits
    assert "disturbed" not in saved_svg  # the synthetic times stay under the peak


def test_backward_plot_of_a_forward_only_run_is_not_applicable(tmp_path, capsys):
    folder = write_run(tmp_path / "fwd", [make_case("naive", seq=s) for s in SEQS])
    assert plot_backward.main([folder, "--out", tmp_path / "out"]) == 2
    assert "no backward pass in this run" in capsys.readouterr().err


def test_roofline_puts_prefill_and_decode_under_both_roofs(tmp_path):
    prefill = decode_case("flash_cpu", 1024, gflops=120.0, intensity=40.0, seq_q=1024)
    decodes = [decode_case("flash_cpu", n, gflops=8.0 + n / 1024, intensity=1.0) for n in SEQS]
    folder = write_run(tmp_path / "roof", [prefill, *decodes])
    write_bandwidth_checks(folder, TRIAD_GBPS)
    run = ar.load_run(folder)
    for case in run.cases:  # the synthetic points sit under both roofs
        assert case["gflops"] <= min(CPU_FMA_PEAK_GFLOPS, TRIAD_GBPS * case["arithmetic_intensity"])
    assert {roofline.phase(c) for c in run.cases} == {"prefill", "decode"}
    fig = roofline.figures(run)["roofline"]
    ax = fig.axes[0]
    labels = ax.get_legend().get_texts()
    text = " ".join(t.get_text() for t in labels)
    assert f"bandwidth roof {TRIAD_GBPS:.4g} GB/s (STREAM triad)" in text
    assert "compute roof 232 GFLOP/s (cpu_fma_gflops)" in text
    assert "prefill (large)" in text and "decode (small)" in text
    points = sum(len(c.get_offsets()) for c in ax.collections)
    assert points == len(run.cases)
    # Each decode point (left of the ridge) carries its own % of the roof; prefill none.
    percents = sorted(t.get_text() for t in ax.texts)
    assert percents == sorted(f"{c['percent_of_bandwidth']:.0f}%" for c in run.cases
                              if c["percent_of_bandwidth"] is not None)
    assert len(percents) == len(decodes)


def test_roofline_draws_the_read_roof_where_it_is_higher(tmp_path):
    folder = write_run(tmp_path / "roof", [decode_case("flash_cpu", n, 8.0, 1.0) for n in SEQS])
    with open(folder / "peaks.jsonl", "w") as lines:
        lines.write(json.dumps({"when": "start", "cpu_triad_gbps": 20.0, "cpu_read_gbps": 32.0}) + "\n")
    ax = roofline.figures(ar.load_run(folder))["roofline"].axes[0]
    text = " ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "bandwidth roof 32 GB/s (read-only sum)" in text
    assert sorted(t.get_text() for t in ax.texts) == ["25%"] * len(SEQS)  # 8 GB/s of 32


def roof_lines(ax, kind: str) -> list:
    """The drawn roofs of one kind ("bandwidth" or "compute"), by their legend label."""
    return [line for line in ax.lines if line.get_label().startswith(f"{kind} roof")]


def ends(line) -> tuple[tuple[float, float], tuple[float, float]]:
    xs, ys = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
    return (xs[0], ys[0]), (xs[-1], ys[-1])


def collection_at(ax, case: dict):
    """The scatter that draws this record's point (one, and only one)."""
    here = (case["arithmetic_intensity"], case["gflops"])
    [found] = [c for c in ax.collections if any(np.allclose(o, here) for o in c.get_offsets())]
    return found


def marker_of(collection) -> str:
    """Which of the dtype markers the scatter draws, read back from its path."""
    path = collection.get_paths()[0]
    for name in ("o", "s", "^", "D"):
        style = MarkerStyle(name)
        expected = style.get_path().transformed(style.get_transform())
        if path.vertices.shape == expected.vertices.shape and np.allclose(path.vertices, expected.vertices):
            return name
    return "?"


def is_hollow(collection) -> bool:
    faces = collection.get_facecolor()
    return len(faces) == 0 or bool(np.all(faces[:, 3] == 0))


def test_roofline_roofs_meet_at_the_ridge_left_of_every_point(tmp_path):
    """Decode far left of the ridge (11.6 FLOP/byte): the picture still reaches the ridge, and
    the sloped roof ends exactly where the flat one starts."""
    ridge = CPU_FMA_PEAK_GFLOPS / TRIAD_GBPS
    cases = [decode_case("flash_cpu", n, gflops=0.1, intensity=0.02) for n in SEQS]
    folder = write_run(tmp_path / "roof", cases)
    write_bandwidth_checks(folder, TRIAD_GBPS)
    ax = roofline.figures(ar.load_run(folder))["roofline"].axes[0]
    [memory], [compute] = roof_lines(ax, "bandwidth"), roof_lines(ax, "compute")
    (memory_x0, _), memory_end = ends(memory)
    compute_start, (compute_x1, _) = ends(compute)
    assert memory_end == pytest.approx((ridge, CPU_FMA_PEAK_GFLOPS))
    assert compute_start == pytest.approx((ridge, CPU_FMA_PEAK_GFLOPS))
    left, right = ax.get_xlim()
    assert left < 0.02 and right > 1.5 * ridge  # the ridge inside, with room on its right
    assert (memory_x0, compute_x1) == pytest.approx((left, right))  # edge to edge


def test_roofline_draws_one_compute_roof_per_peak(tmp_path):
    """fp32 rated against the FMA loop, bf16 against its dot product: two flat roofs, named,
    each from its own ridge; the sloped roof runs on to the higher one."""
    fma, dot = ("cpu_fma_gflops", CPU_FMA_PEAK_GFLOPS), ("cpu_bf16_dot_gflops", 928.0)
    cases = [decode_case("flash_cpu", n, gflops=8.0, intensity=1.0) for n in SEQS]
    cases += [decode_case("flash_cpu", n, gflops=16.0, intensity=2.0, dtype="bf16", peak=dot)
              for n in SEQS]
    folder = write_run(tmp_path / "roof", cases)
    write_bandwidth_checks(folder, TRIAD_GBPS)
    ax = roofline.figures(ar.load_run(folder))["roofline"].axes[0]
    computes = roof_lines(ax, "compute")
    assert [line.get_label() for line in computes] == [
        "compute roof 232 GFLOP/s (cpu_fma_gflops)", "compute roof 928 GFLOP/s (cpu_bf16_dot_gflops)"]
    for line, (_, peak) in zip(computes, (fma, dot)):
        (x, y), _ = ends(line)
        assert (x, y) == pytest.approx((peak / TRIAD_GBPS, peak))  # on the sloped roof, at its ridge
    [memory] = roof_lines(ax, "bandwidth")
    assert ends(memory)[1] == pytest.approx((dot[1] / TRIAD_GBPS, dot[1]))
    assert ax.get_xlim()[1] > dot[1] / TRIAD_GBPS
    legend = " ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "ridge 11.6 FLOP/byte (cpu_fma_gflops)" in legend
    assert "ridge 46.4 FLOP/byte (cpu_bf16_dot_gflops)" in legend
    loaded = ar.load_run(folder).cases
    for case in loaded:  # the shared dtype markers: fp32 a circle, bf16 a square
        assert marker_of(collection_at(ax, case)) == {"fp32": "o", "bf16": "s"}[case["dtype"]]
    assert ax.get_ylabel() == "achieved GFLOP/s (fp32, bf16)"  # the axis names both dtypes


def test_roofline_hollows_paged_points_and_fills_contiguous_ones(tmp_path):
    cases = [decode_case("flash_cpu", 4096, gflops=8.0, intensity=1.0, kv_cache="contiguous"),
             decode_case("flash_cpu", 4096, gflops=6.0, intensity=1.0, kv_cache="paged:16")]
    folder = write_run(tmp_path / "roof", cases)
    write_bandwidth_checks(folder, TRIAD_GBPS)
    run = ar.load_run(folder)
    ax = roofline.figures(run)["roofline"].axes[0]
    by_cache = {c["kv_cache"]: collection_at(ax, c) for c in run.cases}
    assert is_hollow(by_cache["paged:16"]) and not is_hollow(by_cache["contiguous"])
    legend = " ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "contiguous cache (filled)" in legend and "paged:16 cache (hollow)" in legend


def test_roofline_rings_a_disturbed_point_around_its_marker(tmp_path):
    """A bf16 prefill record above its own peak (the peak read low) is disturbed: ringed in red,
    its square still drawn inside the ring; the others are not ringed."""
    dot = ("cpu_bf16_dot_gflops", 400.0)
    over = decode_case("flash_cpu", 1024, gflops=500.0, intensity=80.0, seq_q=1024, dtype="bf16",
                       peak=dot)
    calm = [decode_case("flash_cpu", n, gflops=8.0, intensity=1.0) for n in SEQS]
    folder = write_run(tmp_path / "roof", [over, *calm])
    write_bandwidth_checks(folder, TRIAD_GBPS)
    run = ar.load_run(folder)
    assert [c["seq_q"] for c in run.cases if ar.is_disturbed(c)] == [1024]
    fig = roofline.figures(run)["roofline"]
    ax = fig.axes[0]
    rings = [line for line in ax.lines if line.get_markeredgecolor() == "tab:red"]
    assert len(rings) == 1
    assert list(zip(rings[0].get_xdata(), rings[0].get_ydata())) == [(80.0, 500.0)]
    point = collection_at(ax, over)
    assert marker_of(point) == "s" and rings[0].get_markerfacecolor() == "none"
    assert rings[0].get_markersize() > np.sqrt(point.get_sizes()[0])  # the ring goes round it
    legend = " ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "disturbed (1)" in legend
    caption = " ".join(t.get_text() for t in fig.texts)
    assert "1 of 5 disturbed (ringed in red)" in caption


def test_plot_roofline_script_and_plot_all(tmp_path):
    folder = write_run(tmp_path / "roof", [decode_case("naive", n, 5.0, 1.0) for n in SEQS])
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, ROOT / "scripts/plot_roofline.py", folder, "--out", out],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (out / "roofline.svg").exists()
    assert "no bandwidth roof" in (out / "roofline.svg").read_text()
    all_out = tmp_path / "all"
    assert Command("plot").main([folder, "--out", all_out]) == 0
    assert (all_out / "roofline.png").exists()


def test_compare_pair_matches_peer_and_attnbench_records_of_the_same_pass(tmp_path):
    from attnbench import compare_runs

    def run_of(variant: str, bwd_ratio: float) -> ar.Run:
        cases = []
        for seq in SEQS:
            cases.append(pass_case(variant, seq, "fwd", 1.0, None))
            cases.append(pass_case(variant, seq, "bwd", bwd_ratio, None))
        return ar.load_run(write_run(tmp_path / variant, cases))

    comparisons, _ = compare_runs.compare(run_of("torch_math", 2.0), run_of("naive", 3.0),
                                          ("torch_math", "naive"))
    matched = [c for c in comparisons if c.comparable]
    assert len(matched) == 2 * len(SEQS)
    for comparison in matched:
        assert comparison.baseline["pass"] == comparison.candidate["pass"]
        expected = 1.5 if comparison.baseline["pass"] == "bwd" else 1.0
        assert comparison.ratio == pytest.approx(expected)
