"""Tests for attnbench-gpu-summary (attnbench.gpu_summary) on a synthetic GPU run: attnbench's sweep and the PyTorch
peer's beside it (results_factory), the JSON of `attnbench check --json` and a ctest log."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from attnbench import gpu_summary
from commands import gpu_summary as gpu_summary_command
from conftest import SCRIPTS_DIR
from results_factory import make_case, make_manifest, write_run

SEQS = (1024, 2048, 4096, 8192, 16384)
# fused is slower than cublas at 1k and 2k and faster from 4k on.
FUSED_MS = (2.0, 3.0, 5.0, 15.0, 50.0)
CUBLAS_MS = (1.0, 2.5, 6.0, 20.0, 80.0)



def check_record(variant, status="ok", reason="", rel=None, max_abs=None, **shape) -> dict:
    """A record as `attnbench check --json` lists it: the oracle's errors, no timing."""
    record = make_case(variant, batch=2, heads=4, device="cuda", status=status, reason=reason, **shape)
    record.update(oracle_rel_l2_err=rel, oracle_max_abs_err=max_abs, time_ms_median=None,
                  time_ms_min=None, time_ms_max=None, gflops=None, percent_of_peak=None)
    return record


EDGE_RECORDS = [
    check_record("cublas", rel=3.1e-08, max_abs=2.2e-07, seq_q=1, seq_kv=130, d_k=40),
    check_record("cublas", rel=4.5e-08, max_abs=3e-07, seq_q=1, seq_kv=130, d_k=40, kv_heads=2),
    check_record("fused", rel=2e-07, max_abs=1.1e-06, seq_q=37, seq_kv=257, d_k=40, d_v=72, causal=True),
    check_record("fused", "failed", "oracle (normal inputs): rel L2 0.31 above 1e-05", rel=0.31, max_abs=2.0,
                 seq_q=37, seq_kv=257, d_k=40, d_v=72, causal=True, kv_heads=2),
    check_record("fused", "failed", "oracle (normal inputs): rel L2 0.05 above 0.012", rel=0.05, max_abs=0.3,
                 seq_q=37, seq_kv=257, d_k=40, d_v=72, dtype="bf16", layout="bshd"),
    check_record("chunked_cuda", "skipped", "d_v 72 is not a multiple of 8", seq_q=1, seq_kv=130, d_k=128,
                 d_v=72),
]
EDGE_JSON = json.dumps({"config": "gpu-edge", "passed": 3, "failed": 2, "skipped": 1, "device_lost": False,
                        "records": EDGE_RECORDS}, indent=2)

CTEST_LOG = """\
 1/60 Test  #1: config.parses ..........   Passed    0.01 sec
97% tests passed, 2 tests failed out of 60

Total Test time (real) =  41.20 sec

The following tests FAILED:
\t 17 - fused matches the oracle on every edge shape (Failed)
\t 60 - python.scripts (Failed)
Errors while running CTest
"""


@pytest.fixture
def gpu_run(tmp_path):
    cases = []
    for d_k in (64, 128):
        for seq, fused_ms, cublas_ms in zip(SEQS, FUSED_MS, CUBLAS_MS):
            shape = dict(seq=seq, heads=16, d_k=d_k, device="cuda")
            cases.append(make_case("fused", time_ms=fused_ms, workspace_bytes=0, **shape))
            cases.append(make_case("cublas", time_ms=cublas_ms, workspace_bytes=4 * 16 * seq * seq, **shape))
    cases.append(make_case("chunked_cuda", seq=16384, heads=16, d_k=128, device="cuda", status="failed",
                           reason="oracle after timing: rel L2 0.2 above 1e-05"))
    ours = write_run(tmp_path / "h200-gpu-scaling", cases, make_manifest("gpu-scaling", with_gpu=True))

    torch_cases = []
    for seq in SEQS:
        torch_cases.append(make_case("torch_math", seq=seq, heads=16, d_k=128, device="cuda", time_ms=seq / 500))
        torch_cases.append(make_case("torch_flash", seq=seq, heads=16, d_k=128, device="cuda", status="skipped",
                                     reason="Expected query, key and value to all be of dtype: {Half, BFloat16}"))
        torch_cases.append(make_case("torch_flash", seq=seq, heads=16, d_k=128, device="cuda", dtype="bf16",
                                     layout="bshd", time_ms=seq / 4000))
    manifest = make_manifest("torch-gpu-scaling", with_gpu=True)
    manifest["build"].update(torch="2.11.0", cuda="13.0", cudnn=91000)
    manifest["peer"] = {"tf32": "off: fp32 stays fp32"}
    manifest["peaks"].update(torch_mm_fp32_gflops=50000.0, torch_mm_bf16_gflops=700000.0)
    theirs = write_run(tmp_path / "h200-torch-gpu-scaling", torch_cases, manifest)

    (tmp_path / "edge.json").write_text(EDGE_JSON)
    (tmp_path / "ctest.log").write_text(CTEST_LOG)
    return tmp_path, ours, theirs


def summarise(tmp_path, *runs, extra=()):
    out = tmp_path / "out" / "summary.md"
    short = tmp_path / "out" / "short.txt"
    (tmp_path / "out").mkdir(exist_ok=True)
    code = gpu_summary_command.main([*map(str, runs), "--edge-json", str(tmp_path / "edge.json"),
                             "--ctest-log", str(tmp_path / "ctest.log"), "--out", str(out),
                             "--short", str(short), *extra])
    assert code == 0
    return out.read_text(), short.read_text()


def test_summary_has_every_section(gpu_run):
    tmp_path, ours, theirs = gpu_run
    text, _ = summarise(tmp_path, ours, theirs)
    assert "- GPU: NVIDIA H200; driver 580.0, CUDA runtime 13.0, 132 SMs" in text
    assert "fp32 SGEMM 51.0 TFLOP/s" in text
    assert "PyTorch peer (h200-torch-gpu-scaling): torch 2.11.0, CUDA 13.0, cuDNN 91000" in text
    assert "against torch.mm in the case's dtype (fp32 50000, bf16 700000 GFLOP/s)" in text
    assert "## gpu-scaling (h200-gpu-scaling, h200-torch-gpu-scaling)" in text
    assert "| variant | shape | seq_kv 1024 | seq_kv 4096 | seq_kv 16384 |" in text


def test_throughput_cells_are_tflops_and_percent_of_peak(gpu_run):
    tmp_path, ours, theirs = gpu_run
    text, _ = summarise(tmp_path, ours, theirs)
    # fused, d 128, n 16384: 4 * 16 * 16384^2 * 128 FLOP in 50 ms.
    tflops = 4 * 16 * 16384**2 * 128 / 50e-3 / 1e12
    percent = 100 * tflops * 1e3 / 51000.0
    assert "| fused | d 128 | " in text
    assert f"{tflops:.3g} ({percent:.0f}%) |" in text
    assert "| torch_math | d 128 |" in text
    assert "| torch_flash | d 128 | skipped | skipped | skipped |" in text
    # The bf16 cases of the same shape are a row of their own, never merged with the fp32 one.
    bf16_tflops = 4 * 16 * 1024**2 * 128 / (1024 / 4000 * 1e-3) / 1e12
    assert f"| torch_flash | d 128, bf16, bshd | {bf16_tflops:.3g} (" in text
    assert "| chunked_cuda | d 128 | - | - | failed |" in text


def test_crossover_is_where_fused_stays_faster(gpu_run):
    tmp_path, ours, theirs = gpu_run
    text, short = summarise(tmp_path, ours, theirs)
    assert "- d 64: fused faster from seq_kv = 4096; at seq_kv 16384 fused takes 50 ms, cublas 80 ms (1.60x)" in text
    assert "fused faster from seq_kv = 4096" in short
    assert "\ngpu-scaling: 30/36 ok; TFLOP/s at seq_kv 16384 (d 128): fused 44 (86%)" in short
    assert "torch_flash bf16 bshd 537" in short


def test_crossover_verdicts():
    def cases(fused, cublas):
        return [make_case(v, seq=n, device="cuda", time_ms=t)
                for v, times in (("fused", fused), ("cublas", cublas)) for n, t in zip((1024, 2048, 4096), times)]
    assert "fused faster at every seq_kv measured (1024 to 4096)" in gpu_summary.crossover(cases((1, 1, 1), (2, 2, 2)))[0]
    assert "cublas faster at every seq_kv" in gpu_summary.crossover(cases((3, 3, 3), (2, 2, 2)))[0]
    assert "no lasting crossover: fused faster at seq_kv 2048" in gpu_summary.crossover(cases((3, 1, 3), (2, 2, 2)))[0]


def test_workspace_table(gpu_run):
    tmp_path, ours, theirs = gpu_run
    text, _ = summarise(tmp_path, ours, theirs)
    workspace = text[text.index("Peak workspace"):]
    assert "| cublas | d 64 | 64 MiB | 1 GiB | 16 GiB |" in workspace
    assert "| fused | d 64 | 0 B | 0 B | 0 B |" in workspace


def test_not_ok_cases_are_listed_with_their_reason(gpu_run):
    tmp_path, ours, theirs = gpu_run
    text, _ = summarise(tmp_path, ours, theirs)
    assert "- chunked_cuda failed (1; seq_kv 16384): oracle after timing: rel L2 0.2 above 1e-05" in text
    assert "- torch_flash skipped (5; seq_kv 1024, 2048, 4096, 8192, 16384): Expected query" in text


def test_edge_check_and_ctest_sections(gpu_run):
    tmp_path, ours, theirs = gpu_run
    text, short = summarise(tmp_path, ours, theirs)
    assert "| cublas | 2 | 0 | 0 | 4.5e-08 | 3e-07 |" in text
    # The worst errors are over the cases that passed.
    assert "| fused | 1 | 2 | 0 | 2e-07 | 1.1e-06 |" in text
    assert "| chunked_cuda | 0 | 0 | 1 | - | - |" in text
    assert "Total: 3 passed, 2 failed, 1 skipped." in text
    assert ("- fused batch 2, heads 4 (kv 2), seq 37x257, d 40/72, causal: oracle (normal inputs): "
            "rel L2 0.31 above 1e-05") in text
    assert "- fused batch 2, heads 4, seq 37x257, d 40/72, bf16, bshd: oracle (normal inputs): rel L2 0.05" in text
    assert "- chunked_cuda (1): d_v 72 is not a multiple of 8" in text
    assert ("97% tests passed, 2 tests failed out of 60: fused matches the oracle on every edge shape "
            "(Failed), python.scripts (Failed)") in text
    assert short.startswith("GPU: NVIDIA H200\nctest: 97% tests passed")
    assert "edge oracle: cublas 2 ok/0 failed/0 skipped (worst rel L2 4.5e-08)" in short


def test_an_unreadable_folder_is_named_and_left_out(gpu_run):
    tmp_path, ours, theirs = gpu_run
    cut_short = tmp_path / "h200-decode"
    cut_short.mkdir()
    (cut_short / "manifest.json").write_text("{}")
    text, _ = summarise(tmp_path, ours, theirs, cut_short)
    assert "## Folders left out" in text and "h200-decode" in text
    assert "## gpu-scaling" in text


def test_logs_alone_are_enough(gpu_run):
    tmp_path, _, _ = gpu_run
    text, short = summarise(tmp_path)
    assert "Total: 3 passed, 2 failed, 1 skipped." in text
    assert short.startswith("GPU: none")


@pytest.mark.parametrize("edge_json, why", [
    ("", "empty: the check was not run, or cut off by its time limit"),
    ('{"config": "gpu-edge", "passed": 1', "not the output of attnbench check --json (JSONDecodeError"),
    ('{"config": "gpu-edge"}', "not the output of attnbench check --json (KeyError"),
    # Damaged records: each was a KeyError or TypeError traceback.
    ('{"passed": 1, "failed": 0, "skipped": 0, "records": 5}', "not the output of attnbench check --json "
     "('records' is int, not a list)"),
    ('{"passed": 1, "failed": 0, "skipped": 0, "records": [{"variant": "x"}]}',
     "not the output of attnbench check --json "
     "(record 0's status is None, not ok, failed or skipped)"),
    ('{"passed": 1, "failed": 0, "skipped": 0, "records": [{"variant": "x", "status": "ok"}]}',
     "not the output of attnbench check --json "
     "(record 0 (ok) has no oracle_rel_l2_err)"),
    ('{"passed": 1, "failed": 0, "skipped": 0, "records": [{"variant": "x", "status": "ok", '
     '"oracle_rel_l2_err": "big", "oracle_max_abs_err": 1}]}',
     "not the output of attnbench check --json "
     "(record 0's oracle_rel_l2_err is 'big', not a number)"),
])
def test_an_edge_check_without_a_result_is_named_and_the_rest_summarised(gpu_run, edge_json, why):
    tmp_path, ours, theirs = gpu_run
    (tmp_path / "edge.json").write_text(edge_json)
    text, short = summarise(tmp_path, ours, theirs)
    assert f"No edge-shape check found: {why}" in text
    assert "edge oracle: no result" in short
    assert "## gpu-scaling" in text


def test_the_gpu_lost_during_the_check_is_said(gpu_run):
    tmp_path, ours, theirs = gpu_run
    lost = dict(json.loads(EDGE_JSON), device_lost=True)
    (tmp_path / "edge.json").write_text(json.dumps(lost))
    text, _ = summarise(tmp_path, ours, theirs)
    assert "Total: 3 passed, 2 failed, 1 skipped; the GPU was lost (the cases after it did not run)." in text


def test_nothing_to_summarise_is_one_line_and_exit_2(tmp_path, capsys):
    assert gpu_summary_command.main([str(tmp_path / "absent")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnbench-gpu-summary: error: nothing to summarise") and err.count("\n") == 1


def test_out_and_short_must_be_two_files(gpu_run, capsys):
    tmp_path, ours, _ = gpu_run
    out = tmp_path / "summary.md"
    assert gpu_summary_command.main([str(ours), "--out", str(out), "--short",
                                     str(tmp_path / "." / "summary.md")]) == 2
    assert "--out and --short are the same file" in capsys.readouterr().err
    assert not out.exists()


def test_prints_markdown_without_out(gpu_run, capsys):
    tmp_path, ours, _ = gpu_run
    assert gpu_summary_command.main([str(ours)]) == 0
    assert capsys.readouterr().out.startswith("# attnbench GPU run")


def test_command_line_help():
    result = subprocess.run([sys.executable, str(SCRIPTS_DIR / "gpu_summary.py"), "--help"],
                            capture_output=True, text=True)
    assert result.returncode == 0 and "usage:" in result.stdout
