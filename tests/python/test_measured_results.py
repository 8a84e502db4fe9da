"""The committed runs and the documents about them cannot drift apart: README.md's "Measured
results" table has one row per committed run folder under results/, every such folder has a
README.md that gives the command that made it, and every relative link or image in these documents
resolves.

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
DOCUMENTS = [REPO / "README.md", REPO / "CONTRIBUTING.md",
             *sorted(RESULTS.glob("*/README.md")), *sorted((REPO / "docs").glob("*.md"))]

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def prose(text):
    """The text outside code: links shown as examples in code are not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"^    .*$", "", text, flags=re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def heading_anchors(text):
    anchors = set()
    for heading in re.findall(r"^#+ (.*)$", prose(text), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


def broken_links(document):
    text = document.read_text()
    broken = []
    for target in LINK.findall(prose(text)):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        if not path:
            if anchor not in heading_anchors(text):
                broken.append(target)
        elif not (document.parent / path).exists():
            broken.append(target)
    return broken


def test_every_relative_link_resolves(run_folders):
    assert len(DOCUMENTS) > len(run_folders)
    broken = {str(doc.relative_to(REPO)): links for doc in DOCUMENTS if (links := broken_links(doc))}
    assert not broken, f"links that lead nowhere: {broken}"


def test_a_broken_link_is_noticed(tmp_path):
    document = tmp_path / "README.md"
    (tmp_path / "there.md").write_text("# There\n")
    document.write_text("# Here\n[ok](there.md) [gone](missing.png) [up](#here) [down](#nowhere)\n"
                        "`[code](not-a-link)`\n")
    assert broken_links(document) == ["missing.png", "#nowhere"]


def measured_results_rows():
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Measured results\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| \[([\w.-]+)\]\(results/([\w.-]+)/README\.md\) \|", section, flags=re.M)


def test_the_readme_lists_every_committed_run_once(run_folders):
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
