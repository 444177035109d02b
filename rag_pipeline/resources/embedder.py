"""The embedding model as a Dagster resource, loaded once per process."""

import dagster as dg
from pydantic import Field, PrivateAttr

from rag_pipeline.core.embedding import Embedder
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.store.runtime import load_embedder, load_second_embedder


class EmbedderResource(dg.ConfigurableResource):
    """The configured embedding model (RAG_EMBEDDING_MODEL), and how text is cut for it.

    The defaults shown in the UI are the `RAG_EMBEDDING_*` / `RAG_CHUNK_*` settings when the
    code location loaded; the launchpad can override any of them for one run.
    """

    model: str = Field(default="all-MiniLM-L6-v2-int8", description="RAG_EMBEDDING_MODEL")
    model_path: str | None = Field(default=None, description="RAG_EMBEDDING_MODEL_PATH")
    threads: int | None = Field(default=None, description="RAG_EMBEDDING_THREADS")
    batch_size: int = Field(default=64, description="RAG_EMBEDDING_BATCH_SIZE: texts per batch")
    batch_tokens: int = Field(
        default=1024, description="RAG_EMBEDDING_BATCH_TOKENS: padded tokens per batch"
    )
    chunk_target_tokens: int = Field(default=200, description="RAG_CHUNK_TARGET_TOKENS")
    chunk_overlap_sentences: int = Field(default=1, description="RAG_CHUNK_OVERLAP_SENTENCES")

    multilingual_model: str = Field(
        default="use-multilingual-v3",
        description="RAG_MULTILINGUAL_MODEL: the second vector's model, or none",
    )

    _embedder: Embedder | None = PrivateAttr(default=None)
    _second: Embedder | None = PrivateAttr(default=None)
    _settings: Settings | None = PrivateAttr(default=None)

    @classmethod
    def from_settings(cls, settings: Settings) -> "EmbedderResource":
        """The resource with the given settings as its defaults."""
        return cls(
            model=settings.embedding_model,
            model_path=str(settings.embedding_model_path)
            if settings.embedding_model_path
            else None,
            threads=settings.embedding_threads,
            batch_size=settings.embedding_batch_size,
            batch_tokens=settings.embedding_batch_tokens,
            chunk_target_tokens=settings.chunk_target_tokens,
            chunk_overlap_sentences=settings.chunk_overlap_sentences,
            multilingual_model=settings.multilingual_model,
        )

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Load the model before the step runs, so a bad model fails the step at once."""
        self._embedder = load_embedder(self.settings)
        self._second = load_second_embedder(self.settings)

    @property
    def second(self) -> Embedder | None:
        """The loaded multilingual model of the second vector, or None when it is off."""
        if self._second is None:
            self._second = load_second_embedder(self.settings)
        return self._second

    @property
    def embedder(self) -> Embedder:
        """The loaded model."""
        if self._embedder is None:
            self._embedder = load_embedder(self.settings)
        return self._embedder

    @property
    def settings(self) -> Settings:
        """The settings the model is loaded with: this resource's fields over the environment."""
        if self._settings is None:
            overrides: dict[str, object] = {
                "embedding_model": self.model,
                "embedding_batch_size": self.batch_size,
                "embedding_batch_tokens": self.batch_tokens,
                "chunk_target_tokens": self.chunk_target_tokens,
                "chunk_overlap_sentences": self.chunk_overlap_sentences,
                "multilingual_model": self.multilingual_model,
            }
            if self.model_path:
                overrides["embedding_model_path"] = self.model_path
            if self.threads:
                overrides["embedding_threads"] = self.threads
            self._settings = load_settings(**overrides)
        return self._settings
