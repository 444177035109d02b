"""What the HTML converter reads off elements before it writes Markdown.

Attribute values as strings, the language a code block declares (in the ways GitHub,
highlight.js, MediaWiki and SyntaxHighlighter write it), a table's own rows and cells with
their spans and alignment, whether a list directly follows one of its kind, and link targets
made safe to stand in Markdown. `converter.HtmlToMarkdown` turns these into its output.
"""

from bs4 import Tag

_MAX_SPAN = 64  # a colspan/rowspan beyond this is a typo or an attack, not a layout
_LANGUAGE_CLASS_PREFIXES = ("language-", "lang-", "mw-highlight-lang-", "highlight-source-")
_LANGUAGE_ATTRIBUTES = ("data-lang", "data-language")
# On these (unrendered MediaWiki tags) `lang` names the code's language, elsewhere a human one.
_CODE_TAGS_WITH_LANG = frozenset({"syntaxhighlight", "source"})


def attribute(element: Tag, name: str) -> str:
    """An attribute as one string ("" when absent); multi-valued ones (class) joined by spaces."""
    value = element.get(name)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return " ".join(value)


def _is_language(candidate: str) -> bool:
    return bool(candidate) and all(c.isalnum() or c in "+#._-" for c in candidate)


def code_language(pre: Tag) -> str:
    """The language of a code block, from the element, its `<code>` child or its wrappers.

    Recognises `language-x` / `lang-x` (GitHub, highlight.js, Prism), `mw-highlight-lang-x`
    (MediaWiki SyntaxHighlight), `highlight-source-x` (GitHub wrappers), `brush: x`
    (SyntaxHighlighter) and the `lang=` attribute of an unrendered `<syntaxhighlight>`.
    """
    candidates: list[Tag] = [pre]
    code = pre.find("code", recursive=False)
    if isinstance(code, Tag):
        candidates.append(code)
    parent = pre.parent
    for _ in range(2):
        if not isinstance(parent, Tag):
            break
        candidates.append(parent)
        parent = parent.parent
    for element in candidates:
        names = _LANGUAGE_ATTRIBUTES
        if element.name in _CODE_TAGS_WITH_LANG:
            names = ("lang", *names)
        for name in names:
            value = attribute(element, name).strip().lower()
            if _is_language(value):
                return value
        classes = attribute(element, "class").split()
        for index, css_class in enumerate(classes):
            for prefix in _LANGUAGE_CLASS_PREFIXES:
                if css_class.startswith(prefix) and _is_language(css_class[len(prefix) :]):
                    return css_class[len(prefix) :].lower()
            if css_class == "brush:" and index + 1 < len(classes):
                value = classes[index + 1].rstrip(";").lower()
                if _is_language(value):
                    return value
    return ""


def cell_span(cell: Tag, name: str) -> int:
    """A cell's `colspan` or `rowspan`: 1 unless a number, at most `_MAX_SPAN`."""
    value = attribute(cell, name).strip()
    if not value.isdigit():
        return 1
    return max(1, min(_MAX_SPAN, int(value)))


def cell_alignment(cell: Tag) -> str:
    """A cell's alignment from `align` or a `text-align` style: left, right, center or ""."""
    align = attribute(cell, "align").strip().lower()
    for declaration in attribute(cell, "style").split(";"):
        prop, _, value = declaration.partition(":")
        if prop.strip().lower() == "text-align":
            align = value.strip().lower()
    return align if align in ("left", "right", "center") else ""


def table_rows(table: Tag) -> list[tuple[Tag, bool]]:
    """The table's own rows (not those of nested tables), each with "is in `<thead>`"."""
    rows: list[tuple[Tag, bool]] = []
    for child in table.children:
        if not isinstance(child, Tag):
            continue
        if child.name == "tr":
            rows.append((child, False))
        elif child.name in ("thead", "tbody", "tfoot"):
            rows.extend(
                (tr, child.name == "thead")
                for tr in child.children
                if isinstance(tr, Tag) and tr.name == "tr"
            )
    return rows


def row_cells(row: Tag) -> list[Tag]:
    """The `td` and `th` cells of a row."""
    return [c for c in row.children if isinstance(c, Tag) and c.name in ("td", "th")]


def follows_same_list(element: Tag) -> bool:
    """Whether an odd number of lists of the same kind directly precede `element`."""
    count = 0
    sibling = element.previous_sibling
    while sibling is not None:
        if isinstance(sibling, Tag):
            if sibling.name != element.name:
                break
            count += 1
        elif str(sibling).strip():
            break
        sibling = sibling.previous_sibling
    return count % 2 == 1


def link_destination(href: str) -> str:
    """A link target that stays one Markdown token: no whitespace, no angle brackets."""
    out: list[str] = []
    for char in href:
        if char.isspace() or char in "<>":
            out.append(f"%{ord(char):02X}" if ord(char) < 128 else char)
        else:
            out.append(char)
    destination = "".join(out)
    if destination.count("(") != destination.count(")"):
        destination = destination.replace("(", "%28").replace(")", "%29")
    return destination


def is_autolink_target(href: str) -> bool:
    """Whether `<href>` is a CommonMark autolink (an absolute URI), not an HTML tag."""
    scheme, colon, rest = href.partition(":")
    return (
        bool(colon and rest)
        and 2 <= len(scheme) <= 32
        and scheme[0].isascii()
        and scheme[0].isalpha()
        and all(c.isascii() and (c.isalnum() or c in "+.-") for c in scheme)
        and not any(c.isspace() or c in "<>" or ord(c) < 32 for c in href)
    )
