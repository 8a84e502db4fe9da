#!/usr/bin/env python3
"""Draw every plot that applies to a run into <run>/plots/: time scaling with fitted
exponents, throughput against the measured peak, workspace, time vs heads and d_k,
speed-up over the default baseline and time against mask density; plus the
markdown results table. A plot whose axis the run did not sweep is left out with a
one-line note.

    python3 scripts/plot_all.py results/<run> [--baseline NAME] [--out DIR]
"""

from __future__ import annotations

import sys

import attnbench_results as ar
import plot_heads_dk
import plot_mask_density
import plot_memory
import plot_scaling
import plot_speedup
import plot_throughput
import results_table


def draw_all(run: ar.Run, out_dir, baseline: str | None = None) -> list:
    plots = (
        ("scaling", lambda: plot_scaling.plot(run, out_dir)),
        ("throughput", lambda: plot_throughput.plot(run, out_dir)),
        ("memory", lambda: plot_memory.plot(run, out_dir)),
        ("heads/d_k", lambda: plot_heads_dk.plot(run, out_dir)),
        ("speed-up", lambda: plot_speedup.plot(run, out_dir, baseline)),
        ("mask density", lambda: plot_mask_density.plot(run, out_dir)),
    )
    written = [ar.write_text(out_dir, "results.md", results_table.render(run))]
    for name, draw in plots:
        try:
            written += draw()
        except ar.NotApplicable as reason:
            print(f"no {name} plot: {reason}")
    return written


def build_parser():
    parser = ar.script_parser(__doc__, __file__)
    ar.add_run_arguments(parser)
    parser.add_argument("--baseline", help="variant for the speed-up plot (default: naive if present)")
    return parser


def main(argv=None) -> int:
    return ar.plot_main(build_parser(),
                        lambda run, out_dir, args: draw_all(run, out_dir, args.baseline), argv)


if __name__ == "__main__":
    sys.exit(main())
