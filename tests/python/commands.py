"""The package's commands as the tests call them: in-process, through attnbench.cli.main (the
one argument parser), each with its console name for the error lines it prints."""

from __future__ import annotations

from attnbench import cli


class Command:
    """`attnbench-<name> ARGV... [--only ONLY]`, run in-process; main returns the exit status."""

    def __init__(self, name: str, only: str | None = None):
        self.name, self.only = name, only
        self.prog = f"attnbench-{name}"

    def main(self, argv) -> int:
        extra = ["--only", self.only] if self.only else []
        return cli.main([self.name, *map(str, argv), *extra])

    def __repr__(self) -> str:
        return f"{self.prog}{' --only ' + self.only if self.only else ''}"


plot_all = Command("plot")
plot_scaling = Command("plot", "scaling")
plot_throughput = Command("plot", "throughput")
plot_memory = Command("plot", "memory")
plot_heads_dk = Command("plot", "heads_dk")
plot_speedup = Command("plot", "speedup")
plot_mask_density = Command("plot", "mask_density")
results_table = Command("table")
compare_runs = Command("compare")
compare_variants = Command("compare-variants")
plot_heatmap = Command("heatmap")
gpu_summary = Command("gpu-summary")
