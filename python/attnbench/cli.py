"""The attnbench Python commands, all through one argument parser: each is a subcommand of
`python3 -m attnbench` and a console command of its own (attnbench-plot, attnbench-compare, ...,
installed by `pip install -e python`, which scripts/setup.sh runs).

    attnbench-plot RUN [--only scaling,throughput,...]   every plot that applies, and results.md
    attnbench-table RUN                                  a markdown table of the run
    attnbench-compare BASELINE CANDIDATE [--pair A:B]    ratio of medians, faster/slower/same
    attnbench-compare-variants RUN... --baseline NAME    each variant / the baseline, bootstrap CI
    attnbench-heatmap W.npy [--tokens "..."]             attention weights as a heat map
    attnbench-gpu-summary RUN... --out summary.md        what scripts/gpu_run.sh made, in markdown
    attnbench-report RUN [CANDIDATE_RUN]                 report.html: tables and plots in one file

A results folder that cannot be read (attnbench.results checks every record once, at load), a
plot that does not apply or cannot be drawn, is one line on stderr ("attnbench-plot: error:
...") and exit status 2: every command raises ResultsError or NotApplicable, and main alone
prints it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from pathlib import Path
from typing import Iterable, Sequence

from .results import NotApplicable, ResultsError, Run

# Subcommand: the module (under attnbench) with its add_arguments(parser) and run(args).
COMMANDS = {
    "plot": "plots.all",
    "table": "table",
    "compare": "compare_runs",
    "compare-variants": "compare_variants",
    "heatmap": "plots.heatmap",
    "gpu-summary": "gpu_summary",
    "report": "report",
}


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of a command that reads one run folder: the folder and --out."""
    parser.add_argument("run", help="results folder written by attnbench (results/<run>)")
    parser.add_argument("--out", help="output folder (default: <run>/plots)")


def output_dir(args: argparse.Namespace, run: Run) -> Path:
    return Path(args.out) if args.out else run.folder / "plots"


def report_written(paths: Iterable[Path], stream=None) -> None:
    for path in paths:
        print(f"wrote {path}", file=stream or sys.stdout)


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser, its usage errors one line as every other error here (argparse prints the
    usage block first): the command, the problem, where help is, and exit status 2."""

    def error(self, message: str):
        one_line = " ".join(message.split())
        self.exit(2, f"{self.prog}: error: {one_line} (see {self.prog} --help)\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; with `only`, of that command alone (the others' modules are
    not imported: gpu-summary and table need no matplotlib)."""
    parser = OneLineParser(prog="python3 -m attnbench", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            continue
        module = importlib.import_module(f"{__package__}.{module_name}")
        doc = module.__doc__ or ""
        command = commands.add_parser(name, prog=f"attnbench-{name}", description=doc,
                                      help=doc.strip().split("\n\n")[0].replace("\n", " ").replace("%", "%%"),
                                      formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(command)
        command.set_defaults(action=module.run, prog=command.prog)
    return parser


def main(argv: Sequence[str] | None = None, command: str | None = None) -> int:
    """Parse argv (with `command` in front, for the console commands) and run it; a ResultsError
    or NotApplicable becomes one stderr line and exit status 2, as does a standard output that
    cannot be written (a full disk, a pipe closed early); an interrupt (Ctrl-C) is one line and
    exit status 130. Outputs are written whole or not at all (results.write_output), so an
    interrupted or failed command leaves every finished file as it was."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if command is not None:
        argv = [command, *argv]
    prog = f"attnbench-{argv[0]}" if argv and argv[0] in COMMANDS else "python3 -m attnbench"
    try:
        parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
        if command is not None:
            parser.prog = f"attnbench-{command}"  # it reports arguments no subcommand takes
        args = parser.parse_args(argv)
        with warnings.catch_warnings():
            # numpy's overflow notes while matplotlib scales values far apart: the figure draws,
            # or its error is the one line below.
            warnings.filterwarnings("ignore", r"(overflow|invalid value) encountered", RuntimeWarning)
            args.action(args)
        # What is still buffered fails here, not in the interpreter's last flush (a traceback).
        if sys.stdout is not None:
            sys.stdout.flush()
    except (ResultsError, NotApplicable) as error:
        return error_exit(prog, str(error))
    except OSError as error:
        # Every output file's failure is a ResultsError (write_output): one left is a standard
        # stream's, stdout's unless the error names a file.
        where = (f"{error.filename}: cannot be used" if error.filename
                 else "cannot write to standard output")
        silence_stdout()
        return error_exit(prog, f"{where} ({error.strerror or error})")
    except KeyboardInterrupt:
        silence_stdout()
        say(f"{prog}: interrupted")
        return 130
    return 0


def error_exit(prog: str, message: str) -> int:
    """The one line of an error, and exit status 2. Only line breaks are joined: a name's own
    spaces (a quoted ATTNBENCH_BINARY) stay as given."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    say(f"{prog}: error: " + " ".join(lines))
    return 2


def say(line: str) -> None:
    """A line on stderr, unless stderr itself cannot take it (closed, a full disk): the exit
    status still says what happened."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def silence_stdout() -> None:
    """Points the process's stdout at /dev/null: the interpreter flushes stdout once more at
    exit, and into a closed pipe or a full disk that fails again with an "Exception ignored"
    traceback (the remedy Python's signal documentation gives for SIGPIPE). Only the real
    stdout: a caller's capture (a test's) is left alone."""
    if sys.stdout is None or sys.stdout is not sys.__stdout__:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


# Console commands (pyproject.toml's [project.scripts]).
def plot(argv: Sequence[str] | None = None) -> int:
    return main(argv, "plot")


def table(argv: Sequence[str] | None = None) -> int:
    return main(argv, "table")


def compare(argv: Sequence[str] | None = None) -> int:
    return main(argv, "compare")


def compare_variants(argv: Sequence[str] | None = None) -> int:
    return main(argv, "compare-variants")


def heatmap(argv: Sequence[str] | None = None) -> int:
    return main(argv, "heatmap")


def gpu_summary(argv: Sequence[str] | None = None) -> int:
    return main(argv, "gpu-summary")


def report(argv: Sequence[str] | None = None) -> int:
    return main(argv, "report")
