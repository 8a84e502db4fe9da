"""ATTNBENCH_CPU_FEATURES: a run seen as a CPU with fewer features runs only what that CPU would,
says so in its manifest and records, and a value naming no path (or one the CPU lacks) is bad input
refused before anything is made."""

import json
import os

import pytest

from binary import REPO, run_attnbench

TINY = REPO / "configs" / "portability.toml"


def runnable_paths(**env):
    result = run_attnbench("list", "--isas", env={**os.environ, **env})
    return result.returncode, result.stdout.split(), result.stderr


def test_a_path_no_cpu_has_is_refused_before_anything_is_made(tmp_path):
    out = tmp_path / "run"
    result = run_attnbench("run", TINY, "--out", out, env={**os.environ, "ATTNBENCH_CPU_FEATURES": "avx9"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "attnbench: error: ATTNBENCH_CPU_FEATURES: 'avx9' is not one of scalar, avx2, avx512, avx512_bf16, amx_bf16, neon"]
    assert not out.exists()


def test_a_flash_cpu_path_of_no_name_is_refused_naming_every_path_it_takes(tmp_path):
    out = tmp_path / "run"
    result = run_attnbench("run", TINY, "--out", out, env={**os.environ, "ATTNBENCH_FLASH_CPU_ISA": "avx9"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "attnbench: error: ATTNBENCH_FLASH_CPU_ISA: 'avx9' is not one of scalar, avx2, avx512, avx512_bf16, "
        "amx_bf16, neon, avx512_bf16_emulated, amx_bf16_emulated"]
    assert not out.exists()


def test_scalar_limits_every_choice_to_the_scalar_path(tmp_path):
    code, paths, _ = runnable_paths(ATTNBENCH_CPU_FEATURES="scalar")
    assert (code, paths) == (0, ["scalar"])
    # A forced path beyond the limit is refused as on a CPU without it.
    if "avx2" in runnable_paths()[1]:
        result = run_attnbench("check", TINY, "--variants", "flash_cpu",
                               env={**os.environ, "ATTNBENCH_CPU_FEATURES": "scalar", "ATTNBENCH_FLASH_CPU_ISA": "avx2"})
        assert result.returncode == 2 and "ATTNBENCH_FLASH_CPU_ISA" in result.stderr
    out = tmp_path / "run"
    result = run_attnbench("run", TINY, "--out", out, "--variants", "flash_cpu", "--set", "axes.dtype=[\"fp32\"]",
                           "--set", "axes.layout=[\"bhsd\"]", "--set", "axes.mask=[\"causal\"]",
                           "--set", "axes.alibi=[false]", "--set", "axes.softcap=[0]",
                           "--set", "measure.repetitions=1", "--set", "measure.min_time_s=0.001",
                           env={**os.environ, "ATTNBENCH_CPU_FEATURES": "scalar"})
    assert result.returncode == 0, result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["machine"]["cpu_features"] == "none"
    assert manifest["environment"]["ATTNBENCH_CPU_FEATURES"] == "scalar"
    records = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    assert records and all(r["code_path"] == "scalar" for r in records)


def test_avx2_is_what_an_avx2_only_cpu_runs():
    if "avx2" not in runnable_paths()[1]:
        pytest.skip("this CPU has no AVX2 path")
    code, paths, _ = runnable_paths(ATTNBENCH_CPU_FEATURES="avx2")
    assert (code, paths) == (0, ["scalar", "avx2"])
    if "avx512" not in runnable_paths()[1]:
        code, _, stderr = runnable_paths(ATTNBENCH_CPU_FEATURES="avx512")
        assert code == 2 and "needs" in stderr and "this CPU has" in stderr
