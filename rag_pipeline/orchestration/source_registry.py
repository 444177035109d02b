"""The sources this installation runs, and the names Dagster gives their parts.

One list, read by `ingest_all`, the nightly schedules, the `ingest_errors` report and
`rag status`/`rag validate`: a new source is added here once (and in `defs/<source>/`).
"""

SOURCES: tuple[str, ...] = ("files", "wiki", "k_entry", "ad_metadata")


def ingest_job_name(source_type: str) -> str:
    """The partitioned asset job of a source (built by `pipeline.source_definitions`)."""
    return f"{source_type}_ingest_job"


def resource_key(source_type: str) -> str:
    """The resource key of a source's `SourceResource`."""
    return f"{source_type}_source"


def reconcile_job_name(source_type: str) -> str:
    """The unpartitioned job that reconciles every partition of a source."""
    return f"{source_type}_reconcile_job"
