"""RUN/report.html: one self-contained HTML file of a run: on top, how many records other work on
the machine disturbed, the worst peak check and each reason once (numbered: the table's rows
carry the number); a compact table of every case (one line a row, in a box of its own that
scrolls under a fixed header: 20 and more rows a screen) that sorts by any column (click its
header) and filters by variant, dtype and mask, with times and rates rounded to the digits their
interval supports; every plot that applies, inline as SVG; the peak checks, the machine and build. With a second folder, a comparison view
too: the candidate's median time over the baseline's, case by case, and its plot. Nothing in it
is fetched from a network: no CDN, no fonts, no images but its own inline SVG.

    attnbench-report results/<run> [results/<candidate run>] [--out FILE]

With two folders the first is the baseline and the report goes into the second (the candidate),
as attnbench-compare's files do.
"""

from __future__ import annotations

import html
import io
import json
from pathlib import Path

from . import cli, compare_runs, results as ar

# The cases table: header, how a case shows, and the value it sorts by (None: sorts as text).
_COLUMNS = (
    ("variant", lambda c: c["variant"], None),
    ("device", lambda c: c["device"], None),
    ("dtype", lambda c: c["dtype"], None),
    ("mask", lambda c: c.get("mask", "none"), None),
    ("shape", ar.format_shape, lambda c: c["seq_q"] * c["seq_kv"] * c["heads"] * c["batch"]),
    ("n", lambda c: str(c["seq_kv"]), lambda c: c["seq_kv"]),
    ("status", ar.status_text, None),
    ("median ms", lambda c: ar.format_measured(c["time_ms_median"], c.get("rel_ci_half_width")),
     lambda c: c["time_ms_median"]),
    ("±95% CI", lambda c: "-" if not ar.is_number(c.get("rel_ci_half_width"))
     else f"{ar.format_percent(100 * c['rel_ci_half_width'])}%", lambda c: c.get("rel_ci_half_width")),
    ("GFLOP/s", lambda c: ar.format_measured(c["gflops"], c.get("rel_ci_half_width")),
     lambda c: c["gflops"]),
    ("% of peak", lambda c: "-" if c["percent_of_peak"] is None else ar.format_percent(c["percent_of_peak"]),
     lambda c: c["percent_of_peak"]),
    ("workspace", lambda c: ar.format_bytes(c["workspace_bytes"]), lambda c: c["workspace_bytes"]),
    ("rel L2 err", lambda c: ar.format_number(c["oracle_rel_l2_err"], 2), lambda c: c["oracle_rel_l2_err"]),
)
_FILTERS = (("variant", "variant"), ("dtype", "dtype"), ("mask", "mask"))

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
.cases-box { max-height: 85vh; overflow: auto; border: 1px solid #ccc; }
table.cases { font-size: 0.78em; margin: 0; }
table.cases td, table.cases th { padding: 0.05em 0.35em; white-space: nowrap; line-height: 1.25; }
table.cases td.long { max-width: 22em; overflow: hidden; text-overflow: ellipsis; }
table.cases th { cursor: pointer; background: #f0f0f0; user-select: none; position: sticky; top: 0; }
.disturbances { background: #fff3f3; border: 1px solid #e8b4b4; padding: 0.3em 0.8em; }
.disturbances ul { max-height: 10em; overflow: auto; margin: 0.3em 0; font-size: 0.85em; }
th[aria-sort=ascending]::after { content: " \\25B2"; } th[aria-sort=descending]::after { content: " \\25BC"; }
tr.disturbed td { background: #fff3f3; } tr.skipped td, tr.failed td { color: #777; }
.filters label { margin-right: 1em; } .count { color: #555; margin-left: 1em; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.1em 1em; font-size: 0.9em; }
dt { font-weight: bold; }
"""

# Sorting and filtering, inline: no library, nothing fetched.
_SCRIPT = """
(function () {
  document.querySelectorAll("table.cases").forEach(function (table) {
    var body = table.tBodies[0];
    var box = table.closest("section");
    var selects = box.querySelectorAll("select[data-filter]");
    var count = box.querySelector(".count");
    function applyFilters() {
      var shown = 0;
      Array.prototype.forEach.call(body.rows, function (row) {
        var keep = Array.prototype.every.call(selects, function (select) {
          return select.value === "" || row.dataset[select.dataset.filter] === select.value;
        });
        row.hidden = !keep;
        if (keep) { shown += 1; }
      });
      if (count) { count.textContent = shown + " of " + body.rows.length + " cases shown"; }
    }
    selects.forEach(function (select) { select.addEventListener("change", applyFilters); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (header, column) {
      header.addEventListener("click", function () {
        var ascending = header.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(table.tHead.rows[0].cells, function (other) {
          other.removeAttribute("aria-sort");
        });
        header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        var numeric = header.dataset.type === "number";
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[column].dataset.sort, y = b.cells[column].dataset.sort;
          var order;
          if (numeric) {
            x = x === "" ? Infinity : Number(x); y = y === "" ? Infinity : Number(y);
            order = x === y ? 0 : (x < y ? -1 : 1);   /* empty (no value) sorts last */
          } else {
            order = x.localeCompare(y);
          }
          return ascending ? order : -order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
    applyFilters();
  });
})();
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _sort_value(value) -> str:
    return "" if not ar.is_number(value) else repr(float(value))


def cases_table(cases: list[dict], table_id: str) -> str:
    """The sortable, filterable table of a run's cases, with its filters above it: one line a
    row; a long status shows its start (the whole on hover), a disturbed row its footnote mark."""
    notes = ar.Disturbances(cases)
    columns = (*_COLUMNS, ("disturbed", notes.mark, None))
    filters = []
    for key, label in _FILTERS:
        values = sorted({str(c.get(key, "none")) for c in cases})
        options = "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in values)
        filters.append(f'<label>{_e(label)} <select data-filter="{key}" id="{table_id}-{key}">'
                       f'<option value="">all</option>{options}</select></label>')
    headers = "".join(f'<th data-type="{"text" if sort is None else "number"}">{_e(name)}</th>'
                      for name, _, sort in columns)
    rows = []
    for case in cases:
        cells = []
        for name, show, sort in columns:
            text = show(case) or "-"
            key = text if sort is None else _sort_value(sort(case))
            whole = {"status": text, "disturbed": ar.disturbed_reason(case)}.get(name)
            extra = f' class="long" title="{_e(whole)}"' if whole and whole != "ok" else ""
            cells.append(f'<td data-sort="{_e(key)}"{extra}>{_e(text)}</td>')
        classes = " ".join(filter(None, [case["status"] if case["status"] != "ok" else "",
                                         "disturbed" if ar.is_disturbed(case) else ""]))
        data = " ".join(f'data-{key}="{_e(case.get(key, "none"))}"' for key, _ in _FILTERS)
        rows.append(f'<tr class="{classes}" {data}>{"".join(cells)}</tr>')
    return (f'<div class="filters">{"".join(filters)}<span class="count"></span></div>'
            f'<div class="cases-box"><table class="cases" id="{table_id}"><thead><tr>{headers}'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


def disturbance_section(run: ar.Run) -> str:
    """The run-level note on disturbance (ar.disturbance_summary), or '' when nothing was."""
    lines = ar.disturbance_summary(run)
    if not lines:
        return ""
    items = "".join(f"<li>{_e(line)}</li>" for line in lines[1:])
    return (f'<div class="disturbances" id="disturbances"><strong>{_e(lines[0])}</strong>'
            f" Their numbers are doubtful: read them with care, or run again on a quiet machine."
            f"<ul>{items}</ul></div>")


def machine_section(run: ar.Run) -> str:
    manifest = run.manifest
    machine, build, gpu = manifest.get("machine") or {}, manifest.get("build") or {}, manifest.get("gpu")
    items = [("run", run.provenance()), ("folder", run.folder), ("machine", run.machine),
             *((f"machine {k}", v) for k, v in machine.items() if k != "description"),
             *((f"build {k}", v) for k, v in build.items()),
             ("GPU", "none" if not gpu else ", ".join(f"{k} {v}" for k, v in gpu.items()))]
    rows = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in items if v not in (None, ""))
    return f"<dl>{rows}</dl>"


def peaks_section(run: ar.Run) -> str:
    checks = run.peak_checks
    if not checks:
        summary = ", ".join(f"{k} {v}" for k, v in (run.manifest.get("peaks") or {}).items())
        return f"<p>No peak checks in this folder (peaks.jsonl); the manifest's: {_e(summary or 'none')}.</p>"
    keys = list(dict.fromkeys(k for check in checks for k in check))
    head = "".join(f"<th>{_e(k)}</th>" for k in keys)
    body = "".join("<tr>" + "".join(f"<td>{_e(_check_cell(check.get(k, '')))}</td>" for k in keys)
                   + "</tr>" for check in checks)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _check_cell(value) -> str:
    """A peak check's value as read: 4 significant digits, what a check's own spread supports."""
    if isinstance(value, float):
        return ar.format_number(value, 4)
    return str(value)


def svg_of(fig, name: str = "figure") -> str:
    """The figure as inline SVG (no XML prolog), then closed."""
    from . import plotting as ap

    buffer = io.StringIO()
    ap.show_text_as_written(fig)
    try:
        ap.draw_figure(fig, buffer, name, format="svg")
    finally:
        ap.plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def plots_section(run: ar.Run) -> str:
    from .plots import all as all_plots

    figures = all_plots.figures(run)
    if not figures:
        return "<p>No plot applies to this run.</p>"
    return "".join(f'<figure id="plot-{_e(stem)}">{svg_of(fig, stem)}<figcaption>{_e(stem)}</figcaption></figure>'
                   for stem, fig in figures.items())


def comparison_section(baseline: ar.Run, candidate: ar.Run) -> str:
    comparisons, notes = compare_runs.compare(baseline, candidate)
    headers = ("variant", "device", "dtype", "mask", "shape", f"{baseline.label} ms",
               f"{candidate.label} ms", "ratio", "verdict")
    rows = []
    for comparison in comparisons:
        case = comparison.candidate or comparison.baseline
        ratio = comparison.ratio
        cells = [case["variant"], case["device"], case["dtype"], case.get("mask", "none"),
                 ar.format_shape(case), compare_runs.time_cell(comparison.baseline, comparison.rule),
                 compare_runs.time_cell(comparison.candidate, comparison.rule),
                 "-" if ratio is None else f"{ratio:.3f}", comparison.verdict]
        rows.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    verdicts = [c.verdict for c in comparisons]
    summary = ", ".join(f"{verdicts.count(v)} {v}" for v in ("faster", "slower", "same"))
    figure = ""
    try:
        figure = f"<figure>{svg_of(compare_runs.figure(baseline, candidate, comparisons), 'comparison')}</figure>"
    except ar.NotApplicable as reason:
        figure = f"<p>No plot: {_e(reason)}</p>"
    warnings, condition_notes = compare_runs.condition_warnings(baseline, candidate)
    notes = [f"warning: {w}" for w in warnings] + notes + condition_notes
    note_list = "".join(f"<li>{_e(n)}</li>" for n in notes)
    return (f"<p>Candidate {_e(candidate.label)} against baseline {_e(baseline.label)}: ratio = "
            f"candidate median time / baseline's (above 1: slower); same: the medians' 95% "
            f"confidence intervals overlap (the min..max ranges where a record has none; the "
            f"interval beside each time is the one compared). {_e(summary)}.</p>"
            f"{'<ul>' + note_list + '</ul>' if notes else ''}"
            f'<table class="comparison"><thead><tr>{"".join(f"<th>{_e(h)}</th>" for h in headers)}'
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>{figure}")


def render(run: ar.Run, baseline: ar.Run | None = None) -> str:
    """The report of `run` (and, with `baseline`, of run against it) as one HTML document."""
    counts = ar.status_counts_text(run.cases)
    ok = len(ar.ok_cases(run.cases))
    sections = [
        ("cases", f"Cases: {len(run.cases)}, {ok} ok" + (f", {counts}" if counts else ""),
         cases_table(run.cases, "cases-table")),
        ("plots", "Plots", plots_section(run)),
        ("peaks", "Peak checks", peaks_section(run)),
        ("machine", "Machine and build", machine_section(run)),
    ]
    if baseline is not None:
        sections.append(("comparison", f"{run.label} against {baseline.label}",
                         comparison_section(baseline, run)))
    body = "".join(f'<section id="{key}"><h2>{_e(title)}</h2>{content}</section>'
                   for key, title, content in sections)
    title = f"attnbench: {run.label}"
    meta = _e(json.dumps({"run": run.label, "baseline": baseline.label if baseline else None}))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="attnbench-report" content="{meta}">'
            f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{_e(title)}</h1><p>{_e(run.where(run.devices()))} ({_e(run.provenance())})</p>"
            f"{disturbance_section(run)}{body}<script>{_SCRIPT}</script></body></html>\n")


def add_arguments(parser) -> None:
    parser.add_argument("run", help="results folder written by attnbench (results/<run>)")
    parser.add_argument("candidate", nargs="?",
                        help="a second folder: compared against the first, the report goes into it")
    parser.add_argument("--out", help="the HTML file to write (default: <run>/report.html, or "
                                      "<candidate>/report.html with two folders)")


def run(args) -> None:
    first = ar.load_run(args.run)
    if args.candidate:
        subject, baseline = ar.load_run(args.candidate), first
    else:
        subject, baseline = first, None
    out = Path(args.out) if args.out else subject.folder / "report.html"
    ar.check_output_target(out)  # before the plots are drawn: a refused target costs nothing
    text = render(subject, baseline)
    ar.write_file(out, text)
    cli.report_written([out])
