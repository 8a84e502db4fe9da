"""Every link in the project's documents leads somewhere: README.md, CONTRIBUTING.md, docs/,
results/README.md and each committed run's README.md are parsed as markdown (markdown-it-py, CommonMark with tables), and each link
or image with a relative target must name a file or folder of the checkout; a target with a
#fragment in a markdown file must name one of that file's headings, as GitHub makes their anchors.
Links in code (blocks and `spans`) are examples, not links. Links with a scheme (https:, mailto:)
are not checked: the tests reach no network."""

import re
from functools import cache
from pathlib import Path

from markdown_it import MarkdownIt

from conftest import REPO

PARSER = MarkdownIt("commonmark").enable("table")


def documents(root=REPO):
    return [root / "README.md", root / "CONTRIBUTING.md", root / "results" / "README.md",
            *sorted((root / "docs").rglob("*.md")), *sorted((root / "results").glob("*/README.md"))]


def inline_tokens(text):
    for token in PARSER.parse(text):
        if token.type == "inline":
            yield token


def link_targets(text):
    """The href of every link and the src of every image, in order, outside code."""
    targets = []
    for token in inline_tokens(text):
        for child in token.children or []:
            if child.type == "link_open":
                targets.append(child.attrs["href"])
            elif child.type == "image":
                targets.append(child.attrs["src"])
    return targets


def github_anchor(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def heading_anchors(path: Path):
    tokens = PARSER.parse(path.read_text())
    anchors, seen = set(), {}
    for opening, inline in zip(tokens, tokens[1:]):
        if opening.type != "heading_open":
            continue
        text = "".join(child.content for child in inline.children or []
                       if child.type in ("text", "code_inline"))
        anchor = github_anchor(text)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        anchors.add(anchor if count == 0 else f"{anchor}-{count}")
    return frozenset(anchors)


def broken_links(document: Path):
    broken = []
    for target in link_targets(document.read_text()):
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):
            continue  # an external link (https:, mailto:): not checked, the tests reach no network
        path, _, anchor = target.partition("#")
        file = (document.parent / path).resolve() if path else document
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in heading_anchors(file):
            broken.append(target)
    return broken


def test_every_relative_link_and_anchor_resolves():
    found = documents()
    assert all(document.is_file() for document in found), found
    assert len(found) >= 20
    assert sum(len(link_targets(doc.read_text())) for doc in found) > 100
    broken = {str(doc.relative_to(REPO)): links for doc in found if (links := broken_links(doc))}
    assert not broken, f"links that lead nowhere: {broken}"


def test_the_documents_link_to_each_other():
    assert {"docs/README.md", "results/README.md", "CONTRIBUTING.md"} <= set(
        link_targets((REPO / "README.md").read_text()))
    in_index = set(link_targets((REPO / "docs" / "README.md").read_text()))
    pages = {page.name for page in (REPO / "docs").glob("*.md") if page.name != "README.md"}
    assert pages <= in_index, f"pages docs/README.md does not list: {pages - in_index}"


def test_a_broken_link_is_noticed(tmp_path):
    document = tmp_path / "README.md"
    (tmp_path / "there.md").write_text("# There it is\n\n## `code` heading\n")
    document.write_text(
        "# Here\n\n[ok](there.md) [gone](missing.png) [up](#here) [down](#nowhere)\n"
        "[across](there.md#there-it-is) [astray](there.md#elsewhere) [code](there.md#code-heading)\n"
        "![picture](missing.svg) [web](https://example.org/none) `[code](not-a-link)`\n\n"
        "    [indented](not-a-link-either)\n\n"
        "| a | b |\n| --- | --- |\n| [cell](gone.md) | x |\n")
    assert broken_links(document) == ["missing.png", "#nowhere", "there.md#elsewhere",
                                       "missing.svg", "gone.md"]
