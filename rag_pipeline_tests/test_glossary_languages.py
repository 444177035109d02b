"""A third language through the dictionary's glossary: German rows in the demo iDempiere, no
German vocabulary file, and a German question finds the English page and the German window."""

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import dagster as dg
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from rag_pipeline.definitions import defs
from rag_pipeline.orchestration.reconcile import register
from rag_pipeline.orchestration.source_registry import AD_METADATA
from rag_pipeline.search import Searcher
from rag_pipeline.search import glossary as search_glossary
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.sources.files import DEMO_PARTITION
from rag_pipeline.sources.idempiere.demo_db import admin_conninfo, ensure_demo_database_on
from rag_pipeline.store.glossary import (
    GlossaryRow,
    GlossaryState,
    glossary_states,
    replace_glossary,
)
from rag_pipeline.store.migrations import migrate

pytestmark = pytest.mark.integration
T = TypeVar("T")

# What a German installation's translation rows say (iDempiere's de_DE language pack style).
_GERMAN = {
    "ad_window": [(139, "Lager und Lagerorte"), (200074, "Lagerort Art")],
    "ad_process": [(244, "Lager Organisation")],
}
# The demo's windows the test indexes (all of them in German would cost minutes to embed).
_WINDOWS = (139, 200074, 123)
QUESTION = "Wo lege ich ein neues Lager mit seinen Lagerorten an?"

# The op of the glossary asset (`ad_metadata/glossary` runs as `ad_metadata__glossary`).
GLOSSARY_OP = AD_METADATA.glossary_key.to_python_identifier()


@pytest.fixture
def german_idempiere(
    rag_env: Settings, pg_admin_uri: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The demo iDempiere with de_DE as a third language (AD_Language and a few _Trl rows)."""
    name = f"idem_{uuid.uuid4().hex[:10]}"
    url = ensure_demo_database_on(pg_admin_uri, name)
    with psycopg.connect(url) as conn:
        conn.execute(
            "CREATE TABLE ad_language (ad_language varchar(6) PRIMARY KEY, name text,"
            " isactive char(1), isbaselanguage char(1), issystemlanguage char(1))"
        )
        conn.execute(
            "INSERT INTO ad_language VALUES ('en_US', 'English', 'Y', 'Y', 'N'),"
            " ('es_CO', 'Español (Colombia)', 'Y', 'N', 'Y'), ('de_DE', 'Deutsch', 'Y', 'N', 'Y')"
        )
        for table, rows in _GERMAN.items():
            for record_id, german in rows:
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {trl} ({key}, ad_language, ad_client_id, ad_org_id, isactive,"
                        " created, createdby, updated, updatedby, name, istranslated)"
                        " VALUES (%s, 'de_DE', 0, 0, 'Y', now(), 100, now(), 100, %s, 'Y')"
                    ).format(trl=sql.Identifier(f"{table}_trl"), key=sql.Identifier(f"{table}_id")),
                    (record_id, german),
                )
        conn.execute("DELETE FROM ad_window WHERE ad_window_id <> ALL(%s)", (list(_WINDOWS),))
    params = conninfo_to_dict(url)
    monkeypatch.setenv("IDEMPIERE_DB_HOST", str(params["host"]))
    monkeypatch.setenv("IDEMPIERE_DB_PORT", str(params.get("port") or 5432))
    monkeypatch.setenv("IDEMPIERE_DB_NAME", name)
    monkeypatch.setenv("IDEMPIERE_DB_USER", str(params["user"]))
    if params.get("passfile"):
        line = Path(str(params["passfile"])).read_text().splitlines()[0]
        monkeypatch.setenv("IDEMPIERE_DB_PASSWORD", line.split(":", 4)[4])
    monkeypatch.setenv("RAG_LANGUAGES", "en_US,es_CO,de_DE")
    yield url
    with psycopg.connect(admin_conninfo(url), autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _run(job_name: str, key: str, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    job = defs().resolve_job_def(job_name)
    assert job.partitions_def is not None
    register(job.partitions_def, [key], instance)
    result = job.execute_in_process(instance=instance, partition_key=key)
    assert result.success
    return result


def test_a_german_question_finds_the_english_page_and_the_german_window(
    german_idempiere: str, embedder: Any
) -> None:
    with dg.instance_for_test() as instance:
        _run("files_ingest_job", DEMO_PARTITION, instance)
        _run(AD_METADATA.ingest_job, "window|de_DE", instance)
        result = _run(AD_METADATA.glossary_job, "de_DE", instance)
        (built,) = result.asset_materializations_for_node(GLOSSARY_OP)
        assert built.metadata["word_pairs"] == dg.IntMetadataValue(2)
        assert built.metadata["rewritten"].value is True
        # The same dictionary again: the same version, nothing rewritten.
        again = _run(AD_METADATA.glossary_job, "de_DE", instance)
        (kept,) = again.asset_materializations_for_node(GLOSSARY_OP)
        assert kept.metadata["rewritten"].value is False
    settings = load_settings()
    with psycopg.connect(str(settings.vectordb_url)) as conn:
        (state,) = glossary_states(conn)
    assert (state.language, state.base_language, state.names) == ("de_DE", "en_US", 3)

    searcher = Searcher(settings, embedder=embedder)
    prepared = searcher.understand(QUESTION, "hybrid", language="de_DE")
    carried = {(c.word, c.targets) for c in prepared.added.carried}
    assert carried == {("lager", ("warehouse",)), ("lagerorten", ("locator",))}
    # No vocabulary file for German: every added word is the glossary's.
    assert {words for words, _ in prepared.added.expansions} == {"[en] warehouse", "[en] locator"}
    assert "lager → warehouse (en)" in dict(prepared.describe())["glossary"]

    for mode in ("keyword", "hybrid"):
        hits = searcher.search(QUESTION, top_k=5, mode=mode, language="de_DE")
        found = [(h.source_type, h.source_id, h.language, h.title) for h in hits]
        assert ("files", "demo/warehouse-and-locators.md") in [f[:2] for f in found[:3]], found
        assert ("ad_metadata", "AD_Window:139", "de_DE", "Lager und Lagerorte") in found, found


def test_a_search_process_reloads_the_glossary_when_it_is_rebuilt(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run(work: Callable[[psycopg.Connection], T]) -> T:
        with psycopg.connect(database_url) as conn:
            return work(conn)

    cache = search_glossary.GlossaryCache(run)
    assert cache.current().carry("facturas", "es_CO") == []  # not migrated: no glossary
    monkeypatch.setattr(search_glossary, "CHECK_INTERVAL", 0.0)

    def build(target: str, version: str) -> None:
        state = GlossaryState("es_CO", "en_US", version, 1, 1)
        row = GlossaryRow("es_CO", "word", "factura", target, "factur", 0.9, 3, ("AD_Window:1",))
        with psycopg.connect(database_url) as conn:
            replace_glossary(conn, state, [row])

    with psycopg.connect(database_url) as conn:
        migrate(conn)
    build("invoice", "v1")
    assert [c.targets for c in cache.current().carry("facturas", "es_CO")] == [("invoice",)]
    build("bill", "v2")
    assert [c.targets for c in cache.current().carry("facturas", "es_CO")] == [("bill",)]
