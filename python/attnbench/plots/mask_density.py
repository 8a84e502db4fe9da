"""What a mask costs: median time against the mask's density (unmasked pairs /
(seq_q * seq_kv)) for every variant and shape of a run that swept the mask axis,
with a straight line fitted per variant and mask family (window, documents, all):
time = intercept + slope * density. A block-sparse kernel's time follows the
unmasked pairs, so its slope is close to its dense time and its intercept close to
0; a kernel that computes every pair and masks afterwards is flat (slope near 0).
The right panel shows GFLOP/s over the unmasked pairs beside the dense causal
case's. Writes mask_density.png/.svg and mask_density.md (the table and the fits).

    attnbench-plot results/<run> --only mask_density [--out DIR]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import plotting as ap, results as ar

# Mask families the fit distinguishes; "none" and "causal" are the references.
FAMILIES = ("window", "documents")
FAMILY_MARKERS = {"window": "o", "documents": "s", "prefix": "^", "none": "*", "causal": "P"}


def family(case: dict) -> str:
    """window:819 -> window; none, causal -> themselves."""
    return ap.mask_family(case["mask"])


def shape_key(case: dict) -> tuple:
    """Everything that tells two cases apart except the mask."""
    return (case["variant"], *(case[axis] for axis in ar.SHAPE_AXES),
            case.get("alibi", False), case.get("softcap", 0))


@dataclass
class LineFit:
    slope: float  # ms per unit of density
    intercept: float  # ms at density 0
    points: int

    def at(self, density: float) -> float:
        return self.intercept + self.slope * density


def fit_line(densities: list[float], times: list[float]) -> LineFit | None:
    """Least squares time = intercept + slope * density; None below two distinct densities."""
    if len(set(densities)) < 2:
        return None
    slope, intercept = np.polyfit(np.asarray(densities), np.asarray(times), 1)
    return LineFit(float(slope), float(intercept), len(densities))


def masked_cases(run: ar.Run) -> list[dict]:
    cases = [c for c in ar.ok_cases(run.cases) if ar.is_number(c.get("density"))]
    if not any(family(c) in FAMILIES or family(c) == "prefix" for c in cases):
        raise ar.NotApplicable("no case with a window, prefix or documents mask: the mask axis "
                               "was not swept")
    return cases


def reference(cases: list[dict], kind: str) -> dict | None:
    return next((c for c in cases if family(c) == kind), None)


def group_fits(cases: list[dict]) -> dict[str, LineFit]:
    fits = {}
    for name in (*FAMILIES, "all"):
        members = [c for c in cases if family(c) != "none" and (name == "all" or family(c) == name)]
        fit = fit_line([c["density"] for c in members], [c["time_ms_median"] for c in members])
        if fit is not None:
            fits[name] = fit
    return fits


def table_rows(cases: list[dict]) -> list[list[str]]:
    dense = reference(cases, "none")
    causal = reference(cases, "causal")
    rows = []
    for case in sorted(cases, key=lambda c: (family(c) not in ("none", "causal"), family(c),
                                             c["density"])):
        rows.append([
            case["mask"],
            f"{case['density']:.4f}",
            ar.format_number(case["time_ms_median"]),
            f"{case['time_ms_median'] / dense['time_ms_median']:.3f}" if dense else "-",
            ar.format_number(case["gflops"]),
            f"{case['gflops'] / causal['gflops']:.2f}" if causal else "-",
            "yes" if ar.is_disturbed(case) else "",
        ])
    return rows


def describe_group(cases: list[dict]) -> str:
    return f"{cases[0]['variant']}, {ar.format_shape(cases[0])}"


def render_table(run: ar.Run, groups: dict[tuple, list[dict]]) -> str:
    lines = [f"# Time against mask density: {run.provenance()}", "", f"Machine: {run.machine}", ""]
    for cases in groups.values():
        dense = reference(cases, "none")
        lines += [f"## {describe_group(cases)}", "",
                  ar.markdown_table(["mask", "density", "time ms", "time / dense",
                                     "GFLOP/s (unmasked pairs)", "GFLOP/s / causal's",
                                     "disturbed"], table_rows(cases)), ""]
        for name, fit in group_fits(cases).items():
            relative = f" ({fit.slope / dense['time_ms_median']:.2f} x dense time)" if dense else ""
            lines.append(f"- fit over {name} ({fit.points} cases): time = "
                         f"{fit.intercept:.3g} ms + {fit.slope:.4g} ms x density{relative}")
        lines.append("")
    return "\n".join(lines)


def figures(run) -> dict:
    """{"mask_density": the figure}; run: a loaded Run or its folder. A row of two panels per
    variant and shape, in the variant's colour; a marker per mask family."""
    run = ap.as_run(run)
    cases = masked_cases(run)
    groups = ar.group_by(cases, shape_key)
    colors = ap.variant_colors(c["variant"] for c in cases)
    height = 4.5 * len(groups) + 1.0
    fig, axes = ap.plt.subplots(len(groups), 2, figsize=(14, height), squeeze=False,
                                layout="constrained")
    for (time_ax, rate_ax), members in zip(axes, groups.values()):
        fits = group_fits(members)
        variant = members[0]["variant"]
        color = colors[variant]
        for name in (*FAMILIES, "prefix", "none", "causal"):
            points = sorted((c for c in members if family(c) == name), key=lambda c: c["density"])
            if not points:
                continue
            xs = [c["density"] for c in points]
            marker = FAMILY_MARKERS.get(name, "*")
            size = 14 if name in ("none", "causal") else 7
            ap.tag_variant(time_ax.plot(xs, [c["time_ms_median"] for c in points], marker=marker,
                                        markersize=size, linestyle="none", color=color,
                                        label=name)[0], variant)
            ap.tag_variant(rate_ax.plot(xs, [c["gflops"] for c in points], marker=marker,
                                        markersize=size, color=color, label=name,
                                        linestyle=ap.MASK_LINESTYLES[name] if name in FAMILIES
                                        else "none")[0], variant)
            ap.mark_disturbed(time_ax, points, "density", lambda c: c["time_ms_median"])
        grid = np.linspace(0, max(c["density"] for c in members), 50)
        for name, fit in fits.items():
            ap.tag_variant(time_ax.plot(
                grid, [fit.at(x) for x in grid], color=color, linewidth=1,
                linestyle=ap.MASK_LINESTYLES.get(name, (0, (1, 3))),  # all: sparse dots
                label=f"fit {name}: {fit.intercept:.3g} + {fit.slope:.4g} d ms")[0], variant)
        causal = reference(members, "causal")
        if causal:
            rate_ax.axhline(causal["gflops"], color="black", linewidth=1,
                            label=f"causal: {causal['gflops']:.0f} GFLOP/s")
            rate_ax.axhline(0.85 * causal["gflops"], color="black", linewidth=1, linestyle=":",
                            label="85% of causal's")
        time_ax.set_xlabel("density (unmasked pairs / seq_q seq_kv)")
        time_ax.set_ylabel("median time per pass (ms)")
        time_ax.set_xlim(left=0)
        time_ax.set_ylim(bottom=0)
        time_ax.set_title(describe_group(members))
        time_ax.legend(fontsize="small", **ap.outside_right(time_ax))
        rate_ax.set_xscale("log")
        rate_ax.set_xlabel("density (log)")
        rate_ax.set_ylabel(ap.with_dtypes("GFLOP/s over unmasked pairs", members))
        rate_ax.set_ylim(bottom=0)
        rate_ax.set_title("throughput on the pairs the mask leaves")
        rate_ax.legend(fontsize="small", **ap.outside_right(rate_ax))
    notes = [
        "Fits: least squares of median time on density over the masked cases of each family "
        "and over all masked cases (causal included; none left out).",
        ar.disturbed_caption(cases),
    ]
    title = run.title("Time against mask density", run.devices(cases))
    return {"mask_density": ap.finish_figure(fig, title, notes)}


def plot(run, out_dir: Path) -> list[Path]:
    run = ap.as_run(run)
    written = ap.save_figures(figures(run), out_dir)
    groups = ar.group_by(masked_cases(run), shape_key)
    return [*written, ar.write_text(out_dir, "mask_density.md", render_table(run, groups))]


