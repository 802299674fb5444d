"""The docs link only inside the repository: every relative link and image of README.md and
docs/ names a file (or folder) of this checkout, so a fresh clone has no broken links."""
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# [text](target) and ![alt](target), target up to the first space or ')'; <target> too
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# [label]: target reference definitions
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def markdown_files() -> list[str]:
    files = [os.path.join(REPO, "README.md")]
    for d, _, fs in os.walk(os.path.join(REPO, "docs")):
        files += [os.path.join(d, f) for f in sorted(fs) if f.endswith(".md")]
    return files


def links(path: str) -> list[str]:
    with open(path) as fh:
        text = FENCE.sub("", fh.read())  # code blocks hold commands, not links
    text = re.sub(r"`[^`\n]*`", "", text)
    return LINK.findall(text) + REFERENCE.findall(text)


def test_there_are_docs_with_links():
    assert len(markdown_files()) >= 2
    assert sum(len(links(f)) for f in markdown_files()) >= 5


@pytest.mark.parametrize("doc", markdown_files(), ids=lambda p: os.path.relpath(p, REPO))
def test_relative_links_resolve_inside_the_repository(doc):
    bad = []
    for target in links(doc):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue  # a URL (https:, mailto:) or an anchor in the same page
        path = target.split("#", 1)[0].split("?", 1)[0]
        resolved = os.path.normpath(os.path.join(os.path.dirname(doc), path))
        if os.path.commonpath([resolved, REPO]) != REPO:
            bad.append(f"{target} (outside the repository)")
        elif not os.path.exists(resolved):
            bad.append(f"{target} (no such file)")
    assert not bad, f"{os.path.relpath(doc, REPO)}: broken links: {bad}"
