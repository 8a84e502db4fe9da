"""The README's commands run as written: the quick start's two scripts exist, and the PyTorch
peer's two commands install torch into one virtual environment and run the peer from it with
arguments its parser takes, on a config that exists. Without PyTorch the peer's own command is run
too: it reads the config's plan through the binary and stops, saying torch is missing."""

import importlib.util
import shlex
import subprocess
import sys

import pytest
from markdown_it import MarkdownIt

from binary import REPO, attnbench_binary
from conftest import SCRIPTS_DIR

README = (REPO / "README.md").read_text()
PEER = SCRIPTS_DIR / "peers" / "torch_sdpa.py"


def readme_command_lines():
    """Every line of the README's code blocks, without its trailing comment."""
    lines = []
    for token in MarkdownIt("commonmark").parse(README):
        if token.type in ("code_block", "fence"):
            lines += [line.split("  #")[0].strip() for line in token.content.splitlines()]
    return [line for line in lines if line]


def peer_commands():
    install = [line for line in readme_command_lines() if "pip install" in line]
    run = [line for line in readme_command_lines() if "scripts/peers/torch_sdpa.py" in line]
    assert len(install) == 1 and len(run) == 1, (install, run)
    return install[0], shlex.split(run[0])


def test_the_quick_start_commands_are_the_scripts():
    lines = readme_command_lines()
    assert "bash scripts/quickstart.sh" in lines and "bash scripts/test.sh" in lines
    assert (SCRIPTS_DIR / "quickstart.sh").is_file() and (SCRIPTS_DIR / "test.sh").is_file()


def test_the_peer_runs_from_the_environment_its_install_line_makes():
    install, run = peer_commands()
    venv = shlex.split(install.split("&&")[0])
    assert venv[:3] == [venv[0], "-m", "venv"] and len(venv) == 4
    pip = shlex.split(install.split("&&")[1])
    assert pip[0] == f"{venv[3]}/bin/pip" and pip[1] == "install" and {"torch", "numpy"} <= set(pip)
    assert run[0] == f"{venv[3]}/bin/python" and (REPO / run[1]) == PEER


def test_the_peer_takes_the_readmes_arguments():
    _, run = peer_commands()
    spec = importlib.util.spec_from_file_location("torch_sdpa_readme", PEER)
    peer = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = peer  # its dataclasses look their module up there
    spec.loader.exec_module(peer)
    args = peer.build_parser().parse_args(run[2:])
    assert (REPO / args.config).is_file()


def test_the_peers_command_reads_its_plan_then_needs_torch():
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("PyTorch is installed here: the command would time every case")
    _, run = peer_commands()
    result = subprocess.run([sys.executable, *run[1:], "--attnbench", str(attnbench_binary())],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "cannot import torch" in result.stderr, result.stderr
