"""The PyTorch peer's backward and decode side (scripts/peers/torch_backward.py and how
torch_sdpa.py reads the plan's pass, kv_cache and kv_lens): argument handling without PyTorch,
and, where PyTorch is installed (the interpreter $TORCH_PYTHON names),
the timed calls' gradients against the float64 math backend for real on the CPU."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SCRIPTS_DIR

PEERS = SCRIPTS_DIR / "peers"
sys.path.insert(0, str(PEERS))
import torch_backward  # noqa: E402

if "torch_sdpa" in sys.modules:  # test_torch_peer.py's, loaded first
    peer = sys.modules["torch_sdpa"]
else:
    spec = importlib.util.spec_from_file_location("torch_sdpa", PEERS / "torch_sdpa.py")
    peer = importlib.util.module_from_spec(spec)
    sys.modules["torch_sdpa"] = peer  # dataclasses look their module up there
    spec.loader.exec_module(peer)

# PyTorch lives outside the tree and outside CI (about 5 GB): a virtual environment of the user's.
TORCH_PYTHON = os.environ.get("TORCH_PYTHON", "")
NO_TORCH = ("set TORCH_PYTHON to a python with PyTorch (python3 -m venv /tmp/torchenv && "
            "/tmp/torchenv/bin/pip install torch numpy; TORCH_PYTHON=/tmp/torchenv/bin/python)")


def plan_case(**fields) -> dict:
    case = dict(batch=2, heads=4, kv_heads=2, seq_q=1, seq_kv=64, d_k=8, d_v=8, causal=False,
                dtype="fp32", layout="bhsd", flops=1.0, bytes=1.0, description="decode", seed=3,
                peer_skip_reason="")
    return {**case, **fields}


SHAPE_FIELDS = ["batch", "heads", "kv_heads", "seq_q", "seq_kv", "d_k", "d_v", "causal", "dtype", "layout"]


def plan_of(*cases) -> dict:
    """A plan as `attnbench plan --json` writes one, with the fields the peer reads."""
    return {"shape_fields": SHAPE_FIELDS + sorted({"pass", "kv_cache", "kv_lens"} & set().union(*cases)),
            "cases": list(cases)}


def test_a_case_without_pass_or_cache_reads_as_a_forward_on_a_contiguous_cache():
    shape, = peer.shapes_of(plan_of(plan_case()))
    assert (shape.pass_, shape.kv_cache, shape.kv_lens) == ("fwd", "contiguous", None)
    assert not {"pass", "kv_cache", "kv_lens"} & set(shape.shape_fields())


def test_the_plan_pass_cache_and_lengths_reach_append():
    shape, = peer.shapes_of(plan_of(plan_case(**{"pass": "bwd", "kv_cache": "paged:16", "kv_lens": [64, 17]})))
    fields = shape.shape_fields()
    assert (fields["pass"], fields["kv_cache"], fields["kv_lens"]) == ("bwd", "paged:16", [64, 17])


def test_a_plan_from_an_older_attnbench_is_refused():
    with pytest.raises(peer.PeerError, match="rebuild it"):
        peer.shapes_of({"cases": [plan_case()]})


def test_an_unknown_pass_is_refused():
    with pytest.raises(ValueError, match="pass 'sideways' is not one of fwd, bwd, fwd_bwd"):
        peer.shapes_of(plan_of(plan_case(**{"pass": "sideways"})))


def test_the_record_says_how_the_cache_reached_sdpa():
    notes = torch_backward.cache_notes("paged:16", [64, 17])
    assert "paged:16 cache read contiguous: PyTorch SDPA has no paged KV cache" in notes
    assert "2 calls, one per sequence" in notes[1]
    assert torch_backward.cache_notes("contiguous", None) == []


def test_ragged_batches_are_one_call_per_sequence():
    assert torch_backward.sequence_slices(2, None) == [(-1, None)]
    assert torch_backward.sequence_slices(3, [5, 1, 9]) == [(0, 5), (1, 1), (2, 9)]
    for bad in ([5, 1], [5, 0, 9], [5, 1.5, 9]):
        with pytest.raises(ValueError, match="expected 3 positive cache lengths"):
            torch_backward.sequence_slices(3, bad)


def test_gradient_verdict_names_each_gradient_over_the_limit():
    assert torch_backward.gradient_verdict({"dq": 1e-6, "dk": 3e-6, "dv": 0.0}, 1e-6) == ""
    verdict = torch_backward.gradient_verdict({"dq": 1e-6, "dk": 5e-6, "dv": float("nan")}, 1e-6)
    assert "dk rel L2 5e-06" in verdict and "dv rel L2 nan" in verdict and "dq" not in verdict


TORCH_CHECK = r"""
import sys, torch
sys.path.insert(0, sys.argv[1])
import torch_backward as tb
torch.manual_seed(0)
sdpa = torch.nn.functional.scaled_dot_product_attention
q, k, v = (torch.randn(2, 4, n, 16) for n in (1, 48, 48))
def forward(q, k, v):
    return sdpa(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1))
k, v = k[:, :2].contiguous(), v[:, :2].contiguous()  # GQA: 2 KV heads for 4 query heads
ragged = lambda q, k, v: tb.per_sequence(torch, forward, q, k, v, [48, 20])
for pass_ in ("bwd", "fwd_bwd"):
    call, gradients = tb.timed_call(torch, ragged, q, k, v, pass_)
    timed = call()
    assert len(timed) == 3 and timed[1].shape == k.shape
    errors = tb.gradient_errors(torch, gradients(), tb.reference_gradients(torch, ragged, q, k, v))
    assert tb.gradient_verdict(errors, 1e-6) == "", errors
    assert float(timed[1][1, :, 20:].abs().max()) == 0.0  # keys past the sequence's length: no gradient
wrong = [g * 1.01 for g in gradients()]
errors = tb.gradient_errors(torch, wrong, tb.reference_gradients(torch, ragged, q, k, v))
assert "gradients off" in tb.gradient_verdict(errors, 1e-6), errors
print("ok")
"""


@pytest.mark.skipif(not TORCH_PYTHON or not Path(TORCH_PYTHON).exists(), reason=NO_TORCH)
def test_real_gradients_of_a_ragged_gqa_decode_match_float64():
    done = subprocess.run([TORCH_PYTHON, "-c", TORCH_CHECK, str(PEERS)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
