"""The multilingual second vector: ingest stores it beside MiniLM's, a Spanish question reads it.

Real Dagster job, real PostgreSQL + pgvector, both real models (the bundled MiniLM and USE
multilingual, a default dependency). MiniLM reads English only; a question in another language
goes to the second model's vectors (`embedding_ml`), an English one stays on MiniLM's.
"""

from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from rag_pipeline.cli.ingest import _second_vectors_missing  # pyright: ignore[reportPrivateUsage]
from rag_pipeline.core.embedding import BUNDLED_MODEL_ID
from rag_pipeline.core.multilingual_embedding import USE_MODEL_ID
from rag_pipeline.search import Searcher
from rag_pipeline.settings import ConfigError, Settings, load_settings
from rag_pipeline.store.connection import connect
from rag_pipeline.store.migrations import ensure_second_model, stored_second_model
from rag_pipeline_tests.pipeline_helpers import ENGLISH_PAGES, ingest, write

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SPANISH = "¿Dónde registro la factura que me envía un proveedor?"
ENGLISH = "where do I enter the invoice a supplier sends"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "manual"
    for name, text in ENGLISH_PAGES.items():
        write(folder, name, text)
    return folder


def test_ingest_stores_a_second_vector_that_a_spanish_question_is_compared_with(
    rag_env: Settings, database_url: str, corpus: Path, instance: dg.DagsterInstance
) -> None:
    stats = ingest(corpus, instance)
    assert stats["second_model_id"] == USE_MODEL_ID
    assert stats["second_vectors_embedded"] == stats["chunks_embedded"] > 0
    with connect(database_url) as conn:
        assert stored_second_model(conn) == (USE_MODEL_ID, 512)
        row = conn.execute(
            "SELECT count(*), count(embedding_ml), min(vector_dims(embedding_ml)) FROM rag.chunks"
        ).fetchone()
        assert row is not None
        assert row[0] == row[1]
        assert row[2] == 512
        assert not _second_vectors_missing(conn, load_settings(), "files")

    searcher = Searcher(load_settings())
    spanish = searcher.understand(SPANISH, "hybrid")
    assert spanish.query.language.startswith("es")
    assert (spanish.vector_column, spanish.vector_model) == ("embedding_ml", USE_MODEL_ID)
    # The second model reads Spanish: its leg weighs more than MiniLM's for Spanish (0.25).
    assert spanish.vector_weight == searcher.ranking.second_vector_weight == 0.5
    assert searcher.ranking.cross_language_vector_weight == 0.25
    assert ("vector model", USE_MODEL_ID) in spanish.describe()
    english = searcher.understand(ENGLISH, "hybrid")
    assert (english.vector_column, english.vector_model) == ("embedding", BUNDLED_MODEL_ID)

    hits = searcher.search(SPANISH, mode="vector", top_k=2, explain=True)
    assert hits[0].title == "Vendor invoices"
    # The vector leg's score is the cosine of USE's vectors (512 dimensions), not MiniLM's.
    assert spanish.vector is not None
    assert spanish.vector.shape == (512,)
    with connect(database_url) as conn:
        stored = conn.execute(
            "SELECT embedding_ml::text FROM rag.chunks WHERE id = %s", (hits[0].chunk_id,)
        ).fetchone()
    assert stored is not None
    chunk_vector = np.array([float(x) for x in stored[0].strip("[]").split(",")])
    expected = float(np.dot(spanish.vector, chunk_vector))
    assert hits[0].explain is not None
    assert hits[0].explain.vector_score == pytest.approx(expected, abs=1e-4)


def test_turning_the_second_vector_on_adds_it_without_re_embedding_minilm(
    rag_env: Settings,
    database_url: str,
    corpus: Path,
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAG_MULTILINGUAL_MODEL", "none")
    first = ingest(corpus, instance)
    assert (first["second_model_id"], first["second_vectors_embedded"]) == ("none", 0)
    with connect(database_url) as conn:
        assert conn.execute("SELECT count(embedding_ml) FROM rag.chunks").fetchone() == (0,)
        assert stored_second_model(conn) is None
    off = Searcher(load_settings()).understand(SPANISH, "hybrid")
    assert (off.vector_column, off.vector_model) == ("embedding", BUNDLED_MODEL_ID)

    monkeypatch.delenv("RAG_MULTILINGUAL_MODEL")
    # An index without the configured model's vectors: search keeps to MiniLM, and
    # `rag ingest` runs every partition instead of calling it unchanged.
    waiting = Searcher(load_settings()).understand(SPANISH, "hybrid")
    assert waiting.vector_column == "embedding"
    with connect(database_url) as conn:
        assert _second_vectors_missing(conn, load_settings(), "files")
        # `rag init` binds the column to the model: the chunks still lack their vectors.
        ensure_second_model(conn, USE_MODEL_ID, 512)
        assert _second_vectors_missing(conn, load_settings(), "files")

    second = ingest(corpus, instance)
    assert second["documents_changed"] == len(ENGLISH_PAGES)
    assert second["chunks_embedded"] == 0  # MiniLM's vectors come from the cache
    assert second["second_vectors_embedded"] == first["chunks_embedded"]
    with connect(database_url) as conn:
        assert conn.execute("SELECT count(*) = count(embedding_ml) FROM rag.chunks").fetchone() == (
            True,
        )
    on = Searcher(load_settings()).understand(SPANISH, "hybrid")
    assert on.vector_column == "embedding_ml"


def test_an_unknown_multilingual_model_is_refused_by_name(rag_env: Settings) -> None:
    with pytest.raises(ConfigError, match=r"RAG_MULTILINGUAL_MODEL: .*use-multilingual-v3"):
        load_settings(multilingual_model="labse")
    # The embedding model itself needs no second vector.
    assert load_settings(embedding_model=USE_MODEL_ID).second_vector_model is None


def test_minilm_query_threads_sleep_between_queries(tmp_path: Path) -> None:
    # Spinning ONNX Runtime threads starved the second model's numpy (USE p95 ×10 at load 3-7).
    from rag_pipeline.core.embedding import assemble_bundled_model
    from rag_pipeline.search.encoder import BundledQueryEncoder

    encoder = BundledQueryEncoder(assemble_bundled_model(tmp_path / "models"))
    options = encoder._session.get_session_options()  # pyright: ignore[reportPrivateUsage]
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
