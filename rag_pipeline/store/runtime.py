"""Process-wide shared state, built once: the migrated database and the loaded model.

No Dagster here: the resources, the CLI and the search module all come through this.
"""

import logging
import threading
import time
from collections.abc import Callable

from rag_pipeline.core.embedding import Embedder, ModelSpec, open_embedder
from rag_pipeline.core.model_files import EmbeddingModelError
from rag_pipeline.core.multilingual_embedding import MULTILINGUAL_MODELS
from rag_pipeline.settings import Settings
from rag_pipeline.store.connection import connect
from rag_pipeline.store.migrations import migrate
from rag_pipeline.store.server import embedded_server_running, resolve_conninfo

logger = logging.getLogger(__name__)
# How often (seconds) a search process asks again whether the index holds the second vectors.
_STORED_CHECK_INTERVAL = 30.0
_ready: dict[str, str] = {}
_loaded: dict[tuple[object, ...], Embedder] = {}
_lock = threading.Lock()


def ready_conninfo(settings: Settings) -> str:
    """The URL of the migrated vector database (starting the embedded one if needed).

    Cheap to call before every use: a long-running process (a search service, `rag dev`)
    whose embedded server was stopped (`rag stop`, a reboot) gets it started again here,
    instead of a cached URL that fails for good.
    """
    key = settings.external_conninfo or str(settings.home)
    with _lock:
        cached = _ready.get(key)
        if cached is not None and (
            not settings.uses_embedded_database or embedded_server_running(settings)
        ):
            return cached
        conninfo = resolve_conninfo(settings)
        if conninfo != cached:
            with connect(conninfo) as conn:
                migrate(conn)
        _ready[key] = conninfo
        return conninfo


def load_embedder(settings: Settings) -> Embedder:
    """The configured model, loaded once per process (loading one costs 0.3-2 s)."""
    spec = ModelSpec(
        name=settings.embedding_model,
        local_path=settings.embedding_model_path,
        allow_download=settings.embedding_allow_download,
        max_tokens=settings.embedding_max_tokens,
    )
    key = (
        spec,
        settings.home,
        settings.embedding_threads,
        settings.embedding_batch_size,
        settings.embedding_batch_tokens,
    )
    with _lock:
        if key not in _loaded:
            try:
                _loaded[key] = open_embedder(
                    spec,
                    models_dir=settings.home / "models",
                    threads=settings.embedding_threads,
                    batch_size=settings.embedding_batch_size,
                    batch_tokens=settings.embedding_batch_tokens,
                )
            except EmbeddingModelError as exc:
                if spec.name not in MULTILINGUAL_MODELS:
                    raise
                raise EmbeddingModelError(f"RAG_EMBEDDING_MODEL={spec.name}: {exc}") from exc
        return _loaded[key]


def load_second_embedder(settings: Settings) -> Embedder | None:
    """The multilingual model of the second vector (RAG_MULTILINGUAL_MODEL), loaded once per
    process, or None when it is off or is the embedding model itself.

    Raises:
        EmbeddingModelError: its package is missing or damaged; the message names the setting.
    """
    name = settings.second_vector_model
    if name is None:
        return None
    key = (name, settings.home, settings.embedding_threads, settings.embedding_batch_size)
    with _lock:
        if key not in _loaded:
            try:
                _loaded[key] = open_embedder(
                    ModelSpec(name=name),
                    models_dir=settings.home / "models",
                    threads=settings.embedding_threads,
                    batch_size=settings.embedding_batch_size,
                )
            except EmbeddingModelError as exc:
                raise EmbeddingModelError(
                    f"RAG_MULTILINGUAL_MODEL={name}: {exc} (or set RAG_MULTILINGUAL_MODEL=none)"
                ) from exc
        return _loaded[key]


class SecondModel:
    """The multilingual model (RAG_MULTILINGUAL_MODEL) for queries the first model does not
    read, loaded on the first such query: an English query never pays for it.

    It is offered only while the index holds that model's vectors (`stored` returns the model
    id the index's second vectors were made with), asked again every 30 s until it does, so a
    search process sees the vectors an ingest added. A model that cannot be loaded is said
    once, with the setting and the extra to install, and search goes on with the first model.
    """

    def __init__(self, settings: Settings, stored: Callable[[], str | None]) -> None:
        """`stored` reads the index's second model id (one round trip)."""
        self._settings = settings
        self._stored = stored
        self._lock = threading.Lock()
        self._model: Embedder | None = None
        self._failed = settings.second_vector_model is None
        self._checked = float("-inf")
        self._ready = False

    def __call__(self) -> Embedder | None:
        """The loaded model, or None (off, not loadable, or no vectors of it in the index)."""
        with self._lock:
            if self._failed or not self._index_ready():
                return None
            if self._model is None:
                try:
                    self._model = load_second_embedder(self._settings)
                except EmbeddingModelError as exc:
                    logger.warning("%s; searching with the first model only", exc)
                    self._failed = True
            return self._model

    def _index_ready(self) -> bool:
        now = time.monotonic()
        if not self._ready and now - self._checked >= _STORED_CHECK_INTERVAL:
            self._checked = now
            self._ready = self._stored() == self._settings.second_vector_model
        return self._ready
