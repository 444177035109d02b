"""Query vectors of the bundled model with ONNX Runtime and tokenizers only.

A cold `rag search` spent most of its time importing fastembed (it pulls in huggingface_hub,
requests, tqdm ...) and embedding a probe text, to embed one short query. For the bundled
model this module runs the same computation directly — tokens truncated at 256 like fastembed,
the ONNX model, mean pooling over the attention mask, L2 normalisation — on the same verified
ONNX file, so its vectors equal fastembed's (checked by a test). Any other configured model
goes through the full Embedder.
"""

import threading
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from rag_pipeline.core.embedding import BUNDLED_MODEL_ID, Embedder, assemble_bundled_model
from rag_pipeline.settings import Settings

# What fastembed's tokenizer truncates the bundled model's input to (read from a loaded model:
# its `max_length`), so long queries get the same vector either way.
_MAX_LENGTH = 256


class QueryEmbedder(Protocol):
    """What search needs from a model."""

    model_id: str

    def embed_query(self, query: str) -> NDArray[np.float32]:
        """The normalised vector of a query."""
        ...


class BundledQueryEncoder:
    """The bundled all-MiniLM-L6-v2 int8 model, for queries only."""

    def __init__(self, model_dir: Path, threads: int | None = None) -> None:
        """Load the model folder laid out by `assemble_bundled_model`."""
        import onnxruntime  # pyright: ignore[reportMissingTypeStubs]
        from tokenizers import Tokenizer

        # onnxruntime ships no type information.
        ort: Any = onnxruntime
        options: Any = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        # Idle threads sleep instead of spinning: spinning ones took the cores from the second
        # model's numpy and from PostgreSQL (at load 3-7: USE p95 43-59 -> 5 ms, and this
        # model's own p95 28-34 -> 18-20 ms, docs/multilingual-models.md).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session: Any = ort.InferenceSession(
            str(model_dir / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=_MAX_LENGTH)  # pyright: ignore[reportUnknownMemberType]
        self._tokenizer.no_padding()
        self.model_id = BUNDLED_MODEL_ID

    def embed_query(self, query: str) -> NDArray[np.float32]:
        """The normalised mean-pooled vector of `query`."""
        encoding = self._tokenizer.encode(query)
        ids = np.asarray([encoding.ids], dtype=np.int64)
        mask = np.asarray([encoding.attention_mask], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = np.asarray(self._session.run(None, feed)[0], dtype=np.float32)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        vector = pooled[0]
        norm = float(np.linalg.norm(vector))
        return (vector / norm if norm else vector).astype(np.float32)


_loaded: dict[tuple[Path, int | None], BundledQueryEncoder] = {}
_lock = threading.Lock()


def load_query_embedder(settings: Settings) -> QueryEmbedder | Embedder:
    """The light encoder for the bundled model, else the configured full Embedder."""
    from rag_pipeline.store.runtime import load_embedder

    if settings.embedding_model != BUNDLED_MODEL_ID or settings.embedding_model_path is not None:
        return load_embedder(settings)
    key = (settings.home, settings.embedding_threads)
    with _lock:
        if key not in _loaded:
            model_dir = assemble_bundled_model(settings.home / "models")
            _loaded[key] = BundledQueryEncoder(model_dir, settings.embedding_threads)
        return _loaded[key]
