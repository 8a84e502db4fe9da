"""The configuration reference (`attnbench config reference`) and plan's settings block, both read
off the table the config parser uses: docs/configuration.md's copy of the reference must be the
binary's output, and `plan --json` must report what the config (file and --set) makes of each
setting."""

import json
import re

from binary import REPO, run_attnbench

BEGIN = "<!-- begin config reference"
END = "<!-- end config reference"


def documented_reference() -> str:
    lines = (REPO / "docs" / "configuration.md").read_text().splitlines(keepends=True)
    [begin] = [i for i, line in enumerate(lines) if line.startswith(BEGIN)]
    [end] = [i for i, line in enumerate(lines) if line.startswith(END)]
    return "".join(lines[begin + 1:end])


def reference_rows(text: str) -> dict[str, list[str]]:
    """The table's rows by key: `measure.warmup` -> [type, allowed, default, meaning]."""
    rows = {}
    for line in text.splitlines():
        match = re.match(r"^\| `([^`]+)` \| (.*) \|$", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in re.split(r"(?<!\\)\|", match.group(2))]
    return rows


def plan(*overrides: str) -> dict:
    args = [arg for override in overrides for arg in ("--set", override)]
    return json.loads(run_attnbench("plan", "configs/quick.toml", "--json", *args, check=True).stdout)


def test_the_documented_reference_is_the_binarys_output():
    generated = run_attnbench("config", "reference", check=True).stdout
    assert documented_reference() == generated, (
        "docs/configuration.md's configuration reference differs from "
        "`attnbench config reference`: run `bash scripts/update_config_reference.sh`")


def test_the_reference_lists_every_setting_plan_reports_with_its_default():
    rows = reference_rows(run_attnbench("config", "reference", check=True).stdout)
    settings = plan()["settings"]
    assert set(settings) == {key for key in rows if key.split(".")[0] in ("measure", "oracle")}
    for key, entry in settings.items():
        kind, allowed, default, _ = rows[key]
        assert (kind, allowed) == (entry["type"], entry["allowed"])
        assert json.loads(default.strip("`")) == entry["default"], key
    assert {"name", "axes.seq_len", "axes.mask", "axes.dtype"} <= set(rows)


def test_plan_settings_hold_the_configs_values_and_defaults():
    quick = plan()
    settings = plan("measure.repetitions=5", "measure.cold=true", 'measure.distribution="near_constant"',
                    "oracle.sample_rows=4", "measure.target_rel_ci=0.05")["settings"]
    assert settings["measure.repetitions"] == dict(value=5, default=3, type="integer", allowed="[1, 100000]")
    assert settings["measure.cold"]["value"] is True
    assert settings["measure.distribution"]["value"] == "near_constant"
    assert settings["oracle.sample_rows"]["value"] == 4
    assert settings["measure.target_rel_ci"]["value"] == 0.05
    # What configs/quick.toml sets itself, and what it leaves to the defaults.
    config = quick["config"]
    for key, entry in quick["settings"].items():
        section, name = key.split(".")
        expected = config.get(section, {}).get(name, entry["default"])
        assert entry["value"] == expected, key
    # The older blocks agree with the settings block.
    for section in ("measure", "oracle"):
        for name, value in quick[section].items():
            if f"{section}.{name}" in quick["settings"]:
                assert quick["settings"][f"{section}.{name}"]["value"] == value, name


def test_config_without_a_subcommand_is_one_line_and_exit_2():
    result = run_attnbench("config")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "config needs a subcommand: one of reference" in result.stderr
