"""The committed runs and the documents about them cannot drift apart: README.md's "Measured
results" table has one row per folder under results/, every folder has a README.md that gives the
command that made it, and every relative link or image in these documents resolves."""

import json
import re

from conftest import REPO

RESULTS = REPO / "results"
RUN_FOLDERS = sorted(path for path in RESULTS.iterdir() if path.is_dir())
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


def test_every_relative_link_resolves():
    assert len(DOCUMENTS) > len(RUN_FOLDERS)
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


def test_the_readme_lists_every_committed_run_once():
    rows = measured_results_rows()
    assert all(name == folder for name, folder in rows)
    assert [folder for _, folder in rows] == [folder.name for folder in RUN_FOLDERS]


def test_every_run_has_a_readme_naming_its_command():
    assert len(RUN_FOLDERS) >= 10
    for folder in RUN_FOLDERS:
        readme = folder / "README.md"
        assert readme.is_file(), f"{folder.relative_to(REPO)} has no README.md"
        manifest = folder / "manifest.json"
        if manifest.is_file():
            command = json.loads(manifest.read_text())["command"]
            config = next(word for word in command.split() if word.endswith(".toml"))
            assert f"{config} " in readme.read_text(), (
                f"{readme.relative_to(REPO)} does not give the command that made the run "
                f"(its manifest's: {command})")
