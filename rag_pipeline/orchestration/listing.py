"""A partition's cheap listing: the source system's data version, and whether to run at all.

Every source lists a partition's documents with their versions without fetching them (see
`core/source.py`). The listing is what the raw step plans from; here it also gives the
observation of the source system that every ingest records (its data version: a hash of the
listed keys and versions, with the counts), and lets `rag ingest --source all` skip the run of
a partition whose run would change nothing.
"""

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import dagster as dg
import psycopg

from rag_pipeline.core.incremental import plan
from rag_pipeline.core.source import Source
from rag_pipeline.orchestration.reconcile import DATA_VERSION_TAG
from rag_pipeline.orchestration.source_registry import RAW, STAGES, SourceSpec
from rag_pipeline.store import stages
from rag_pipeline.store.reports import current_failures

# Dagster's tag of the code version a materialization was computed with.
_CODE_VERSION_TAG = "dagster/code_version"


@dataclass(frozen=True)
class Listing:
    """What a partition's listing gave: document key → version, and entries it could not read."""

    versions: Mapping[str, str]
    failed: int

    @property
    def data_version(self) -> str:
        """A hash of the listed keys and versions: it moves when a document does."""
        digest = hashlib.sha256()
        for key in sorted(self.versions):
            digest.update(f"{key}\t{self.versions[key]}\n".encode())
        return digest.hexdigest()[:16]


def list_partition(source: Source, partition_key: str) -> Listing:
    """The partition's listing (no document is fetched)."""
    from rag_pipeline.core.models import FailedDocument

    versions: dict[str, str] = {}
    failed = 0
    for item in source.list_documents(partition_key):
        if isinstance(item, FailedDocument):
            failed += 1
        else:
            versions[item.key] = item.version
    return Listing(versions, failed)


def listing_observation(
    spec: SourceSpec, partition_key: str, listing: Listing, *, skipped: bool = False
) -> dg.AssetObservation:
    """The source system's partition as listed now: its data version and counts."""
    return dg.AssetObservation(
        spec.system_key,
        partition=partition_key,
        tags={DATA_VERSION_TAG: listing.data_version},
        metadata={
            "data_version": listing.data_version,
            "documents_listed": len(listing.versions),
            "listing_failed": listing.failed,
            "run": "none: nothing changed" if skipped else "ingested",
        },
    )


def why_run(
    instance: dg.DagsterInstance,
    code_versions: Mapping[str, str | None],
    conn: psycopg.Connection,
    spec: SourceSpec,
    partition_key: str,
    listing: Listing,
    raw_fingerprint: str,
    failing: Collection[str] | None = None,
) -> str | None:
    """Why the partition needs a run, or None when its run would change nothing.

    Nothing changes when every listed version is the one stored (`raw_fingerprint` as the raw
    step plans), the partition lists the same documents as at its last run, no document of it
    failed, and every stage was materialized after its upstream with its current code version
    (`code_versions`: stage → the asset's code version). `failing`: the source's partitions
    with failed documents, when the caller read them once for many partitions.
    """
    if listing.failed:
        return f"{listing.failed} listing entries unreadable"
    keys = list(listing.versions)
    previous = stages.input_hashes(conn, spec.asset_name(RAW), keys)
    work = plan(listing.versions, previous, raw_fingerprint)
    if work.todo:
        return f"{len(work.todo)} documents new or changed"
    if stages.partition_members(conn, spec.name, partition_key) != set(keys):
        return "documents removed"
    upstream_time = 0.0
    for stage in STAGES:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=spec.asset_key(stage), asset_partitions=[partition_key]
            ),
            limit=1,
        ).records
        if not records:
            return f"{stage} never materialized"
        materialization = records[0].asset_materialization
        tags = (materialization.tags if materialization else None) or {}
        if tags.get(_CODE_VERSION_TAG) != code_versions.get(stage):
            return f"{stage} code version changed"
        if records[0].timestamp < upstream_time:
            return f"{stage} older than its upstream"
        upstream_time = records[0].timestamp
    if failing is None:
        failing = failing_partitions(conn, spec)
    if partition_key in failing:
        return "failed documents to retry"
    return None


def failing_partitions(conn: psycopg.Connection, spec: SourceSpec) -> set[str]:
    """The source's partitions whose newest run left failed documents."""
    return {
        f.partition_key
        for f in current_failures(conn, limit=1_000_000)
        if f.source_type == spec.name
    }
