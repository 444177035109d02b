"""The `wiki` source: pages of a MediaWiki (the iDempiere wiki) or of a MediaWiki XML export.

Partitions — one per unit of configuration, so a run re-lists only what it owns:

- `Category:<Name>` (one per configured category, spelled with underscores, e.g.
  `Category:Plug-In_Development`): the pages of that category and of its subcategories down to
  `category_depth` levels, in the configured namespaces.
- `pages`: the explicitly configured titles (`RAG_WIKI_PAGES`), if any.
- `export:<absolute path>` for an XML export given with `--xml FILE`, and `export:demo` for the
  demo export shipped in the package (what is read when no `RAG_WIKI_API_URL` is set).

A document is a page: `source_id` is its page id (stable across moves; a title is not) and its
version is the latest revision id, so an unchanged page costs its share of one `prop=revisions`
request and nothing else. `list_documents` returns exactly the pages of its partition: the
shared pipeline stores a page listed by two partitions once and deletes it only when no
partition lists it any more — a page that left every configured category goes at the next full
listing of its partitions, and a deleted or moved page at the next run of its partition.

The breadcrumb is the category path that reached the page in the partition that fetched it
(`New Features › New Features v11`); the page's own categories are in `metadata["categories"]`.
A page in two configured categories is fetched by whichever partition first sees its new revid,
so its breadcrumb names one of the two paths.

Content comes from `action=parse` (the HTML the wiki itself renders, templates expanded; the
HTML normalizer strips MediaWiki's chrome) rather than `rvprop=content` wikitext: templates such
as `{{Note|…}}` and transcluded pages only exist in the rendered HTML. Exports have no rendered
HTML, so their wikitext goes through the small renderer in `wikitext.py`.

One bad page fails alone: a page larger than `max_bytes` (`RAG_WIKI_MAX_BYTES`, like the files
source's cap), an answer for it that is malformed (a revid that is no number; `documents.py`),
or a listing or export entry without numeric ids is recorded as that document's failure with a
one-line reason, its previous version stays searchable, and the other pages are indexed.
"""

import json
import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rag_pipeline.core.models import FailedDocument
from rag_pipeline.core.source import (
    ChainOptions,
    DocumentRef,
    Source,
    SourceDocument,
    document_key,
)
from rag_pipeline.settings import Settings
from rag_pipeline.sources.wiki.client import (
    DEFAULT_MAX_FETCH_SECONDS,
    DEFAULT_MAX_LISTING_REQUESTS,
    DEFAULT_MAX_LISTING_SECONDS,
    DEFAULT_USER_AGENT,
    MediaWikiClient,
    WikiApiError,
)
from rag_pipeline.sources.wiki.discovery import (
    MalformedEntry,
    PageRevision,
    category_members,
    category_name,
    revisions_by_ids,
    revisions_by_titles,
)
from rag_pipeline.sources.wiki.documents import (
    PARSE_PARAMS,
    PageTooLargeError,
    exported_document,
    rendered_document,
)
from rag_pipeline.sources.wiki.xml_export import MalformedPage, read_pages, read_site

logger = logging.getLogger(__name__)

SOURCE_TYPE = "wiki"
PAGES_PARTITION = "pages"
CATEGORY_PREFIX = "Category:"
EXPORT_PREFIX = "export:"
DEMO_EXPORT_PARTITION = "export:demo"
# Dagster partition keys may not contain these.
_FORBIDDEN_IN_KEYS = set("|,[]")
# The page is gone (deleted, or its id never existed): not a failure, the page just vanished.
_VANISHED_CODES = frozenset({"missingtitle", "nosuchpageid", "missingpage"})
DEFAULT_MAX_BYTES = 2 * 1024 * 1024
# A parse answer holds the page's HTML JSON-escaped (quotes double) plus categories and title.
_RESPONSE_BYTES_PER_PAGE_BYTE = 4
_RESPONSE_OVERHEAD_BYTES = 1024 * 1024


class WikiConfigError(ValueError):
    """The wiki configuration cannot be used; the message names the setting to fix."""


def demo_export() -> Path:
    """The demo XML export shipped in the package (written for this project)."""
    return Path(__file__).resolve().parents[2] / "demo" / "wiki" / "idempiere-demo-export.xml"


def _split(value: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p.strip() for p in value.split(",") if p.strip()))


@dataclass(frozen=True)
class WikiConfig:
    """What the wiki source reads.

    Attributes:
        api_url: the wiki's api.php; None = read an XML export (`xml_file`, else the demo).
        categories: category names, with or without `Category:`.
        pages: explicit page titles.
        namespaces: namespace ids whose pages are documents (0 = articles).
        category_depth: levels of subcategories followed (0 = the category itself only).
        max_concurrency: requests in flight at most.
        user_agent: sent with every request.
        xml_file: an XML export to import instead of the API.
        language: the language of the wiki's pages (the iDempiere English wiki: en_US).
        max_bytes: the largest page (rendered HTML, or an export's wikitext) indexed.
        max_listing_requests: requests one listing may make (`continue` pages).
        max_listing_seconds: seconds one listing may take.
        max_fetch_seconds: seconds one request (a page's fetch) may take, retries included.
    """

    api_url: str | None = None
    categories: tuple[str, ...] = ("Developer", "New_Features")
    pages: tuple[str, ...] = ()
    namespaces: tuple[int, ...] = (0,)
    category_depth: int = 2
    max_concurrency: int = 4
    user_agent: str = DEFAULT_USER_AGENT
    xml_file: Path | None = None
    language: str = "en_US"
    max_bytes: int = DEFAULT_MAX_BYTES
    max_listing_requests: int = DEFAULT_MAX_LISTING_REQUESTS
    max_listing_seconds: float = DEFAULT_MAX_LISTING_SECONDS
    max_fetch_seconds: float = DEFAULT_MAX_FETCH_SECONDS

    @classmethod
    def from_settings(cls, settings: Settings, *, xml_file: Path | None = None) -> "WikiConfig":
        """The configuration from `RAG_WIKI_*` settings (and `--xml FILE`, if given)."""
        return cls(
            api_url=settings.wiki_api_url,
            categories=_split(settings.wiki_categories),
            pages=_split(settings.wiki_pages),
            namespaces=tuple(int(n) for n in _split(settings.wiki_namespaces)),
            category_depth=settings.wiki_category_depth,
            max_concurrency=settings.wiki_max_concurrency,
            user_agent=settings.wiki_user_agent,
            xml_file=xml_file,
            max_bytes=settings.wiki_max_bytes,
            max_listing_requests=settings.wiki_max_listing_requests,
            max_listing_seconds=settings.wiki_listing_timeout_seconds,
            max_fetch_seconds=settings.wiki_fetch_seconds,
        )

    @property
    def max_response_bytes(self) -> int:
        """The largest API response read: a parse answer for a page of `max_bytes`."""
        return self.max_bytes * _RESPONSE_BYTES_PER_PAGE_BYTE + _RESPONSE_OVERHEAD_BYTES

    @property
    def offline(self) -> bool:
        """True when pages come from an XML export, not the API."""
        return self.xml_file is not None or not self.api_url

    def partition_keys(self) -> list[str]:
        """The partitions this configuration wants run, in a stable order."""
        if self.xml_file is not None:
            return [export_partition_key(self.xml_file)]
        if not self.api_url:
            return [DEMO_EXPORT_PARTITION]
        keys = [category_partition_key(c) for c in self.categories]
        if self.pages:
            keys.append(PAGES_PARTITION)
        return list(dict.fromkeys(keys))


def category_partition_key(category: str) -> str:
    """`New Features v11` / `Category:New_Features_v11` → `Category:New_Features_v11`."""
    name = category_name(category).replace(" ", "_")
    key = CATEGORY_PREFIX + name
    if not name or _FORBIDDEN_IN_KEYS & set(key):
        raise WikiConfigError(
            f"RAG_WIKI_CATEGORIES: {category!r} cannot be a partition (empty, or has | , [ ])"
        )
    return key


def export_partition_key(path: Path | str) -> str:
    """The partition of an XML export file: `export:` and its absolute path."""
    if str(path) == "demo":
        return DEMO_EXPORT_PARTITION
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_file():
        raise WikiConfigError(f"--xml: {path} is not a file")
    key = EXPORT_PREFIX + str(resolved)
    if _FORBIDDEN_IN_KEYS & set(key):
        raise WikiConfigError(f"--xml: the path {resolved} may not contain any of | , [ ]")
    return key


def export_path(partition_key: str) -> Path:
    """The file an `export:` partition reads."""
    if partition_key == DEMO_EXPORT_PARTITION:
        return demo_export()
    return Path(partition_key.removeprefix(EXPORT_PREFIX))


@dataclass(frozen=True)
class _Locator:
    """What `fetch` needs besides the page id, carried in `DocumentRef.locator` as JSON."""

    title: str
    path: tuple[str, ...] = ()
    export: str = ""

    def dumps(self) -> str:
        data: dict[str, Any] = {"title": self.title, "path": list(self.path)}
        if self.export:
            data["export"] = self.export
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def loads(cls, text: str) -> "_Locator":
        data = json.loads(text) if text else {}
        return cls(str(data.get("title", "")), tuple(data.get("path", ())), data.get("export", ""))


class WikiSource(Source):
    """MediaWiki pages as documents: listed by revision id, fetched as rendered HTML.

    Args:
        config: what to read.
        client: the API client (built from `config` when None; closed by `close()` only then).
    """

    source_type: ClassVar[str] = SOURCE_TYPE
    chain_options: ClassVar[ChainOptions] = ChainOptions(default_language="en_US")

    def __init__(self, config: WikiConfig, *, client: MediaWikiClient | None = None) -> None:
        self.config = config
        self._own_client = client is None and config.api_url is not None
        self._client = client
        if self._client is None and config.api_url:
            self._client = MediaWikiClient(
                config.api_url,
                user_agent=config.user_agent,
                max_concurrency=config.max_concurrency,
                max_response_bytes=config.max_response_bytes,
                max_listing_requests=config.max_listing_requests,
                max_listing_seconds=config.max_listing_seconds,
                max_fetch_seconds=config.max_fetch_seconds,
            )

    @property
    def client(self) -> MediaWikiClient:
        """The API client; a configuration error when no API is configured."""
        if self._client is None:
            raise WikiConfigError("RAG_WIKI_API_URL is not set: only export partitions can run")
        return self._client

    def close(self) -> None:
        """Close the client if this source built it."""
        if self._own_client and self._client is not None:
            self._client.close()

    def list_documents(self, partition_key: str) -> Iterator[DocumentRef | FailedDocument]:
        """The pages of the partition with their latest revision ids."""
        if partition_key.startswith(EXPORT_PREFIX):
            yield from self._list_export(partition_key)
            return
        malformed: list[MalformedEntry] = []
        if partition_key == PAGES_PARTITION:
            listing = revisions_by_titles(self.client, self.config.pages)
            for title in listing.missing:
                yield FailedDocument(
                    f"title:{title}", "raw", f"no page {title!r} on the wiki (RAG_WIKI_PAGES)"
                )
        elif partition_key.startswith(CATEGORY_PREFIX):
            members = category_members(
                self.client,
                partition_key,
                namespaces=self.config.namespaces,
                depth=self.config.category_depth,
                malformed=malformed,
            )
            listing = revisions_by_ids(self.client, members)
        else:
            raise WikiConfigError(
                f"unknown wiki partition {partition_key!r}: expected Category:<Name>, "
                f"{PAGES_PARTITION!r} or export:<file>"
            )
        for entry in (*malformed, *listing.malformed):
            yield self._failed(entry.pageid, entry.title, entry.reason)
        for page in listing.pages:
            yield self._ref(page)

    def _failed(self, pageid: int | None, title: str, reason: str) -> FailedDocument:
        """A listed page that cannot be a document: by its key if its id is known."""
        key = document_key(str(pageid), self.config.language) if pageid is not None else ""
        return FailedDocument(key or f"title:{title[:200]}", "raw", reason)

    def fetch(self, refs: Sequence[DocumentRef]) -> Iterator[SourceDocument | FailedDocument]:
        """The pages of `refs`: rendered HTML from `action=parse`, or an export's wikitext."""
        exported = [r for r in refs if _Locator.loads(r.locator).export]
        if exported:
            yield from self._fetch_export(exported)
        online = [r for r in refs if not _Locator.loads(r.locator).export]
        if not online:
            return
        with ThreadPoolExecutor(max_workers=self.client.max_concurrency) as pool:
            for result in pool.map(self._parse_one, online):
                if result is not None:
                    yield result

    def _ref(self, page: PageRevision) -> DocumentRef:
        locator = _Locator(page.title, page.path)
        return DocumentRef(str(page.pageid), self.config.language, str(page.revid), locator.dumps())

    def _parse_one(self, ref: DocumentRef) -> SourceDocument | FailedDocument | None:
        locator = _Locator.loads(ref.locator)
        try:
            site = self.client.siteinfo()
            data = self.client.get({**PARSE_PARAMS, "pageid": ref.source_id})
            return rendered_document(
                data,
                ref,
                listed_title=locator.title,
                path=locator.path,
                site=site,
                max_bytes=self.config.max_bytes,
            )
        except WikiApiError as exc:
            if exc.code in _VANISHED_CODES:
                return None  # deleted since the listing: the pipeline treats it as deleted
            return FailedDocument(ref.key, "raw", str(exc))
        except PageTooLargeError as exc:
            return FailedDocument(ref.key, "raw", str(exc))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:  # MalformedEntryError too
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            return FailedDocument(ref.key, "raw", f"malformed parse answer: {reason}")

    def _list_export(self, partition_key: str) -> Iterator[DocumentRef | FailedDocument]:
        path = export_path(partition_key)
        for page in read_pages(path):
            if isinstance(page, MalformedPage):
                yield self._failed(page.pageid, page.title, f"{path.name}: {page.reason}")
                continue
            if page.namespace not in self.config.namespaces or page.redirect:
                continue
            locator = _Locator(page.title, export=str(path))
            yield DocumentRef(
                str(page.pageid), self.config.language, str(page.revid), locator.dumps()
            )

    def _fetch_export(
        self, refs: Sequence[DocumentRef]
    ) -> Iterator[SourceDocument | FailedDocument]:
        by_file: dict[str, dict[str, DocumentRef]] = {}
        for ref in refs:
            by_file.setdefault(_Locator.loads(ref.locator).export, {})[ref.source_id] = ref
        for file, wanted in by_file.items():
            site = read_site(Path(file))
            for page in read_pages(Path(file)):
                ref = wanted.get(str(page.pageid))
                if ref is None:
                    continue
                if isinstance(page, MalformedPage):
                    yield FailedDocument(ref.key, "raw", f"{Path(file).name}: {page.reason}")
                    continue
                yield exported_document(
                    page,
                    ref,
                    article_url=site.article_url,
                    sitename=site.sitename,
                    max_bytes=self.config.max_bytes,
                )
