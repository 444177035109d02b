"""Which pages a configured category (with its subcategories) or title list holds, at what revision.

Discovery costs one `list=categorymembers` request per category visited (500 members each, more
only for larger categories, followed with `continue`) and one `prop=revisions` request per 50
pages (the API's limit on ids per query): an unchanged sync of N pages in C categories makes C
listing requests and ceil(N/50) revision requests, and the content of an unchanged page is
never requested.

Subcategories are followed breadth-first up to a depth limit, each at most once (category
graphs on wikis have cycles); a page reached through several paths keeps the shortest one as
its breadcrumb. Redirects are resolved to their targets, so a redirect and its target are one
document; titles that do not exist are reported, not indexed. An entry whose id, namespace or
revision is not a number is reported as malformed (`MalformedEntry`) and the others are kept:
one bad page must not hide the rest of its category.
"""

import logging
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rag_pipeline.sources.wiki.client import (
    MalformedEntryError,
    MediaWikiClient,
    batched,
    json_objects,
    strict_int,
)

logger = logging.getLogger(__name__)

CATEGORY_NAMESPACE = 14
_CATEGORY_PREFIX = "category:"


def category_name(name: str) -> str:
    """A category as configured (`Category:New_Features_v11`, `new features v11`) → its name
    as the wiki spells titles: no prefix, spaces, first letter upper case (`New features v11`
    stays as it is otherwise: MediaWiki titles are case-sensitive after the first letter)."""
    name = name.strip()
    if name.lower().startswith(_CATEGORY_PREFIX):
        name = name[len(_CATEGORY_PREFIX) :]
    return page_title(name)


def page_title(title: str) -> str:
    """A title as the API returns it: underscores as spaces, one space, first letter upper."""
    title = " ".join(title.replace("_", " ").split())
    return title[:1].upper() + title[1:]


@dataclass(frozen=True)
class Member:
    """A page found in a category tree: its id, title and the category path that reached it."""

    pageid: int
    title: str
    namespace: int
    path: tuple[str, ...]


@dataclass(frozen=True)
class PageRevision:
    """A page's identity and its latest revision: the cheap version of a wiki document."""

    pageid: int
    title: str
    namespace: int
    revid: int
    timestamp: str
    path: tuple[str, ...] = ()


@dataclass(frozen=True)
class MalformedEntry:
    """An entry of the wiki's answer that cannot be a document, and why (one line).

    Attributes:
        pageid: the page's id when that much could be read, else None.
        title: the page's title as the wiki gave it.
        reason: what is wrong with it.
    """

    pageid: int | None
    title: str
    reason: str


@dataclass(frozen=True)
class Listing:
    """The pages of one partition, with what could not be resolved.

    Attributes:
        pages: each page once, by page id.
        missing: configured titles (or listed ids) the wiki does not have.
        redirects: redirect title → target title, for the titles that were redirects.
        malformed: pages whose entry could not be read (each fails alone).
    """

    pages: tuple[PageRevision, ...]
    missing: tuple[str, ...] = ()
    redirects: tuple[tuple[str, str], ...] = ()
    malformed: tuple[MalformedEntry, ...] = ()


def category_members(
    client: MediaWikiClient,
    category: str,
    *,
    namespaces: Sequence[int] = (0,),
    depth: int = 0,
    malformed: list[MalformedEntry] | None = None,
) -> list[Member]:
    """Pages of `category` and of its subcategories down to `depth` levels, each page once.

    Entries that cannot be read are appended to `malformed` (when given) and left out.
    """
    root = category_name(category)
    wanted = set(namespaces)
    seen_categories = {root}
    found: dict[int, Member] = {}
    queue: deque[tuple[str, tuple[str, ...]]] = deque([(root, (root,))])
    while queue:
        name, path = queue.popleft()
        follow = len(path) <= depth
        listed = sorted(wanted | {CATEGORY_NAMESPACE}) if follow else sorted(wanted)
        params = {
            "list": "categorymembers",
            "cmtitle": f"Category:{name}",
            "cmprop": "ids|title|type",
            "cmnamespace": "|".join(str(n) for n in listed),
            "cmlimit": 500,
        }
        for batch in client.query_all(params):
            for item in _entries(batch, "categorymembers"):
                title = str(item.get("title", ""))
                try:
                    ns = strict_int(item.get("ns", 0), "ns")
                    pageid = strict_int(item.get("pageid"), "pageid")
                except MalformedEntryError as exc:
                    if malformed is not None:
                        malformed.append(_malformed(item, title, exc))
                    continue
                if ns == CATEGORY_NAMESPACE and follow:
                    sub = category_name(title)
                    if sub not in seen_categories:
                        seen_categories.add(sub)
                        queue.append((sub, (*path, sub)))
                if ns in wanted and pageid not in found:
                    found[pageid] = Member(pageid, title, ns, path)
    return list(found.values())


def revisions_by_ids(client: MediaWikiClient, members: Iterable[Member]) -> Listing:
    """The latest revision of each member, 50 page ids per request; redirects resolved."""
    by_id = {m.pageid: m for m in members}
    by_title = {m.title: m for m in by_id.values()}
    pages: dict[int, PageRevision] = {}
    missing: list[str] = []
    redirects: list[tuple[str, str]] = []
    malformed: list[MalformedEntry] = []
    for ids in batched([str(i) for i in sorted(by_id)]):
        query = _one_query(
            client,
            {
                "prop": "revisions",
                "rvprop": "ids|timestamp",
                "pageids": "|".join(ids),
                "redirects": 1,
            },
        )
        redirect_from = _redirect_map(query, redirects)
        for page in _entries(query, "pages"):
            if page.get("missing") or "revisions" not in page:
                # Deleted since the category was listed: it is simply not there any more.
                missing.append(str(page.get("title", page.get("pageid", "?"))))
                continue
            try:
                pageid = strict_int(page.get("pageid"), "pageid")
                member = by_id.get(pageid) or by_title.get(
                    redirect_from.get(str(page.get("title")), "")
                )
                pages.setdefault(pageid, _revision(page, member.path if member else ()))
            except MalformedEntryError as exc:
                malformed.append(_malformed(page, str(page.get("title", "")), exc))
    return Listing(tuple(pages.values()), tuple(missing), tuple(redirects), tuple(malformed))


def revisions_by_titles(client: MediaWikiClient, titles: Iterable[str]) -> Listing:
    """The latest revision of each titled page, 50 titles per request; redirects resolved."""
    wanted = list(dict.fromkeys(page_title(t) for t in titles if t.strip()))
    pages: dict[int, PageRevision] = {}
    missing: list[str] = []
    redirects: list[tuple[str, str]] = []
    malformed: list[MalformedEntry] = []
    for chunk in batched(wanted):
        query = _one_query(
            client,
            {
                "prop": "revisions",
                "rvprop": "ids|timestamp",
                "titles": "|".join(chunk),
                "redirects": 1,
            },
        )
        _redirect_map(query, redirects)
        for page in _entries(query, "pages"):
            if page.get("missing") or page.get("invalid") or "revisions" not in page:
                missing.append(str(page.get("title", "?")))
                continue
            try:
                revision = _revision(page, ())
            except MalformedEntryError as exc:
                malformed.append(_malformed(page, str(page.get("title", "")), exc))
                continue
            pages.setdefault(revision.pageid, revision)
    if missing:
        logger.warning("wiki pages that do not exist (RAG_WIKI_PAGES): %s", ", ".join(missing))
    return Listing(tuple(pages.values()), tuple(missing), tuple(redirects), tuple(malformed))


def _one_query(client: MediaWikiClient, params: dict[str, str | int]) -> dict[str, Any]:
    """A query whose answer is complete in one batch (latest revisions of ≤ 50 pages are)."""
    merged: dict[str, Any] = {}
    for batch in client.query_all(params):
        for key, value in batch.items():
            if isinstance(value, list) and isinstance(merged.get(key), list):
                merged[key].extend(value)
            else:
                merged[key] = value
    return merged


def _redirect_map(query: dict[str, Any], redirects: list[tuple[str, str]]) -> dict[str, str]:
    """target title → redirect title, and the pairs appended to `redirects`."""
    back: dict[str, str] = {}
    for item in _entries(query, "redirects"):
        source, target = item.get("from"), item.get("to")
        if isinstance(source, str) and isinstance(target, str):
            redirects.append((source, target))
            back[target] = source
    return back


def _entries(container: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The objects of `container[key]` (a list in formatversion=2); anything else is skipped."""
    return json_objects(container.get(key))


def _revision(page: dict[str, Any], path: tuple[str, ...]) -> PageRevision:
    revisions = json_objects(page.get("revisions"))
    if not revisions:
        raise MalformedEntryError("the page has no readable revision")
    latest = revisions[0]
    return PageRevision(
        pageid=strict_int(page.get("pageid"), "pageid"),
        title=str(page.get("title", "")),
        namespace=strict_int(page.get("ns", 0), "ns"),
        revid=strict_int(latest.get("revid"), "revid"),
        timestamp=str(latest.get("timestamp", "")),
        path=path,
    )


def _malformed(entry: dict[str, Any], title: str, problem: Exception) -> MalformedEntry:
    try:
        pageid: int | None = strict_int(entry.get("pageid"), "pageid")
    except MalformedEntryError:
        pageid = None
    return MalformedEntry(pageid, title[:200], f"malformed wiki entry: {problem}")
