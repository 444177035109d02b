"""One wiki page as a `SourceDocument`: from an `action=parse` answer, or from an export page.

Both paths check what the page is before it goes further: larger than `max_bytes`
(`RAG_WIKI_MAX_BYTES`, like the files source's cap) it fails with the sizes named; a parse
answer without its object, with text that is not text, or a revid that is no ASCII number
fails with what is wrong (`MalformedEntryError`). The caller records either as that page's
failure; the other pages go on.
"""

from collections.abc import Sequence

from rag_pipeline.core.models import FailedDocument, SourceFormat
from rag_pipeline.core.source import DocumentRef, SourceDocument
from rag_pipeline.sources.wiki.client import (
    MalformedEntryError,
    SiteInfo,
    article_address,
    json_object,
    json_objects,
    strict_int,
)
from rag_pipeline.sources.wiki.wikitext import wikitext_to_html
from rag_pipeline.sources.wiki.xml_export import ExportPage

BREADCRUMB_SEPARATOR = " › "
# What `action=parse` is asked for: edit links, the TOC and the limit report are chrome.
PARSE_PARAMS: dict[str, str | int] = {
    "action": "parse",
    "prop": "text|categories|revid|displaytitle",
    "disableeditsection": 1,
    "disabletoc": 1,
    "disablelimitreport": 1,
}


class PageTooLargeError(ValueError):
    """The page is larger than `RAG_WIKI_MAX_BYTES`; the message names both sizes."""


def check_size(text: str, max_bytes: int, what: str) -> None:
    """Raise `PageTooLargeError` when `text` is over `max_bytes` bytes of UTF-8."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise PageTooLargeError(
            f"page is {size:,} bytes of {what}, more than RAG_WIKI_MAX_BYTES ({max_bytes:,})"
        )


def rendered_document(
    data: dict[str, object],
    ref: DocumentRef,
    *,
    listed_title: str,
    path: Sequence[str],
    site: SiteInfo,
    max_bytes: int,
) -> SourceDocument:
    """The document of an `action=parse` answer for `ref`.

    Raises:
        MalformedEntryError: the answer is not what the API documents.
        PageTooLargeError: the page's HTML is over `max_bytes`.
    """
    parse = json_object(data.get("parse"))
    if not parse:
        raise MalformedEntryError("no `parse` object")
    text = parse.get("text", "")
    if isinstance(text, dict):  # formatversion=1 shape, from an old wiki or a proxy
        text = json_object(text).get("*", "")
    if not isinstance(text, str):
        raise MalformedEntryError("`parse.text` is not text")
    check_size(text, max_bytes, "HTML")
    revid = strict_int(parse.get("revid") or ref.version, "parse.revid")
    title = str(parse.get("title") or listed_title)
    categories = [
        str(c.get("category", c.get("*", ""))).replace("_", " ")
        for c in json_objects(parse.get("categories"))
        if not c.get("hidden")
    ]
    url = site.page_url(title)
    return SourceDocument(
        source_id=ref.source_id,
        language=ref.language,
        # The revision actually rendered: newer than the listing's if edited in between.
        version=str(revid),
        title=title,
        original_format=SourceFormat.HTML,
        body=text,
        breadcrumb=breadcrumb(path, categories),
        url=url,
        metadata={
            "pageid": strict_int(ref.source_id, "pageid"),
            "revid": revid,
            "title": title,
            "url": url,
            "categories": categories,
            "category_path": list(path),
            "wiki": site.sitename,
        },
    )


def exported_document(
    page: ExportPage, ref: DocumentRef, *, article_url: str, sitename: str, max_bytes: int
) -> SourceDocument | FailedDocument:
    """The document of an export's page (its wikitext rendered), or its failure if too large."""
    try:
        check_size(page.text, max_bytes, "wikitext")
    except PageTooLargeError as exc:
        return FailedDocument(ref.key, "raw", str(exc))
    rendered = wikitext_to_html(page.text, article_url=article_url)
    url = article_address(article_url, page.title) if article_url else ""
    categories = list(rendered.categories)
    return SourceDocument(
        source_id=ref.source_id,
        language=ref.language,
        version=str(page.revid),
        title=page.title,
        original_format=SourceFormat.HTML,
        body=rendered.html,
        breadcrumb=breadcrumb((), categories),
        url=url,
        metadata={
            "pageid": page.pageid,
            "revid": page.revid,
            "title": page.title,
            "url": url,
            "categories": categories,
            "timestamp": page.timestamp,
            "wiki": sitename,
        },
    )


def breadcrumb(path: Sequence[str], categories: Sequence[str]) -> str:
    """The category path that reached the page; else the page's first category."""
    if path:
        return BREADCRUMB_SEPARATOR.join(path)
    return categories[0] if categories else ""
