"""The committed runs and the documents about them cannot drift apart: results/README.md's table
has one row per committed run folder under results/, in order, and every such folder has a
README.md that gives the command that made it (test_doc_links.py checks that the links resolve).

A committed run is one git tracks: the folders are read from `git ls-files results/`, never from
the directory listing, so a run the quick start just wrote (results/quick-<time>/, which
.gitignore ignores) or any other untracked folder is not one."""

import json
import re
import shutil
import subprocess

import pytest

from conftest import REPO

RESULTS = REPO / "results"


def committed_run_folders(root=REPO):
    """The folders under root/results/ that hold a file git tracks, sorted; skips where git cannot
    say (no git, or root not a git checkout)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the committed runs are the files git tracks")
    listed = subprocess.run(["git", "ls-files", "-z", "--", "results/"], cwd=root,
                            capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip(f"{root} is not a git checkout, so its committed runs are unknown: "
                    f"{listed.stderr.strip()}")
    names = {path.split("/")[1] for path in listed.stdout.split("\0") if path.count("/") >= 2}
    return [root / "results" / name for name in sorted(names)]


@pytest.fixture(scope="module")
def run_folders():
    return committed_run_folders()


def test_a_run_git_does_not_track_is_not_a_committed_run(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "results" / "kept").mkdir(parents=True)
    (tmp_path / "results" / "kept" / "README.md").write_text("# kept\n")
    (tmp_path / "results" / "README.md").write_text("# runs\n")
    subprocess.run([*git, "add", "results"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "a run"], cwd=tmp_path, check=True)
    (tmp_path / "results" / "quick-20260101-000000").mkdir()
    (tmp_path / "results" / "quick-20260101-000000" / "cases.jsonl").write_text("{}\n")
    assert committed_run_folders(tmp_path) == [tmp_path / "results" / "kept"]
def measured_results_rows():
    """The (name, folder) of each row of results/README.md's table, in order."""
    table = (RESULTS / "README.md").read_text()
    return re.findall(r"^\| \[([\w.-]+)\]\(([\w.-]+)/README\.md\) \|", table, flags=re.M)


def test_the_results_table_lists_every_committed_run_once(run_folders):
    rows = measured_results_rows()
    assert all(name == folder for name, folder in rows)
    assert [folder for _, folder in rows] == [folder.name for folder in run_folders]


def test_every_run_has_a_readme_naming_its_command(run_folders):
    assert len(run_folders) >= 10
    for folder in run_folders:
        readme = folder / "README.md"
        assert readme.is_file(), f"{folder.relative_to(REPO)} has no README.md"
        manifest = folder / "manifest.json"
        if manifest.is_file():
            command = json.loads(manifest.read_text())["command"]
            config = next(word for word in command.split() if word.endswith(".toml"))
            assert f"{config} " in readme.read_text(), (
                f"{readme.relative_to(REPO)} does not give the command that made the run "
                f"(its manifest's: {command})")
