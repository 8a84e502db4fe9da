"""A markdown table of one run: per case the variant, shape, status (with the reason
for skipped and failed cases), median time with its 95% interval, GFLOP/s, % of the
measured peak, peak workspace, the oracle's errors, and whether other work on the
machine disturbed the numbers (a footnote mark: each reason is said once, under the table,
after a line with how many records and the worst peak check). Times and rates are rounded
to the digits their interval supports. Printed, and written to <out>/results.md.

    attnbench-table results/<run> [--out DIR]
"""

from __future__ import annotations

import sys

from . import cli, results as ar

HEADERS = ("variant", "device", "precision", "shape", "status", "median ms", "±95% CI",
           "GFLOP/s", "% of peak", "workspace", "max abs err", "rel L2 err", "disturbed")


def interval_cell(case: dict) -> str:
    half_width = case.get("rel_ci_half_width")
    if not ar.is_number(half_width):
        return "-"
    missed = case.get("target_reached") is False  # a target was set and time ran out first
    return f"{ar.format_percent(100 * half_width)}%" + (" (target missed)" if missed else "")


def row(case: dict, notes: ar.Disturbances) -> list[str]:
    max_abs_err = ar.format_number(case["oracle_max_abs_err"], 2)
    if case["oracle_sampled"] and case["oracle_max_abs_err"] is not None:
        max_abs_err += " (sampled)"  # checked on sampled rows only: a large case
    return [
        case["variant"], case["device"], case["precision"], ar.format_shape(case),
        ar.status_text(case),
        ar.format_measured(case["time_ms_median"], case.get("rel_ci_half_width")),
        interval_cell(case),
        ar.format_measured(case["gflops"], case.get("rel_ci_half_width")),
        "-" if case["percent_of_peak"] is None else ar.format_percent(case["percent_of_peak"]),
        ar.format_bytes(case["workspace_bytes"]),
        max_abs_err,
        ar.format_number(case["oracle_rel_l2_err"], 2),
        notes.mark(case) or "-",
    ]


def render(run: ar.Run) -> str:
    counts = ar.status_counts_text(run.cases)
    ok = len(ar.ok_cases(run.cases))
    heading = f"# attnbench results: {run.name}\n\n{run.where(run.devices())} ({run.provenance()})"
    summary = f"{len(run.cases)} cases: {ok} ok" + (f", {counts}" if counts else "")
    notes = ar.Disturbances(run.cases)
    headers, rows = list(HEADERS), [row(case, notes) for case in run.cases]
    if len(run.machines()) > 1:  # merged from shards on different machines: say which is which
        headers.insert(1, "machine")
        for cells, case in zip(rows, run.cases):
            cells.insert(1, str(case.get("machine") or "-"))
    footnotes = "".join(f"\n{line}\n" for line in ar.disturbance_summary(run))
    return f"{heading}\n\n{summary}\n\n{ar.markdown_table(headers, rows)}{footnotes}"


def add_arguments(parser) -> None:
    cli.add_run_arguments(parser)


def run(args) -> None:
    loaded = ar.load_run(args.run)
    text = render(loaded)
    # The folder first: an --out that cannot be one is the one line, not a table then an error.
    out_dir = ar.make_output_dir(cli.output_dir(args, loaded))
    print(text, end="")
    path = ar.write_text(out_dir, "results.md", text)
    print(f"wrote {path}", file=sys.stderr)
