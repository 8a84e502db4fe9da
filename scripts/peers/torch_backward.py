"""The PyTorch peer's backward pass (#23) and decode cases (#24), apart from its forward timing
(torch_sdpa.py): what a timed call is for each pass, how a ragged batch and a paged cache reach
SDPA, and the gradient check. Cheap beside the timing: the check runs the float64 math backend
once per case, on the CPU copy of the inputs.

- pass fwd: the SDPA call alone (torch_sdpa.py's). pass bwd: the forward runs untimed with Q, K,
  V requiring grad, then torch.autograd.grad(out, (q, k, v), dO, retain_graph=True) is timed
  alone, so every timed run differentiates the same graph. pass fwd_bwd: forward and gradients
  timed together.
- Gradients are checked against PyTorch's float64 math backend on the same inputs and the same
  dO (attnbench append checks the forward's output only): the relative L2 error of each of dQ,
  dK, dV against the float64 one must stay under the case's forward tolerance times
  GRAD_TOLERANCE_FACTOR (a backward sums over seq, rounding grows with it).
- Ragged batches (kv_lens): one call per sequence, each on its own cache length, timed as the
  sum. Padding to seq_kv with a mask would time keys nobody reads and refuse every backend that
  takes no mask; one call per sequence times what each sequence needs, at the cost of one
  launch per sequence, which the record's reason says.
- Paged caches (kv_cache paged:N): SDPA has no block table; the peer reads the cache contiguous
  and the record's reason says so.
"""

from __future__ import annotations

PASSES = ("fwd", "bwd", "fwd_bwd")
# The backward's rounding against the forward's tolerance: dQ, dK and dV each sum over a whole
# sequence of products of rounded values.
GRAD_TOLERANCE_FACTOR = 4.0


def pass_of(case: dict) -> str:
    """The plan's pass for a case (absent in plans from before #23: fwd)."""
    value = case.get("pass") or "fwd"
    if value not in PASSES:
        raise ValueError(f"pass {value!r} is not one of {', '.join(PASSES)}")
    return value


def cache_notes(kv_cache: str, kv_lens) -> list[str]:
    """What the record's reason says about how the cache reached SDPA."""
    notes = []
    if kv_cache and kv_cache != "contiguous":
        notes.append(f"{kv_cache} cache read contiguous: PyTorch SDPA has no paged KV cache")
    if kv_lens:
        notes.append(f"ragged batch (kv_lens): {len(kv_lens)} calls, one per sequence, timed as one")
    return notes


def sequence_slices(batch: int, kv_lens) -> list[tuple[int, int | None]]:
    """(batch index, cache length) per call: one call per sequence when ragged, else
    [(-1, None)]: one call on the whole batch."""
    if not kv_lens:
        return [(-1, None)]
    if len(kv_lens) != batch or any(not isinstance(n, int) or n < 1 for n in kv_lens):
        raise ValueError(f"kv_lens {kv_lens!r}: expected {batch} positive cache lengths")
    return list(enumerate(kv_lens))


def per_sequence(torch, forward, q, k, v, kv_lens):
    """A forward over a ragged batch: forward(q_b, k_b[:len], v_b[:len]) per sequence, the
    outputs concatenated on the batch axis (query rows need no trimming: seq_q is the same)."""
    slices = sequence_slices(q.shape[0], kv_lens)
    if slices == [(-1, None)]:
        return forward(q, k, v)
    return torch.cat([forward(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n]) for b, n in slices])


def timed_call(torch, forward, q, k, v, pass_: str):
    """(call, grads): the no-argument function to time for this pass, and one that returns the
    gradients (dQ, dK, dV) for the check (None for fwd). The forward of bwd runs here, untimed."""
    if pass_ == "fwd":
        return (lambda: forward(q, k, v)), None
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    out = forward(q, k, v)
    grad_out = torch.ones_like(out) / out.numel() ** 0.5  # dO the same in every run and check

    def gradients():
        return torch.autograd.grad(out, (q, k, v), grad_out, retain_graph=True)

    if pass_ == "bwd":
        return gradients, gradients

    def forward_and_backward():
        fresh = forward(q, k, v)
        return torch.autograd.grad(fresh, (q, k, v), grad_out)

    return forward_and_backward, gradients


def reference_gradients(torch, forward64, q, k, v):
    """dQ, dK, dV in float64 on the CPU with the same dO convention as timed_call."""
    q, k, v = (t.detach().to("cpu", torch.float64).requires_grad_(True) for t in (q, k, v))
    out = forward64(q, k, v)
    return torch.autograd.grad(out, (q, k, v), torch.ones_like(out) / out.numel() ** 0.5)


def gradient_errors(torch, grads, reference) -> dict:
    """Relative L2 error of each gradient against the float64 one."""
    errors = {}
    for name, got, want in zip(("dq", "dk", "dv"), grads, reference):
        got = got.detach().to("cpu", torch.float64)
        norm = float(torch.linalg.vector_norm(want))
        errors[name] = float(torch.linalg.vector_norm(got - want)) / (norm if norm > 0 else 1.0)
    return errors


def gradient_verdict(errors: dict, tolerance: float) -> str:
    """"" when every gradient is within GRAD_TOLERANCE_FACTOR x tolerance; else why not."""
    limit = GRAD_TOLERANCE_FACTOR * tolerance
    over = [f"{name} rel L2 {error:.3g}" for name, error in errors.items() if not error <= limit]
    if over:
        return (f"gradients off the float64 math backend's: {', '.join(over)} over "
                f"{limit:.3g} ({GRAD_TOLERANCE_FACTOR:g}x the forward tolerance)")
    return ""


# What the record's reason says about the pass timed.
PASS_NOTES = {
    "fwd": "forward timed",
    "bwd": "backward timed alone (torch.autograd.grad, forward untimed); gradients checked "
           "against PyTorch's float64 math backend",
    "fwd_bwd": "forward and backward timed together; gradients checked against PyTorch's "
               "float64 math backend",
}


def result_bytes(result) -> int:
    """The bytes of what a timed call returns: the output, or the gradients."""
    tensors = result if isinstance(result, (tuple, list)) else (result,)
    return sum(t.numel() * t.element_size() for t in tensors)
