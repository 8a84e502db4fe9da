"""Draw every plot that applies to a run into <run>/plots/: time scaling with fitted
exponents, throughput against the measured peak, workspace, time vs heads and d_k,
speed-up over the default baseline, time against mask density, the backward pass (time per
pass, bwd/fwd ratio, memory kept for backward), the roofline and a quantized KV cache's speed-up
against its error; plus the
markdown results table. A plot whose axis the run did not sweep is left out with a
one-line note; with --only, the plots named, and one that does not apply is an error.

    attnbench-plot results/<run> [--only scaling,throughput,...] [--baseline NAME]
                   [--seq N] [--heads H] [--d-k D] [--out DIR]
"""

from __future__ import annotations

import argparse

from .. import cli, results as ar, table
from . import (backward, heads_dk, kv_quant, mask_density, memory, roofline, scaling, speedup,
               throughput)

# Name (for --only), what the note calls it, and how to draw it from the parsed arguments.
PLOTS = {
    "scaling": ("scaling", lambda run, out, a: scaling.plot(run, out)),
    "throughput": ("throughput", lambda run, out, a: throughput.plot(run, out)),
    "memory": ("memory", lambda run, out, a: memory.plot(run, out)),
    "heads_dk": ("heads/d_k", lambda run, out, a: heads_dk.plot(run, out, a.seq, a.heads, a.d_k)),
    "speedup": ("speed-up", lambda run, out, a: speedup.plot(run, out, a.baseline)),
    "mask_density": ("mask density", lambda run, out, a: mask_density.plot(run, out)),
    "backward": ("backward", lambda run, out, a: backward.plot(run, out)),
    "roofline": ("roofline", lambda run, out, a: roofline.plot(run, out)),
    "kv_quant": ("quantized KV cache", lambda run, out, a: kv_quant.plot(run, out)),
}


def figures(run, baseline: str | None = None) -> dict:
    """Every figure that applies to the run, by file stem (for a notebook or the report)."""
    from .. import plotting as ap

    run = ap.as_run(run)
    found: dict = {}
    for draw in (scaling.figures, throughput.figures, memory.figures, heads_dk.figures,
                 lambda r: speedup.figures(r, baseline), mask_density.figures, backward.figures,
                 roofline.figures, kv_quant.figures):
        try:
            found.update(draw(run))
        except ar.NotApplicable:
            pass
    return found


def draw_all(run: ar.Run, out_dir, args: argparse.Namespace | None = None) -> list:
    """Writes results.md and the plots named by args.only (default: all that apply)."""
    args = args or argparse.Namespace(only=None, baseline=None, seq=None, heads=None, d_k=None)
    only = parse_only(args.only)
    written = [ar.write_text(out_dir, "results.md", table.render(run))] if only is None else []
    for name in only or PLOTS:
        description, draw = PLOTS[name]
        try:
            written += draw(run, out_dir, args)
        except ar.NotApplicable as reason:
            if only is not None:
                raise
            print(f"no {description} plot: {reason}")
    return written


def parse_only(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in PLOTS]
    if unknown or not names:
        raise ar.ResultsError(f"--only {text!r}: expected plots among {', '.join(PLOTS)}")
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cli.add_run_arguments(parser)
    parser.add_argument("--only", metavar="PLOTS",
                        help=f"comma-separated, of {', '.join(PLOTS)} (default: every one that applies)")
    parser.add_argument("--baseline", help="variant for the speed-up plot (default: naive if present)")
    parser.add_argument("--seq", type=int, help="heads_dk: fixed sequence length (the swept seq axis)")
    parser.add_argument("--heads", type=int, help="heads_dk: fixed head count for the d_k panel")
    parser.add_argument("--d-k", dest="d_k", type=int, help="heads_dk: fixed d_k for the heads panel")


def run(args: argparse.Namespace) -> None:
    parse_only(args.only)  # a bad --only before anything is read
    loaded = ar.load_run(args.run)
    cli.report_written(draw_all(loaded, cli.output_dir(args, loaded), args))
