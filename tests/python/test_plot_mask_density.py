"""attnbench-plot --only mask_density: time against mask density with a fitted line per mask family. Synthetic
runs whose times are exact lines in the density, so the fitted slopes and intercepts are known."""

from __future__ import annotations

import pytest

from commands import plot_mask_density
from results_factory import make_case, write_run

DENSE_MS = 500.0
WINDOWS = {"window:128": 0.0156, "window:819": 0.0951, "window:2048": 0.2189, "window:8192": 0.5}
DOCUMENTS = {"documents:64": 0.0167, "documents:16": 0.0462, "documents:4": 0.2567}


def masked_case(variant: str, mask: str, density: float, time_ms: float) -> dict:
    case = make_case(variant, seq=8192, causal=mask == "causal", time_ms=time_ms)
    case["dense_flops"] = case["flops"] if mask == "none" else round(case["flops"] / density)
    case["mask"] = mask
    case["density"] = density
    case["flops"] = round(case["dense_flops"] * density)
    case["gflops"] = case["flops"] / (time_ms * 1e6)
    return case


def run_with(tmp_path, time_of) -> list[dict]:
    """Cases of two variants: `sparse` whose time is time_of(density), `dense` that ignores it."""
    cases = []
    for variant, time in (("sparse", time_of), ("dense", lambda _: DENSE_MS)):
        cases.append(masked_case(variant, "none", 1.0, DENSE_MS))
        cases.append(masked_case(variant, "causal", 0.5, time(0.5)))
        for mask, density in {**WINDOWS, **DOCUMENTS}.items():
            cases.append(masked_case(variant, mask, density, time(density)))
    return write_run(tmp_path / "masks", cases)


def test_fits_recover_a_line_in_the_density(tmp_path):
    run = run_with(tmp_path, lambda density: 20.0 + 960.0 * density)
    out_dir = tmp_path / "out"
    assert plot_mask_density.main([str(run), "--out", str(out_dir)]) == 0
    assert (out_dir / "mask_density.png").stat().st_size > 0
    table = (out_dir / "mask_density.md").read_text()
    # The sparse variant's fits: 20 ms + 960 ms x density, 1.92 x its dense time per unit density.
    sparse = table.split("## sparse")[1].split("## ")[0]
    assert "fit over window (4 cases): time = 20 ms + 960 ms x density (1.92 x dense time)" in sparse
    assert "fit over documents (3 cases): time = 20 ms + 960 ms x density" in sparse
    # The dense variant is flat: slope 0, intercept its dense time.
    dense = table.split("## dense")[1]
    assert "time = 500 ms + " in dense and "x density (0.00 x dense time)" in dense
    # window:819's row: time / dense and the rate against causal's.
    row = next(line for line in sparse.splitlines() if line.startswith("| window:819 "))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == "0.0951"
    assert float(cells[3]) == pytest.approx((20 + 960 * 0.0951) / DENSE_MS, abs=1e-3)


def test_a_run_without_the_mask_axis_is_one_line_and_exit_2(tmp_path, capsys):
    run = write_run(tmp_path / "plain", [make_case("naive", seq=1024), make_case("naive", seq=2048)])
    assert plot_mask_density.main([str(run)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "mask axis was not swept" in error[0]
