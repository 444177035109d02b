"""Swapping the embedding model on a built index: MiniLM → a multilingual model of the extra.

Real Dagster job, real PostgreSQL + pgvector, the real models: the stored model is checked
when ingest and search start, `--force` re-embeds everything, and then a Spanish question
finds the English page.
"""

import importlib.util
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.core.embedding import BUNDLED_MODEL_ID
from rag_pipeline.core.multilingual_embedding import E5_MODEL_ID, MULTILINGUAL_MODELS, USE_MODEL_ID
from rag_pipeline.search import Searcher
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.store.connection import connect
from rag_pipeline.store.migrations import ModelMismatchError, stored_model
from rag_pipeline_tests.pipeline_helpers import ENGLISH_PAGES, ingest, write

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("model_id", [E5_MODEL_ID, USE_MODEL_ID])
def test_a_forced_ingest_swaps_minilm_for_a_multilingual_model(
    model_id: str,
    rag_env: Settings,
    database_url: str,
    tmp_path: Path,
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    packaged = MULTILINGUAL_MODELS[model_id]
    if importlib.util.find_spec(packaged.module) is None:
        pytest.skip(f"{packaged.distribution} is not installed (the multilingual extra)")
    corpus = tmp_path / "manual"
    for name, text in ENGLISH_PAGES.items():
        write(corpus, name, text)
    ingest(corpus, instance)
    with connect(database_url) as conn:
        assert stored_model(conn) == (BUNDLED_MODEL_ID, 384)

    monkeypatch.setenv("RAG_EMBEDDING_MODEL", model_id)
    # Both starts refuse the other model's vectors and name the command that re-embeds.
    with pytest.raises(ModelMismatchError, match="rag ingest --force"):
        Searcher(load_settings())
    with pytest.raises(ModelMismatchError, match="rag ingest --force"):
        ingest(corpus, instance)

    stats = ingest(corpus, instance, force=True)
    assert stats["model_id"] == model_id
    assert stats["documents_changed"] + stats["documents_new"] == len(ENGLISH_PAGES)
    # The cache holds MiniLM's vectors and those of the default second vector, USE: a swap to
    # USE embeds nothing again, a swap to e5 everything.
    if model_id == USE_MODEL_ID:
        assert (stats["chunks_embedded"], stats["second_model_id"]) == (0, "none")
        assert stats["chunks_reused"] > 0
    else:
        assert stats["chunks_reused"] == 0
        assert stats["chunks_embedded"] > 0
    searcher = Searcher(load_settings())
    with connect(database_url) as conn:
        assert stored_model(conn) == (model_id, searcher.embedder.embed_query("x").shape[0])
        assert conn.execute("SELECT count(*) FROM rag.documents").fetchone() == (
            len(ENGLISH_PAGES),
        )

    hits = searcher.search("¿Dónde registro la factura de un proveedor?", mode="vector", top_k=2)
    assert hits[0].title == "Vendor invoices"
