"""HTML, including MediaWiki `action=parse` output, → Markdown.

The tree is cleaned first (page chrome and MediaWiki furniture removed, math turned into its
TeX source), then converted by `HtmlToMarkdown`. Editor.js documents are built as a tree of the
same kind and go through the same two steps, so both formats share one set of rules.
"""

import functools
from typing import Any

from bs4 import BeautifulSoup, Tag

from rag_pipeline.core.normalize.converter import HtmlToMarkdown, attribute
from rag_pipeline.core.normalize.inline import parse_html

# Elements that are never content: page furniture, scripts and interactive controls.
_DROPPED_TAGS = (
    "script",
    "style",
    "nav",
    "footer",
    "form",
    "noscript",
    "template",
    "head",
    "title",
    "meta",
    "link",
    "button",
    "select",
    "textarea",
    "object",
    "embed",
    "canvas",
    "svg",
)

# MediaWiki furniture. Not every `mw-` class is chrome: `mw-parser-output` wraps the page,
# `mw-headline` is heading text, `mw-highlight` is code; so the lists are explicit. They are
# matched with set lookups in one pass over the tree: a CSS selector list of this length costs
# soupsieve a quarter of the whole conversion time.
_CHROME_CLASSES = frozenset(
    {
        "mw-editsection",
        "toc",
        "navbox",
        "navbox-styles",
        "vertical-navbox",
        "mw-jump-link",
        "printfooter",
        "catlinks",
        "mw-hidden-catlinks",
        "mw-indicators",
        "mw-cite-backlink",
        "mw-empty-elt",
        "noprint",
        "magnify",
        # The skin around the content when a whole page is fetched rather than parsed.
        "mw-footer",
        "vector-menu",
    }
)
_CHROME_IDS = frozenset(
    {
        "toc",
        "jump-to-nav",
        "catlinks",
        "siteSub",
        "contentSub",
        "mw-navigation",
        "mw-head",
        "mw-panel",
        "footer",
    }
)
# ARIA landmarks of page furniture, whatever the element.
_CHROME_ROLES = frozenset({"navigation", "banner", "contentinfo", "search"})
# Reference markers: `sup.reference` (a `reference` class elsewhere may be content).
_REFERENCE_MARKER = ("sup", "reference")


def _classes(element: Tag) -> list[str]:
    value = element.get("class")
    if isinstance(value, str):
        return value.split()
    return list(value) if value else []


def _is_chrome(element: Tag) -> bool:
    if element.name in _DROPPED_TAGS:
        return True
    classes = _classes(element)
    if _CHROME_CLASSES.intersection(classes):
        return True
    if element.name == _REFERENCE_MARKER[0] and _REFERENCE_MARKER[1] in classes:
        return True
    if attribute(element, "id") in _CHROME_IDS or attribute(element, "role") in _CHROME_ROLES:
        return True
    return _is_hidden(element)


def _is_math(element: Tag) -> bool:
    return element.name == "math" or "mwe-math-element" in _classes(element)


# Containers markdownify does not know as blocks: the whitespace around their children would
# pile up into an indentation that reads as a code block. As <div>s they are blocks.
_BLOCK_CONTAINERS = (
    "html",
    "body",
    "main",
    "header",
    "aside",
    "figure",
    "address",
    "hgroup",
    "center",
    "fieldset",
    "search",
)

# Links that only wrap an image (MediaWiki links every image to its file page).
_IMAGE_LINK_CLASSES = frozenset({"image", "mw-file-description"})


@functools.cache
def _converter() -> HtmlToMarkdown:
    return HtmlToMarkdown()


def _is_hidden(element: Tag) -> bool:
    if element.has_attr("hidden"):
        return True
    for declaration in attribute(element, "style").split(";"):
        prop, _, value = declaration.partition(":")
        if prop.strip().lower() == "display" and value.strip().lower().startswith("none"):
            return True
    return False


def _tex_of(element: Tag) -> str:
    annotation = element.find("annotation", attrs={"encoding": "application/x-tex"})
    tex = annotation.get_text() if isinstance(annotation, Tag) else ""
    if not tex.strip():
        math = element if element.name == "math" else element.find("math")
        if isinstance(math, Tag):
            tex = attribute(math, "alttext")
    if not tex.strip():
        image = element.find("img")
        if isinstance(image, Tag):
            tex = attribute(image, "alt")
    tex = " ".join(tex.split())
    # MediaWiki wraps every formula in `{\displaystyle ...}`, which says nothing about it.
    wrapper = "{\\displaystyle"
    if tex.startswith(wrapper) and tex.endswith("}"):
        tex = tex[len(wrapper) : -1].strip()
    return tex


def _tags(soup: BeautifulSoup) -> list[Tag]:
    """Every element of the tree in document order, as `find_all(True)` lists them.

    A plain walk: `find_all` builds and applies a filter object per call and per element,
    which cost more than the rest of the tree's cleaning.
    """
    return [node for node in soup.descendants if isinstance(node, Tag)]


def _inside(element: Tag, names: tuple[str, ...]) -> bool:
    return any(parent.name in names for parent in element.parents)


def _replace_math(soup: BeautifulSoup) -> None:
    """Replace formulas by their TeX source as inline code (their MathML is hidden markup)."""
    for element in [tag for tag in _tags(soup) if _is_math(tag)]:
        if element.decomposed or element.parent is None:
            continue
        tex = _tex_of(element)
        if not tex:
            element.decompose()
            continue
        code = soup.new_tag("code")
        code.string = tex
        element.replace_with(code)


def prepare_tree(soup: BeautifulSoup) -> dict[str, Any]:
    """Clean an HTML tree in place for conversion.

    Args:
        soup: The parsed document or fragment.

    Returns:
        Metadata: the page `title` (when the document has one) and how many elements were
        removed as chrome (`removed_elements`).
    """
    metadata: dict[str, Any] = {}
    title = next((tag for tag in _tags(soup) if tag.name == "title"), None)
    if title is not None and title.get_text().strip():
        metadata["title"] = " ".join(title.get_text().split())
    _replace_math(soup)
    removed = 0
    tags = _tags(soup)
    doomed: list[Tag] = [el for el in tags if _is_chrome(el)]
    # A <header> of the page holds the site name and menus; one inside an article, its title.
    doomed.extend(el for el in tags if el.name == "header" and not _inside(el, ("article", "main")))
    for element in doomed:
        if not element.decomposed:
            element.decompose()
            removed += 1
    for link in [tag for tag in _tags(soup) if tag.name == "a"]:
        href = attribute(link, "href")
        classes = set(attribute(link, "class").split())
        # A red link points at an edit form for a page that does not exist; an image link
        # points at the image's file page. Both keep their content and lose the link.
        is_red_link = "new" in classes and "redlink=1" in href
        is_image_link = bool(classes & _IMAGE_LINK_CLASSES) and link.find("img") is not None
        if is_red_link or is_image_link:
            link.unwrap()
    for container in [tag for tag in _tags(soup) if tag.name in _BLOCK_CONTAINERS]:
        container.name = "div"
    metadata["removed_elements"] = removed
    return metadata


def convert_tree(soup: BeautifulSoup) -> str:
    """Convert a prepared tree to (not yet canonical) Markdown."""
    markdown: str = _converter().convert_soup(soup)
    return markdown


def html_to_markdown(html: str) -> tuple[str, dict[str, Any]]:
    """Convert an HTML document or fragment to (not yet canonical) Markdown.

    Args:
        html: The HTML; malformed markup is parsed as browsers would, never rejected.

    Returns:
        The Markdown and the metadata of `prepare_tree`.
    """
    soup = parse_html(html)
    metadata = prepare_tree(soup)
    return convert_tree(soup), metadata
