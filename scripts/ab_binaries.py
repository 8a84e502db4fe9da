#!/usr/bin/env python3
"""Interleaved A/B of two attnbench builds on one config: is the candidate's speed the
baseline's?

    python3 scripts/ab_binaries.py --baseline OLD/attnbench --candidate build/attnbench \
        --config configs/ab-speed.toml --rounds 6 --out results/ab-speed

Each round runs the config once with each binary, each into its own run folder under
OUT/rounds/, in the order AB, BA, AB, ... so a drift of the machine's speed over the session
falls on both sides alike. Per case (matched by case_id, which both builds write), the ratio is
candidate median time over baseline median time within a round; the table gives the median of
the rounds' ratios and their range, and every round's medians. Comparing within a round, never
across runs made minutes apart, is what lets a 2% difference show on a shared machine (see
results/noise-ratios). Writes OUT/ab.json and OUT/ab.md and prints the table.

With --case-by-case each round alternates the binaries case by case instead (`run --cases I`,
then `--resume` into the same round folders), in the order AB, BA, ... over the cases, so that
the two timings of a case lie seconds apart rather than a whole run apart: on a machine whose
load changes from minute to minute, the pairing that makes the ratio mean something.

Extra environment for both binaries (e.g. ATTNBENCH_CPU_FEATURES=avx2 to time the AVX2 path
on an AVX-512 host) is given with --env NAME=VALUE.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, type=Path,
                        help="the attnbench binary compared against")
    parser.add_argument("--candidate", required=True, type=Path,
                        help="the attnbench binary judged")
    parser.add_argument("--config", required=True, type=Path,
                        help="a sweep config both binaries read")
    parser.add_argument("--rounds", type=int, default=6,
                        help="rounds of one run per binary (default 6)")
    parser.add_argument("--out", required=True, type=Path,
                        help="folder for the rounds and the table")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="environment for both binaries (repeatable)")
    parser.add_argument("--case-by-case", action="store_true",
                        help="alternate the binaries per case within each round, not per run")
    arguments = parser.parse_args(argv)
    for side in ("baseline", "candidate"):
        binary = getattr(arguments, side)
        if not binary.is_file() or not os.access(binary, os.X_OK):
            parser.error(f"{binary} is not an executable file")
        # Absolute, so that a bare name ("./attnbench" becomes "attnbench") is never looked up
        # on PATH instead of the file given.
        setattr(arguments, side, binary.resolve())
    if arguments.out.exists() and not arguments.out.is_dir():
        parser.error(f"--out {arguments.out} is a file, not a folder")
    if not arguments.config.is_file():
        parser.error(f"config {arguments.config} does not exist")
    if arguments.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {arguments.rounds}")
    for setting in arguments.env:
        if "=" not in setting:
            parser.error(f"--env takes NAME=VALUE, got {setting!r}")
    return arguments


def run_binary(command: list[str], environment: dict) -> subprocess.CompletedProcess:
    """Runs one attnbench command; a failure ends the tool with its last line."""
    completed = subprocess.run(command, env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    if completed.returncode != 0:
        last_line = (completed.stderr.strip().splitlines() or ["(no message)"])[-1]
        sys.exit(f"ab_binaries: {' '.join(command)} failed (exit {completed.returncode}): "
                 f"{last_line}")
    return completed


def case_count(binary: Path, config: Path, environment: dict) -> int:
    """How many cases the config expands to, as `attnbench plan` numbers them."""
    command = [str(binary), "plan", str(config), "--json"]
    try:
        return len(json.loads(run_binary(command, environment).stdout)["cases"])
    except (json.JSONDecodeError, KeyError, TypeError):
        sys.exit(f"ab_binaries: {' '.join(command)} printed no case list")


def run_once(binary: Path, config: Path, folder: Path, environment: dict,
             case: int | None = None) -> None:
    """One run of the config, or of its case `case` into `folder` (resumed if it exists)."""
    command = [str(binary), "run", str(config), "--out", str(folder)]
    if case is not None:
        command += ["--cases", str(case)] + (["--resume"] if folder.exists() else [])
    run_binary(command, environment)


def read_times(folder: Path) -> dict[str, dict]:
    """Each ok case's median and fastest time in ms by case_id, from a run folder."""
    medians = {}
    records = folder / "cases.jsonl"
    if not records.is_file():
        sys.exit(f"ab_binaries: {folder} holds no cases.jsonl: is the binary attnbench?")
    with open(records) as lines:
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                sys.exit(f"ab_binaries: {records}:{number} is not a JSON record")
            if record["status"] == "ok":
                medians[record["case_id"]] = {"median": record["time_ms_median"],
                                              "min": record["time_ms_min"]}
    return medians


def summarise(rounds: list[dict[str, dict[str, dict]]]) -> list[dict]:
    """Per case: every round's medians and ratio, the median ratio and its range, and the ratio
    of the two binaries' fastest repetitions over all rounds (a time another process can only
    lengthen, so the best of many is the least disturbed reading of each)."""
    case_ids = [case_id for case_id in rounds[0]["baseline"] if all(
        case_id in r["baseline"] and case_id in r["candidate"] for r in rounds)]
    rows = []
    for case_id in case_ids:
        ratios = [r["candidate"][case_id]["median"] / r["baseline"][case_id]["median"]
                  for r in rounds]
        fastest = {side: min(r[side][case_id]["min"] for r in rounds)
                   for side in ("baseline", "candidate")}
        rows.append({
            "case_id": case_id,
            "baseline_ms": [r["baseline"][case_id]["median"] for r in rounds],
            "candidate_ms": [r["candidate"][case_id]["median"] for r in rounds],
            "ratios": ratios,
            "fastest_baseline_ms": fastest["baseline"],
            "fastest_candidate_ms": fastest["candidate"],
            "fastest_ratio": fastest["candidate"] / fastest["baseline"],
            "median_ratio": statistics.median(ratios),
            "min_ratio": min(ratios),
            "max_ratio": max(ratios),
        })
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| case | baseline ms (median of rounds) | candidate ms | candidate/baseline (median) "
             "| range over rounds | fastest runs' ratio |", "| --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        lines.append(f"| {row['case_id']} | {statistics.median(row['baseline_ms']):.4g} "
                     f"| {statistics.median(row['candidate_ms']):.4g} | {row['median_ratio']:.3f} "
                     f"| {row['min_ratio']:.3f}–{row['max_ratio']:.3f} "
                     f"| {row['fastest_ratio']:.3f} |")
    if rows:
        lines.append("")
        for column, label in (("median_ratio", "median ratios"),
                              ("fastest_ratio", "fastest runs' ratios")):
            mean = statistics.geometric_mean([r[column] for r in rows])
            lines.append(f"Geometric mean of the {label}: {mean:.3f}  ")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(sys.argv[1:] if argv is None else argv)
    environment = dict(os.environ)
    environment.update(setting.split("=", 1) for setting in arguments.env)
    rounds_folder = arguments.out / "rounds"
    rounds_folder.mkdir(parents=True, exist_ok=True)
    rounds = []
    cases = (case_count(arguments.baseline, arguments.config, environment)
             if arguments.case_by_case else None)
    if cases == 0:
        sys.exit(f"ab_binaries: {arguments.config} expands to no case")
    for index in range(arguments.rounds):
        folders = {side: rounds_folder / f"round{index}-{side}"
                   for side in ("baseline", "candidate")}
        for folder in folders.values():
            if folder.exists():
                sys.exit(f"ab_binaries: {folder} exists already: give a new --out")
        for case in range(cases) if cases is not None else [None]:
            # AB, BA, ... over the rounds, and over the cases within one.
            flip = (index + (case or 0)) % 2
            order = ["candidate", "baseline"] if flip else ["baseline", "candidate"]
            for side in order:
                run_once(getattr(arguments, side), arguments.config, folders[side], environment,
                         case)
        rounds.append({side: read_times(folder) for side, folder in folders.items()})
        print(f"round {index + 1}/{arguments.rounds} done", file=sys.stderr)
    rows = summarise(rounds)
    if not rows:
        sys.exit("ab_binaries: no case finished ok in every run of both binaries")
    table = markdown(rows)
    (arguments.out / "ab.md").write_text(table)
    (arguments.out / "ab.json").write_text(json.dumps({
        "baseline": str(arguments.baseline), "candidate": str(arguments.candidate),
        "config": str(arguments.config), "rounds": arguments.rounds, "env": arguments.env,
        "case_by_case": arguments.case_by_case,
        "cases": rows}, indent=2) + "\n")
    print(table, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
