"""Links of the documentation: every page in docs/ is reachable from docs/index.md, and every relative link in
docs/*.md and README.md points at an existing file (and, with ``#anchor`` into a Markdown page, at one of
its headings)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _prose(text: str) -> str:
    """Text outside fenced code blocks and inline code (links are only read from prose)."""
    text = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _relative_links(page: Path):
    """``(target path or None for a same-page anchor, anchor or None, raw link)`` of each relative link."""
    for raw in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", raw):  # http:, https:, mailto:, ...
            continue
        path, _, anchor = raw.partition("#")
        yield (page.parent / path).resolve() if path else page.resolve(), anchor or None, raw


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (but ``-`` and ``_``), spaces -> ``-``."""
    text = re.sub(r"`|\*\*|\*", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set:
    headings = re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"),
                                                            flags=re.S | re.M), flags=re.M)
    seen, out = {}, set()
    for h in headings:  # repeated headings get -1, -2, ... as on GitHub
        s = _slug(h)
        out.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return out


def test_slug_rules_by_hand():
    # The anchors GitHub gives these headings (checked on rendered pages of this repository's style).
    assert _slug("## 4. Corrected reliability diagram and other plots".lstrip("# ")) == \
        "4-corrected-reliability-diagram-and-other-plots"
    assert _slug("Gaussian recalibration (Appendix G.2, Table 5)") == "gaussian-recalibration-appendix-g2-table-5"
    assert _slug("`fit_em` and `fit_nuts`") == "fit_em-and-fit_nuts"


def _broken(page: Path) -> list:
    """The relative links of ``page`` whose file, or whose anchor in a Markdown file, does not exist."""
    broken = []
    for target, anchor, raw in _relative_links(page):
        if not target.exists():
            broken.append(f"{raw} (no such file)")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{raw} (no heading with anchor #{anchor} in {target.name})")
    return broken


def _unreachable(docs: Path) -> list:
    """Pages ``docs/*.md`` that no chain of relative links from ``docs/index.md`` reaches."""
    seen, todo = set(), [(docs / "index.md").resolve()]
    while todo:
        page = todo.pop()
        if page in seen:
            continue
        seen.add(page)
        for target, _, _ in _relative_links(page):
            if target.suffix == ".md" and target.parent == docs.resolve() and target.exists():
                todo.append(target)
    return sorted(p.name for p in docs.glob("*.md") if p.resolve() not in seen)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    broken = _broken(page)
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"


def test_every_docs_page_is_reachable_from_the_index():
    unreachable = _unreachable(DOCS)
    assert not unreachable, (f"pages in docs/ that no chain of links from docs/index.md reaches: {unreachable}; "
                             "link them from index.md or a page it links to")


def test_the_link_checks_can_fail(tmp_path):
    # Negative control: a missing file and a missing anchor are reported; a good link, a same-page anchor,
    # a web address and links inside code are not; a page linked from nowhere is reported as unreachable.
    (tmp_path / "index.md").write_text("# Here\n\n[ok](q.md#a-section) [bad](nope.md) [bad anchor](q.md#b) "
                                       "[self](#here) [web](https://example.org/x.md) `[code](missing.md)`\n\n"
                                       "```\n[fenced](missing2.md)\n```\n")
    (tmp_path / "q.md").write_text("# Title\n\n## A section\n")
    (tmp_path / "orphan.md").write_text("# Orphan\n\n[back](index.md)\n")
    assert _broken(tmp_path / "index.md") == ["nope.md (no such file)",
                                              "q.md#b (no heading with anchor #b in q.md)"]
    assert _broken(tmp_path / "q.md") == [] and _broken(tmp_path / "orphan.md") == []
    assert _unreachable(tmp_path) == ["orphan.md"]
