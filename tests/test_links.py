"""Every relative link of the repository's Markdown and notebooks resolves, without building the
book: for a link ``path.md#anchor`` (or ``path.ipynb#anchor``, or ``#anchor`` into its own file)
the file exists and the anchor is one of its headings' slugs or one of its explicit labels, and
every ``{ref}`` of the book names a label that exists. A page that moves or a heading that is
renamed then fails here, not only in the book's build (which needs the notebooks executed)."""
import json
import re
import subprocess
import sys
import unicodedata
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Folders that hold no source: build outputs, the book's copy of notebooks/ (docs/conf.py makes
#: it), run folders and virtual environments.
SKIPPED = {".git", "_build", "runs", "build", "dist", ".pytest_cache", ".ipynb_checkpoints",
           "node_modules", "__pycache__"}
#: The executed notebooks are copies of notebooks/ (their text is the source's); their links
#: resolve from there. The book's pages link to notebooks/ as docs/notebooks/, the copy that
#: docs/conf.py makes when the book is built.
EXECUTED = ROOT / "docs" / "executed"
BOOK_NOTEBOOKS = ("docs", "notebooks")
#: Headings down to this level get an anchor (Sphinx: ``myst_heading_anchors`` in docs/conf.py).
HEADING_ANCHORS = int(re.search(r"^myst_heading_anchors\s*=\s*(\d+)",
                                (ROOT / "docs" / "conf.py").read_text(encoding="utf-8"), re.M).group(1))

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LABEL = re.compile(r"^\(([^()\s]+)\)=\s*$")
HTML_ID = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
INLINE_CODE = re.compile(r"(`+).*?\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF = re.compile(r"\{ref\}`(?:[^`<]*<([^>`]+)>|([^`<]+))`")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def source_files():
    """The repository's Markdown files and notebooks (tracked and new ones), no build output."""
    try:
        listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                                 "*.md", "*.ipynb"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.split("\n")
        paths = [ROOT / name for name in listed if name]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout
        paths = [*ROOT.rglob("*.md"), *ROOT.rglob("*.ipynb")]
    return sorted(path for path in paths if path.is_file()
                  and not any(part in SKIPPED or part.startswith((".venv", "venv"))
                              for part in path.relative_to(ROOT).parts)
                  and path.relative_to(ROOT).parts[:2] != ("docs", "notebooks"))


@lru_cache(maxsize=None)
def markdown_of(path):
    """The Markdown of a file: the file itself, or a notebook's markdown cells one after another."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".ipynb":
        return text
    cells = json.loads(text)["cells"]
    return "\n\n".join("".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                       for cell in cells if cell["cell_type"] == "markdown")


def prose_lines(text):
    """(line number, line, inside a directive) of the text outside fenced code blocks; the body of
    a MyST directive (```{figure} ...) is Markdown, so it is read too."""
    block = None  # None in prose, else "code" or "directive"
    for number, line in enumerate(text.split("\n"), 1):
        fence = FENCE.match(line)
        if fence and block is None:
            block = "directive" if line.lstrip()[3:4] == "{" else "code"
        elif fence and re.fullmatch(r"\s*(`{3,}|~{3,})\s*", line):
            block = None
        elif block != "code":
            yield number, line, block == "directive"


def heading_title(markdown):
    """A heading's text as MyST reads it for its slug: links by their text, emphasis and inline
    code by their content, inline math left out."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"(?<!\\)\$[^$]+\$", "", text)
    text = re.sub(r"(\*\*|__)(.+?)\1", r"\2", text)
    text = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"\1", text)
    text = re.sub(r"(?<!\w)_(?!\s)(.+?)(?<!\s)_(?!\w)", r"\1", text)
    text = re.sub(r"(`+)(.*?)\1", r"\2", text)
    return text.replace("\\", "")


def github_slug(title):
    """MyST's default slug (``myst_parser.slugs.github_slugify``), the one GitHub uses too:
    lower case, spaces to hyphens, every character dropped that is not a word character, a
    hyphen or a space."""
    return re.sub(r"[^\w\u4e00-\u9fff\- ]", "", title.lower().replace(" ", "-"))


def docutils_id(title):
    """The id docutils gives a section (``docutils.nodes.make_id``), which MyST also accepts as
    an anchor: ASCII letters and digits, runs of anything else one hyphen, no leading digit or
    hyphen, no trailing hyphen."""
    text = unicodedata.normalize("NFKD", title.lower()).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^a-z0-9]+", "-", " ".join(text.split()))
    return re.sub(r"^[-0-9]+|-+$", "", text)


def headings(text):
    """(level, title) of every heading outside code blocks, in order."""
    found = []
    for _, line, in_directive in prose_lines(text):
        match = HEADING.match(line)
        if match and not in_directive:
            found.append((len(match.group(1)), heading_title(match.group(2))))
    return found


@lru_cache(maxsize=None)
def anchors_of(path):
    """Every anchor a link into ``path`` may name: the slugs of its headings down to
    HEADING_ANCHORS (made unique as MyST makes them: -1, -2, ... on repeats), their docutils
    ids, its ``(label)=`` targets and its ``<a id=...>`` elements."""
    text = markdown_of(path)
    anchors, slugs = set(), set()
    for level, title in headings(text):
        if level > HEADING_ANCHORS:
            continue
        slug, count = github_slug(title), 0
        while (slug if not count else f"{slug}-{count}") in slugs:
            count += 1
        slug = slug if not count else f"{slug}-{count}"
        slugs.add(slug)
        anchors.update({slug, docutils_id(title)})
    for _, line, _ in prose_lines(text):
        label = LABEL.match(line.strip())
        if label:
            anchors.add(label.group(1))
        anchors.update(HTML_ID.findall(line))
    anchors.discard("")
    return anchors


def links_of(path):
    """(line number, target) of every link in the prose of ``path``; line numbers count the
    notebook's markdown cells one after another."""
    for number, line, _ in prose_lines(markdown_of(path)):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            yield number, target


def broken_links(path):
    """One line per link of ``path`` that does not resolve."""
    base = ROOT / "notebooks" if path.parent == EXECUTED else path.parent
    broken = []
    for number, target in links_of(path):
        if SCHEME.match(target) or target.startswith("//"):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (base / file_part).resolve() if file_part else path
        inside = linked.relative_to(ROOT).parts if linked.is_relative_to(ROOT) else ()
        if inside[:2] == BOOK_NOTEBOOKS:
            linked = ROOT.joinpath("notebooks", *inside[2:])
        where = f"{path.relative_to(ROOT)}:{number}: {target}"
        if not linked.exists():
            broken.append(f"{where}: no such file")
        elif anchor and linked.suffix in (".md", ".ipynb") and anchor not in anchors_of(linked):
            broken.append(f"{where}: no heading or label '{anchor}' in {linked.relative_to(ROOT)}")
    return broken


FILES = source_files()


def test_the_repository_has_markdown_and_notebooks_to_check():
    names = {str(path.relative_to(ROOT)) for path in FILES}
    assert {"README.md", "docs/results.md", "docs/index.md"} <= names
    assert any(name.startswith("notebooks/") and name.endswith(".ipynb") for name in names)


@pytest.mark.parametrize("path", FILES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    assert not broken_links(path), "\n".join(broken_links(path))


def test_every_ref_names_a_label_of_the_book():
    book = [path for path in FILES if path.relative_to(ROOT).parts[0] in ("docs", "notebooks")]
    labels = set().union(*(anchors_of(path) for path in book))
    missing = []
    for path in book:
        for number, line, _ in prose_lines(markdown_of(path)):
            for named, bare in REF.findall(line):
                label = (named or bare).strip()
                if label not in labels:
                    missing.append(f"{path.relative_to(ROOT)}:{number}: {{ref}} {label}")
    assert not missing, "\n".join(missing)


def test_the_checker_finds_a_broken_link_and_a_broken_anchor(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "a.md").write_text(
        "# Top\n\n## The paper's long protocol: 600 epochs\n\n(my-label)=\n### `code` and **bold**\n\n"
        "```bash\n# not a heading\n[not a link](nowhere.md)\n```\n\n"
        "[ok](b.md#second) [ok](#the-papers-long-protocol-600-epochs) "
        "[ok](#the-paper-s-long-protocol-600-epochs) [ok](#my-label) [ok](#code-and-bold) "
        "[ok](https://example.org/x.md#y) `[ok](inline-code.md)`\n"
        "[bad](b.md#third) [bad](c.md) [bad](#not-a-heading)\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("# First\n\n## Second\n\n## Second\n", encoding="utf-8")
    anchors_of.cache_clear()
    markdown_of.cache_clear()
    try:
        broken = broken_links(tmp_path / "a.md")
        assert [line.split(": ", 1)[1].split(":")[0] for line in broken] == \
            ["b.md#third", "c.md", "#not-a-heading"], broken
        assert {"first", "second", "second-1"} <= anchors_of(tmp_path / "b.md")
    finally:
        anchors_of.cache_clear()
        markdown_of.cache_clear()


def test_the_slug_rules_are_mysts_and_docutils_on_every_heading_of_the_repository():
    """The two slug rules above against the libraries the book uses, on every heading here."""
    slugs = pytest.importorskip("myst_parser.slugs", reason="needs myst-parser (pip install -e .[test])")
    nodes = pytest.importorskip("docutils.nodes")
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    parser = create_md_parser(MdParserConfig(enable_extensions={"dollarmath", "amsmath"}), RendererHTML)
    compared = 0
    for path in FILES:
        text = markdown_of(path)
        tokens = parser.parse(text)
        parsed = [tokens[i + 1] for i, token in enumerate(tokens) if token.type == "heading_open"]
        titles = ["".join(child.content for child in token.children or []
                          if child.type in ("text", "code_inline")) for token in parsed]
        mine = [title for _, title in headings(text)]
        assert len(mine) == len(titles), f"{path.relative_to(ROOT)}: headings {mine} against {titles}"
        for title, theirs in zip(mine, titles):
            assert github_slug(title) == slugs.github_slugify(theirs), (path, title, theirs)
            assert docutils_id(title) == nodes.make_id(theirs), (path, title, theirs)
            compared += 1
    assert compared > 200
