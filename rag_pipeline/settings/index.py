"""The settings of building the index: where it is stored, the model, chunking, cost caps, files.

`IndexSettings` holds them with the values derived from them (the external database's URL, the
worker count, the watched folders); `rag_pipeline.settings.Settings` combines it with the
other groups.
"""

import os
from functools import cached_property
from pathlib import Path
from typing import Annotated
from urllib.parse import quote

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings

BUNDLED_MODEL = "all-MiniLM-L6-v2-int8"
MULTILINGUAL_MODEL = "use-multilingual-v3"
MULTILINGUAL_CHOICES = ("use-multilingual-v3", "multilingual-e5-small-q4", "none")


class IndexSettings(BaseSettings):
    """Where the index lives, how documents are embedded and chunked, and the caps per document."""

    home: Path = Field(
        default_factory=lambda: Path.home() / ".rag_pipeline",
        description="Where the embedded database, model links and Dagster state live.",
    )
    vectordb_url: str | None = Field(
        default=None, description="postgresql:// URL of an external PostgreSQL with pgvector."
    )
    vectordb_pg_host: str | None = Field(
        default=None,
        description="An external PostgreSQL's host, instead of a URL (with the four below).",
    )
    vectordb_pg_port: Annotated[int, Field(ge=1, le=65535)] = Field(
        default=5432, description="Its port."
    )
    vectordb_pg_name: str = Field(default="rag", description="Its database.")
    vectordb_pg_user: str = Field(default="postgres", description="Its user.")
    vectordb_pg_password: str | None = Field(default=None, description="Its password.")

    embedding_model: str = Field(
        default=BUNDLED_MODEL,
        description="The bundled model, use-multilingual-v3 or multilingual-e5-small-q4 (the"
        " `multilingual` extra), any fastembed model name, or a name for a local folder.",
    )
    embedding_model_path: Path | None = Field(
        default=None, description="A local folder with model.onnx and tokenizer files."
    )
    embedding_allow_download: bool = Field(
        default=False, description="Let fastembed fetch a named model it does not have yet."
    )
    embedding_threads: Annotated[int, Field(ge=1, le=256)] | None = Field(
        default=None,
        description="Inference threads (default: the model runtime's choice).",
    )
    embedding_batch_size: Annotated[int, Field(ge=1, le=4096)] = Field(
        default=64, description="Texts per inference batch."
    )
    embedding_batch_tokens: Annotated[int, Field(ge=256, le=1_048_576)] = Field(
        default=1024, description="Padded tokens per inference batch: bounds the model's memory."
    )
    embedding_max_tokens: Annotated[int, Field(ge=16, le=8192)] | None = Field(
        default=None, description="Override of the model's maximum sequence length."
    )
    multilingual_model: str = Field(
        default=MULTILINGUAL_MODEL,
        description="A second vector for questions in a language RAG_SEARCH_MODEL_LANGUAGES"
        " does not list: use-multilingual-v3, multilingual-e5-small-q4 (the `multilingual`"
        " extra) or none. Changing it re-embeds on the next ingest.",
    )

    workers: Annotated[int, Field(ge=1, le=256)] | None = Field(
        default=None,
        description="Worker processes converting, sanitizing and chunking (default: CPU count,"
        " max 8).",
    )
    chunk_target_tokens: Annotated[int, Field(ge=16, le=8192)] = Field(
        default=200,
        description="Chunk size aimed at, in the model's tokens (never above its maximum).",
    )
    chunk_overlap_sentences: Annotated[int, Field(ge=0, le=10)] = Field(
        default=1, description="Sentences repeated at the start of the next chunk of a section."
    )

    files_max_bytes: Annotated[int, Field(ge=1)] = Field(
        default=5 * 1024 * 1024, description="Larger files are recorded as failed, not read."
    )
    # Cost caps per document (issue 14): past them the document fails with the reason.
    max_chunks_per_document: Annotated[int, Field(ge=1)] = Field(
        default=2000, description="A document needing more chunks fails alone."
    )
    max_chunk_chars: Annotated[int, Field(ge=256)] = Field(
        default=6000, description="Characters per chunk at most (a huge 'word' is cut too)."
    )
    max_convert_seconds: Annotated[float, Field(gt=0)] = Field(
        default=30.0,
        description="A document whose conversion or chunking takes longer fails alone.",
    )
    files_folders: str = Field(
        default="demo",
        description="Folders the files sensor watches, separated by ':' ('demo' = bundled corpus).",
    )

    @field_validator("multilingual_model")
    @classmethod
    def _known_multilingual_model(cls, value: str) -> str:
        if value not in MULTILINGUAL_CHOICES:
            raise ValueError(f"must be one of {', '.join(MULTILINGUAL_CHOICES)}")
        return value

    @property
    def second_vector_model(self) -> str | None:
        """The multilingual model of the second vector, or None (off, or the model itself)."""
        if self.multilingual_model in ("none", self.embedding_model):
            return None
        return self.multilingual_model

    @field_validator("vectordb_url")
    @classmethod
    def _url_is_postgres(cls, value: str | None) -> str | None:
        if value and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must start with postgresql://")
        return value or None

    @property
    def files_folder_list(self) -> list[str]:
        """The configured folders, in order, without empty entries or repeats."""
        return list(dict.fromkeys(p.strip() for p in self.files_folders.split(":") if p.strip()))

    @property
    def effective_workers(self) -> int:
        """Processes for CPU-bound per-document stages."""
        return self.workers or min(os.cpu_count() or 1, 8)

    @property
    def uses_embedded_database(self) -> bool:
        """True when no external vector database is configured."""
        return self.vectordb_url is None and self.vectordb_pg_host is None

    @cached_property
    def external_conninfo(self) -> str | None:
        """The connection URL of the configured external database, if any."""
        if self.vectordb_url:
            return self.vectordb_url
        if self.vectordb_pg_host is None:
            return None
        auth = quote(self.vectordb_pg_user, safe="")
        if self.vectordb_pg_password:
            auth += ":" + quote(self.vectordb_pg_password, safe="")
        return (
            f"postgresql://{auth}@{self.vectordb_pg_host}:{self.vectordb_pg_port}/"
            f"{quote(self.vectordb_pg_name, safe='')}"
        )
