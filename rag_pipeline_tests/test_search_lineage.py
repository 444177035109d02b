"""Search hits carry their lineage: source version, partition, ingestion time and run id."""

from datetime import datetime
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.core.embedding import Embedder
from rag_pipeline.search import Searcher
from rag_pipeline.settings import Settings
from rag_pipeline.store.connection import connect
from rag_pipeline_tests.pipeline_helpers import folder_partition, ingest, write

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_hit_names_its_source_version_partition_time_and_run(
    rag_env: Settings,
    database_url: str,
    tmp_path: Path,
    instance: dg.DagsterInstance,
    embedder: Embedder,
) -> None:
    folder = tmp_path / "lineage"
    write(folder, "locators.md", "# Locators\n\nEvery locator has an aisle, a bin and a level.\n")
    ingest(folder, instance)
    (hit,) = Searcher(rag_env, embedder=embedder).search("aisle bin level of a locator", top_k=1)
    with connect(database_url) as conn:
        row = conn.execute(
            "SELECT source_version, ingested_at FROM rag.documents WHERE id = %s",
            (hit.document_id,),
        ).fetchone()
    assert row is not None
    assert hit.source_version == row[0] != ""
    assert datetime.fromisoformat(hit.ingested_at) == row[1]
    assert hit.partition == folder_partition(folder)
    runs = instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS]))
    assert hit.run_id in {record.dagster_run.run_id for record in runs}
    assert {"source_version", "partition", "ingested_at", "run_id"} <= hit.to_dict().keys()
