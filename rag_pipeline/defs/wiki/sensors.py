"""The wiki sensor: polls recentchanges and logevents and runs the partitions holding changes."""

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence

import dagster as dg
import psycopg

from rag_pipeline.defs.wiki.partitions import wiki_partitions
from rag_pipeline.defs.wiki.resources import WikiSourceResource
from rag_pipeline.orchestration.reconcile import system_observation
from rag_pipeline.orchestration.source_registry import WIKI
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.sources.wiki.changes import ChangeCursor, poll_changes, start_cursor
from rag_pipeline.sources.wiki.client import WikiApiError
from rag_pipeline.store import stages

DOCUMENT_KEY_SEPARATOR = "@"


@dg.sensor(
    job_name=WIKI.ingest_job,
    description="Runs each wiki partition holding an edit, delete, move or restore "
    "(recentchanges and logevents, two requests a tick); registers the configured ones.",
    minimum_interval_seconds=120,
    default_status=dg.DefaultSensorStatus.STOPPED,
)
def wiki_changes_sensor(
    context: dg.SensorEvaluationContext,
    wiki_source: WikiSourceResource,
    vectordb: VectorDBResource,
) -> dg.SensorResult:
    """Registers the configured partitions (a new one runs once) and runs those with changes.

    Two API requests per tick when nothing changed. The cursor is the wiki's own clock of the
    newest edit, delete, move or restore seen (JSON); the first tick only starts it there, as
    the initial sync is the new partitions' first run. An XML export has nothing to poll.
    A registered partition holding changes is observed on the `mediawiki` asset, the wiki time
    of the newest change its data version.
    """
    stored = json.loads(context.cursor) if context.cursor else {}
    config = wiki_source.config()
    wanted = wiki_source.partition_keys()
    registered = list(context.instance.get_dynamic_partitions(wiki_partitions.name or ""))
    new = [key for key in wanted if key not in registered]
    runs = [dg.RunRequest(partition_key=key, run_key=f"{key}:first") for key in new]
    adds = [wiki_partitions.build_add_request(new)] if new else []
    if config.offline:
        return dg.SensorResult(run_requests=runs, dynamic_partitions_requests=adds)

    source = wiki_source.build()
    try:
        cursor = ChangeCursor.from_json(stored.get("changes"))
        if cursor is None:
            cursor = start_cursor(source.client, config)
            return dg.SensorResult(
                run_requests=runs,
                dynamic_partitions_requests=adds,
                cursor=json.dumps({"changes": cursor.to_json()}),
            )
        changes = poll_changes(
            source.client,
            config,
            cursor,
            stored_partitions=_index_lookup(context, vectordb, registered),
        )
    except WikiApiError as exc:
        # The wiki is down or refuses us: try again next tick from the same cursor.
        return dg.SensorResult(
            run_requests=runs, dynamic_partitions_requests=adds, skip_reason=str(exc)
        )
    finally:
        source.close()
    known = set(registered) | set(new)
    tag = hashlib.sha256(changes.cursor.to_json().encode()).hexdigest()[:16]
    changed = [key for key in changes.partitions if key in known and key not in new]
    runs += [dg.RunRequest(partition_key=key, run_key=f"{key}:{tag}") for key in changed]
    observed = [system_observation(WIKI, key, changes.cursor.since) for key in changed]
    for change in changes.changes:
        moved = f" → {change.new_title}" if change.new_title else ""
        context.log.info(f"wiki {change.kind}: {change.title}{moved} (page {change.pageid})")
    return dg.SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=adds,
        asset_events=observed,
        cursor=json.dumps({"changes": changes.cursor.to_json()}),
    )


def _index_lookup(
    context: dg.SensorEvaluationContext, vectordb: VectorDBResource, partitions: Sequence[str]
) -> "_IndexLookup | None":
    """Which partitions hold each page in the index, read once per tick; None if unreadable."""
    try:
        with vectordb.connect() as conn:
            members = {key: stages.partition_members(conn, WIKI.name, key) for key in partitions}
    except (psycopg.Error, OSError) as exc:
        # Without the index a deleted page cannot be placed: every partition runs for it.
        context.log.warning(f"wiki sensor: index not readable ({exc})")
        return None
    return _IndexLookup(members)


class _IndexLookup:
    """Page ids → the partitions whose last run listed them."""

    def __init__(self, members: Mapping[str, Collection[str]]) -> None:
        self._by_page: dict[str, set[str]] = {}
        for partition, keys in members.items():
            for key in keys:
                # A document key is `<page id>@<language>` (see core.source.document_key).
                self._by_page.setdefault(key.split(DOCUMENT_KEY_SEPARATOR, 1)[0], set()).add(
                    partition
                )

    def __call__(self, pageids: Sequence[str]) -> dict[str, set[str]]:
        return {p: self._by_page[p] for p in pageids if p in self._by_page}
