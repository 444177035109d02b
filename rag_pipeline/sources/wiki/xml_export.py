"""Reading a MediaWiki XML export (`Special:Export`, `dumpBackup.php`) as a stream of pages.

The schema is `<mediawiki><siteinfo>…</siteinfo><page><title/><ns/><id/><redirect title=…/>
<revision><id/><timestamp/><text>…</text></revision>…</page>…</mediawiki>`, in a namespace
that changes with the MediaWiki version (`export-0.10/`, `export-0.11/`), so elements are
matched by local name. An `XMLPullParser` streams: each `<page>` is cleared once read, so an
export of any size is read in constant memory (beyond its largest page). Expat resolves no
external entities and (Python ≥ 3.11 with expat ≥ 2.4) refuses entity-expansion bombs.

Time linear in the size of one tag: expat before 2.6 parses an unfinished tag again from its
start on every piece fed to it, so a 16 MB attribute fed in 16 KB pieces (as `iterparse`
does) costs a thousand re-parses of up to 16 MB each. Here a piece is as large as what was
fed since the parser last produced an event, so a long tag is fed in doubling pieces and
re-parsed a logarithmic number of times.

A full-history export has several `<revision>`s per page; the one with the highest id is the
page's current text. A page whose id, namespace or revision id is not a number comes out as a
`MalformedPage` (that page fails, the others are read); a file that is not XML, not an export
or cut off raises `ExportError`, since the pages after the break cannot be known.
"""

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

_PIECE_BYTES = 64 * 1024
_ASCII_INT = re.compile(r"-?[0-9]{1,18}")


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


@dataclass(frozen=True)
class MalformedPage:
    """A page of the export that cannot be read, and why (one line)."""

    pageid: int | None
    title: str
    reason: str


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child_text(element: ET.Element, name: str) -> str:
    for child in element:
        if _local(child.tag) == name:
            return child.text or ""
    return ""


def _number(text: str) -> int | None:
    """An export's id: ASCII digits only (`'²'.isdigit()` is True, and `int('٣')` is 3)."""
    text = text.strip()
    return int(text) if _ASCII_INT.fullmatch(text) else None


def _events(path: Path) -> Iterator[tuple[str, ET.Element]]:
    """(event, element) pairs of `path`, fed to the parser in pieces that grow with a tag."""
    # Only start and end events are asked for: each carries an element (typeshed's union also
    # covers namespace events).
    parser = ET.XMLPullParser(events=("start", "end"))
    try:
        with path.open("rb") as file:
            since_event = 0
            while data := file.read(max(_PIECE_BYTES, since_event)):
                parser.feed(data)
                since_event += len(data)
                for event in parser.read_events():
                    since_event = 0
                    yield cast(tuple[str, ET.Element], event)
            parser.close()
            for event in parser.read_events():
                yield cast(tuple[str, ET.Element], event)
    except ET.ParseError as exc:
        raise ExportError(f"{path}: not a valid XML export ({exc})") from None
    except OSError as exc:
        raise ExportError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def read_site(path: Path) -> ExportSite:
    """The export's `<siteinfo>` (empty values if it has none)."""
    for event, element in _events(path):
        if event != "end":
            continue
        name = _local(element.tag)
        if name == "siteinfo":
            return ExportSite(_child_text(element, "sitename"), _child_text(element, "base"))
        if name == "page":
            break
    return ExportSite("", "")


def read_pages(path: Path) -> Iterator[ExportPage | MalformedPage]:
    """Every page of the export, in file order, each with its latest revision.

    Raises:
        ExportError: the file is not XML, not a MediaWiki export, or is cut off.
    """
    events = _events(path)
    first = next(events, None)
    if first is None:
        raise ExportError(f"{path}: the file is empty")
    root = first[1]
    if _local(root.tag) != "mediawiki":
        raise ExportError(f"{path}: the root element is <{_local(root.tag)}>, not <mediawiki>")
    for event, element in events:
        if event != "end" or _local(element.tag) != "page":
            continue
        yield _page(element)
        # Read pages are dropped from the tree: constant memory for any export size.
        root.clear()


def _page(element: ET.Element) -> ExportPage | MalformedPage:
    title = _child_text(element, "title")
    page_id = _number(_child_text(element, "id"))
    if page_id is None:
        return MalformedPage(None, title, f"page {title[:100]!r} has no numeric <id>")
    namespace = _number(_child_text(element, "ns") or "0")
    if namespace is None:
        return MalformedPage(page_id, title, f"page {title[:100]!r} has no numeric <ns>")
    redirect = next((c.get("title") for c in element if _local(c.tag) == "redirect"), None)
    latest: tuple[int, str, str] | None = None
    for child in element:
        if _local(child.tag) != "revision":
            continue
        revid = _number(_child_text(child, "id") or "0")
        if revid is None:
            return MalformedPage(
                page_id, title, f"page {title[:100]!r} has a revision without numeric <id>"
            )
        if latest is None or revid > latest[0]:
            latest = (revid, _child_text(child, "timestamp"), _child_text(child, "text"))
    revid, timestamp, text = latest or (0, "", "")
    return ExportPage(
        pageid=page_id,
        title=title,
        namespace=namespace,
        revid=revid,
        timestamp=timestamp,
        text=text,
        redirect=redirect,
    )
