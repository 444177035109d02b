"""The bundled model: verified before loading, offline, exact token counts, stable order."""

from pathlib import Path

import numpy as np
import pytest

from rag_pipeline.core.embedding import (
    BUNDLED_MODEL_ID,
    Embedder,
    EmbeddingModelError,
    ModelSpec,
    open_embedder,
    verify_sha256,
)


def test_bundled_model_properties(embedder: Embedder) -> None:
    assert embedder.model_id == BUNDLED_MODEL_ID
    assert embedder.dimension == 384
    assert embedder.max_tokens == 256


def test_token_count_is_not_truncated(embedder: Embedder) -> None:
    long_text = "warehouse " * 600
    # 600 words + [CLS] + [SEP]: the count must see past the tokenizer files' 128/512 limits.
    assert embedder.count_tokens(long_text) == 602
    assert embedder.count_tokens_batch(["hello world", long_text]) == [4, 602]


def test_passages_keep_input_order_despite_length_sorting(embedder: Embedder) -> None:
    texts = ["a much longer passage about sales orders and invoices " * 3, "locator", "price list"]
    together = embedder.embed_passages(texts)
    alone = np.stack([embedder.embed_passages([t])[0] for t in texts])
    assert together.shape == (3, 384)
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def test_query_is_closer_to_its_topic(embedder: Embedder) -> None:
    query = embedder.embed_query("How do I define storage bins in a warehouse?")
    passages = embedder.embed_passages(
        [
            "A locator is a bin in a warehouse, identified by aisle, bin and level.",
            "The payment allocation form matches payments to invoices.",
        ]
    )
    assert float(query @ passages[0]) > float(query @ passages[1]) + 0.1


def test_tampered_model_file_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    with pytest.raises(EmbeddingModelError, match="sha256"):
        verify_sha256(fake, "0" * 64)


def test_unknown_model_is_not_downloaded(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingModelError, match="RAG_EMBEDDING_ALLOW_DOWNLOAD"):
        open_embedder(ModelSpec("BAAI/bge-small-en-v1.5"), models_dir=tmp_path)
    # Nothing was fetched into the cache folder.
    cached = (
        list((tmp_path / "fastembed").rglob("*.onnx")) if (tmp_path / "fastembed").exists() else []
    )
    assert cached == []


def test_local_folder_model_loads(tmp_path: Path, embedder: Embedder) -> None:
    # A local folder with the same files loads through RAG_EMBEDDING_MODEL_PATH's code path.
    source = Path(__file__).resolve().parents[1] / "rag_pipeline" / "model" / "all-MiniLM-L6-v2"
    from rag_pipeline.core.embedding import bundled_onnx_path

    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "model.onnx").symlink_to(bundled_onnx_path())
    for file in source.iterdir():
        if file.suffix in (".json", ".txt"):
            (folder / file.name).symlink_to(file)
    local = open_embedder(ModelSpec("my-model", local_path=folder), models_dir=tmp_path / "models")
    assert local.model_id.startswith("my-model@")
    assert local.dimension == 384
    np.testing.assert_allclose(
        local.embed_passages(["locator"]), embedder.embed_passages(["locator"]), atol=1e-5
    )
