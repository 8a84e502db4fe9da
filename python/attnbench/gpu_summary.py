"""A markdown summary of a GPU run (what scripts/gpu_run.sh made): the tests, the oracle on
the edge shapes per CUDA variant, TFLOP/s and % of the measured peak at n = 1k, 4k and 16k
with PyTorch's SDPA backends beside attnbench's variants, the n from which fused beats
cublas, the peak workspace, and every case that was skipped or failed.

    attnbench-gpu-summary results/h200-gpu-scaling results/h200-torch-gpu-scaling \\
        results/h200-fa-shapes --edge-json OUT/edge-check.json --ctest-log OUT/ctest.log \\
        --out OUT/summary.md [--short OUT/summary-short.txt]

Runs are results folders (attnbench's own, or written by scripts/peers/torch_sdpa.py); a run
whose name is torch-<name> is put beside the run named <name>. A folder that cannot be read
is named in the summary and left out, so a run cut short by its time limit still gets a
summary of what it finished. --edge-json is what `attnbench check configs/gpu-edge.toml --json`
printed (empty when the check was cut off). --short writes a few plain lines for a terminal.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from . import results as ar

HEADLINE_SEQS = (1024, 4096, 16384)
MAX_LISTED = 12  # lines of skipped/failed groups or oracle failures per section


# ----------------------------------------------------------------------------------------------
# Inputs


@dataclass
class EdgeCheck:
    """The oracle on the edge shapes, per variant, from `attnbench check --json`."""
    per_variant: dict = field(default_factory=dict)  # variant -> {"ok", "failed", "skipped", "worst_*"}
    failures: list = field(default_factory=list)  # (variant, shape, reason)
    skip_reasons: dict = field(default_factory=dict)  # (variant, reason) -> count
    totals: str = ""
    problem: str = ""  # why there is no result: the check was cut off, or printed something else


EDGE_STATUSES = ("ok", "failed", "skipped")


def edge_records_problem(records) -> str:
    """What in check --json's records this summary cannot read (empty when nothing): a damaged
    file gave a KeyError or TypeError traceback."""
    if not isinstance(records, list):
        return f"'records' is {type(records).__name__}, not a list"
    for index, record in enumerate(records):
        where = f"record {index}"
        if not isinstance(record, dict):
            return f"{where} is not an object"
        if not isinstance(record.get("variant"), str):
            return f"{where} has no variant name"
        if record.get("status") not in EDGE_STATUSES:
            return f"{where}'s status is {record.get('status')!r}, not ok, failed or skipped"
        if record["status"] == "ok":
            for key in ("oracle_rel_l2_err", "oracle_max_abs_err"):
                if key not in record:
                    return f"{where} (ok) has no {key}"
                value = record[key]
                if value is not None and not is_finite_number(value):
                    return f"{where}'s {key} is {value!r}, not a number"
        elif not isinstance(record.get("reason"), str):
            return f"{where} ({record['status']}) has no reason"
        if record["status"] == "failed" and (missing := [
                key for key in (*ar.SIZE_AXES, "causal") if key not in record]):
            return f"{where} (failed) has no {missing[0]}"
    return ""


def is_finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_edge_json(text: str) -> EdgeCheck:
    """check --json prints {"passed", "failed", "skipped", "device_lost", "records"} once every
    case is done, so a check cut off by its time limit leaves nothing."""
    check = EdgeCheck()
    if not text.strip():
        check.problem = "empty: the check was not run, or cut off by its time limit"
        return check
    try:
        result = json.loads(text)
        records = result["records"]
        check.totals = f"{result['passed']} passed, {result['failed']} failed, {result['skipped']} skipped"
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        check.problem = f"not the output of attnbench check --json ({type(error).__name__}: {error})"
        return check
    if (problem := edge_records_problem(records)):
        return EdgeCheck(problem=f"not the output of attnbench check --json ({problem})")
    if result.get("device_lost"):
        check.totals += "; the GPU was lost (the cases after it did not run)"
    for record in records:
        variant, status = record["variant"], record["status"]
        entry = check.per_variant.setdefault(
            variant, {"ok": 0, "failed": 0, "skipped": 0, "worst_rel": None, "worst_abs": None})
        entry[status] += 1
        if status == "ok":
            for key, worst in (("oracle_rel_l2_err", "worst_rel"), ("oracle_max_abs_err", "worst_abs")):
                if record[key] is not None:
                    entry[worst] = record[key] if entry[worst] is None else max(entry[worst], record[key])
        elif status == "failed":
            check.failures.append((variant, ar.format_shape(record), record["reason"]))
        else:
            key = (variant, record["reason"])
            check.skip_reasons[key] = check.skip_reasons.get(key, 0) + 1
    return check


@dataclass
class CtestResult:
    line: str = ""  # "100% tests passed, 0 tests failed out of 57"
    failed: list = field(default_factory=list)
    passed: int | None = None
    total: int | None = None


def parse_ctest_log(text: str) -> CtestResult:
    result = CtestResult()
    lines = text.splitlines()
    for index, line in enumerate(lines):
        match = re.search(r"(\d+)% tests passed, (\d+) tests? failed out of (\d+)", line)
        if match:
            result.line = line.strip()
            result.total = int(match[3])
            result.passed = result.total - int(match[2])
        if line.startswith("The following tests FAILED"):
            for failed in lines[index + 1:]:
                entry = re.match(r"^\s+\d+ - (.+)$", failed)
                if not entry:
                    break
                result.failed.append(entry[1].strip())
    return result


def load_runs(folders) -> tuple[list[ar.Run], list[str]]:
    runs, problems = [], []
    for folder in folders:
        try:
            runs.append(ar.load_run(folder))
        except ar.ResultsError as error:
            problems.append(" ".join(str(error).split()))
    return runs, problems


def base_name(run: ar.Run) -> str:
    """The config a run is of: torch-<name> (the PyTorch peer) goes beside <name>."""
    return run.name[len("torch-"):] if run.name.startswith("torch-") else run.name


def group_runs(runs: list[ar.Run]) -> dict[str, list[ar.Run]]:
    groups: dict[str, list[ar.Run]] = {}
    for run in runs:
        groups.setdefault(base_name(run), []).append(run)
    for members in groups.values():  # attnbench's own run first, then the peer
        members.sort(key=lambda r: r.name.startswith("torch-"))
    return groups


# ----------------------------------------------------------------------------------------------
# Tables


def tflops(case: dict) -> float | None:
    return case["gflops"] / 1e3 if case["status"] == "ok" and case["gflops"] is not None else None


def throughput_cell(case: dict | None) -> str:
    if case is None:
        return "-"  # not in the sweep
    if case["status"] != "ok":
        return case["status"]
    text = f"{tflops(case):.3g}"
    if case["percent_of_peak"] is not None:
        text += f" ({case['percent_of_peak']:.0f}%)"
    return text


def series_key(case: dict) -> tuple:
    """Everything but the swept sequence length: one table row."""
    return (case["variant"], case["batch"], case["heads"], case["kv_heads"], case["d_k"],
            case["d_v"], case["dtype"], case["layout"], case["causal"],
            case["seq_q"] if case["seq_q"] != case["seq_kv"] else None)


def typed(dtype: str, layout: str) -> list[str]:
    """dtype and layout as the harness describes a shape: named when not the default."""
    return [value for value, default in ((dtype, ar.SHAPE_DEFAULTS["dtype"]),
                                         (layout, ar.SHAPE_DEFAULTS["layout"])) if value != default]


def row_label(key: tuple, varying: set[str]) -> list[str]:
    variant, batch, heads, kv_heads, d_k, d_v, dtype, layout, causal, seq_q = key
    shape = []
    if "batch" in varying:
        shape.append(f"batch {batch}")
    if "heads" in varying:
        shape.append(f"heads {heads}")
    if kv_heads != heads:
        shape.append(f"kv {kv_heads}")
    shape.append(f"d {d_k}" if d_k == d_v else f"d {d_k}/{d_v}")
    if seq_q is not None:
        shape.append(f"seq_q {seq_q}")
    if causal:
        shape.append("causal")
    shape += typed(dtype, layout)
    return [variant, ", ".join(shape)]


def swept_values(cases: list[dict]) -> tuple[str, list[int]]:
    """The sequence axis and the values to show: 1k, 4k, 16k where swept, else every value."""
    axis = ar.sweep_axis(cases)
    values = ar.distinct(cases, axis)
    headline = [n for n in HEADLINE_SEQS if n in values]
    return axis, headline if len(headline) >= 2 else values[:8]


def group_cases(runs: list[ar.Run]) -> list[dict]:
    return [case for run in runs for case in run.cases]


def throughput_table(cases: list[dict]) -> str:
    axis, columns = swept_values(cases)
    varying = {a for a in ("batch", "heads") if len(ar.distinct(cases, a)) > 1}
    rows = []
    for key, series in ar.group_by(cases, series_key).items():
        by_n = {c[axis]: c for c in series}
        rows.append(row_label(key, varying) + [throughput_cell(by_n.get(n)) for n in columns])
    headers = ["variant", "shape"] + [f"{axis} {n}" for n in columns]
    return ar.markdown_table(headers, rows)


def workspace_table(cases: list[dict]) -> str:
    axis, columns = swept_values(cases)
    varying = {a for a in ("batch", "heads") if len(ar.distinct(cases, a)) > 1}
    rows = []
    for key, series in ar.group_by(cases, series_key).items():
        by_n = {c[axis]: c for c in series}
        cells = []
        for n in columns:
            case = by_n.get(n)
            cells.append("-" if case is None else
                         ar.format_bytes(case["workspace_bytes"]) if case["status"] == "ok" else case["status"])
        rows.append(row_label(key, varying) + cells)
    headers = ["variant", "shape"] + [f"{axis} {n}" for n in columns]
    return ar.markdown_table(headers, rows)


def crossover(cases: list[dict], fast: str = "fused", slow: str = "cublas") -> list[str]:
    """Per shape family, the smallest n from which `fast` is faster than `slow` at every larger n
    measured by both."""
    axis = ar.sweep_axis(cases)
    lines = []
    def family(c):
        return series_key(c)[1:]
    both = [c for c in cases if c["variant"] in (fast, slow) and c["status"] == "ok"]
    for key, members in ar.group_by(both, family).items():
        fast_at = {c[axis]: c["time_ms_median"] for c in members if c["variant"] == fast}
        slow_at = {c[axis]: c["time_ms_median"] for c in members if c["variant"] == slow}
        common = sorted(set(fast_at) & set(slow_at))
        if not common:
            continue
        label = row_label((fast,) + key, set())[1]
        wins = [fast_at[n] < slow_at[n] for n in common]
        if all(wins):
            verdict = f"{fast} faster at every {axis} measured ({common[0]} to {common[-1]})"
        elif not any(wins):
            verdict = f"{slow} faster at every {axis} measured ({common[0]} to {common[-1]})"
        else:
            start = next((common[i] for i in range(len(common)) if all(wins[i:])), None)
            if start is None:
                verdict = f"no lasting crossover: {fast} faster at {axis} " + ", ".join(
                    str(n) for n, w in zip(common, wins) if w)
            else:
                verdict = f"{fast} faster from {axis} = {start}"
        ratio = slow_at[common[-1]] / fast_at[common[-1]]
        lines.append(f"{label}: {verdict}; at {axis} {common[-1]} {fast} takes "
                     f"{fast_at[common[-1]]:.3g} ms, {slow} {slow_at[common[-1]]:.3g} ms ({ratio:.2f}x)")
    return lines


def not_ok_lines(cases: list[dict]) -> list[str]:
    groups = ar.group_by([c for c in cases if c["status"] != "ok"],
                         lambda c: (c["variant"], c["status"], c["reason"] or "no reason given"))
    lines = []
    for (variant, status, reason), members in groups.items():
        axis = ar.sweep_axis(members)
        values = ", ".join(str(v) for v in ar.distinct(members, axis))
        lines.append(f"{variant} {status} ({len(members)}; {axis} {values}): {reason}")
    if len(lines) > MAX_LISTED:
        lines = lines[:MAX_LISTED] + [f"... and {len(lines) - MAX_LISTED} more groups"]
    return lines


# ----------------------------------------------------------------------------------------------
# The summary


def machine_lines(runs: list[ar.Run]) -> list[str]:
    lines = []
    own = [r for r in runs if not r.name.startswith("torch-")]
    reference = own[0] if own else (runs[0] if runs else None)
    if reference is None:
        return lines
    gpu = reference.manifest.get("gpu") or {}
    lines.append(f"- GPU: {gpu.get('name', 'none')}; driver {gpu.get('driver_version', '?')}, "
                 f"CUDA runtime {gpu.get('runtime_version', '?')}, {gpu.get('sm_count', '?')} SMs")
    peaks = []
    if gpu.get("sgemm_gflops"):
        peaks.append(f"fp32 SGEMM {gpu['sgemm_gflops'] / 1e3:.1f} TFLOP/s")
    if gpu.get("tf32_gemm_gflops"):
        peaks.append(f"TF32 GEMM {gpu['tf32_gemm_gflops'] / 1e3:.0f} TFLOP/s")
    for dtype in ("bf16", "fp16"):
        if gpu.get(f"{dtype}_gemm_gflops"):
            peaks.append(f"{dtype} GEMM {gpu[f'{dtype}_gemm_gflops'] / 1e3:.0f} TFLOP/s")
    if gpu.get("copy_gbps"):
        peaks.append(f"copy {gpu['copy_gbps']:.0f} GB/s")
    if peaks:
        lines.append("- measured peaks (the % of peak below is against these: each case against its "
                     "dtype's, tf32 variants against TF32): " + ", ".join(peaks))
    lines.append(f"- CPU: {reference.machine}; commit {str(reference.manifest.get('git_commit') or '?')[:10]}, "
                 f"{str(reference.manifest.get('date') or '')[:16]}")
    for run in runs:
        if run.name.startswith("torch-"):
            build = run.manifest.get("build") or {}
            peer = run.manifest.get("peer") or {}
            peaks = run.manifest.get("peaks") or {}
            mm = ", ".join(f"{dtype} {peaks[f'torch_mm_{dtype}_gflops']:.0f}" for dtype in ("fp32", "bf16", "fp16")
                           if ar.is_number(peaks.get(f"torch_mm_{dtype}_gflops")))
            # The versions are the peer's own (older peer runs kept them under build).
            versions = {key: peer.get(key, build.get(key, "?")) for key in ("torch", "cuda", "cudnn")}
            lines.append(f"- PyTorch peer ({run.label}): torch {versions['torch']}, CUDA "
                         f"{versions['cuda']}, cuDNN {versions['cudnn']}; "
                         f"{peer.get('tf32', 'TF32 setting not recorded')}; its % of peak is against "
                         f"torch.mm in the case's dtype ({mm or 'not recorded'} GFLOP/s)")
            break
    return lines


def render(runs: list[ar.Run], problems: list[str], edge: EdgeCheck | None,
           ctest: CtestResult | None) -> str:
    out = ["# attnbench GPU run", ""]
    out += machine_lines(runs) or ["- no results folder could be read"]
    out.append("")

    out += ["## Tests (ctest)", ""]
    if ctest is None or not ctest.line:
        out.append("No ctest result found (not run, or cut off by its time limit).")
    else:
        out.append(ctest.line + ("" if not ctest.failed else ": " + ", ".join(ctest.failed)))
    out.append("")

    out += ["## Oracle on the edge shapes (attnbench check configs/gpu-edge.toml)", ""]
    if edge is None or not edge.per_variant:
        why = f": {edge.problem}" if edge is not None and edge.problem else " (not run, or cut off by its time limit)"
        out.append(f"No edge-shape check found{why}.")
    else:
        rows = [[variant, str(e["ok"]), str(e["failed"]), str(e["skipped"]),
                 ar.format_number(e["worst_rel"], 2), ar.format_number(e["worst_abs"], 2)]
                for variant, e in edge.per_variant.items()]
        out.append(ar.markdown_table(["variant", "passed", "failed", "skipped",
                                      "worst rel L2", "worst max abs"], rows).rstrip())
        if edge.totals:
            out += ["", f"Total: {edge.totals}."]
        if edge.failures:
            out += ["", "Failures:"]
            out += [f"- {v} {shape}: {reason}" for v, shape, reason in edge.failures[:MAX_LISTED]]
            if len(edge.failures) > MAX_LISTED:
                out.append(f"- ... and {len(edge.failures) - MAX_LISTED} more")
        if edge.skip_reasons:
            out += ["", "Skipped:"]
            out += [f"- {v} ({count}): {reason}" for (v, reason), count in
                    list(edge.skip_reasons.items())[:MAX_LISTED]]
    out.append("")

    for name, members in group_runs(runs).items():
        cases = group_cases(members)
        labels = ", ".join(r.label for r in members)
        out += [f"## {name} ({labels})", ""]
        ok = len(ar.ok_cases(cases))
        counts = ar.status_counts_text(cases)
        out.append(f"{len(cases)} cases: {ok} ok" + (f", {counts}" if counts else "") + ".")
        out += ["", "TFLOP/s (% of the measured peak); causal counts unmasked pairs only:", ""]
        out.append(throughput_table(cases).rstrip())
        lines = crossover(cases, "fused", "cublas") + crossover(cases, "fused", "cublas_tf32")
        if lines:
            out += ["", "Fused against the materialising cuBLAS variants:", ""]
            out += [f"- {line}" for line in lines]
        out += ["", "Peak workspace (memory the variant allocated beyond Q, K, V, O):", ""]
        out.append(workspace_table(cases).rstrip())
        not_ok = not_ok_lines(cases)
        if not_ok:
            out += ["", "Not ok:", ""]
            out += [f"- {line}" for line in not_ok]
        out.append("")

    if problems:
        out += ["## Folders left out", ""]
        out += [f"- {p}" for p in problems]
        out.append("")
    return "\n".join(out)


def render_short(runs: list[ar.Run], edge: EdgeCheck | None, ctest: CtestResult | None) -> str:
    """A few lines for the end of a terminal: tests, oracle, headline TFLOP/s, crossover."""
    lines = []
    gpu = next((r.gpu_name for r in runs if r.gpu_name), None)
    lines.append(f"GPU: {gpu or 'none'}")
    lines.append(f"ctest: {ctest.line if ctest and ctest.line else 'no result'}"
                 + (f" FAILED: {', '.join(ctest.failed[:6])}" if ctest and ctest.failed else ""))
    if edge and edge.per_variant:
        parts = [f"{v} {e['ok']} ok/{e['failed']} failed/{e['skipped']} skipped"
                 f" (worst rel L2 {ar.format_number(e['worst_rel'], 2)})" for v, e in edge.per_variant.items()]
        lines.append("edge oracle: " + "; ".join(parts))
    else:
        lines.append("edge oracle: no result")
    for name, members in group_runs(runs).items():
        cases = group_cases(members)
        axis, columns = swept_values(cases)
        full = [c for c in cases if not c["causal"]] or cases
        largest = max(c[axis] for c in full)
        at_largest = [c for c in full if c[axis] == largest and c["status"] == "ok"]
        best = {}
        for c in at_largest:  # the largest d_k's figure per variant, dtype and layout
            label = " ".join([c["variant"], *typed(c["dtype"], c["layout"])])
            if label not in best or c["d_k"] > best[label]["d_k"]:
                best[label] = c
        figures = ", ".join(f"{v} {tflops(c):.3g}" + (f" ({c['percent_of_peak']:.0f}%)"
                                                     if c["percent_of_peak"] is not None else "")
                            for v, c in best.items())
        ok = len(ar.ok_cases(cases))
        lines.append(f"{name}: {ok}/{len(cases)} ok; TFLOP/s at {axis} {largest}"
                     f"{' (d ' + str(max(c['d_k'] for c in at_largest)) + ')' if at_largest else ''}: "
                     f"{figures or 'none ok'}")
        for line in crossover(cases, "fused", "cublas")[:2]:
            lines.append(f"  {line}")
    return "\n".join(lines) + "\n"


def add_arguments(parser) -> None:
    parser.add_argument("runs", nargs="*", help="results folders (attnbench's and the torch peer's)")
    parser.add_argument("--edge-json", help="output of `attnbench check configs/gpu-edge.toml --json`")
    parser.add_argument("--ctest-log", help="output of ctest --output-on-failure")
    parser.add_argument("--out", help="write the markdown here (default: print it)")
    parser.add_argument("--short", help="also write a few plain lines for a terminal here")


def read_optional(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise ar.ResultsError(f"{path}: cannot be read ({error.strerror})") from None


def run(args) -> None:
    if args.out and args.short and Path(args.out).resolve() == Path(args.short).resolve():
        # The short summary, written second, replaced the full one without a word.
        raise ar.ResultsError(f"--out and --short are the same file ({args.short})")
    runs, problems = load_runs(args.runs)
    edge_text, ctest_text = read_optional(args.edge_json), read_optional(args.ctest_log)
    if not runs and edge_text is None and ctest_text is None:
        raise ar.ResultsError("nothing to summarise: " + ("; ".join(problems) if problems
                                                           else "give results folders or logs"))
    edge = parse_edge_json(edge_text) if edge_text is not None else None
    ctest = parse_ctest_log(ctest_text) if ctest_text is not None else None
    text = render(runs, problems, edge, ctest)
    if args.out:
        ar.write_file(args.out, text)
        print(f"wrote {args.out}")
    else:
        print(text, end="")
    if args.short:
        ar.write_file(args.short, render_short(runs, edge, ctest))
