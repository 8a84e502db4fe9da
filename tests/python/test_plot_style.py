"""Plots that read at a glance: on every figure of configs/quick.toml's plots (a run the binary
plans here, with synthetic timings, and results/quick-after, a real one), of the comparisons and
of the committed runs of other configs, no legend covers a plotted point or a panel, and no two
variants' colours are closer than the palette's threshold (ΔE in CIELAB), with every variant of
attnbench and its peer at once too; a variant keeps its colour across figures and runs; a rate
axis names every dtype it draws."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib import colors as mcolors
from matplotlib.collections import Collection
from matplotlib.lines import Line2D

from attnbench import compare_runs, compare_variants, plotting as ap, results as ar
from attnbench.plots import all as all_plots
from binary import REPO, run_attnbench
from results_factory import make_case, write_run

# Relative speed of each CPU variant (ms at n = 1024, non-causal), roughly as measured here.
_SPEED = {"naive": 900.0, "blocked": 120.0, "openmp": 12.0, "blas": 40.0, "chunked": 14.0,
          "flash_cpu": 7.0}


def planned_cases(config: str) -> list[dict]:
    plan = json.loads(run_attnbench("plan", config, "--json", check=True).stdout)
    return plan["cases"]


def synthetic_run(folder: Path, config: str = "configs/quick.toml", slower: float = 1.0) -> Path:
    """The config's planned cases with n^2 timings; naive skipped from n = 1024 (as its budget
    skips it), and flash_cpu's n = 512 records disturbed."""
    cases = []
    for planned in planned_cases(config):
        variant, seq = planned["variant"], planned["seq_kv"]
        ms = slower * _SPEED.get(variant, 50.0) * (seq / 1024) ** 2 * (0.55 if planned["causal"] else 1)
        skipped = variant == "naive" and seq >= 1024
        case = make_case(variant, seq=seq, heads=planned["heads"], d_k=planned["d_k"],
                         causal=planned["causal"], dtype=planned["dtype"], time_ms=ms,
                         status="skipped" if skipped else "ok",
                         reason="predicted 5.5s > case_budget_s 4" if skipped else "",
                         workspace_bytes=4 * seq * (seq if variant in ("naive", "blas") else 64))
        case["mask"] = planned["mask"]
        if variant == "flash_cpu" and seq == 512:
            case.update(disturbed=True, disturbed_reason="checks disagree")
        cases.append(case)
    return write_run(folder, cases)


def drawn_points(ax) -> np.ndarray:
    """Every plotted point of the panel in display coordinates (lines' vertices and markers)."""
    points = []
    for line in ax.lines:
        xy = np.asarray(line.get_xydata(), dtype=float)
        if xy.size == 0:
            continue
        xy = xy[np.isfinite(xy).all(axis=1)]
        if not xy.size or line.get_transform() is None:
            continue
        points.append(line.get_transform().transform(xy))
    return np.concatenate(points) if points else np.empty((0, 2))


def legends_of(fig) -> list:
    return [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)


def check_legends_clear_of_data(fig, name: str) -> None:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = legends_of(fig)
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            if ax.get_label() == "<colorbar>":
                continue
            panel = ax.get_window_extent(renderer)
            assert not box.overlaps(panel), f"{name}: a legend lies over a panel ({box} on {panel})"
            points = drawn_points(ax)
            inside = ((points[:, 0] >= box.x0) & (points[:, 0] <= box.x1)
                      & (points[:, 1] >= box.y0) & (points[:, 1] <= box.y1))
            assert not inside.any(), f"{name}: {int(inside.sum())} plotted points under a legend"


def variant_colours(fig) -> dict[str, set[str]]:
    """The colours each variant is drawn in, over every tagged artist of the figure."""
    found: dict[str, set[str]] = {}
    for ax in fig.axes:
        for artist in [*ax.lines, *ax.collections]:
            variant = getattr(artist, "attnbench_variant", None)
            if variant is None:
                continue
            if isinstance(artist, Line2D):
                colours = [artist.get_color()]
            elif isinstance(artist, Collection):
                colours = list(artist.get_edgecolor()) or list(artist.get_facecolor())
            else:
                continue
            found.setdefault(variant, set()).update(mcolors.to_hex(c) for c in colours)
    return found


def check_one_colour_per_variant(fig, name: str) -> dict[str, str]:
    found = variant_colours(fig)
    assert found, f"{name}: no artist says which variant it draws"
    for variant, colours in found.items():
        assert len(colours) == 1, f"{name}: {variant} drawn in {sorted(colours)}"
    chosen = {variant: colours.pop() for variant, colours in found.items()}
    by_colour: dict[str, list[str]] = {}
    for variant, colour in chosen.items():
        by_colour.setdefault(colour, []).append(variant)
    shared = {c: v for c, v in by_colour.items() if len(v) > 1}
    assert not shared, f"{name}: variants share a colour: {shared}"
    close = close_pairs(chosen)
    assert not close, f"{name}: variants closer than ΔE {ap.MIN_DELTA_E:g}: {close}"
    return chosen


def check_figures(figures: dict, where: str) -> dict[str, str]:
    colours: dict[str, str] = {}
    assert figures, f"{where}: no figures"
    for stem, fig in figures.items():
        name = f"{where}/{stem}"
        check_legends_clear_of_data(fig, name)
        for variant, colour in check_one_colour_per_variant(fig, name).items():
            assert colours.setdefault(variant, colour) == colour, \
                f"{name}: {variant} changed colour between the figures of one run"
        ap.plt.close(fig)
    return colours


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    return synthetic_run(tmp_path_factory.mktemp("quick") / "quick")


def test_every_plot_of_the_quick_config_keeps_legends_off_the_data_and_colours_apart(quick_run):
    figures = all_plots.figures(ar.load_run(quick_run))
    assert {"scaling", "throughput_cpu", "memory", "speedup_vs_naive"} <= set(figures)
    colours = check_figures(figures, "quick")
    assert set(colours) == set(_SPEED)


def test_every_plot_of_a_real_quick_run_keeps_legends_off_the_data_and_colours_apart():
    run = ar.load_run(REPO / "results" / "quick-after")
    assert run.name == "quick"
    check_figures(all_plots.figures(run), "quick-after")


@pytest.mark.parametrize("folder", ["cpu-scaling", "dtypes", "mask-density", "cpu-bf16"])
def test_the_committed_runs_plot_the_same_way(folder):
    check_figures(all_plots.figures(REPO / "results" / folder), folder)


def test_a_variant_keeps_its_colour_across_runs_and_comparisons(quick_run, tmp_path):
    first = check_figures(all_plots.figures(quick_run), "quick")
    # Another run with fewer variants and a new one: the known ones keep their colours.
    few = [make_case(v, seq=s, time_ms=_SPEED[v] * (s / 1024) ** 2) for v in ("flash_cpu", "openmp")
           for s in (256, 512, 1024, 2048)]
    few += [make_case("my_variant", seq=s, time_ms=(s / 1024) ** 2) for s in (256, 512, 1024, 2048)]
    second = check_figures(all_plots.figures(write_run(tmp_path / "few", few)), "few")
    assert second["flash_cpu"] == first["flash_cpu"] and second["openmp"] == first["openmp"]
    assert second["my_variant"] not in (first["flash_cpu"], first["openmp"])

    slower = synthetic_run(tmp_path / "slower", slower=1.3)
    baseline, candidate = ar.load_run(quick_run), ar.load_run(slower)
    comparisons, _ = compare_runs.compare(baseline, candidate)
    fig = compare_runs.figure(baseline, candidate, comparisons)
    compared = check_figures({"compare": fig}, "compare")
    assert all(compared[v] == first[v] for v in compared)

    found = compare_variants.ratios(candidate, "openmp", None, 200, 0)
    compared = check_figures({"ratio": compare_variants.figure(found, "openmp")}, "ratio")
    assert all(compared[v] == first[v] for v in compared)


def test_the_palette_is_keyed_by_name():
    alone = ap.variant_colors(["flash_cpu"])
    crowd = ap.variant_colors(["naive", "zeta", "flash_cpu", "alpha", "my_variant"])
    assert alone["flash_cpu"] == crowd["flash_cpu"]
    assert ap.variant_colors(["my_variant"])["my_variant"] == ap.variant_colors(
        ["my_variant", "naive"])["my_variant"]
    many = ap.variant_colors([f"variant_{i}" for i in range(len(ap.PALETTE))])
    assert len(set(many.values())) == len(ap.PALETTE)  # never shared while colours last


# Every variant attnbench and its PyTorch peer have: all of them may share one figure (a merged
# CPU and CUDA run with the peer's records), and must still be told apart there.
ALL_VARIANTS = ("naive", "blocked", "openmp", "blas", "chunked", "flash_cpu", "cublas",
                "cublas_tf32", "fused", "chunked_cuda", "flash_tc", "torch_math", "torch_flash",
                "torch_efficient", "torch_cudnn")


def close_pairs(colors: dict[str, str]) -> list[tuple[str, str, float]]:
    """The pairs of names whose colours are closer than the palette's threshold, with their ΔE."""
    return [(a, b, round(ap.delta_e(colors[a], colors[b]), 1))
            for a, b in itertools.combinations(sorted(colors), 2)
            if ap.delta_e(colors[a], colors[b]) < ap.MIN_DELTA_E]


def test_delta_e_is_cie76_in_cielab():
    # Reference values: sRGB white, black and primaries in CIELAB under D65.
    assert ap.cielab("white") == pytest.approx([100.0, 0.0, 0.0], abs=0.01)
    assert ap.cielab("black") == pytest.approx([0.0, 0.0, 0.0], abs=0.01)
    assert ap.cielab("#ff0000") == pytest.approx([53.24, 80.09, 67.20], abs=0.02)
    assert ap.cielab("#0000ff") == pytest.approx([32.30, 79.19, -107.86], abs=0.02)
    assert ap.delta_e("black", "white") == pytest.approx(100.0, abs=0.01)
    assert ap.delta_e("#9467bd", "#9467bd") == 0.0


def test_the_threshold_separates_what_the_report_could_not_tell_apart():
    # The palette before: flash_cpu's pink and blas's purple, read as one colour.
    assert ap.delta_e("#e377c2", "#9467bd") < ap.MIN_DELTA_E
    assert ap.MIN_DELTA_E >= 20


def test_every_variant_at_once_is_at_least_the_threshold_apart():
    colors = ap.variant_colors(ALL_VARIANTS)
    assert set(colors) == set(ALL_VARIANTS)
    assert not close_pairs(colors)
    # Nor near the red that rings disturbed records or the greys and black of the keys and lines.
    near = [(v, r) for v in ALL_VARIANTS for r in ap.RESERVED_COLORS
            if ap.delta_e(colors[v], r) < ap.MIN_DELTA_E]
    assert not near


def test_the_palette_itself_keeps_the_threshold_and_shows_on_white():
    assert len(ap.PALETTE) >= len(ALL_VARIANTS) + 8  # room for names the palette does not know
    assert not close_pairs({c: c for c in ap.PALETTE})
    assert all(ap.delta_e(c, r) >= ap.MIN_DELTA_E for c in ap.PALETTE for r in ap.RESERVED_COLORS)
    assert all(ap.cielab(c)[0] <= 80 for c in ap.PALETTE)


def test_flash_cpu_and_blas_are_told_apart():
    for colors in (ap.variant_colors(["blas", "flash_cpu"]), ap.variant_colors(ALL_VARIANTS)):
        assert ap.delta_e(colors["flash_cpu"], colors["blas"]) >= ap.MIN_DELTA_E


def test_colours_are_stable_for_a_set_of_variants_in_any_order():
    first = ap.variant_colors(ALL_VARIANTS)
    assert ap.variant_colors(ALL_VARIANTS) == first
    assert ap.variant_colors(reversed(ALL_VARIANTS)) == first
    # A known variant keeps its colour in any company.
    for pair in (("blas", "flash_cpu"), ("torch_flash", "naive"), ("fused",)):
        assert ap.variant_colors(pair) == {v: first[v] for v in pair}


def test_new_names_beside_every_known_one_still_keep_the_threshold():
    # Their hashed slots land on colours the known variants hold: each takes the next palette
    # colour that keeps the distance, the same one however the names are ordered.
    new = [f"my_variant_{i}" for i in range(len(ap.PALETTE) - len(ALL_VARIANTS))]
    colors = ap.variant_colors([*ALL_VARIANTS, *new])
    assert len(colors) == len(ap.PALETTE)
    assert not close_pairs(colors)
    assert ap.variant_colors([*reversed(new), *ALL_VARIANTS]) == colors
    assert {v: colors[v] for v in ALL_VARIANTS} == ap.variant_colors(ALL_VARIANTS)


def test_a_rate_axis_names_every_dtype_it_plots(tmp_path):
    from attnbench.plots import throughput

    cases = [make_case(v, seq=s, dtype=dtype, time_ms=speed * (s / 1024) ** 2)
             for v, speed in (("flash_cpu", 7.0), ("blas", 40.0)) for dtype in ("fp32", "bf16")
             for s in (256, 512, 1024, 2048)]
    fig = throughput.figures(write_run(tmp_path / "dtypes", cases))["throughput_cpu"]
    assert fig.axes[0].get_ylabel() == "GFLOP/s (fp32, bf16)"
    # The two dtypes of a variant stay apart: one series each, in its dtype's marker.
    markers = {line.get_label(): line.get_marker() for line in fig.axes[0].lines
               if getattr(line, "attnbench_variant", None) == "flash_cpu"
               and not line.get_label().startswith("_")}  # its series, not its status markers
    assert markers == {"flash_cpu fp32": "o", "flash_cpu bf16": "s"}
    ap.plt.close(fig)

    only_bf16 = [c for c in cases if c["dtype"] == "bf16"]
    fig = throughput.figures(write_run(tmp_path / "bf16", only_bf16))["throughput_cpu"]
    assert fig.axes[0].get_ylabel() == "GFLOP/s (bf16)"
    ap.plt.close(fig)


def test_tf32_records_are_named_apart_from_fp32_ones():
    fp32 = make_case("cublas", device="cuda")
    tf32 = make_case("cublas_tf32", device="cuda", precision="tf32")
    bf16 = make_case("flash_tc", device="cuda", dtype="bf16")
    assert ap.with_dtypes("TFLOP/s", [bf16, tf32, fp32]) == "TFLOP/s (fp32, tf32, bf16)"
    assert ap.with_dtypes("TFLOP/s", [tf32]) == "TFLOP/s (tf32)"
    assert ap.with_dtypes("TFLOP/s", []) == "TFLOP/s"


def test_compare_variants_draws_a_line_per_shape_family_not_a_zigzag(tmp_path):
    cases = []
    for causal in (False, True):
        for d_k in (64, 128):
            for seq in (512, 1024, 2048):
                for variant, speed in (("openmp", 2.0), ("flash_cpu", 1.0)):
                    cases.append(make_case(variant, seq=seq, d_k=d_k, causal=causal,
                                           time_ms=speed * seq / 512))
    run = ar.load_run(write_run(tmp_path / "shapes", cases))
    fig = compare_variants.figure(compare_variants.ratios(run, "openmp", None, 200, 0), "openmp")
    lines = [line for line in fig.axes[0].lines if getattr(line, "attnbench_variant", None)]
    assert len(lines) == 4  # flash_cpu at (causal, d_k) = 4 shape families, 3 points each
    for line in lines:
        xs = list(line.get_xdata())
        assert xs == sorted(xs) and len(xs) == 3
    check_figures({"ratio": fig}, "shapes")


def test_throughput_with_a_tenfold_spread_is_on_a_log_axis(quick_run):
    from attnbench.plots import throughput

    fig = throughput.figures(quick_run)["throughput_cpu"]
    assert fig.axes[0].get_yscale() == "log"
    ap.plt.close(fig)


def test_heads_dk_picks_the_largest_n_every_variant_has(tmp_path):
    from attnbench.plots import heads_dk

    cases = [make_case(v, seq=seq, heads=h, time_ms=h * seq / 100) for v in ("naive", "flash_cpu")
             for h in (1, 2, 4, 8) for seq in (1024, 2048, 4096)
             if not (v == "naive" and seq == 4096)]
    cases += [make_case("naive", seq=4096, heads=h, status="skipped", reason="too slow")
              for h in (1, 2, 4, 8)]
    fig = heads_dk.figures(write_run(tmp_path / "hd", cases))["heads_dk"]
    assert fig.axes[0].get_title() == "at seq_kv=2048, d_k=64"
    assert not any("(no points)" in t.get_text() for t in fig.axes[0].get_legend().get_texts())
    ap.plt.close(fig)


def test_throughput_names_the_roof_records_are_rated_against_and_reads_one_axis_against_one(tmp_path):
    """An AMX host rates bf16 against the AMX check and fp32 against the FMA loop: the plot
    draws and names each roof; its % axis is there only where every record reads against one."""
    from attnbench.plots import throughput

    def rated(dtype, name, peak):
        cases = [make_case("flash_cpu", seq=s, dtype=dtype, time_ms=(s / 1024) ** 2)
                 for s in (256, 512, 1024)]
        for case in cases:
            case.update(peak_name=name, peak_gflops=peak)
        return cases

    bf16 = rated("bf16", "cpu_amx_bf16_gflops", 7500.0)
    fig = throughput.figures(write_run(tmp_path / "amx", bf16))["throughput_cpu"]
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert "measured AMX bf16 peak: 7.5e+03 GFLOP/s" in labels
    assert [ax.get_ylabel() for ax in fig.axes[0].child_axes] == ["% of measured AMX bf16 peak"]
    ap.plt.close(fig)

    both = bf16 + rated("fp32", "cpu_fma_gflops", 480.0)
    fig = throughput.figures(write_run(tmp_path / "both", both))["throughput_cpu"]
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert {"measured AMX bf16 peak: 7.5e+03 GFLOP/s", "measured FMA peak: 480 GFLOP/s"} <= set(labels)
    assert not fig.axes[0].child_axes
    assert "rated against several roofs (AMX bf16 peak, FMA peak)" in " ".join(
        text.get_text() for text in fig.texts)
    ap.plt.close(fig)
