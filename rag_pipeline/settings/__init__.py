"""One typed place for configuration: environment variables, validated, read when asked.

Nothing here reads the environment at import time: `load_settings()` is called when a command
or a resource starts, so a changed variable is seen by the next run, not frozen at code load.

The fields are declared by group in this package's modules (index, sources, search,
operations); `Settings` combines the groups, and this module is the one to import from.
"""

from pathlib import Path
from typing import Any

from pydantic import ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from rag_pipeline.settings.index import BUNDLED_MODEL, IndexSettings
from rag_pipeline.settings.operations import OperationsSettings
from rag_pipeline.settings.parsers import parse_entity_weights, parse_freshness_hours
from rag_pipeline.settings.quality import QualitySettings
from rag_pipeline.settings.search import AnswerSettings, SearchLimitSettings, SearchSettings
from rag_pipeline.settings.sources import SourceSettings
from rag_pipeline.settings.trust import ROUTING_FIELDS, dotenv_is_trusted

__all__ = [
    "BUNDLED_MODEL",
    "ConfigError",
    "Settings",
    "load_settings",
    "parse_entity_weights",
    "parse_freshness_hours",
]


class ConfigError(ValueError):
    """Invalid configuration; the message names the environment variable to fix."""


# Pydantic orders the fields base by base from the end of the MRO, so the groups are listed
# last first: the README's settings table (operations/settings_doc.py) follows that order.
# Each group is a BaseSettings of its own so that every base declares `model_config` alike.
class Settings(
    QualitySettings,
    SearchLimitSettings,
    OperationsSettings,
    SearchSettings,
    SourceSettings,
    AnswerSettings,
    IndexSettings,
):
    """Every setting of rag_pipeline, from `RAG_*` environment variables (or a `.env` file)."""

    model_config = SettingsConfigDict(
        env_prefix="RAG_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            _OwnDotEnv(settings_cls, dotenv_settings),
            file_secret_settings,
        )

    @model_validator(mode="after")
    def _folders_exist(self) -> "Settings":
        for variable, folder in (
            ("RAG_EMBEDDING_MODEL_PATH", self.embedding_model_path),
            ("RAG_SEARCH_VOCABULARY_DIR", self.search_vocabulary_dir),
        ):
            if folder is not None and not folder.is_dir():
                raise ValueError(f"{variable}: {folder} is not a folder")
        return self


class _OwnDotEnv(PydanticBaseSettingsSource):
    """The `.env` source, without the values that route secrets (`ROUTING_FIELDS`) unless the
    file is the user's own and others cannot write it (see `settings/trust.py`)."""

    def __init__(self, settings_cls: type[BaseSettings], inner: PydanticBaseSettingsSource):
        super().__init__(settings_cls)
        self._inner = inner

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._inner.get_field_value(field, field_name)

    def __call__(self) -> dict[str, Any]:
        values = self._inner()
        if dotenv_is_trusted(Path(".env")):
            return values
        return {key: value for key, value in values.items() if key.lower() not in ROUTING_FIELDS}


def load_settings(**overrides: object) -> Settings:
    """Read and validate the settings, failing fast with the names of the bad variables."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            name = "_".join(str(part) for part in error["loc"]) or "settings"
            # Fields read through an alias (IDEMPIERE_DB_*, ANTHROPIC_API_KEY) report it as is.
            variable = name if name.isupper() else f"RAG_{name.upper()}"
            problems.append(f"{variable}: {error['msg']}")
        raise ConfigError("invalid configuration: " + "; ".join(problems)) from None
