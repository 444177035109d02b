"""Reading a MediaWiki XML export (`Special:Export`, `dumpBackup.php`) as a stream of pages.

The schema is `<mediawiki><siteinfo>…</siteinfo><page><title/><ns/><id/><redirect title=…/>
<revision><id/><timestamp/><text>…</text></revision>…</page>…</mediawiki>`, in a namespace
that changes with the MediaWiki version (`export-0.10/`, `export-0.11/`), so elements are
matched by local name. `xml.etree.ElementTree.iterparse` streams: each `<page>` is cleared
once read, so an export of any size is read in constant memory. Expat resolves no external
entities and (Python ≥ 3.11 with expat ≥ 2.4) refuses entity-expansion bombs.

A full-history export has several `<revision>`s per page; the one with the highest id is the
page's current text.
"""

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


class ExportError(ValueError):
    """The file is not a readable MediaWiki XML export; the message says where."""


@dataclass(frozen=True)
class ExportSite:
    """The `<siteinfo>` of an export: the wiki's name and its main page's address."""

    sitename: str
    base: str

    @property
    def article_url(self) -> str:
        """The address pattern of a page, with `$1` for the title (from the main page's)."""
        if "/" not in self.base:
            return ""
        return self.base.rsplit("/", 1)[0] + "/$1"


@dataclass(frozen=True)
class ExportPage:
    """One page of an export with its latest revision."""

    pageid: int
    title: str
    namespace: int
    revid: int
    timestamp: str
    text: str
    redirect: str | None = None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child_text(element: ET.Element, name: str) -> str:
    for child in element:
        if _local(child.tag) == name:
            return child.text or ""
    return ""


def read_site(path: Path) -> ExportSite:
    """The export's `<siteinfo>` (empty values if it has none)."""
    try:
        for _, element in ET.iterparse(path, events=("end",)):
            name = _local(element.tag)
            if name == "siteinfo":
                return ExportSite(_child_text(element, "sitename"), _child_text(element, "base"))
            if name == "page":
                break
    except ET.ParseError as exc:
        raise ExportError(f"{path}: not a valid XML export ({exc})") from exc
    return ExportSite("", "")


def read_pages(path: Path) -> Iterator[ExportPage]:
    """Every page of the export, in file order, each with its latest revision.

    Raises:
        ExportError: the file is not XML, not a MediaWiki export, or a page lacks an id.
    """
    try:
        context = ET.iterparse(path, events=("start", "end"))
        _, root = next(context)
        if _local(root.tag) != "mediawiki":
            raise ExportError(f"{path}: the root element is <{_local(root.tag)}>, not <mediawiki>")
        for event, element in context:
            if event != "end" or _local(element.tag) != "page":
                continue
            yield _page(path, element)
            # Read pages are dropped from the tree: constant memory for any export size.
            root.clear()
    except ET.ParseError as exc:
        raise ExportError(f"{path}: not a valid XML export ({exc})") from exc
    except StopIteration:
        raise ExportError(f"{path}: the file is empty") from None


def _page(path: Path, element: ET.Element) -> ExportPage:
    title = _child_text(element, "title")
    page_id = _child_text(element, "id")
    if not page_id.strip().isdigit():
        raise ExportError(f"{path}: page {title!r} has no numeric <id>")
    redirect = next((c.get("title") for c in element if _local(c.tag) == "redirect"), None)
    latest: tuple[int, str, str] | None = None
    for child in element:
        if _local(child.tag) != "revision":
            continue
        revid = int(_child_text(child, "id") or 0)
        if latest is None or revid > latest[0]:
            latest = (revid, _child_text(child, "timestamp"), _child_text(child, "text"))
    revid, timestamp, text = latest or (0, "", "")
    return ExportPage(
        pageid=int(page_id),
        title=title,
        namespace=int(_child_text(element, "ns") or 0),
        revid=revid,
        timestamp=timestamp,
        text=text,
        redirect=redirect,
    )
