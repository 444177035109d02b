"""Both iDempiere sources through the real Dagster jobs, the index and search; their sensors."""

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from rag_pipeline.definitions import defs
from rag_pipeline.defs.ad_metadata.checks import KNOWN_ANSWERS, judge_known_answers
from rag_pipeline.defs.ad_metadata.resources import ADSourceResource
from rag_pipeline.defs.ad_metadata.sensors import ad_metadata_changes_sensor
from rag_pipeline.defs.k_entry.resources import KEntrySourceResource
from rag_pipeline.defs.k_entry.sensors import k_entry_changes_sensor
from rag_pipeline.orchestration.reconcile import register
from rag_pipeline.resources.embedder import EmbedderResource
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.search import Searcher
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.sources.idempiere.ad import ENTITY_TYPES
from rag_pipeline.sources.idempiere.demo_db import (
    KnowledgeEntry,
    admin_conninfo,
    ensure_demo_database_on,
    insert_entry,
)

pytestmark = pytest.mark.integration

QUESTION = "where do I maintain customers and vendors"


@pytest.fixture
def own_idempiere(
    rag_env: Settings, pg_admin_uri: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A demo iDempiere database of this test alone, configured through IDEMPIERE_DB_*."""
    name = f"idem_{uuid.uuid4().hex[:10]}"
    url = ensure_demo_database_on(pg_admin_uri, name)
    params = conninfo_to_dict(url)
    monkeypatch.setenv("IDEMPIERE_DB_HOST", str(params["host"]))
    monkeypatch.setenv("IDEMPIERE_DB_PORT", str(params.get("port") or 5432))
    monkeypatch.setenv("IDEMPIERE_DB_NAME", name)
    monkeypatch.setenv("IDEMPIERE_DB_USER", str(params["user"]))
    if params.get("passfile"):
        # The embedded server wants its password; IDEMPIERE_DB_* can only carry it in clear.
        line = Path(str(params["passfile"])).read_text().splitlines()[0]
        monkeypatch.setenv("IDEMPIERE_DB_PASSWORD", line.split(":", 4)[4])
    yield url
    with psycopg.connect(admin_conninfo(url), autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _run(source: str, key: str, instance: dg.DagsterInstance) -> dict[str, Any]:
    """One in-process run of `<source>_ingest_job`; each stage's materialization metadata."""
    job = defs().resolve_job_def(f"{source}_ingest_job")
    assert job.partitions_def is not None
    register(job.partitions_def, [key], instance)
    result = job.execute_in_process(instance=instance, partition_key=key)
    assert result.success
    metadata: dict[str, Any] = {}
    for stage in ("raw", "markdown", "embeddings"):
        (materialization,) = result.asset_materializations_for_node(f"{source}__{stage}")
        metadata[stage] = {name: v.value for name, v in materialization.metadata.items()}
    metadata["checks"] = [
        (e.check_name, e.partition, e.passed) for e in result.get_asset_check_evaluations()
    ]
    return metadata


def _rank(hits: list[Any], source_id: str) -> int | None:
    ids = [(h.source_type, h.source_id) for h in hits]
    target = ("ad_metadata", source_id)
    return ids.index(target) + 1 if target in ids else None


def test_both_jobs_on_the_demo_database_answer_the_business_partner_question(
    rag_env: Settings, monkeypatch: pytest.MonkeyPatch, embedder: Any
) -> None:
    monkeypatch.delenv("IDEMPIERE_DB_HOST", raising=False)
    monkeypatch.setenv("RAG_LANGUAGES", "en_US")
    with dg.instance_for_test() as instance:
        entries = _run("k_entry", "en_US", instance)
        assert entries["raw"]["documents_new"] == 10
        assert entries["raw"]["documents_failed"] == 0
        windows = 0
        for entity in ENTITY_TYPES:
            metadata = _run("ad_metadata", f"{entity}|en_US", instance)
            assert metadata["raw"]["documents_failed"] == 0
            windows += metadata["raw"]["documents_new"] if entity == "window" else 0
            # Once per dictionary run, on its own partition's cases; none for a table.
            known = [c[1] for c in metadata["checks"] if c[0] == KNOWN_ANSWERS]
            if entity in ("window", "process"):
                assert known == [f"{entity}|en_US"], metadata["checks"]
            else:
                assert known == [], known
        assert windows > 400
    searcher = Searcher(load_settings(), embedder=embedder)
    vector = searcher.search(QUESTION, top_k=10, mode="vector")
    hybrid = searcher.search(QUESTION, top_k=10)
    # Both modes put the Business Partner window first or second: only the demo's
    # knowledge-base guide to that same window ("One business partner as customer and
    # vendor", whose title holds both query words) may be ahead of it.
    for hits in (vector, hybrid):
        rank = _rank(hits, "AD_Window:123")
        assert rank in (1, 2), [(h.source_id, h.title) for h in hits]
        ahead = {(h.source_type, h.source_id) for h in hits[: rank - 1]}
        assert ahead <= {("k_entry", "1000001")}
    # Identifier searches find the dictionary by column name.
    by_column = searcher.search("IsCustomer", top_k=5)
    assert any(h.source_type == "ad_metadata" and "IsCustomer" in h.text for h in by_column)

    # The known-answer check passes on this index, and warns once the windows are unsearchable.
    vectordb = VectorDBResource(url=rag_env.vectordb_url, home=str(rag_env.home))
    resource = EmbedderResource.from_settings(rag_env)
    good = judge_known_answers(vectordb, resource, "window|en_US")
    assert good is not None
    assert good.passed, good.metadata
    assert good.metadata["cases"].value == 20  # type: ignore[union-attr]
    assert good.metadata["partition"].value == "window|en_US"  # type: ignore[union-attr]
    assert "misses" not in good.metadata
    # An entity type without cases, or a language not indexed, has nothing to judge.
    assert judge_known_answers(vectordb, resource, "tab|en_US") is None
    assert judge_known_answers(vectordb, resource, "window|de_DE") is None
    with psycopg.connect(str(rag_env.vectordb_url)) as conn:
        conn.execute(
            "DELETE FROM rag.chunks WHERE document_id IN (SELECT id FROM rag.documents"
            " WHERE source_type = 'ad_metadata' AND source_id LIKE 'AD_Window:%')"
        )
    bad = judge_known_answers(vectordb, resource, "window|en_US")
    assert bad is not None
    assert not bad.passed
    assert bad.severity == dg.AssetCheckSeverity.WARN
    assert "AD_Window:" in str(bad.metadata["misses"].value)  # type: ignore[union-attr]


def test_incremental_runs_edits_deactivations_and_a_broken_entry(
    own_idempiere: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_LANGUAGES", "en_US,es_CO")
    with dg.instance_for_test() as instance:
        first = _run("k_entry", "es_CO", instance)
        assert first["raw"]["documents_new"] == 9
        windows = _run("ad_metadata", "window|es_CO", instance)
        assert windows["raw"]["documents_new"] > 400
        # Unchanged database: nothing fetched, nothing embedded.
        again = _run("k_entry", "es_CO", instance)
        assert again["raw"]["documents_unchanged"] == 9
        assert again["embeddings"].get("chunks_embedded", 0) == 0
        windows_again = _run("ad_metadata", "window|es_CO", instance)
        assert windows_again["raw"]["documents_new"] == 0
        assert windows_again["raw"]["documents_changed"] == 0
        with psycopg.connect(own_idempiere) as conn:
            conn.execute(
                "UPDATE k_entry_trl SET textmsg = textmsg || '<p>Nueva nota.</p>', "
                "updated = now() WHERE k_entry_id = 1000003 AND ad_language = 'es_CO'"
            )
            conn.execute("UPDATE k_entry SET isactive = 'N' WHERE k_entry_id = 1000005")
            insert_entry(conn, _broken_entry())
            conn.execute("UPDATE ad_window SET isactive = 'N' WHERE ad_window_id = 143")
        edited = _run("k_entry", "es_CO", instance)
        assert edited["raw"]["documents_changed"] == 1
        assert edited["raw"]["documents_deleted"] == 1
        # The broken Editor.js entry fails conversion alone; the others went through.
        assert edited["markdown"]["documents_failed"] == 1
        assert edited["markdown"]["documents_changed"] == 1
        windows_edited = _run("ad_metadata", "window|es_CO", instance)
        assert windows_edited["raw"]["documents_deleted"] == 1
    searcher = Searcher(load_settings())
    found = {(h.source_type, h.source_id) for h in searcher.search("Orden de Venta", top_k=20)}
    assert ("ad_metadata", "AD_Window:143") not in found
    with psycopg.connect(load_settings().external_conninfo or "") as conn:
        errors = conn.execute(
            "SELECT source_id, reason FROM rag.ingest_errors WHERE source_type = 'k_entry'"
        ).fetchall()
    assert any(source_id.startswith("1000098") for source_id, _ in errors), errors


def _broken_entry() -> KnowledgeEntry:
    from datetime import datetime

    return KnowledgeEntry(
        id=1000098,
        topic=1000000,
        edit_mode="BLK",
        name="Broken entry",
        keywords=None,
        url=None,
        text='{"blocks": [{"type": "paragraph", "data": {"text": "cut',
        client_id=11,
        active=True,
        public=True,
        valid_to=None,
        updated=datetime(2026, 3, 3),
        translations={"es_CO": {"name": "Entrada rota", "text": '{"blocks": ['}},
    )


def test_sensors_request_changed_partitions_only(
    own_idempiere: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_LANGUAGES", "all")
    settings = load_settings()
    k_entry = KEntrySourceResource.from_settings(settings)
    ad = ADSourceResource.from_settings(settings)
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(instance=instance, resources={"k_entry_source": k_entry})
        result = k_entry_changes_sensor(context)
        assert isinstance(result, dg.SensorResult)
        assert sorted(r.partition_key or "" for r in result.run_requests or []) == [
            "en_US",
            "es_CO",
        ]
        (added,) = result.dynamic_partitions_requests or []
        assert sorted(added.partition_keys) == ["en_US", "es_CO"]
        cursor = result.cursor
        quiet = k_entry_changes_sensor(
            dg.build_sensor_context(
                instance=instance, cursor=cursor, resources={"k_entry_source": k_entry}
            )
        )
        assert isinstance(quiet, dg.SensorResult)
        assert not quiet.run_requests

        ad_context = dg.build_sensor_context(
            instance=instance, resources={"ad_metadata_source": ad}
        )
        ad_result = ad_metadata_changes_sensor(ad_context)
        assert isinstance(ad_result, dg.SensorResult)
        assert len(ad_result.run_requests or []) == len(ENTITY_TYPES) * 2
        ad_cursor = ad_result.cursor
        assert ad_cursor is not None
        assert set(json.loads(ad_cursor)) == {
            f"{e}|{lang}" for e in ENTITY_TYPES for lang in ("en_US", "es_CO")
        }

        with psycopg.connect(own_idempiere) as conn:
            conn.execute(
                "UPDATE k_entry_trl SET name = 'Otro nombre', updated = now() "
                "WHERE k_entry_id = 1000002 AND ad_language = 'es_CO'"
            )
            conn.execute("DELETE FROM ad_field WHERE ad_field_id = 9000106")
        changed = k_entry_changes_sensor(
            dg.build_sensor_context(
                instance=instance, cursor=cursor, resources={"k_entry_source": k_entry}
            )
        )
        assert isinstance(changed, dg.SensorResult)
        assert [r.partition_key for r in changed.run_requests or []] == ["es_CO"]
        ad_changed = ad_metadata_changes_sensor(
            dg.build_sensor_context(
                instance=instance, cursor=ad_cursor, resources={"ad_metadata_source": ad}
            )
        )
        assert isinstance(ad_changed, dg.SensorResult)
        # The deleted field had its own document and was listed by its tab and window, in
        # both languages; tables (columns, not fields) and processes are untouched.
        assert sorted(r.partition_key or "" for r in ad_changed.run_requests or []) == [
            "field|en_US",
            "field|es_CO",
            "tab|en_US",
            "tab|es_CO",
            "window|en_US",
            "window|es_CO",
        ]


def test_registering_a_partition_key_fills_the_dynamic_language_dimension() -> None:
    jobs = defs()
    with dg.instance_for_test() as instance:
        for source, key in (("ad_metadata", "window|es_CO"), ("k_entry", "sk_SK")):
            job = jobs.resolve_job_def(f"{source}_ingest_job")
            assert job.partitions_def is not None
            register(job.partitions_def, [key], instance)
            register(job.partitions_def, [key], instance)  # idempotent
            assert key in job.partitions_def.get_partition_keys(dynamic_partitions_store=instance)
        assert sorted(instance.get_dynamic_partitions("idempiere_languages")) == ["es_CO", "sk_SK"]
