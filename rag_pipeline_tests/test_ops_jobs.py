"""Ingesting everything as CI does: `rag ingest --source all` in a subprocess, fresh instance.

Every partition of every source is a run of its source's ingest job, none started from inside
another run.
"""

import dagster as dg

from rag_pipeline.orchestration.source_registry import EMBEDDINGS, SOURCES
from rag_pipeline_tests.ops_support import (
    IngestAllRun,
    index_snapshot,
    ingest_all_in_process,  # noqa: F401 - a session fixture shared with test_celery
)


def test_ingest_all_indexes_every_source_offline(
    ingest_all_in_process: IngestAllRun,  # noqa: F811
) -> None:
    run = ingest_all_in_process
    assert run.returncode == 0, run.output[-3000:]
    documents = index_snapshot(run.database_url)["documents"]
    indexed = {row[0] for row in documents}
    assert indexed == {spec.name for spec in SOURCES}
    with dg.DagsterInstance.from_config(str(run.dagster_home)) as instance:
        runs = instance.get_runs()
        # One run per partition of a source's ingest job (and of the dictionary's glossary job,
        # per language), and no other run: none launched another (no parent run, no reconcile).
        jobs = {spec.ingest_job for spec in SOURCES}
        jobs |= {spec.glossary_job for spec in SOURCES if spec.glossary}
        assert {r.job_name for r in runs} == jobs
        partitions = [(r.job_name, r.tags["dagster/partition"]) for r in runs]
        assert len(partitions) == len(set(partitions))
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        assert all(r.parent_run_id is None and r.root_run_id is None for r in runs)
        assert all(r.tags["dagster/max_runtime"] for r in runs)
        # Only the tables of the Application Dictionary were configured (RAG_AD_ENTITY_TYPES).
        assert ("ad_metadata_ingest_job", "table|en_US") in partitions
        assert ("files_ingest_job", "demo") in partitions
        assert not any(key.startswith("window|") for _, key in partitions)
        # Every source's index was materialized, with the metadata a person reads.
        for spec in SOURCES:
            event = instance.get_latest_materialization_event(spec.asset_key(EMBEDDINGS))
            assert event is not None
            assert event.asset_materialization is not None
            metadata = event.asset_materialization.metadata
            assert metadata["documents_new"].value > 0, spec
            assert "chunks_embedded" in metadata
