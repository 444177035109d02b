"""`ingest_all` end to end as CI runs it: `dagster job execute` in a subprocess, fresh instance."""

import dagster as dg

from rag_pipeline.orchestration.source_registry import SOURCES
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
    assert indexed == set(SOURCES)
    # Only the tables of the Application Dictionary were configured (RUN_CONFIG).
    with dg.DagsterInstance.from_config(str(run.dagster_home)) as instance:
        runs = instance.get_runs()
        ingest_all = [r for r in runs if r.job_name == "ingest_all"]
        children = [r for r in runs if r.tags.get("rag/reconcile") == ingest_all[0].run_id]
        partitions = {(r.job_name, r.tags["dagster/partition"]) for r in children}
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        assert ("ad_metadata_ingest_job", "table|en_US") in partitions
        assert ("files_ingest_job", "demo") in partitions
        assert {job for job, _ in partitions} == {f"{s}_ingest_job" for s in SOURCES}
        assert not any(key.startswith("window|") for _, key in partitions)
        # Every source's embeddings were materialized, with the metadata a person reads.
        for source in SOURCES:
            event = instance.get_latest_materialization_event(dg.AssetKey(f"{source}_embeddings"))
            assert event is not None
            assert event.asset_materialization is not None
            metadata = event.asset_materialization.metadata
            assert metadata["documents_new"].value > 0, source
            assert "chunks_embedded" in metadata
