"""Property tests: random Editor.js documents, HTML and text (rag_pipeline.core.normalize).

Documents are built from the block schemas of the Editor.js core and common plugins, with
text that mixes words and Markdown/HTML special characters. Every word put into a text field
must come out, the output must never show JSON structure, and re-normalising the output as
Markdown must change nothing.
"""

import html
import json
import re
import string
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from rag_pipeline.core.normalize import SourceFormat, to_markdown

# Property runs of a few hundred examples each: outside the unit tier's 90 s.
pytestmark = pytest.mark.slow

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
JSON_STRUCTURE_WORDS = ('"blocks"', '"type":', '"data"')

words = st.text(alphabet=string.ascii_letters + string.digits, min_size=2, max_size=8)
# Characters that mean something in Markdown or HTML, between the words. Each starts and
# ends with a non-alphanumeric character, so the words stay words.
separators = st.sampled_from(
    [" ", " ", ", ", ". ", " * ", "_", " # ", " - ", " 1. ", " | ", " [", "] ", "(", ") ", " < ",
     " > ", " & ", " `", "~~", " \\ ", " = ", " + ", "!", ":", "; ", "\t", " **", "__ "]
)  # fmt: skip
PRESENTATION_KEYS = {"id", "alignment", "align", "style", "theme", "variant", "color", "class"}
INLINE_TAGS = ("b", "strong", "i", "em", "code", "mark", "u", "s")


@dataclass
class Text:
    """An Editor.js text field (HTML) and the words a reader must find in the output."""

    html: str
    words: list[str] = field(default_factory=list)


@st.composite
def plain_text(draw: st.DrawFn, max_words: int = 6) -> tuple[str, list[str]]:
    chosen = draw(st.lists(words, min_size=1, max_size=max_words))
    parts = [chosen[0]]
    for word in chosen[1:]:
        parts.extend([draw(separators), word])
    return "".join(parts), chosen


@st.composite
def html_text(draw: st.DrawFn) -> Text:
    """Words and special characters, escaped as Editor.js saves them, some inside inline tags."""
    pieces: list[str] = []
    found: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        text, chosen = draw(plain_text())
        escaped = html.escape(text, quote=False)
        wrapper = draw(st.sampled_from([None, "a", "br", *INLINE_TAGS]))
        if wrapper == "a":
            escaped = f'<a href="https://wiki.idempiere.org/en/{chosen[0]}">{escaped}</a>'
        elif wrapper == "br":
            escaped += "<br>"
        elif wrapper is not None:
            escaped = f"<{wrapper}>{escaped}</{wrapper}>"
        pieces.append(escaped)
        found.extend(chosen)
    return Text(" ".join(pieces), found)


@dataclass
class Block:
    """A generated block and the words it must keep."""

    data: dict[str, Any]
    words: list[str]


def _block(block_type: str, data: dict[str, Any], *texts: Text | tuple[str, list[str]]) -> Block:
    found: list[str] = []
    for text in texts:
        found.extend(text.words if isinstance(text, Text) else text[1])
    return Block({"type": block_type, "data": data}, found)


@st.composite
def header(draw: st.DrawFn) -> Block:
    text = draw(html_text())
    return _block("header", {"text": text.html, "level": draw(st.integers(1, 6))}, text)


@st.composite
def paragraph(draw: st.DrawFn) -> Block:
    text = draw(html_text())
    return _block("paragraph", {"text": text.html}, text)


@st.composite
def list_items(draw: st.DrawFn, generation: str, depth: int) -> tuple[list[Any], list[str]]:
    items: list[Any] = []
    found: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        text = draw(html_text())
        found.extend(text.words)
        if generation == "strings":
            items.append(text.html)
            continue
        children: list[Any] = []
        if depth < 3 and draw(st.booleans()):
            children, child_words = draw(list_items(generation, depth + 1))
            found.extend(child_words)
        item: dict[str, Any] = {"content": text.html, "items": children}
        if generation == "v2":
            item["meta"] = {"checked": draw(st.booleans())}
        items.append(item)
    return items, found


@st.composite
def list_block(draw: st.DrawFn) -> Block:
    generation = draw(st.sampled_from(["strings", "nested", "v2"]))
    items, found = draw(list_items(generation, 1))
    style = draw(st.sampled_from(["ordered", "unordered", "checklist"]))
    data: dict[str, Any] = {"style": style, "items": items}
    if generation == "v2" and style == "ordered":
        data["meta"] = {"start": draw(st.integers(0, 30)), "counterType": "upper-roman"}
    return Block(
        {"type": draw(st.sampled_from(["list", "List", "nestedList"])), "data": data}, found
    )


@st.composite
def checklist(draw: st.DrawFn) -> Block:
    texts = draw(st.lists(html_text(), min_size=1, max_size=4))
    items = [{"text": t.html, "checked": draw(st.booleans())} for t in texts]
    return _block("checklist", {"items": items}, *texts)


@st.composite
def quote(draw: st.DrawFn) -> Block:
    text, caption = draw(html_text()), draw(html_text())
    return _block(
        "quote", {"text": text.html, "caption": caption.html, "alignment": "left"}, text, caption
    )


@st.composite
def code(draw: st.DrawFn) -> Block:
    lines = draw(st.lists(plain_text(), min_size=1, max_size=4))
    indents = draw(
        st.lists(
            st.sampled_from(["", "  ", "\t", "    "]), min_size=len(lines), max_size=len(lines)
        )
    )
    source = "\n".join(indent + text for indent, (text, _) in zip(indents, lines, strict=True))
    found = [word for _, chosen in lines for word in chosen]
    block_type = draw(st.sampled_from(["code", "codeBox"]))
    return Block({"type": block_type, "data": {"code": source, "language": "java"}}, found)


@st.composite
def warning(draw: st.DrawFn) -> Block:
    title, message = draw(html_text()), draw(html_text())
    if draw(st.booleans()):
        return _block("warning", {"title": title.html, "message": message.html}, title, message)
    key = draw(st.sampled_from(["message", "text"]))
    return _block("alert", {"type": "danger", key: message.html}, message)


@st.composite
def table(draw: st.DrawFn) -> Block:
    rows: list[list[str]] = []
    found: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        cells = draw(st.lists(html_text(), min_size=1, max_size=4))  # ragged rows
        rows.append([cell.html for cell in cells])
        found.extend(word for cell in cells for word in cell.words)
    data = {"withHeadings": draw(st.booleans()), "content": rows}
    return Block({"type": "table", "data": data}, found)


@st.composite
def media(draw: st.DrawFn) -> Block:
    caption = draw(html_text())
    url = f"https://cdn.example.org/{draw(words)}.png"
    kind = draw(st.sampled_from(["image", "simpleImage", "embed"]))
    if kind == "image":
        return _block("image", {"file": {"url": url}, "caption": caption.html}, caption)
    if kind == "simpleImage":
        return _block("image", {"url": url, "caption": caption.html, "stretched": False}, caption)
    data = {"service": "youtube", "source": url, "embed": url, "caption": caption.html}
    return _block("embed", data, caption)


@st.composite
def link_like(draw: st.DrawFn) -> Block:
    first, second, third = draw(plain_text()), draw(plain_text()), draw(plain_text())
    url = f"https://files.example.org/{draw(words)}"
    if draw(st.booleans()):
        meta = {"title": first[0], "site_name": second[0], "description": third[0]}
        return _block("linkTool", {"link": url, "meta": meta}, first, second, third)
    data = {"file": {"url": url, "name": first[0], "size": 12}, "title": second[0]}
    return _block("attaches", data, first, second)


@st.composite
def raw(draw: st.DrawFn) -> Block:
    text = draw(html_text())
    return _block("raw", {"html": f"<div><p>{text.html}</p><script>x()</script></div>"}, text)


@st.composite
def unknown(draw: st.DrawFn) -> Block:
    texts = draw(st.lists(html_text(), min_size=1, max_size=3))
    # Keys that style a block (style, theme, id …) are not text; the converter skips them.
    key_names = words.filter(lambda key: key not in PRESENTATION_KEYS)
    keys = draw(st.lists(key_names, min_size=len(texts), max_size=len(texts), unique=True))
    data: dict[str, Any] = {key: text.html for key, text in zip(keys, texts, strict=True)}
    data["nested"] = {"number": 3, "flag": True, "url": "https://example.org/x"}
    block_type = draw(st.sampled_from(["personality", "bpmn", "excerpt", "avatar", "Custom-Thing"]))
    return _block(block_type, data, *texts)


simple_blocks = st.one_of(
    header(), paragraph(), list_block(), checklist(), quote(), code(), warning(), table(),
    media(), link_like(), raw(), unknown(),
    st.just(Block({"type": "delimiter", "data": {}}, [])),
    st.just(Block({"type": "delimiter"}, [])),
)  # fmt: skip


@st.composite
def columns(draw: st.DrawFn) -> Block:
    cols = draw(st.lists(st.lists(simple_blocks, min_size=1, max_size=3), min_size=1, max_size=3))
    found = [word for col in cols for item in col for word in item.words]
    data = {"cols": [{"blocks": [item.data for item in col]} for col in cols]}
    return Block({"type": "columns", "data": data}, found)


documents = st.lists(st.one_of(simple_blocks, columns()), min_size=1, max_size=8)


def _words_of(markdown: str) -> set[str]:
    return set(re.findall(r"[A-Za-z0-9]+", markdown))


@SETTINGS
@given(documents)
def test_random_editorjs_documents(blocks: list[Block]) -> None:
    body = json.dumps({"time": 1, "blocks": [item.data for item in blocks], "version": "2.31"})
    result = to_markdown(body, SourceFormat.EDITORJS)
    markdown = result.markdown

    for word in JSON_STRUCTURE_WORDS:
        assert word not in markdown
    present = _words_of(markdown)
    missing = [word for item in blocks for word in item.words if word not in present]
    assert not missing, f"words lost: {missing}"
    assert markdown == "" or (markdown.endswith("\n") and not markdown.endswith("\n\n"))
    # The canonical form is a fixed point of the Markdown path.
    assert to_markdown(markdown, SourceFormat.MARKDOWN).markdown == markdown
    json.dumps(result.metadata)


@SETTINGS
@given(
    st.lists(st.tuples(st.sampled_from(["p", "li", "h2", "td", "blockquote", "pre"]), plain_text()))
)
def test_random_html_keeps_words(elements: list[tuple[str, tuple[str, list[str]]]]) -> None:
    parts = []
    for tag, (text, _) in elements:
        escaped = html.escape(text, quote=False)
        if tag == "li":
            parts.append(f"<ul><li>{escaped}</li></ul>")
        elif tag == "td":
            parts.append(f"<table><tr><td>{escaped}</td><td>x</td></tr></table>")
        else:
            parts.append(f"<{tag}>{escaped}</{tag}>")
    markdown = to_markdown("\n".join(parts), SourceFormat.HTML).markdown
    present = _words_of(markdown)
    assert all(word in present for _, (_, chosen) in elements for word in chosen)
    assert to_markdown(markdown, SourceFormat.MARKDOWN).markdown == markdown


@SETTINGS
@given(st.lists(plain_text(), max_size=6), st.sampled_from(["\n", "\n\n", "\r\n"]))
def test_random_plain_text_keeps_words_and_is_not_formatted(
    paragraphs: list[tuple[str, list[str]]], joiner: str
) -> None:
    text = joiner.join(chunk for chunk, _ in paragraphs)
    markdown = to_markdown(text, SourceFormat.TEXT).markdown
    present = _words_of(markdown)
    assert all(word in present for _, chosen in paragraphs for word in chosen)
    inline = [t for block in MarkdownIt().parse(markdown) for t in block.children or []]
    assert not [t for t in inline if t.type == "html_inline"]  # no text became markup
    assert to_markdown(markdown, SourceFormat.MARKDOWN).markdown == markdown
