"""The Python side is the attnbench package (python/attnbench), imported as installed by
scripts/setup.sh (`pip install -e python`); these tests check that the one imported is this
checkout's, so they never test another checkout's code.

Also what the end-to-end tests share: the small sweep configs they run the binary on
(`sweep_toml`, and the `config` fixture most of them use)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import attnbench
import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS_DIR = REPO / "scripts"
# The peer scripts import their neighbours as Python lets a script do (its folder first on the
# path); tests that load them as modules give them the same path.
sys.path.insert(0, str(SCRIPTS_DIR / "peers"))

_IMPORTED = Path(attnbench.__file__).resolve().parent
assert _IMPORTED == REPO / "python" / "attnbench", (
    f"attnbench is imported from {_IMPORTED}, not this checkout's {REPO / 'python' / 'attnbench'}: "
    f"run `python3 -m pip install -e {REPO / 'python'}` (scripts/setup.sh does)")


def sweep_toml(name: str = "small", variants=("naive",), repetitions: int = 1,
               min_time_s: float = 0.001, peaks: str = "skip", **axes) -> str:
    """A sweep small enough to run in a fraction of a second: no warm-up, `repetitions` of each
    case, over `axes` (heads 2, seq_len 16 and 24, d_k 8 unless given; any other axis, such as
    causal, mask or dtype, only when given; None leaves a default one out). Lists are written as JSON arrays, which TOML reads
    the same (numbers, strings, true/false). The peaks are not measured unless `peaks` is
    "measure": a test of something else need not spend a second on them (its records are then
    unrated, and say so)."""
    axes = {"heads": (2,), "seq_len": (16, 24), "d_k": (8,), **axes}
    axes = {axis: values for axis, values in axes.items() if values is not None}
    lines = [f"name = {json.dumps(name)}", f"variants = {json.dumps(list(variants))}", "[axes]"]
    lines += [f"{axis} = {json.dumps(list(values))}" for axis, values in axes.items()]
    lines += ["[measure]", "warmup = 0", f"repetitions = {repetitions}", f"min_time_s = {min_time_s}",
              f"peaks = {json.dumps(peaks)}"]
    return "\n".join(lines) + "\n"


# The sweep the Slurm tests shard: eight cases, so each of three shards gets some.
TINY_SWEEP = sweep_toml("tiny", heads=(1,), seq_len=(8, 16, 24, 32), causal=(False, True))


@pytest.fixture
def sweep_file(tmp_path):
    """`sweep_file(**fields)`: sweep_toml(**fields) written to a file of the test's own."""
    def write(file_name: str = "sweep.toml", **fields) -> Path:
        path = tmp_path / file_name
        path.write_text(sweep_toml(**fields))
        return path
    return write


@pytest.fixture
def tiny_sweep(tmp_path):
    """TINY_SWEEP written to a file of the test's own."""
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_SWEEP)
    return path
