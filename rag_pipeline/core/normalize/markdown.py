"""Canonical re-emit of CommonMark/GFM: the last step of every converter.

Every format is first turned into *some* Markdown; this module parses it with markdown-it-py
and renders the token tree again with mdformat (and its GFM plugin) in one fixed style, so two
documents that mean the same come out byte-identical whatever their source format:

- ATX headings, `-` bullets, `1.` `2.` … numbered lists, `*em*`, `**strong**`;
- fenced code with backticks (content untouched), unpadded GFM tables, `- [x]` task items;
- paragraphs on one line (soft line breaks become spaces: no wrapping, no unwrapping
  differences between an HTML source and a hard-wrapped Markdown file);
- `___` for a thematic break (`---` would turn a preceding line in a tight list item into a
  setext heading; mdformat's own 70 underscores cost 70 tokens of the embedding budget);
- Docusaurus admonitions (`:::tip Title` … `:::`, used by docs.idempiere.org) as a block
  quote that starts with the bold label: they are not GFM, and left alone their closing
  `:::` would be glued onto the last paragraph or list item;
- relative link and image targets resolved against a base URL when one is given.
"""

import functools
import re
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any, cast
from urllib.parse import urljoin

import mdformat.plugins
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdformat.renderer import MDRenderer, RenderContext, RenderTreeNode
from mdit_py_plugins.container import container_plugin

from rag_pipeline.core.normalize.document import NormalizationError
from rag_pipeline.core.normalize.renderers import render_paragraph, render_text

_MDFORMAT_OPTIONS: Mapping[str, Any] = {
    # "no" means: never wrap, and join the lines of a paragraph (see the module docstring).
    "wrap": "no",
    "end_of_line": "lf",
    # Cells padded to the widest one cost a table's worth of spaces per row.
    "compact_tables": True,
}
_THEMATIC_BREAK = "___"
_ADMONITIONS = ("note", "tip", "info", "warning", "danger", "caution", "important", "success")
# Where `_tight` keeps what it worked out, in the `env` of one render.
_TIGHT_LISTS = "rag_pipeline_tight_lists"
# What mdformat-gfm strips before a task item's text (spaces written as character references).
_LEADING_SPACES = re.compile(r"^(&#32;)+")
_GFM: Any = mdformat.plugins.PARSER_EXTENSIONS["gfm"]


def _render_children(node: RenderTreeNode, context: RenderContext) -> str:
    return "".join(child.render(context) for child in node.children)


def _render_hr(node: RenderTreeNode, context: RenderContext) -> str:
    return _THEMATIC_BREAK


def _render_em(node: RenderTreeNode, context: RenderContext) -> str:
    # mdformat keeps the author's marker (`_` or `*`); one style needs one marker.
    return "*" + _render_children(node, context) + "*"


def _render_strong(node: RenderTreeNode, context: RenderContext) -> str:
    return "**" + _render_children(node, context) + "**"


def _plain_text(node: RenderTreeNode) -> str:
    """The text of an inline subtree as an image's alt attribute shows it (markup dropped)."""
    if node.type in ("text", "code_inline", "html_inline"):
        return node.content
    if node.type in ("softbreak", "hardbreak"):
        return " "
    return "".join(_plain_text(child) for child in node.children)


# Escaped in an image description: what would otherwise be read as markup or end the label.
_DESCRIPTION_SPECIALS = frozenset("\\[]*_`<~&")


def _render_image(node: RenderTreeNode, context: RenderContext) -> str:
    # mdformat writes the description without escapes, so an alt text with an unbalanced
    # bracket or an asterisk reads back differently; escape what the parser would interpret.
    text = "".join(_plain_text(child) for child in node.children)
    description = "".join("\\" + c if c in _DESCRIPTION_SPECIALS else c for c in text)
    label = node.meta.get("label")
    if label:
        # mdformat types `env` as a bare MutableMapping; we put a set of labels there.
        used = cast(set[str], context.env["used_refs"])  # pyright: ignore[reportUnknownMemberType]
        used.add(label)
        return f"![{description}][{label.lower()}]"
    source = str(node.attrs.get("src", ""))
    if not source or any(c in " ()" or ord(c) < 32 or ord(c) == 127 for c in source):
        source = f"<{source}>"
    title = node.attrs.get("title")
    if title is not None:
        escaped_title = str(title).replace('"', '\\"')
        return f'![{description}]({source} "{escaped_title}")'
    return f"![{description}]({source})"


def _is_tight(node: RenderTreeNode) -> bool:
    # A list is tight when the paragraphs of its items are hidden (rendered without <p>).
    return all(
        grandchild.hidden
        for child in node.children
        for grandchild in child.children
        if grandchild.type == "paragraph"
    )


def _tight(node: RenderTreeNode, context: RenderContext) -> bool:
    """`_is_tight(node)`, worked out once per list of a render (kept in its `env`)."""
    env = cast(MutableMapping[str, Any], context.env)  # pyright: ignore[reportUnknownMemberType]
    known = cast(dict[int, bool], env.setdefault(_TIGHT_LISTS, {}))
    tight = known.get(id(node))
    if tight is None:
        tight = known[id(node)] = _is_tight(node)
    return tight


def _render_list_item(node: RenderTreeNode, context: RenderContext) -> str:
    # mdformat's own (which mdformat-gfm's calls) asks whether the whole list is tight for
    # every item: a list of n items took n² steps (10,000 items never converted within the
    # 30 s deadline; issue 49). This one asks once per list, and does mdformat-gfm's part.
    assert node.parent is not None
    task = "task-list-item" in str(node.attrs.get("class", ""))
    checkmark = _take_checkbox(node) if task else None
    separator = "\n" if _tight(node.parent, context) else "\n\n"
    text = separator.join(out for out in (c.render(context) for c in node.children) if out)
    if checkmark is None:
        return text if text.strip() else ""
    return f"[{checkmark}] {_LEADING_SPACES.sub('', text).lstrip()}"


def _take_checkbox(node: RenderTreeNode) -> str:
    """Remove a task item's checkbox (an HTML token the GFM parser puts first in its text)
    and say whether it is checked, as mdformat-gfm's renderer does."""
    inline = node.children[0].children[0]
    checkbox = inline.children[0]
    inline.children.remove(checkbox)
    return "x" if 'checked="checked"' in checkbox.content else " "


class _Gfm:
    """mdformat-gfm's plugin without its list item renderer (`_render_list_item` does its
    part): two renderers for one syntax would leave only the first plugin's."""

    CHANGES_AST = False
    RENDERERS: Mapping[str, Any] = {
        name: render for name, render in _GFM.RENDERERS.items() if name != "list_item"
    }
    POSTPROCESSORS: Mapping[str, Any] = _GFM.POSTPROCESSORS

    @staticmethod
    def update_mdit(mdit: MarkdownIt) -> None:
        """mdformat-gfm's parser rules (tables, strikethrough, task lists, autolinks)."""
        _GFM.update_mdit(mdit)


def _render_ordered_list(node: RenderTreeNode, context: RenderContext) -> str:
    # mdformat numbers consecutively only with zero padding ("01.", "02."); we want "1.", "2.".
    # Two ordered lists in a row need different delimiters, or they would merge into one.
    delimiter = "."
    previous = node.previous_sibling
    while previous is not None and previous.type == "ordered_list":
        delimiter = ")" if delimiter == "." else "."
        previous = previous.previous_sibling
    start = node.attrs.get("start")
    first = start if isinstance(start, int) else 1
    separator = "\n" if _is_tight(node) else "\n\n"
    items: list[str] = []
    for index, item in enumerate(node.children):
        marker = f"{first + index}{delimiter}"
        with context.indented(len(marker) + 1):
            lines = item.render(context).split("\n")
        head = f"{marker} {lines[0]}" if lines[0] else marker
        rest = [" " * (len(marker) + 1) + line if line else "" for line in lines[1:]]
        items.append("\n".join([head, *rest]))
    return separator.join(items)


def _admonition_kind(params: str) -> str:
    # `:::tip Title` (Docusaurus 2) and `:::tip[Title]` (Docusaurus 3).
    return params.strip().split(" ", 1)[0].split("[", 1)[0].lower()


def _render_admonition(node: RenderTreeNode, context: RenderContext) -> str:
    kind = node.type.removeprefix("container_")
    params = node.info.strip()
    title = params[len(kind) :].strip()
    if title.startswith("[") and title.endswith("]"):
        title = title[1:-1].strip()
    label = kind.capitalize() + (f": {title}" if title else "")
    with context.indented(2):
        body = "\n\n".join(child.render(context) for child in node.children)
    text = f"**{label}**" + (f"\n\n{body}" if body else "")
    return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))


def _escape_admonition_markers(text: str, node: RenderTreeNode, context: RenderContext) -> str:
    # A paragraph line starting with `:::` would open or close an admonition when read back.
    return "\n".join("\\" + line if line.startswith(":::") else line for line in text.split("\n"))


def _use_admonitions(mdit: MarkdownIt) -> None:
    for kind in _ADMONITIONS:
        mdit.use(container_plugin, name=kind, validate=_admonition_validator(kind))


class _CanonicalStyle:
    """An mdformat parser extension (the plugin protocol) holding the house-style renderers."""

    CHANGES_AST = False
    RENDERERS: Mapping[str, Any] = {
        "hr": _render_hr,
        "em": _render_em,
        "strong": _render_strong,
        "ordered_list": _render_ordered_list,
        "list_item": _render_list_item,
        "image": _render_image,
        "text": render_text,
        "paragraph": render_paragraph,
        **{f"container_{kind}": _render_admonition for kind in _ADMONITIONS},
    }
    POSTPROCESSORS: Mapping[str, Any] = {"paragraph": _escape_admonition_markers}

    @staticmethod
    def update_mdit(mdit: MarkdownIt) -> None:
        """Nothing: the admonition rules are added by `_WithAdmonitions`."""


class _WithAdmonitions(_CanonicalStyle):
    """The house style, and a parser that knows Docusaurus admonitions."""

    @staticmethod
    def update_mdit(mdit: MarkdownIt) -> None:
        """Teach the parser Docusaurus admonitions."""
        _use_admonitions(mdit)


def _admonition_validator(kind: str) -> Callable[..., bool]:
    """The container plugin's `validate` for one admonition kind."""

    def validate(params: str, *_: object) -> bool:
        return _admonition_kind(params) == kind

    return validate


@functools.cache
def _parser(admonitions: bool) -> MarkdownIt:
    # The same set-up as `mdformat.text`, built once: mdformat builds a new parser per call,
    # which costs more than the rendering of a typical document.
    # The eight admonition rules are tried at every line, but only a line holding ":::" can
    # open one: text without ":::" is parsed without them, to the same tokens.
    # mdformat's renderer is what markdown-it calls at run time; its typing says otherwise.
    mdit = MarkdownIt(renderer_cls=MDRenderer)  # pyright: ignore[reportArgumentType]
    # The commonmark preset stops at 20 levels of block nesting and drops deeper content
    # without a word; the "default" preset's 100 loses nothing a real document has.
    mdit.options["maxNesting"] = 100
    mdit.options["mdformat"] = dict(_MDFORMAT_OPTIONS)
    mdit.options["store_labels"] = True
    mdit.options["parser_extension"] = []
    mdit.options["codeformatters"] = {}
    style = _WithAdmonitions if admonitions else _CanonicalStyle
    for plugin in (_Gfm, style):
        if plugin not in mdit.options["parser_extension"]:
            mdit.options["parser_extension"].append(plugin)
            plugin.update_mdit(mdit)
    return mdit


def _needs_base(url: str) -> bool:
    """Whether `url` is relative (no scheme), so that it depends on the page it came from."""
    if not url or url.startswith("//"):
        return bool(url)
    head = url.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    return ":" not in head


def _resolve(base_url: str, url: str) -> str:
    if not _needs_base(url):
        return url
    try:
        return urljoin(base_url, url)
    except ValueError:  # e.g. a malformed IPv6 host: keep the target as written
        return url


def _resolve_links(tokens: Iterable[Token], env: MutableMapping[str, Any], base_url: str) -> None:
    for token in tokens:
        for attr in ("href", "src"):
            value = token.attrs.get(attr)
            if isinstance(value, str):
                token.attrs[attr] = _resolve(base_url, value)
        if token.children:
            _resolve_links(token.children, env, base_url)


def _resolve_references(env: MutableMapping[str, Any], base_url: str) -> None:
    # Reference-style links are rendered from their definitions, which live in `env`.
    for reference in env.get("references", {}).values():
        href = reference.get("href")
        if isinstance(href, str):
            reference["href"] = _resolve(base_url, href)


def _prepare_tokens(tokens: Iterable[Token]) -> None:
    """Adjust the parsed tokens so that the rendering is a fixed point.

    - Soft line breaks become spaces, merged with the text around them: mdformat decides
      escapes one text token at a time, so `[a` and `b]` on two lines are each escaped as
      unbalanced, while joined on one line `[a b]` needs no escape; a second run would differ.
    - Code ends with a newline: an unclosed fence at the very end of a document has none, and
      mdformat would then glue the closing fence onto the last line of code.
    """
    for token in tokens:
        if token.type in ("fence", "code_block") and token.content[-1:] not in ("", "\n"):
            token.content += "\n"
        if token.type != "inline" or not token.children:
            continue
        merged: list[Token] = []
        for child in token.children:
            if child.type == "softbreak":
                child = Token("text", "", 0, content=" ")
            if child.type == "text" and merged and merged[-1].type == "text":
                merged[-1].content += child.content
            else:
                merged.append(child)
        token.children = merged


def _first_heading(tokens: list[Token]) -> str:
    """The plain text of the first heading (its text and code spans, markup dropped)."""
    for index, token in enumerate(tokens[:-1]):
        if token.type == "heading_open":
            children = tokens[index + 1].children or []
            text = "".join(c.content for c in children if c.type in ("text", "code_inline"))
            return " ".join(text.split())
    return ""


def _check_nesting(tokens: list[Token], limit: int) -> None:
    """Refuse a document deeper than the parser's nesting cap instead of losing its content.

    markdown-it stops at `maxNesting` levels of lists, quotes (and inline markup) and drops
    everything deeper without a word: a list nested 1,500 levels kept 49 of its words.
    """
    for token in tokens:
        deepest = token.level
        if token.children:
            deepest = max(deepest, *(child.level for child in token.children))
        if deepest >= limit - 1:
            # A list level is two parser levels (list and item), a quote one.
            raise NormalizationError(
                f"document is nested too deeply: lists, quotes or emphasis reach the parser's "
                f"limit of {limit} levels (about {limit // 2} nested lists), and what is "
                "deeper would be lost; flatten the nesting"
            )


def _render(markdown: str, base_url: str | None) -> tuple[str, str]:
    # CommonMark turns NUL into U+FFFD; we promise NUL is removed (as the sanitizer does), so
    # it must go before the parser sees it.
    markdown = markdown.replace("\x00", "")
    mdit = _parser(":::" in markdown)
    env: dict[str, Any] = {}
    tokens = mdit.parse(markdown, env)
    _check_nesting(tokens, int(mdit.options["maxNesting"]))
    _prepare_tokens(tokens)
    if base_url:
        _resolve_links(tokens, env, base_url)
        _resolve_references(env, base_url)
    return mdit.renderer.render(tokens, mdit.options, env), _first_heading(tokens)


def canonicalize_with_heading(markdown: str, *, base_url: str | None = None) -> tuple[str, str]:
    """Re-emit Markdown in the house style, with the text of its first heading.

    Args:
        markdown: Any CommonMark/GFM text.
        base_url: When given, relative link and image targets are resolved against it.

    Returns:
        The canonical Markdown (ending with exactly one newline, or "" if it has no content)
        and its first heading's text ("" when it has none), found in the same parse.
    """
    rendered, heading = _render(markdown, base_url)
    rendered = rendered.strip("\n")
    return (rendered + "\n" if rendered.strip() else ""), heading


def canonicalize(markdown: str, *, base_url: str | None = None) -> str:
    """Re-emit Markdown in the house style (see `canonicalize_with_heading`)."""
    return canonicalize_with_heading(markdown, base_url=base_url)[0]
