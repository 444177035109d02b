"""Process-wide shared state, built once: the migrated database and the loaded model.

No Dagster here: the resources, the CLI and the search module all come through this.
"""

import threading

from rag_pipeline.core.embedding import Embedder, ModelSpec, open_embedder
from rag_pipeline.settings import Settings
from rag_pipeline.store.connection import connect
from rag_pipeline.store.migrations import migrate
from rag_pipeline.store.server import embedded_server_running, resolve_conninfo

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
            _loaded[key] = open_embedder(
                spec,
                models_dir=settings.home / "models",
                threads=settings.embedding_threads,
                batch_size=settings.embedding_batch_size,
                batch_tokens=settings.embedding_batch_tokens,
            )
        return _loaded[key]
