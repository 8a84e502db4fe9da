"""Hostile results folders against the Python commands: each is one line on stderr
("attnbench-<cmd>: error: ...") and exit status 2, or a plot drawn as written, never a
traceback. Text holding matplotlib math ($...$) is drawn as written; a name holding '/' stays
one file in the output folder; wrong-typed fields, numbers past a double's range, NaN and
Infinity are refused once, at load, by the binary that reads the folder for every reader
(`attnbench export`: the schema's types, its size caps)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attnbench import cli
from attnbench import results as ar
from commands import Command
from results_factory import make_manifest, power_law_cases, write_run

PLOT, TABLE, REPORT, COMPARE = Command("plot"), Command("table"), Command("report"), Command("compare")
COMPARE_VARIANTS, GPU_SUMMARY = Command("compare-variants"), Command("gpu-summary")
MATH_TEXT = r"$\sqrt{$"


def two_variant_cases() -> list[dict]:
    return power_law_cases("naive", 2.0, 1e-6) + power_law_cases("flash_cpu", 2.0, 5e-7)


def folder_with(tmp_path: Path, name: str = "run", edit=None, manifest: dict | None = None,
                raw: dict[str, str] | None = None) -> Path:
    """A two-variant run; `edit(cases)` changes the records; `raw` replaces a quoted JSON
    string with literal text in cases.jsonl (for 1e400, NaN: what json.dumps cannot write)."""
    cases = two_variant_cases()
    if edit:
        edit(cases)
    folder = write_run(tmp_path / name, cases, manifest)
    for quoted, literal in (raw or {}).items():
        path = folder / "cases.jsonl"
        path.write_text(path.read_text().replace(json.dumps(quoted), literal))
    return folder


def set_field(key, value, index=0):
    def edit(cases):
        cases[index][key] = value
    return edit


def set_time(value, index=0):
    """Case `index` timed at `value` ms, its fastest repetition with it (min <= median)."""
    def edit(cases):
        cases[index].update(time_ms_median=value, time_ms_min=min(value, cases[index]["time_ms_min"]))
    return edit


def run_command(command: Command, argv, capsys) -> tuple[int, str]:
    status = command.main(argv)
    return status, capsys.readouterr().err


def assert_one_line_error(command: Command, argv, capsys, *fragments: str) -> str:
    status, err = run_command(command, argv, capsys)
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{command.prog}: error: "), err
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


def every_command(folder: Path, other: Path, out: Path):
    return [(PLOT, [folder, "--out", out / "plots"]), (TABLE, [folder]),
            (REPORT, [folder, "--out", out / "report"]), (COMPARE, [other, folder, "--out", out / "cmp"]),
            (COMPARE_VARIANTS, [folder, "--baseline", "naive", "--out", out / "cv"]),
            (GPU_SUMMARY, [folder, "--out", out / "summary.md"])]


def svg_texts(folder: Path) -> str:
    return "".join(path.read_text() for path in folder.rglob("*.svg"))


# ----------------------------------------------------------------------------
# Text holding matplotlib math is drawn as written


def skip_with_math_reason(cases):
    cases[3].update(status="skipped", reason=f"needs {MATH_TEXT} and $x$", time_ms_median=None,
                    time_ms_min=None, time_ms_max=None, cv=None, gflops=None, gbps=None,
                    workspace_bytes=None)


def rename(variant: str, first: int, last: int):
    return lambda cases: [case.update(variant=variant) for case in cases[first:last]]


@pytest.mark.parametrize("manifest, edit", [
    pytest.param({**make_manifest("x"), "name": MATH_TEXT}, None, id="config name"),
    pytest.param(None, rename(MATH_TEXT, 6, 12), id="variant"),
    pytest.param(None, rename(MATH_TEXT, 0, 6), id="baseline variant"),
    pytest.param(None, skip_with_math_reason, id="skip reason"),
])
def test_math_text_in_names_and_reasons_is_drawn_as_written(tmp_path, capsys, manifest, edit):
    folder = folder_with(tmp_path, edit=edit, manifest=manifest)
    status, err = run_command(PLOT, [folder, "--out", tmp_path / "plots"], capsys)
    assert status == 0, err
    assert MATH_TEXT in svg_texts(tmp_path / "plots")
    status, err = run_command(REPORT, [folder, folder_with(tmp_path, "other"), "--out",
                                       tmp_path / "report"], capsys)
    assert status == 0, err


def test_math_text_in_a_compared_variant_is_drawn_as_written(tmp_path, capsys):
    folder = folder_with(tmp_path, edit=rename(MATH_TEXT, 6, 12))
    status, err = run_command(COMPARE_VARIANTS, [folder, "--baseline", "naive", "--out",
                                                 tmp_path / "cv"], capsys)
    assert status == 0, err
    other = folder_with(tmp_path, "other", edit=rename(MATH_TEXT, 6, 12))
    status, err = run_command(COMPARE, [folder, other, "--out", tmp_path / "cmp"], capsys)
    assert status == 0, err


def test_math_text_in_heatmap_tokens_is_drawn_as_written(tmp_path, capsys):
    np = pytest.importorskip("numpy")
    weights = tmp_path / "w.npy"
    np.save(weights, np.full((1, 1, 3, 3), 1 / 3, dtype=np.float32))
    status, err = run_command(Command("heatmap"), [weights, "--tokens", "$a $\\sqrt{$ b$",
                                                   "--out", tmp_path / "h"], capsys)
    assert status == 0, err


def npy_with_header(path: Path, header: str) -> Path:
    """A version-1 .npy file whose header dict is `header` as written, padded as NumPy pads it,
    and 64 bytes of data."""
    text = header + " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1")
                     + bytes(64))
    return path


@pytest.mark.parametrize("header, fragment", [
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 8, 4)", "not a readable .npy"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999, 1), }",
     "not a readable .npy"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 8, 4)) }", "not a readable .npy"),
], ids=["unclosed", "huge-dimension", "unbalanced"])
def test_a_damaged_npy_header_is_one_line_for_the_heatmap(tmp_path, capsys, header, fragment):
    # NumPy parses the header with ast.literal_eval: these raised a SyntaxError, a tokenizer
    # error or an OverflowError, each a traceback of 24-48 lines.
    pytest.importorskip("numpy")
    weights = npy_with_header(tmp_path / "w.npy", header)
    assert_one_line_error(Command("heatmap"), [weights, "--out", tmp_path / "h"], capsys, fragment,
                          "w.npy")


def test_a_heatmap_tokens_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path, capsys):
    np = pytest.importorskip("numpy")
    weights = tmp_path / "w.npy"
    np.save(weights, np.full((1, 1, 3, 3), 1 / 3, dtype=np.float32))
    fifo = tmp_path / "tokens"
    os.mkfifo(fifo)
    assert_one_line_error(Command("heatmap"), [weights, "--tokens-file", fifo, "--out",
                                               tmp_path / "h"], capsys, "not a regular file",
                          "tokens")


def test_the_heatmap_colour_scale_is_that_of_the_finite_weights(tmp_path, capsys):
    np = pytest.importorskip("numpy")
    from attnbench.plots import heatmap
    matrix = np.full((4, 4), 0.25)
    matrix[0, 0] = np.inf
    assert heatmap.colour_max(matrix) == 0.25
    assert heatmap.colour_max(np.full((2, 2), np.nan)) == 1.0
    # An all-NaN file is drawn with its caption, and nothing on stderr but the lines written.
    weights = tmp_path / "nan.npy"
    np.save(weights, np.full((1, 1, 3, 3), np.nan, dtype=np.float32))
    status, err = run_command(Command("heatmap"), [weights, "--out", tmp_path / "h"], capsys)
    assert status == 0 and "Warning" not in err, err


# ----------------------------------------------------------------------------
# A name never makes a path of its own


@pytest.mark.parametrize("variant", ["a/b", "../up", "..", "tab\there", "new\nline", "50%/x"])
def test_a_variant_name_stays_one_file_in_the_output_folder(tmp_path, capsys, variant):
    folder = folder_with(tmp_path, edit=rename(variant, 0, 6))
    out = tmp_path / "plots"
    status, err = run_command(PLOT, [folder, "--out", out], capsys)
    assert status == 0, err
    status, err = run_command(COMPARE_VARIANTS, [folder, "--baseline", variant, "--out", out], capsys)
    assert status == 0, err
    assert all(path.parent == out for path in out.rglob("*")), sorted(out.rglob("*"))
    assert not (tmp_path / "up.png").exists()
    names = [path.name for path in out.iterdir()]
    assert any(name.startswith("speedup_vs_") for name in names)
    assert any(name.startswith("ratio_vs_") for name in names)


def test_safe_file_names_are_readable_and_one_to_one():
    names = ["a/b", "a%2Fb", "a_b", "..", ".hidden", "x" * 300, "x" * 301, "é", "a\x00b"]
    safe = [ar.safe_file_name(name) for name in names]
    assert len(set(safe)) == len(safe)
    assert safe[0] == "a%2Fb" and safe[2] == "a_b" and safe[7] == "é"
    for name in safe:
        assert "/" not in name and "\x00" not in name and not name.startswith(".")
        assert len(name.encode()) <= 200


# ----------------------------------------------------------------------------
# Values: refused at load, one line, by every command


@pytest.mark.parametrize("field, literal, expected", [
    ("workspace_bytes", "1e400", "number overflow parsing '1e400'"),
    ("gflops", "1e999", "number overflow parsing '1e999'"),
    ("time_ms_median", "-1e400", "number overflow parsing '-1e400'"),
    ("round_times_ms", "[1.0, 1e400]", "number overflow parsing '1e400'"),
    ("cv", "NaN", "syntax error while parsing value"),
    ("gbps", "Infinity", "syntax error while parsing value"),
    ("flops", "-Infinity", "syntax error while parsing value"),
])
def test_numbers_past_a_double_are_refused_by_every_command(tmp_path, capsys, field, literal,
                                                             expected):
    folder = folder_with(tmp_path, edit=set_field(field, "PLACEHOLDER"),
                         raw={"PLACEHOLDER": literal})
    for command, argv in every_command(folder, folder_with(tmp_path, "other"), tmp_path / "out"):
        assert_one_line_error(command, argv, capsys, "cases.jsonl:1: malformed record (not JSON",
                              expected)


INTEGER = "an integer from 0 to 9223372036854775807"


@pytest.mark.parametrize("field, value, expected", [
    ("iterations", 1.5, f"'iterations' must be {INTEGER}, got 1.5"),
    ("threads", "two", f"'threads' must be {INTEGER}, got \"two\""),
    ("alibi", "yes", "'alibi' must be true or false, got \"yes\""),
    ("seq_q", 2**70, f"'seq_q' must be {INTEGER}"),
    ("workspace_bytes", 2**63, f"'workspace_bytes' must be {INTEGER}"),
    ("case_index", -1, "'case_index' is -1, below 0"),
    ("repetitions", True, f"'repetitions' must be {INTEGER}, got true"),
    ("flops", "1e9", "'flops' must be a finite number, got \"1e9\""),
    pytest.param("flops", 10**400, "number overflow parsing", id="flops-10**400"),
    ("softcap", [], "'softcap' must be a finite number"),
    ("noisy", 0, "'noisy' must be true or false, got 0"),
    ("code_path", 3, "'code_path' must be a string, got 3"),
    ("reason", None, "'reason' is null; the schema says string"),
    ("precision", None, "'precision' is null; the schema says string"),
    ("dtype", None, "'dtype' is null; the schema says string"),
    ("gflops", None, "status ok but 'gflops' is null"),
    ("cv", None, None),  # "number|null": null is "not measured"
    ("round_times_ms", [1.0, "x"], "'round_times_ms' element 1 must be a finite number"),
    # A negative minimum or round read as a measurement and moved the ratios derived from it.
    ("time_ms_min", -1, "'time_ms_min' is -1: a time is above 0"),
    ("round_times_ms", [-1, 2], "'round_times_ms' element 0 is -1: a time is above 0"),
    ("round_times_ms", [0, 0, 0], "'round_times_ms' element 0 is 0: a time is above 0"),
    ("doc_lens", [1, 2.5], f"'doc_lens' element 1 must be {INTEGER}"),
    ("kv_lens", "8,32", "'kv_lens' must be an array"),
    ("shard", 7, "'shard' must be a string"),
])
def test_wrong_typed_fields_are_one_results_error_at_load(tmp_path, capsys, field, value, expected):
    folder = folder_with(tmp_path, edit=set_field(field, value))
    if expected is None:
        assert len(ar.load(folder)) == 12
        return
    with pytest.raises(ar.ResultsError, match=r"cases\.jsonl(:1: malformed record|: case 0)") as error:
        ar.load(folder)
    assert expected in str(error.value)
    assert_one_line_error(TABLE, [folder], capsys, expected)


# A string read as 0 left every record unrated without a word; 1e300 rated them at 1e-296%.
@pytest.mark.parametrize("value, expected", [
    ('"x"', "'cpu_fma_gflops' is \"x\": a rate from 0 to 1e+09"),
    ("-5", "'cpu_fma_gflops' is -5: a rate from 0 to 1e+09"),
    ("1e300", "'cpu_fma_gflops' is 1e+300: a rate from 0 to 1e+09"),
])
def test_peak_checks_out_of_range_are_refused(tmp_path, capsys, value, expected):
    folder = folder_with(tmp_path)
    (folder / "peaks.jsonl").write_text(
        json.dumps({"when": "start", "cpu_fma_gflops": 200.0}) + "\n"
        + f'{{"when": "end", "cpu_fma_gflops": {value}}}\n')
    for command, argv in every_command(folder, folder_with(tmp_path, "other"), tmp_path / "out"):
        assert_one_line_error(command, argv, capsys, "peaks.jsonl:2: malformed peak check: " + expected)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_peak_checks_past_a_double_are_refused(tmp_path, capsys, literal):
    folder = folder_with(tmp_path)
    (folder / "peaks.jsonl").write_text(
        json.dumps({"when": "start", "cpu_fma_gflops": 200.0}) + "\n"
        + f'{{"when": "end", "cpu_fma_gflops": {literal}}}\n')
    with pytest.raises(ar.ResultsError, match=r"peaks.jsonl:2: malformed peak check \(not JSON: "
                                              r".*(number overflow|invalid)"):
        ar.load(folder)
    for command, argv in every_command(folder, folder_with(tmp_path, "other"), tmp_path / "out"):
        assert_one_line_error(command, argv, capsys, "peaks.jsonl:2: malformed peak check")


@pytest.mark.parametrize("literal", ["NaN", "1e400"])
def test_a_manifest_past_a_double_is_refused(tmp_path, capsys, literal):
    folder = folder_with(tmp_path)
    path = folder / "manifest.json"
    path.write_text(path.read_text().replace("232.0", literal, 1))
    assert_one_line_error(PLOT, [folder, "--out", tmp_path / "p"], capsys, "manifest.json")


def test_a_manifest_name_that_is_not_a_string_is_refused(tmp_path, capsys):
    folder = folder_with(tmp_path, manifest={**make_manifest("x"), "name": {"a": 1}})
    assert_one_line_error(PLOT, [folder, "--out", tmp_path / "p"], capsys,
                          "manifest.json: malformed manifest: 'name' is not a string")


# ----------------------------------------------------------------------------
# Tiny and huge finite values: drawn, or one line; never a traceback


def tiny_times(cases):
    for case in cases[6:]:
        case.update(time_ms_median=1e-290, time_ms_min=1e-290, time_ms_max=1e-290,
                    gflops=case["flops"] / 1e-284, round_times_ms=[1e-290] * 5)


def huge_values(cases):
    cases[0].update(gflops=1e308, flops=1e308, workspace_bytes=2**63 - 1, time_ms_median=1e300,
                    time_ms_max=1.7e308, bytes_moved=1e308, arithmetic_intensity=1e-300, cv=1e300)
    cases[1].update(time_ms_median=5e-324, time_ms_min=5e-324, gflops=1e-300)


@pytest.mark.parametrize("edit", [tiny_times, huge_values, set_time(1e-290)])
def test_tiny_and_huge_finite_values_never_raise(tmp_path, capsys, edit):
    folder = folder_with(tmp_path, edit=edit)
    other = folder_with(tmp_path, "other")
    for command, argv in every_command(folder, other, tmp_path / "out") + [
            (COMPARE, [folder, other, "--out", tmp_path / "cmp2"]),
            (COMPARE_VARIANTS, [folder, "--baseline", "flash_cpu", "--out", tmp_path / "cv2"])]:
        status, err = run_command(command, argv, capsys)
        assert status in (0, 2), (command, err)
        if status == 2:
            assert len(err.strip().splitlines()) == 1 and "cannot be drawn" in err, err


def test_one_tiny_time_is_compared_and_drawn(tmp_path, capsys):
    folder = folder_with(tmp_path, edit=set_time(1e-290))
    other = folder_with(tmp_path, "other")
    for argv in ([other, folder], [folder, other]):
        status, err = run_command(COMPARE, [*argv, "--out", tmp_path / "cmp"], capsys)
        assert status == 0, err


def test_ratio_of_times_past_a_double_is_not_called_the_same():
    from attnbench.compare_runs import within_noise
    base = {"time_ms_min": None, "time_ms_max": None, "cv": 0.01, "time_ms_median": 1e300}
    cand = {"time_ms_min": None, "time_ms_max": None, "cv": 0.01, "time_ms_median": 1e-300}
    assert not within_noise(base, cand) and not within_noise(cand, base)


# ----------------------------------------------------------------------------
# The binary reads and rates; the package shows what it exports


def schema_version() -> int:
    return json.loads(subprocess.run([ar.attnbench_binary(), "schema", "--json"], check=True,
                                     capture_output=True, text=True).stdout)["schema_version"]


def export_changed_by(tmp_path: Path, change: str) -> Path:
    """A stand-in binary: the real one's output, with `change` (Python acting on `exported`, the
    parsed export) applied before it is printed."""
    wrapper = tmp_path / "changed-attnbench"
    wrapper.write_text(f"""#!{sys.executable}
import json, subprocess, sys
exported = json.loads(subprocess.run([{ar.attnbench_binary()!r}, *sys.argv[1:]], check=True,
                                     capture_output=True, text=True).stdout)
{change.strip()}
print(json.dumps(exported))
""")
    wrapper.chmod(0o755)
    return wrapper


def test_the_loader_shows_the_binarys_rating_and_rates_nothing_itself(tmp_path, monkeypatch):
    """By construction: a binary whose export says a record is at 12.5% of a 999 GFLOP/s peak
    and disturbed makes every reader say so, whatever the folder holds."""
    folder = folder_with(tmp_path)
    monkeypatch.setenv("ATTNBENCH_BINARY", str(export_changed_by(tmp_path, """
for record in exported["records"]:
    record.update(peak_gflops=999.0, percent_of_peak=12.5, disturbed=True,
                  disturbed_reason="said by the binary")""")))
    cases = ar.load_run(folder).cases
    assert {(c["peak_gflops"], c["percent_of_peak"], ar.disturbed_reason(c)) for c in cases} == {
        (999.0, 12.5, "said by the binary")}


def test_an_export_without_what_this_package_reads_is_one_line(tmp_path, capsys, monkeypatch):
    """A binary older than the package (its export without the peak checks' summary)."""
    folder = folder_with(tmp_path)
    monkeypatch.setenv("ATTNBENCH_BINARY", str(export_changed_by(
        tmp_path, 'del exported["peak_check_summary"]')))
    assert_one_line_error(TABLE, [folder], capsys, "no peak_check_summary", "rebuild it")


def test_a_folder_whose_name_starts_with_a_dash_loads(tmp_path, monkeypatch):
    folder_with(tmp_path, "-run")
    monkeypatch.chdir(tmp_path)
    assert len(ar.load_run("-run").cases) == 12


def test_without_a_binary_loading_is_one_line(tmp_path, capsys, monkeypatch):
    folder = folder_with(tmp_path)
    monkeypatch.setenv("ATTNBENCH_BINARY", str(tmp_path / "no-such-binary"))
    assert_one_line_error(TABLE, [folder], capsys, "no-such-binary: cannot run")


def test_a_binary_error_is_its_one_line(tmp_path, capsys):
    folder = folder_with(tmp_path, raw={"naive": "NaN"})
    assert_one_line_error(TABLE, [folder], capsys, "cases.jsonl:1: malformed record")


def test_committed_results_still_load():
    root = Path(__file__).resolve().parents[2] / "results"
    folders = [m.parent for m in root.rglob("manifest.json") if (m.parent / "cases.jsonl").exists()]
    for folder in folders:
        ar.load_run(folder)


@pytest.mark.parametrize("option", ["--out", "--short"])
def test_a_summary_that_cannot_be_written_is_one_line(tmp_path, capsys, option):
    folder = folder_with(tmp_path)
    (tmp_path / "file").write_text("")
    argv = [folder, option, tmp_path / "file" / "summary.md"]
    if option == "--short":
        argv += ["--out", tmp_path / "summary.md"]
    assert_one_line_error(GPU_SUMMARY, argv, capsys, "file: cannot create output folder")


def test_a_figure_from_figures_draws_as_written_in_a_notebook(tmp_path):
    import io

    from attnbench.plots import all as all_plots

    folder = folder_with(tmp_path, edit=rename(MATH_TEXT, 0, 6))
    for figure in all_plots.figures(ar.load_run(folder)).values():
        figure.savefig(io.BytesIO(), format="svg")  # as a notebook displays it
        buffer = io.StringIO()
        from attnbench import plotting
        plotting.show_text_as_written(figure)  # twice is harmless
        figure.savefig(buffer, format="svg")
        assert "\\$" not in buffer.getvalue()


@pytest.mark.parametrize("version, message", [
    ("newer", "record schema version .*newer than this attnbench reads"),
    ("1", "'schema_version' is not a version number"),
    (-1, "'schema_version' is not a version number"),
])
def test_a_manifest_of_a_newer_or_malformed_schema_version_is_refused(tmp_path, version, message):
    manifest = make_manifest()
    manifest["schema_version"] = schema_version() + 1 if version == "newer" else version
    with pytest.raises(ar.ResultsError, match=message):
        ar.load_run(folder_with(tmp_path, manifest=manifest))


def test_a_manifest_of_this_or_no_schema_version_loads(tmp_path):
    manifest = make_manifest()
    manifest["schema_version"] = schema_version()
    assert ar.load_run(folder_with(tmp_path, "current", manifest=manifest)).cases
    assert ar.load_run(folder_with(tmp_path, "before", manifest=make_manifest())).cases


@pytest.mark.parametrize("name, argv, expected", [
    ("plot", [], "the following arguments are required: run"),
    ("plot", ["run", "--bogus"], "unrecognized arguments: --bogus"),
    ("plot", ["run", "--seq", "abc"], "--seq"),
    ("compare", ["baseline"], "the following arguments are required: candidate"),
    ("table", ["run", "extra", "more"], "unrecognized arguments"),
])
def test_usage_errors_are_one_line_and_exit_2(capsys, name, argv, expected):
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv, name)  # as the console command attnbench-<name> calls it
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage:" not in err, err
    assert err.startswith(f"attnbench-{name}: error: ") and expected in err, err


def test_a_table_whose_out_cannot_be_a_folder_prints_nothing_but_the_error(tmp_path, capsys):
    # The table was printed in full, then the error: a caller reading stdout took it for a result.
    folder = folder_with(tmp_path)
    taken = tmp_path / "file"
    taken.write_text("x")
    assert TABLE.main([folder, "--out", taken]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "cannot create output folder" in captured.err
    assert taken.read_text() == "x"


def test_a_damaged_percentage_is_printed_in_powers_of_ten():
    # A peak of 1e-300 GFLOP/s made "% of peak" a number of 300 digits in the table and report.
    from attnbench.results import format_percent
    assert format_percent(81.14) == "81.1"
    assert format_percent(1e302) == "1e+302"
    assert len(format_percent(1e302)) < 10
