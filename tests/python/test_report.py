"""attnbench-report: RUN/report.html is one self-contained file (machine and build, peaks, a cases
table that sorts and filters, the plots as inline SVG, and with two folders a comparison view).
The table is checked in a real browser: headless Chromium through Selenium (Debian's chromium
and chromium-driver, `pip install selenium`), skipped with the reason where either is missing."""

from __future__ import annotations

import json
import re

import pytest

from browser import headless_chromium
from commands import Command
from results_factory import make_case, write_run

report = Command("report")


def cases_of(scale: float) -> list[dict]:
    cases = []
    for variant, speed in (("naive", 8.0), ("flash_cpu", 1.0), ("openmp", 2.0)):
        for dtype in ("fp32", "bf16"):
            for causal in (False, True):
                for seq in (256, 512, 1024):
                    case = make_case(variant, seq=seq, dtype=dtype, causal=causal,
                                     time_ms=scale * speed * (seq / 256) ** 2 * (0.6 if causal else 1))
                    case["mask"] = "causal" if causal else "none"
                    cases.append(case)
    cases.append(make_case("naive", seq=2048, status="skipped", reason="over the time budget"))
    return cases


@pytest.fixture
def two_runs(tmp_path):
    before = write_run(tmp_path / "before", cases_of(1.0))
    after = write_run(tmp_path / "after", cases_of(1.2))
    (after / "peaks.jsonl").write_text(json.dumps(
        {"when": "start", "date": "2025-01-02T03:04:05Z", "cpu_fma_gflops": 232.0,
         "cpu_fma_sustained_gflops": 230.0, "load_1min": 0.1}) + "\n")
    return before, after


def test_the_report_is_one_file_with_every_section(two_runs, capsys):
    before, after = two_runs
    assert report.main([after]) == 0
    text = (after / "report.html").read_text(encoding="utf-8")
    for section in ("machine", "peaks", "cases", "plots"):
        assert f'<section id="{section}">' in text
    assert "AMD EPYC (2 cores)" in text and "cpu_fma_sustained_gflops" in text
    assert text.count("<svg") == 4  # scaling, throughput, memory, speed-up
    assert text.count("<tr class=") == len(cases_of(1.0))
    # Self-contained: nothing fetched (the SVGs' xmlns names are names, not fetches).
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', text)
    assert "<link" not in text and "@import" not in text and "url(http" not in text
    assert '<section id="comparison">' not in text


def test_two_folders_add_the_comparison_view(two_runs):
    before, after = two_runs
    assert report.main([before, after]) == 0
    text = (after / "report.html").read_text(encoding="utf-8")
    assert '<section id="comparison">' in text and "after against before" in text
    assert "<td>1.200</td><td>slower</td>" in text
    assert text.count("<svg") == 5


def test_a_malformed_folder_is_one_line_and_exit_2(tmp_path, capsys):
    assert report.main([tmp_path / "absent"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnbench-report: error:") and err.count("\n") == 1


def visible_rows(browser):
    return [row for row in browser.find_elements("css selector", "#cases-table tbody tr")
            if row.is_displayed()]


def column(rows, index: int) -> list[str]:
    return [row.find_elements("tag name", "td")[index].text for row in rows]


def test_the_table_sorts_and_filters_in_a_real_browser(two_runs):
    from selenium.webdriver.support.ui import Select

    before, after = two_runs
    assert report.main([before, after]) == 0
    browser = headless_chromium()
    try:
        browser.get((after / "report.html").as_uri())
        headers = [h.text.strip(" ▲▼") for h in
                   browser.find_elements("css selector", "#cases-table thead th")]
        median = headers.index("median ms")
        rows = visible_rows(browser)
        assert len(rows) == len(cases_of(1.0))
        assert browser.find_element("css selector", "#cases .count").text == f"{len(rows)} of {len(rows)} cases shown"

        header = browser.find_elements("css selector", "#cases-table thead th")[median]
        header.click()
        times = column(visible_rows(browser), median)
        numbers = [float(t) for t in times if t != "-"]
        assert numbers == sorted(numbers) and numbers[0] < numbers[-1]
        assert times[-1] == "-"  # the skipped case (no time) sorts last
        assert header.get_attribute("aria-sort") == "ascending"
        header.click()
        numbers = [float(t) for t in column(visible_rows(browser), median) if t != "-"]
        assert numbers == sorted(numbers, reverse=True)

        Select(browser.find_element("id", "cases-table-variant")).select_by_value("flash_cpu")
        rows = visible_rows(browser)
        assert len(rows) == 12 and set(column(rows, headers.index("variant"))) == {"flash_cpu"}
        Select(browser.find_element("id", "cases-table-dtype")).select_by_value("bf16")
        Select(browser.find_element("id", "cases-table-mask")).select_by_value("causal")
        rows = visible_rows(browser)
        assert len(rows) == 3
        assert set(column(rows, headers.index("dtype"))) == {"bf16"}
        assert set(column(rows, headers.index("mask"))) == {"causal"}
        # Still sorted, descending, within the filter.
        numbers = [float(t) for t in column(rows, median)]
        assert numbers == sorted(numbers, reverse=True)
        assert browser.find_element("css selector", "#cases .count").text.startswith("3 of ")
        # The plots drew: inline SVG with size, in the page itself.
        sizes = [svg.size for svg in browser.find_elements("css selector", "#plots svg")]
        assert len(sizes) == 4 and all(s["width"] > 100 and s["height"] > 100 for s in sizes)
    finally:
        browser.quit()
