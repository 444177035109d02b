"""What changed on the wiki since a cursor, and which partitions must run because of it.

Edits and new pages come from `list=recentchanges` (`rctype=edit|new`); deletions, restores and
moves from `list=logevents` (delete/delete, delete/restore, move/move, move/move_redir), which
name the page id a deleted page had (`logpage`) and a move's new title. Two requests per poll
when nothing changed.

The cursor is the wiki's own clock (never ours: the two differ) of the newest event seen, plus
the ids of the events at exactly that second: `rcstart`/`lestart` are inclusive and timestamps
have one-second resolution, so the ids keep a boundary event from being reported twice while
an event in the same second that arrived later is still seen.

Which partitions hold a changed page:
- a page that exists (edited, new, moved, restored): its current categories (`prop=categories`,
  50 pages per request) matched against each configured category and its subcategories down to
  the configured depth (listed only when a category is not itself configured), plus `pages` if
  its title (old or new) is configured;
- plus, for every change, the partitions that hold the page now in the index, when the caller
  can say (`stored_partitions`): a page that left a category, was deleted or moved out of the
  indexed namespaces is removed by running the partition that had it;
- a deleted page the index cannot place: every partition (deletions are rare; a missed one
  would leave a deleted page searchable until the nightly reconcile).

An event whose ids are not numbers is logged and skipped: a sensor tick must not fail on it
(the nightly reconcile lists every page anyway).

Pure: no Dagster here; the sensor in `defs/wiki` turns the result into run requests.
"""

import json
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rag_pipeline.sources.wiki.client import (
    MalformedEntryError,
    MediaWikiClient,
    batched,
    json_object,
    json_objects,
    strict_int,
)
from rag_pipeline.sources.wiki.discovery import (
    CATEGORY_NAMESPACE,
    category_members,
    category_name,
    page_title,
)
from rag_pipeline.sources.wiki.source import (
    PAGES_PARTITION,
    WikiConfig,
    WikiConfigError,
    category_partition_key,
)

logger = logging.getLogger(__name__)

ChangeKind = Literal["edit", "new", "delete", "move", "restore"]
StoredPartitions = Callable[[Sequence[str]], Mapping[str, Collection[str]]]
_LOG_ACTIONS: Mapping[tuple[str, str], ChangeKind] = {
    ("delete", "delete"): "delete",
    ("delete", "restore"): "restore",
    ("move", "move"): "move",
    ("move", "move_redir"): "move",
}


@dataclass(frozen=True)
class ChangeCursor:
    """Where the last poll stopped: the wiki time of its newest event and the events then."""

    since: str
    seen: tuple[str, ...] = ()

    def to_json(self) -> str:
        """The cursor as the JSON a sensor stores."""
        return json.dumps({"since": self.since, "seen": list(self.seen)})

    @classmethod
    def from_json(cls, text: str | None) -> "ChangeCursor | None":
        """A stored cursor; None for none (or one from an incompatible older version)."""
        if not text:
            return None
        try:
            data = json.loads(text)
            return cls(str(data["since"]), tuple(str(s) for s in data.get("seen", [])))
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class PageChange:
    """One change to one page. `pageid` is the page's id (a deleted page: the id it had)."""

    kind: ChangeKind
    pageid: int
    title: str
    timestamp: str
    new_title: str = ""


@dataclass(frozen=True)
class ChangeSet:
    """The result of a poll: the changes, the partitions to run, the cursor to store."""

    changes: tuple[PageChange, ...]
    partitions: tuple[str, ...]
    cursor: ChangeCursor


def start_cursor(client: MediaWikiClient, config: WikiConfig) -> ChangeCursor:
    """A cursor at the wiki's current time: the first poll reports nothing older.

    Events stamped with the current second already happened, so they are marked seen; an
    event of a later second is left for the first poll.
    """
    now = ChangeCursor(client.server_time())
    events = _recent_changes(client, config, now) + _log_events(client, config, now)
    return ChangeCursor(now.since, tuple(sorted(eid for eid, ts, _ in events if ts == now.since)))


def poll_changes(
    client: MediaWikiClient,
    config: WikiConfig,
    cursor: ChangeCursor,
    *,
    stored_partitions: StoredPartitions | None = None,
) -> ChangeSet:
    """The changes since `cursor`, the partitions that must run for them, and the next cursor.

    Args:
        client: the wiki's API client.
        config: the configured categories, pages and namespaces.
        cursor: from the previous poll (or `start_cursor`).
        stored_partitions: page ids → the partitions that hold each in the index now.
    """
    if config.offline:
        raise WikiConfigError("RAG_WIKI_API_URL is not set: an XML export has no changes to poll")
    events: list[tuple[str, str, PageChange]] = []
    events += _recent_changes(client, config, cursor)
    events += _log_events(client, config, cursor)
    fresh = [(eid, ts, change) for eid, ts, change in events if eid not in cursor.seen]
    changes = tuple(change for _, _, change in sorted(fresh, key=lambda e: (e[1], e[0])))
    newest = max((ts for _, ts, _ in fresh), default=cursor.since)
    at_newest = {eid for eid, ts, _ in events if ts == newest}
    if newest == cursor.since:
        at_newest |= set(cursor.seen)
    next_cursor = ChangeCursor(newest, tuple(sorted(at_newest)))
    partitions = _partitions_for(client, config, changes, stored_partitions) if changes else []
    return ChangeSet(changes, tuple(partitions), next_cursor)


def _recent_changes(
    client: MediaWikiClient, config: WikiConfig, cursor: ChangeCursor
) -> list[tuple[str, str, PageChange]]:
    params = {
        "list": "recentchanges",
        "rcstart": cursor.since,
        "rcdir": "newer",
        "rctype": "edit|new",
        "rcprop": "ids|title|timestamp",
        "rcnamespace": "|".join(str(n) for n in config.namespaces),
        "rclimit": 500,
    }
    found: list[tuple[str, str, PageChange]] = []
    for batch in client.query_all(params):
        for item in _items(batch, "recentchanges"):
            kind: ChangeKind = "new" if item.get("type") == "new" else "edit"
            timestamp = str(item.get("timestamp", ""))
            try:
                pageid = strict_int(item.get("pageid"), "pageid")
                rcid = strict_int(item.get("rcid"), "rcid")
            except MalformedEntryError as exc:
                _skip("recent change", item, exc)
                continue
            change = PageChange(kind, pageid, str(item.get("title", "")), timestamp)
            found.append((f"rc:{rcid}", timestamp, change))
    return found


def _items(batch: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return json_objects(batch.get(key))


def _skip(what: str, item: dict[str, Any], problem: Exception) -> None:
    title = " ".join(str(item.get("title", "?")).split())[:100]
    logger.warning("wiki %s for %r skipped: %s", what, title, problem)


def _log_events(
    client: MediaWikiClient, config: WikiConfig, cursor: ChangeCursor
) -> list[tuple[str, str, PageChange]]:
    # No `letype`: it takes one type, and deletes and moves would cost two requests.
    params = {
        "list": "logevents",
        "lestart": cursor.since,
        "ledir": "newer",
        "leprop": "ids|title|type|timestamp|details",
        "lelimit": 500,
    }
    wanted = set(config.namespaces)
    found: list[tuple[str, str, PageChange]] = []
    for batch in client.query_all(params):
        for item in _items(batch, "logevents"):
            kind = _LOG_ACTIONS.get((str(item.get("type")), str(item.get("action"))))
            if kind is None:
                continue
            params_ = json_object(item.get("params"))
            try:
                namespace = strict_int(item.get("ns", 0), "ns")
                target_ns = strict_int(params_.get("target_ns", namespace), "target_ns")
                # `pageid` is the title's page now (0 once deleted); `logpage` the id it had.
                pageid = strict_int(item.get("logpage") or item.get("pageid") or 0, "pageid")
                logid = strict_int(item.get("logid"), "logid")
            except MalformedEntryError as exc:
                _skip("log event", item, exc)
                continue
            if namespace not in wanted and target_ns not in wanted:
                continue
            timestamp = str(item.get("timestamp", ""))
            change = PageChange(
                kind,
                pageid,
                str(item.get("title", "")),
                timestamp,
                new_title=str(params_.get("target_title", "")),
            )
            found.append((f"log:{logid}", timestamp, change))
    return found


def _partitions_for(
    client: MediaWikiClient,
    config: WikiConfig,
    changes: Sequence[PageChange],
    stored_partitions: StoredPartitions | None,
) -> list[str]:
    configured = {category_partition_key(c): category_name(c) for c in config.categories}
    explicit = {page_title(t) for t in config.pages}
    wanted: set[str] = set()
    existing = sorted({c.pageid for c in changes if c.kind != "delete" and c.pageid})
    page_categories = _current_categories(client, existing)
    tree = _CategoryTree(client, config, configured)
    for change in changes:
        if explicit & {page_title(change.title), page_title(change.new_title or change.title)}:
            wanted.add(PAGES_PARTITION)
        if change.kind == "delete":
            continue
        for category in page_categories.get(change.pageid, ()):
            wanted.update(tree.partitions_holding(category))
    ids = sorted({str(c.pageid) for c in changes if c.pageid})
    stored = stored_partitions(ids) if stored_partitions is not None and ids else {}
    for change in changes:
        held = stored.get(str(change.pageid))
        if held:
            wanted.update(held)
        elif change.kind == "delete" and stored_partitions is None:
            wanted.update(configured)
    known = set(configured) | ({PAGES_PARTITION} if config.pages else set())
    return sorted(wanted & known)


def _current_categories(client: MediaWikiClient, pageids: Sequence[int]) -> dict[int, set[str]]:
    found: dict[int, set[str]] = {}
    for ids in batched([str(i) for i in pageids]):
        params = {"prop": "categories", "pageids": "|".join(ids), "cllimit": "max"}
        for batch in client.query_all(params):
            for page in _items(batch, "pages"):
                try:
                    pageid = strict_int(page.get("pageid"), "pageid")
                except MalformedEntryError:
                    continue  # a missing page has no id; a malformed one names no page either
                names = {category_name(str(c.get("title", ""))) for c in _items(page, "categories")}
                found.setdefault(pageid, set()).update(names)
    return found


class _CategoryTree:
    """Category name → the configured partitions whose tree (to the depth limit) holds it.

    Subcategories are listed only when a changed page is in a category that is not itself
    configured, once per poll.
    """

    def __init__(
        self, client: MediaWikiClient, config: WikiConfig, configured: Mapping[str, str]
    ) -> None:
        self._client = client
        self._config = config
        self._roots = {name: key for key, name in configured.items()}
        self._below: dict[str, set[str]] | None = None

    def partitions_holding(self, category: str) -> set[str]:
        if category in self._roots:
            return {self._roots[category]}
        if self._config.category_depth == 0:
            return set()
        if self._below is None:
            self._below = {}
            for root, key in self._roots.items():
                subs = category_members(
                    self._client,
                    root,
                    namespaces=(CATEGORY_NAMESPACE,),
                    depth=self._config.category_depth - 1,
                )
                for sub in subs:
                    self._below.setdefault(category_name(sub.title), set()).add(key)
        return self._below.get(category, set())
