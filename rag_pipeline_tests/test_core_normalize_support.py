"""Shared helpers of the normalize tests: fixture paths, golden files, Markdown structure.

No tests live here; pytest collects the module (its name matches) and finds none.
"""

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.container import container_plugin
from mdit_py_plugins.front_matter import front_matter_plugin
from mdit_py_plugins.tasklists import tasklists_plugin

# The read-only fixtures shared by the project live beside the repository, not in it.
SHARED_FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
LOCAL_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "normalize"
GOLDEN = LOCAL_FIXTURES / "golden"
EDITORJS_FIXTURES = SHARED_FIXTURES / "editorjs"
WIKI_FIXTURES = SHARED_FIXTURES / "wiki"
LEWISIT = WIKI_FIXTURES / "mediawiki_api_examples" / "parse_fv2_dewiki_Lewisit.json"

SHARED_ABSENT = f"shared fixtures folder {SHARED_FIXTURES} is absent (it sits beside the repo)"
requires_shared = pytest.mark.skipif(not SHARED_FIXTURES.is_dir(), reason=SHARED_ABSENT)


def shared_files(folder: Path, pattern: str) -> list[Any]:
    """Fixture files to parametrise over; one skipped parameter when the folder is absent."""
    if not folder.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=SHARED_ABSENT), id="absent")]
    return sorted(folder.glob(pattern))


def assert_golden(relative: str, actual: str) -> None:
    """Compare `actual` with the golden file; `UPDATE_GOLDEN=1` rewrites the file instead."""
    path = GOLDEN / relative
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    assert path.is_file(), f"golden {path} is missing; run with UPDATE_GOLDEN=1 and review it"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"output differs from golden {relative} (UPDATE_GOLDEN=1 to accept)"


def html_text(html: str) -> str:
    """The visible text of an HTML fragment, whitespace collapsed."""
    return " ".join(BeautifulSoup(html, "html.parser").get_text(" ").split())


@dataclass
class Structure:
    """What a reader sees of a Markdown document's block structure."""

    headings: list[tuple[int, str]] = field(default_factory=list)
    list_items: int = 0
    list_depth: int = 0
    checked: int = 0
    unchecked: int = 0
    tables: list[list[list[str]]] = field(default_factory=list)
    code_blocks: list[str] = field(default_factory=list)
    paragraphs: list[str] = field(default_factory=list)
    blockquotes: int = 0
    thematic_breaks: int = 0


# Docusaurus admonitions (docs.idempiere.org): `:::tip Title` … `:::`.
ADMONITIONS = ("note", "tip", "info", "warning", "danger", "caution", "important", "success")


def _parser() -> MarkdownIt:
    parser = (
        MarkdownIt("commonmark", {"maxNesting": 100})
        .enable("table")
        .enable("strikethrough")
        .use(front_matter_plugin)
        .use(tasklists_plugin)
    )
    for kind in ADMONITIONS:
        parser.use(container_plugin, name=kind)
    return parser


def inline_text(token: Token) -> str:
    """The plain text of an inline token: text and code content, breaks as spaces."""
    parts: list[str] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(inline_text(child))
    return " ".join("".join(parts).split())


def structure(markdown: str) -> Structure:
    """Parse Markdown (GFM tables and task lists) and collect its structure."""
    result = Structure()
    tokens = _parser().parse(markdown)
    depth = 0
    row: list[str] | None = None
    for index, token in enumerate(tokens):
        if token.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
            result.list_depth = max(result.list_depth, depth)
        elif token.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
        elif token.type == "list_item_open":
            result.list_items += 1
            classes = token.attrs.get("class", "")
            if "task-list-item" in str(classes):
                inline = tokens[index + 2]
                if 'checked="checked"' in (inline.children or [Token("", "", 0)])[0].content:
                    result.checked += 1
                else:
                    result.unchecked += 1
        elif token.type == "heading_open":
            result.headings.append((int(token.tag[1]), inline_text(tokens[index + 1])))
        elif token.type == "table_open":
            result.tables.append([])
        elif token.type == "tr_open":
            row = []
        elif token.type == "tr_close" and row is not None:
            result.tables[-1].append(row)
            row = None
        elif token.type in ("th_open", "td_open") and row is not None:
            row.append(inline_text(tokens[index + 1]))
        elif token.type in ("fence", "code_block"):
            result.code_blocks.append(token.content)
        elif token.type == "paragraph_open":
            result.paragraphs.append(inline_text(tokens[index + 1]))
        elif token.type == "blockquote_open":
            result.blockquotes += 1
        elif token.type == "hr":
            result.thematic_breaks += 1
    return result
