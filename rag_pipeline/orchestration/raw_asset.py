"""The raw stage of a source's chain: what the source lists and fetches, with its versions.

It plans the incremental work from the listed versions (a document whose version did not
change is kept), fetches the rest in batches, and completes the partition: a document that
fails keeps its previous version, one that vanished between listing and fetch is gone.
"""

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import dagster as dg
import psycopg

from rag_pipeline.core import document_stages
from rag_pipeline.core.document_stages import RAW_VERSION
from rag_pipeline.core.incremental import StageSummary, plan, run_stage, start_workers
from rag_pipeline.core.models import FailedDocument, SourceFormat
from rag_pipeline.core.records import DocumentInfo, RawRecord
from rag_pipeline.core.source import DocumentError, DocumentRef, Source, SourceDocument
from rag_pipeline.io_managers.stage import StageOutput, stage_definition_metadata
from rag_pipeline.orchestration.asset_common import (
    KINDS,
    OWNERS,
    IngestConfig,
    stage_metadata,
    stage_tags,
)
from rag_pipeline.orchestration.listing import Listing, listing_observation
from rag_pipeline.orchestration.source_registry import RAW, SourceSpec
from rag_pipeline.orchestration.steps import committing, complete_partition
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.store import stages
from rag_pipeline.store.locks import advisory_lock

# What a raw row's input hash is computed with (a listed version and this).
RAW_FINGERPRINT = f"raw:{RAW_VERSION}"
_FETCH_BATCH = 50
# Transient source errors (a database restarting, a wiki down for longer than its client's own
# retries) are retried with backoff: 5 s, then 10 s. Short, because a permanent error (a wrong
# password) is retried too and `rag ingest` reports it only after the last attempt.
RAW_RETRY_POLICY = dg.RetryPolicy(
    max_retries=2, delay=5, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)


def requests_pool(spec: SourceSpec) -> str:
    """The concurrency pool of a source's raw stage (its requests to the source)."""
    return f"{spec.name}_requests"


def raw_asset(spec: SourceSpec, partitions_def: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    """The raw asset of a source, reading it through the source's `SourceResource`."""
    resource_key = spec.resource_key

    @dg.asset(
        key=spec.asset_key(RAW),
        description=f"{spec.name} documents as their source gave them, with their versions.",
        partitions_def=partitions_def,
        # The source system, observed by every run of this step (and by the source's sensor):
        # the lineage starts there.
        deps=[spec.system_key],
        io_manager_key="stage_io_manager",
        # The source's resource key depends on the source: both come through the context.
        required_resource_keys={resource_key, "vectordb"},
        kinds=KINDS,
        group_name=spec.group_name,
        code_version=RAW_VERSION,
        retry_policy=RAW_RETRY_POLICY,
        pool=requests_pool(spec),
        owners=OWNERS,
        tags=stage_tags(spec.name, RAW),
        metadata=stage_definition_metadata(spec.name, RAW),
    )
    def raw(
        context: dg.AssetExecutionContext, config: IngestConfig
    ) -> dg.MaterializeResult[StageOutput]:
        started = time.perf_counter()
        vectordb: VectorDBResource = context.resources.vectordb
        source: Source = getattr(context.resources, resource_key).build()
        try:
            with (
                vectordb.connect() as conn,
                advisory_lock(conn, spec.name, context.partition_key, RAW),
            ):
                workers = config.workers or vectordb.settings().effective_workers
                summary, metadata = _ingest_raw(context, conn, spec, source, config.force, workers)
        finally:
            source.close()
        return dg.MaterializeResult(
            value=StageOutput(spec.name, context.partition_key, summary),
            metadata=stage_metadata(summary, started, **metadata),
        )

    return raw


def _ingest_raw(
    context: dg.AssetExecutionContext,
    conn: psycopg.Connection,
    spec: SourceSpec,
    source: Source,
    force: bool,
    workers: int,
) -> tuple[StageSummary, dict[str, Any]]:
    """List, plan, fetch and store one partition; its summary and the figures to report."""
    asset_name = spec.asset_name(RAW)
    partition_key = context.partition_key
    refs, listing_failed = _listing(source, partition_key)
    # The source system as this run listed it, whether or not its sensor runs.
    listing = Listing({key: ref.version for key, ref in refs.items()}, len(listing_failed))
    context.log_event(listing_observation(spec, partition_key, listing))
    previous = stages.input_hashes(
        conn, asset_name, [*refs, *(f.source_id for f in listing_failed)]
    )
    work = plan(dict(listing.versions), previous, RAW_FINGERPRINT, force=force)
    context.log.info(f"raw: {len(work.todo)} to fetch, {len(work.kept)} unchanged")
    # The next stages convert and chunk these in worker processes: start them now, while
    # this stage fetches (a worker's start costs about as much CPU as converting 500
    # documents).
    start_workers(workers, document_stages.__name__, len(work.todo))
    summary = run_stage(
        stage=RAW,
        work=work,
        previous_inputs=previous,
        load=_fetcher(source, refs),
        transform=_to_raw(spec.name),
        store=committing(conn, asset_name, context.run.run_id),
    )
    for failure in listing_failed:
        summary.fail(failure.source_id, failure.reason, previous)
    failed_keys = {f.source_id for f in summary.failed}
    vanished = set(work.todo) - set(summary.written) - failed_keys
    # A document that fails keeps its place (and its previous version); one that vanished
    # between listing and fetch is gone.
    members = [key for key in refs if key not in vanished]
    members += [f.source_id for f in listing_failed if f.source_id in previous]
    completed = complete_partition(
        conn,
        asset_key=asset_name,
        source_type=spec.name,
        partition_key=partition_key,
        run_id=context.run.run_id,
        failures=summary.failed,
        members=members,
    )
    return summary, {"documents_listed": len(refs), **completed}


def _listing(
    source: Source, partition_key: str
) -> tuple[dict[str, DocumentRef], list[FailedDocument]]:
    """The partition's documents by key, and the entries the listing could not read."""
    refs: dict[str, DocumentRef] = {}
    failed: list[FailedDocument] = []
    for item in source.list_documents(partition_key):
        if isinstance(item, FailedDocument):
            failed.append(item)
        else:
            refs[item.key] = item
    return refs, failed


def _fetcher(
    source: Source, refs: dict[str, DocumentRef]
) -> Callable[[Sequence[str]], Iterator[tuple[str, SourceDocument | FailedDocument]]]:
    """Fetch documents by key, `_FETCH_BATCH` at a time."""

    def fetch(keys: Sequence[str]) -> Iterator[tuple[str, SourceDocument | FailedDocument]]:
        for start in range(0, len(keys), _FETCH_BATCH):
            batch = [refs[key] for key in keys[start : start + _FETCH_BATCH]]
            for item in source.fetch(batch):
                key = item.key if isinstance(item, SourceDocument) else item.source_id
                yield key, item

    return fetch


def _to_raw(source_type: str) -> Callable[[SourceDocument | FailedDocument], RawRecord]:
    def convert(item: SourceDocument | FailedDocument) -> RawRecord:
        if isinstance(item, FailedDocument):
            raise DocumentError(item.reason)
        info = DocumentInfo(
            source_type=source_type,
            source_id=item.source_id,
            language=item.language,
            title=item.title,
            original_format=SourceFormat(item.original_format),
            version=item.version,
            breadcrumb=item.breadcrumb,
            url=item.url,
            metadata=item.metadata,
        )
        return RawRecord(item.key, info, item.body.removeprefix("\ufeff"))

    return convert
