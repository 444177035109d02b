"""Configuration fails fast and names the setting to fix."""

from pathlib import Path

import pytest

from rag_pipeline.settings import BUNDLED_MODEL, ConfigError, load_settings


def test_defaults_use_embedded_database_and_bundled_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("RAG_VECTORDB_URL", "RAG_VECTORDB_PG_HOST", "RAG_EMBEDDING_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAG_HOME", str(tmp_path))
    settings = load_settings()
    assert settings.uses_embedded_database
    assert settings.external_conninfo is None
    assert settings.embedding_model == BUNDLED_MODEL
    assert settings.home == tmp_path


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("RAG_VECTORDB_PG_PORT", "not-a-port"),
        ("RAG_VECTORDB_PG_PORT", "70000"),
        ("RAG_VECTORDB_URL", "mysql://localhost/rag"),
        ("RAG_EMBEDDING_BATCH_SIZE", "0"),
        ("RAG_CHUNK_TARGET_TOKENS", "-5"),
        ("RAG_SEARCH_VOCABULARY_WEIGHT", "1.5"),
        # Digits that str.isdigit() accepts but no id is written in (issue 38, item 13).
        ("RAG_KENTRY_CLIENT_IDS", "²"),
        ("RAG_KENTRY_CLIENT_IDS", "11,١٢"),
        ("RAG_WIKI_NAMESPACES", "0,²"),
        ("RAG_WIKI_NAMESPACES", "-"),
        ("RAG_VECTORDB_PG_PORT", "５４３２"),
        ("RAG_WIKI_MAX_BYTES", "0"),
        ("RAG_WIKI_MAX_LISTING_REQUESTS", "0"),
        ("RAG_WIKI_LISTING_TIMEOUT_SECONDS", "-1"),
        ("RAG_LLM_DEADLINE_SECONDS", "0"),
        ("RAG_HISTORY_VERSIONS", "-1"),
        ("RAG_DAGSTER_UI_URL", "127.0.0.1:3000"),
    ],
)
def test_invalid_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=variable):
        load_settings()


def test_integer_lists_keep_ascii_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_KENTRY_CLIENT_IDS", " 1000014 , 11,11")
    monkeypatch.setenv("RAG_WIKI_NAMESPACES", "0,-1,4")
    settings = load_settings()
    assert settings.kentry_client_id_list == [1000014, 11]
    assert settings.wiki_namespaces == "0,-1,4"


@pytest.mark.parametrize("variable", ["RAG_EMBEDDING_MODEL_PATH", "RAG_SEARCH_VOCABULARY_DIR"])
def test_a_missing_folder_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str
) -> None:
    monkeypatch.setenv(variable, str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match=f"{variable}: .*nope is not a folder"):
        load_settings()


def test_parts_build_a_url_with_quoted_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAG_VECTORDB_URL", raising=False)
    monkeypatch.setenv("RAG_VECTORDB_PG_HOST", "db.local")
    monkeypatch.setenv("RAG_VECTORDB_PG_PORT", "6543")
    monkeypatch.setenv("RAG_VECTORDB_PG_USER", "rag")
    monkeypatch.setenv("RAG_VECTORDB_PG_PASSWORD", "p@ss:w/rd")
    settings = load_settings()
    assert not settings.uses_embedded_database
    assert settings.external_conninfo == "postgresql://rag:p%40ss%3Aw%2Frd@db.local:6543/rag"
