"""One rating rule, whoever wrote the record and whenever: a CPU record of a dtype reads against
that dtype's roof, the best check of it among all the folder's checks (harness/results/
peak_checks.cpp's rate_record, which the Python loader reads through `attnbench export`). A folder whose start check
read low and whose later checks read high is the case a user met: one bf16 record had been
written against the vdpbf16ps peak, the rest against the FMA loop's."""

import json

import pytest

from attnbench import results as ar
from results_factory import make_case, write_run


def checks_low_then_high(folder):
    with open(folder / "peaks.jsonl", "w") as lines:
        for when, fma, bf16 in (("start", 67.6, 40.0), ("between variants", 483.0, 242.0),
                                ("end", 470.0, 490.0)):
            lines.write(json.dumps({"when": when, "cpu_fma_gflops": fma,
                                    "cpu_fma_sustained_gflops": 0.98 * fma,
                                    "cpu_bf16_dot_gflops": bf16}) + "\n")


def test_every_record_of_a_dtype_reads_against_one_roof(tmp_path):
    cases = []
    for index, (variant, dtype, stored) in enumerate((
            ("flash_cpu", "bf16", "cpu_bf16_dot_gflops"), ("flash_cpu", "bf16", "cpu_fma_gflops"),
            ("blas", "bf16", "cpu_fma_gflops"), ("flash_cpu", "fp32", "cpu_fma_gflops"),
            ("torch_flash", "bf16", "torch_mm_bf16_gflops"))):
        case = make_case(variant, dtype=dtype, seq=512 + 64 * index, time_ms=2.0)
        case["peak_name"] = stored
        case["peak_gflops"] = 100.0 if stored.startswith("torch") else None
        cases.append(case)
    folder = write_run(tmp_path / "run", cases)
    checks_low_then_high(folder)
    run = ar.load_run(folder)
    roofs = {(c["dtype"], c["peak_name"], c["peak_gflops"]) for c in run.cases}
    # bf16: the highest of the FMA loop's best (483) and vdpbf16ps' best (490); fp32: the FMA's.
    assert roofs == {("bf16", "cpu_bf16_dot_gflops", 490.0), ("fp32", "cpu_fma_gflops", 483.0)}
    for case in run.cases:
        assert case["percent_of_peak"] == pytest.approx(100 * case["gflops"] / case["peak_gflops"])
    # The table a user reads: summary from the same loader (attnbench-table) names the roof.
    frame = ar.frame([run])
    assert set(frame[frame["dtype"] == "bf16"]["peak_name"]) == {"cpu_bf16_dot_gflops"}


def test_a_folder_without_cpu_checks_keeps_what_records_brought(tmp_path):
    case = make_case("torch_flash", dtype="bf16", time_ms=2.0)
    case["peak_name"], case["peak_gflops"] = "torch_mm_bf16_gflops", 100.0
    [rated] = ar.load_run(write_run(tmp_path / "run", [case])).cases
    assert (rated["peak_name"], rated["peak_gflops"]) == ("torch_mm_bf16_gflops", 100.0)
