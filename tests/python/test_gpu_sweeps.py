"""The GPU run's sweeps (scripts/gpu_sweeps.sh), planned on a CPU: each config and its reduced
arguments as scripts/gpu_run.sh runs them must be a plan the binary accepts, so that a sweep that
cannot run is found here, not on the GPU machine after its time is spent (the decode sweep once
named the CPU's serving config, which refuses seq_kv beside kv_lens, and no GPU decode number
was ever made)."""

import subprocess

import pytest

from binary import REPO, attnbench_binary


def sweep_names() -> list[str]:
    result = subprocess.run(["bash", "-c", 'source scripts/gpu_sweeps.sh; printf "%s\\n" "${gpu_sweeps[@]}"'],
                            cwd=REPO, capture_output=True, text=True, check=True)
    return result.stdout.split()


def sweep_arguments(name: str, full: bool = False) -> list[str]:
    script = f'source scripts/gpu_sweeps.sh; gpu_sweep_args {name} && printf "%s\\n" "${{sweep_args[@]}}"'
    env = {"PATH": "/usr/bin:/bin", "ATTNBENCH_GPU_FULL": "1" if full else "0"}
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line]


def test_the_gpu_run_has_its_four_sweeps_and_gpu_run_sh_runs_each():
    names = sweep_names()
    assert names == ["gpu-scaling", "fa-shapes", "decode-gpu", "gpu-masks"]
    run_script = (REPO / "scripts" / "gpu_run.sh").read_text()
    for name in names:
        assert f"run_sweep {name} " in run_script


@pytest.mark.parametrize("full", [False, True], ids=["reduced", "full"])
@pytest.mark.parametrize("name", ["gpu-scaling", "fa-shapes", "decode-gpu", "gpu-masks"])
def test_each_gpu_sweep_is_a_plan_the_binary_accepts(name, full):
    arguments = sweep_arguments(name, full)
    if not full:
        assert "--set" in arguments  # the reduction is there
    result = subprocess.run([str(attnbench_binary()), "plan", f"configs/{name}.toml", *arguments],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, f"plan {name} {' '.join(arguments)}: {result.stderr}"
    assert result.stdout.strip(), "the plan lists its cases"


def test_an_unknown_sweep_is_refused_by_name():
    result = subprocess.run(["bash", "-c", "source scripts/gpu_sweeps.sh; gpu_sweep_args decode"],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 2
    assert "no sweep named 'decode'" in result.stderr
