"""Disturbance said once (the run-level note and numbered footnotes, never a reason per row or
per point): on runs where other work disturbed every record, with a long reason per record, no
plot's caption exceeds CAPTION_MAX_LINES, results.md gives each reason once under its table, and
report.html opens on the disturbance summary and shows 20 and more table rows in a 1400 x 900
viewport, as headless Chromium draws it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from attnbench import plotting as ap, results as ar, table
from attnbench.plots import all as all_plots
from browser import headless_chromium
from commands import Command

REPO = Path(__file__).resolve().parents[2]
# Committed runs whose plots between them are every kind: scaling, throughput, memory, speed-up,
# heads/d_k, mask density, backward, the roofline with decode points.
FOLDERS = ("cpu-scaling", "dtypes", "mask-density", "backward", "decode", "cpu-bf16", "decode-kv-quant")
LONG_REASON = ("cpu_fma_gflops checks disagree: 67.6 (start) to 483 (end) GFLOP/s, 614% apart; other "
               "work ran during the start check: the FMA loop sustained 25.1 of the best 483 GFLOP/s "
               "(5%); other work ran during the end check: the FMA loop sustained 301 of the best "
               "483 GFLOP/s (62%)")

# Plots of what no timing touches (the bytes the forward keeps): nothing there to disturb.
UNTIMED = {"saved_for_backward"}

report = Command("report")


def all_disturbed(source: Path, folder: Path) -> Path:
    """A copy of a committed run with every ok record disturbed: where the folder keeps its peak
    checks (readers rate from them), by a check that other work slowed to a fifth; else by a
    reason of its own on each record."""
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("plots", "report.html"))
    checks = ar.load_run(folder).peak_checks  # peaks.jsonl, or an older manifest's checks
    if checks:
        slowed = {k: v / 5 if isinstance(v, float) else v for k, v in checks[0].items()}
        (folder / "peaks.jsonl").write_text(
            "".join(json.dumps(c) + "\n" for c in [*checks, {**slowed, "when": "middle"}]))
        return folder
    records = [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines() if line]
    for number, record in enumerate(records):
        if record["status"] == "ok":
            record.update(disturbed=True, disturbed_reason=f"{LONG_REASON} (record {number})")
    (folder / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("disturbed")
    return [ar.load_run(all_disturbed(REPO / "results" / name, base / name)) for name in FOLDERS]


def caption_lines(fig) -> int:
    # The caption is the figure's text below the panels (finish_figure): its longest text.
    return max((text.get_text().count("\n") + 1 for text in fig.texts if text.get_text()), default=0)


def test_no_caption_exceeds_six_lines_when_every_record_is_disturbed(runs):
    drawn = []
    for run in runs:
        assert all(ar.is_disturbed(c) for c in ar.ok_cases(run.cases))
        for stem, fig in all_plots.figures(run).items():
            try:
                text = "\n".join(t.get_text() for t in fig.texts)
                lines = caption_lines(fig)
            finally:
                ap.plt.close(fig)
            drawn.append(stem)
            assert lines <= ap.CAPTION_MAX_LINES, f"{run.name}/{stem}: {lines} caption lines"
            for reason in ar.Disturbances(run.cases).reasons:
                assert reason not in text, f"{run.name}/{stem} repeats a reason in its caption"
            if stem not in UNTIMED:
                assert "disturbed (ringed in red)" in text, f"{run.name}/{stem} does not say it"
    for kind in ("scaling", "throughput_cpu", "memory", "speedup_vs_naive", "mask_density",
                 "pass_time", "bwd_fwd_ratio", "heads_dk", "roofline", "kv_quant"):
        assert kind in drawn, f"no {kind} plot among {drawn}"


def test_a_caption_over_its_lines_says_how_many_more(capsys):
    lines = ap.caption_text(["x " * 400, "one", "two"])
    assert len(lines) == ap.CAPTION_MAX_LINES
    assert lines[-1].startswith("... ") and "more caption lines" in lines[-1]


def test_results_md_gives_each_reason_once_under_its_table(runs):
    for run in runs:
        text = table.render(run)
        ok = ar.ok_cases(run.cases)
        reasons = ar.Disturbances(run.cases).reasons
        assert f"{len(ok)} of {len(ok)} ok records disturbed" in text
        last_row = text.rindex("\n| ")
        for number, reason in enumerate(reasons, start=1):
            # Said once, not counting where it starts a longer reason (a decode record's adds its
            # bandwidth checks' disagreement to the compute checks' reason after "; ").
            said = re.findall(re.escape(reason) + "(?!; )", text)
            assert len(said) == 1, f"{run.name}: a reason said more than once"
            assert text.index(f"[{number}] {reason}") > last_row  # under the table
        rows = [line for line in text.splitlines() if line.startswith("| ")][2:]
        assert sum(1 for row in rows if row.rstrip(" |").endswith("]")) == len(ok)
    assert any("worst check: the middle check" in table.render(run) for run in runs)


def test_the_report_opens_on_the_summary_and_shows_twenty_rows_a_screen(runs, tmp_path):
    run = max(runs, key=lambda r: len(r.cases))
    assert len(run.cases) >= 40
    out = tmp_path / "report.html"
    assert report.main([run.folder, "--out", out]) == 0
    browser = headless_chromium(1400, 900)
    try:
        browser.get(out.as_uri())
        summary = browser.find_element("id", "disturbances")
        assert summary.location["y"] < 300, "the disturbance summary is not at the top"
        assert f"{len(ar.ok_cases(run.cases))} of " in summary.text
        browser.execute_script("document.getElementById('cases-table').scrollIntoView();")
        shown = browser.execute_script("""
            var rows = document.querySelectorAll('#cases-table tbody tr');
            var seen = 0;
            rows.forEach(function (row) {
              var box = row.getBoundingClientRect();
              if (box.top >= 0 && box.bottom <= window.innerHeight) { seen += 1; }
            });
            return [seen, window.innerWidth, window.innerHeight];""")
        assert shown[1:] == [1400, 900]
        assert shown[0] >= 20, f"{shown[0]} table rows in a 1400 x 900 viewport"
        # The reason is said once, on top; a row carries its mark (the whole reason on hover).
        cell = browser.find_element("css selector", "#cases-table tbody tr.disturbed td:last-child")
        assert cell.text.startswith("[") and cell.get_attribute("title") in ar.Disturbances(run.cases).reasons
    finally:
        browser.quit()
