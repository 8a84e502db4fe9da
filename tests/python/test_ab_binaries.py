"""scripts/ab_binaries.py: the rounds alternate AB, BA, ...; the ratio is candidate over
baseline within a round; its output table and JSON say so; bad arguments and a failing binary
end with one line and a nonzero exit. The binaries here are small scripts that write
cases.jsonl with times they are given, so every number the tool prints is known."""

import json
import subprocess
import sys

import pytest

from conftest import SCRIPTS_DIR

SCRIPT = SCRIPTS_DIR / "ab_binaries.py"


def fake_binary(path, times_ms, log):
    """An 'attnbench' whose `run CONFIG --out DIR` writes two cases at the given median times
    (a list, one per call) and logs its name, so the order of the calls can be checked."""
    path.write_text(f"""#!/usr/bin/env python3
import json, sys, pathlib
times = {times_ms!r}
log = pathlib.Path({str(log)!r})
calls = log.read_text().splitlines() if log.exists() else []
mine = [c for c in calls if c == {path.name!r}]
log.write_text("\\n".join(calls + [{path.name!r}]) + "\\n")
out = pathlib.Path(sys.argv[sys.argv.index("--out") + 1]); out.mkdir(parents=True)
t = times[len(mine)]
with open(out / "cases.jsonl", "w") as f:
    for case_id, scale in (("a|n1", 1.0), ("b|n2", 2.0)):
        f.write(json.dumps({{"case_id": case_id, "status": "ok", "time_ms_median": t * scale,
                            "time_ms_min": 0.9 * t * scale}}) + "\\n")
    f.write(json.dumps({{"case_id": "c|n3", "status": "skipped"}}) + "\\n")
""")
    path.chmod(0o755)
    return path


def run_tool(*arguments):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, arguments)],
                          capture_output=True, text=True)


@pytest.fixture
def setup(tmp_path):
    log = tmp_path / "calls.log"
    config = tmp_path / "c.toml"
    config.write_text("name = 'x'\n")
    baseline = fake_binary(tmp_path / "old", [10.0, 10.0, 10.0, 10.0], log)
    candidate = fake_binary(tmp_path / "new", [11.0, 9.0, 10.5, 10.0], log)
    return tmp_path, log, config, baseline, candidate


def test_rounds_alternate_and_ratios_are_within_rounds(setup):
    tmp_path, log, config, baseline, candidate = setup
    out = tmp_path / "ab"
    result = run_tool("--baseline", baseline, "--candidate", candidate, "--config", config,
                      "--rounds", 4, "--out", out)
    assert result.returncode == 0, result.stderr
    assert log.read_text().split() == ["old", "new", "new", "old", "old", "new", "new", "old"]
    report = json.loads((out / "ab.json").read_text())
    assert [row["case_id"] for row in report["cases"]] == ["a|n1", "b|n2"]  # skipped left out
    first = report["cases"][0]
    assert first["ratios"] == pytest.approx([1.1, 0.9, 1.05, 1.0])
    assert first["median_ratio"] == pytest.approx(1.025)
    assert (first["min_ratio"], first["max_ratio"]) == pytest.approx((0.9, 1.1))
    assert first["fastest_ratio"] == pytest.approx(0.9)  # 0.9*9 over 0.9*10
    table = (out / "ab.md").read_text()
    assert "| a|n1 | 10 | 10.25 | 1.025 | 0.900–1.100 | 0.900 |" in table
    assert table in result.stdout


def test_bad_arguments_and_failures_are_one_line(setup, tmp_path):
    _, _, config, baseline, candidate = setup
    missing = run_tool("--baseline", tmp_path / "nope", "--candidate", candidate, "--config",
                       config, "--out", tmp_path / "o1")
    assert missing.returncode != 0 and "is not an executable file" in missing.stderr
    rounds = run_tool("--baseline", baseline, "--candidate", candidate, "--config", config,
                      "--rounds", 0, "--out", tmp_path / "o2")
    assert rounds.returncode != 0 and "--rounds must be at least 1" in rounds.stderr
    failing = tmp_path / "failing"
    failing.write_text("#!/bin/sh\necho 'error: config: unknown key' >&2\nexit 2\n")
    failing.chmod(0o755)
    failed = run_tool("--baseline", failing, "--candidate", candidate, "--config", config,
                      "--out", tmp_path / "o3")
    assert failed.returncode != 0
    assert failed.stderr.strip().splitlines()[-1].endswith("(exit 2): error: config: unknown key")


def fake_case_binary(path, times_ms, log):
    """An 'attnbench' of two cases whose `plan --json` lists them and whose `run --cases I`
    (with --resume after the first) appends case I's record at the next of the given times, and
    logs its name and the case, so the order of the calls can be checked."""
    path.write_text(f"""#!/usr/bin/env python3
import json, sys, pathlib
if sys.argv[1] == "plan":
    print(json.dumps({{"cases": [{{"index": 0}}, {{"index": 1}}]}}))
    sys.exit(0)
times = {times_ms!r}
log = pathlib.Path({str(log)!r})
calls = log.read_text().splitlines() if log.exists() else []
mine = [c for c in calls if c.startswith({path.name!r})]
case = int(sys.argv[sys.argv.index("--cases") + 1])
log.write_text("\\n".join(calls + [{path.name!r} + str(case)]) + "\\n")
out = pathlib.Path(sys.argv[sys.argv.index("--out") + 1])
if out.exists() != ("--resume" in sys.argv):
    sys.exit("attnbench: --out must be new, or resumed")
out.mkdir(parents=True, exist_ok=True)
with open(out / "cases.jsonl", "a") as f:
    t = times[len(mine)]
    f.write(json.dumps({{"case_id": ["a|n1", "b|n2"][case], "status": "ok",
                        "time_ms_median": t, "time_ms_min": t}}) + "\\n")
""")
    path.chmod(0o755)
    return path


def test_case_by_case_pairs_each_case_and_alternates_the_order(tmp_path):
    log = tmp_path / "calls.log"
    config = tmp_path / "c.toml"
    config.write_text("name = 'x'\n")
    # Calls per binary in order: round 0 cases 0, 1; round 1 cases 0, 1.
    baseline = fake_case_binary(tmp_path / "old", [10.0, 20.0, 10.0, 20.0], log)
    candidate = fake_case_binary(tmp_path / "new", [11.0, 18.0, 9.0, 22.0], log)
    out = tmp_path / "ab"
    result = run_tool("--baseline", baseline, "--candidate", candidate, "--config", config,
                      "--rounds", 2, "--out", out, "--case-by-case")
    assert result.returncode == 0, result.stderr
    assert log.read_text().split() == ["old0", "new0", "new1", "old1",
                                       "new0", "old0", "old1", "new1"]
    report = json.loads((out / "ab.json").read_text())
    assert report["case_by_case"] is True
    by_case = {row["case_id"]: row for row in report["cases"]}
    assert by_case["a|n1"]["ratios"] == pytest.approx([1.1, 0.9])
    assert by_case["b|n2"]["ratios"] == pytest.approx([0.9, 1.1])
    assert (out / "rounds" / "round1-candidate" / "cases.jsonl").read_text().count("\n") == 2


def test_a_binary_given_relative_to_the_folder_runs_that_file_not_one_on_path(setup):
    """Path("./old") is "old", which was looked up on PATH: another binary could have run."""
    tmp_path, log, config, baseline, candidate = setup
    result = subprocess.run([sys.executable, str(SCRIPT), "--baseline", "./old", "--candidate", "./new",
                             "--config", "c.toml", "--rounds", "1", "--out", "ab"],
                            cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert log.read_text().split() == ["old", "new"]


def test_an_out_file_and_a_binary_that_writes_no_results_are_one_line_errors(setup):
    tmp_path, log, config, baseline, candidate = setup
    (tmp_path / "afile").write_text("")
    result = run_tool("--baseline", baseline, "--candidate", candidate, "--config", config,
                      "--rounds", 1, "--out", tmp_path / "afile")
    assert result.returncode != 0 and "is a file" in result.stderr
    assert "Traceback" not in result.stderr
    result = run_tool("--baseline", "/bin/true", "--candidate", candidate, "--config", config,
                      "--rounds", 1, "--out", tmp_path / "ab2")
    assert result.returncode != 0 and "holds no cases.jsonl" in result.stderr
    assert "Traceback" not in result.stderr
