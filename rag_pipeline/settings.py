"""One typed place for configuration: environment variables, validated, read when asked.

Nothing here reads the environment at import time: `load_settings()` is called when a command
or a resource starts, so a changed variable is seen by the next run, not frozen at code load.
"""

import os
from functools import cached_property
from pathlib import Path
from typing import Annotated
from urllib.parse import quote

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

BUNDLED_MODEL = "all-MiniLM-L6-v2-int8"


class ConfigError(ValueError):
    """Invalid configuration; the message names the environment variable to fix."""


class Settings(BaseSettings):
    """Every setting of rag_pipeline, from `RAG_*` environment variables (or a `.env` file)."""

    model_config = SettingsConfigDict(
        env_prefix="RAG_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    home: Path = Field(
        default_factory=lambda: Path.home() / ".rag_pipeline",
        description="Where the embedded database, model links and Dagster state live.",
    )
    vectordb_url: str | None = Field(
        default=None, description="postgresql:// URL of an external PostgreSQL with pgvector."
    )
    vectordb_pg_host: str | None = None
    vectordb_pg_port: Annotated[int, Field(ge=1, le=65535)] = 5432
    vectordb_pg_name: str = "rag"
    vectordb_pg_user: str = "postgres"
    vectordb_pg_password: str | None = None

    embedding_model: str = Field(
        default=BUNDLED_MODEL,
        description="The bundled model, any fastembed model name, or a name for a local folder.",
    )
    embedding_model_path: Path | None = Field(
        default=None, description="A local folder with model.onnx and tokenizer files."
    )
    embedding_allow_download: bool = Field(
        default=False, description="Let fastembed fetch a named model it does not have yet."
    )
    embedding_threads: Annotated[int, Field(ge=1, le=256)] | None = None
    embedding_batch_size: Annotated[int, Field(ge=1, le=4096)] = 64
    embedding_max_tokens: Annotated[int, Field(ge=16, le=8192)] | None = Field(
        default=None, description="Override of the model's maximum sequence length."
    )

    workers: Annotated[int, Field(ge=1, le=256)] | None = Field(
        default=None, description="Processes for format conversion (default: CPU count, max 8)."
    )
    chunk_target_tokens: Annotated[int, Field(ge=16, le=8192)] = 200
    chunk_overlap_sentences: Annotated[int, Field(ge=0, le=10)] = 1

    files_max_bytes: Annotated[int, Field(ge=1)] = 5 * 1024 * 1024
    files_folders: str = Field(
        default="demo",
        description="Folders the files sensor watches, separated by ':' ('demo' = bundled corpus).",
    )

    @property
    def files_folder_list(self) -> list[str]:
        """The configured folders, in order, without empty entries or repeats."""
        return list(dict.fromkeys(p.strip() for p in self.files_folders.split(":") if p.strip()))

    @field_validator("vectordb_url")
    @classmethod
    def _url_is_postgres(cls, value: str | None) -> str | None:
        if value and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must start with postgresql://")
        return value or None

    @model_validator(mode="after")
    def _model_path_exists(self) -> "Settings":
        if self.embedding_model_path is not None and not self.embedding_model_path.is_dir():
            raise ValueError(
                f"RAG_EMBEDDING_MODEL_PATH: {self.embedding_model_path} is not a folder"
            )
        return self

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


def load_settings(**overrides: object) -> Settings:
    """Read and validate the settings, failing fast with the names of the bad variables."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            name = "_".join(str(part) for part in error["loc"]) or "settings"
            variable = name if name.startswith("RAG_") else f"RAG_{name.upper()}"
            problems.append(f"{variable}: {error['msg']}")
        raise ConfigError("invalid configuration: " + "; ".join(problems)) from None
