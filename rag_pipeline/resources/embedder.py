"""The embedding model as a Dagster resource, loaded once per process."""

import dagster as dg
from pydantic import PrivateAttr

from rag_pipeline.core.embedding import Embedder
from rag_pipeline.runtime import load_embedder
from rag_pipeline.settings import Settings, load_settings


class EmbedderResource(dg.ConfigurableResource):
    """fastembed over the configured model (default: the bundled int8 all-MiniLM-L6-v2).

    Unset fields come from `RAG_EMBEDDING_*` when the resource is set up for a run.
    """

    model: str | None = None
    model_path: str | None = None
    threads: int | None = None

    _embedder: Embedder | None = PrivateAttr(default=None)
    _settings: Settings | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Load the model before the step runs, so a bad model fails the step at once."""
        self._embedder = load_embedder(self.settings)

    def _effective_settings(self) -> Settings:
        overrides: dict[str, object] = {}
        if self.model:
            overrides["embedding_model"] = self.model
        if self.model_path:
            overrides["embedding_model_path"] = self.model_path
        if self.threads:
            overrides["embedding_threads"] = self.threads
        return load_settings(**overrides)

    @property
    def embedder(self) -> Embedder:
        """The loaded model."""
        if self._embedder is None:
            self._embedder = load_embedder(self.settings)
        return self._embedder

    @property
    def settings(self) -> Settings:
        """The settings the model was loaded with."""
        if self._settings is None:
            self._settings = self._effective_settings()
        return self._settings
