"""iDempiere settings, the read-only connection, the demo database and a second server."""

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from rag_pipeline.core.source import DocumentRef
from rag_pipeline.settings import ConfigError, load_settings
from rag_pipeline.sources.idempiere.ad import ADSource
from rag_pipeline.sources.idempiere.connection import (
    connect_read_only,
    read_only_conninfo,
    resolve_idempiere_conninfo,
)
from rag_pipeline.sources.idempiere.demo_db import (
    DEMO_DATABASE,
    admin_conninfo,
    demo_fingerprint,
    demo_folder,
    ensure_demo_database,
    ensure_demo_database_on,
    load_demo_content,
)
from rag_pipeline.sources.idempiere.k_entry import KEntrySource

# The machine's own PostgreSQL (not the embedded one): a second, independent server.
LOCAL_SERVER = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("IDEMPIERE_DB_PORT", "not-a-port"),
        ("IDEMPIERE_DB_PORT", "0"),
        ("RAG_LANGUAGES", "english"),
        ("RAG_LANGUAGES", "en_US,es"),
        ("RAG_KENTRY_CLIENT_IDS", "11,abc"),
        ("RAG_KENTRY_CLIENT_IDS", ""),
    ],
)
def test_invalid_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=f"{variable}:"):
        load_settings()


def test_idempiere_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("IDEMPIERE_DB_HOST", "RAG_LANGUAGES", "RAG_KENTRY_CLIENT_IDS"):
        monkeypatch.delenv(name, raising=False)
    defaults = load_settings()
    assert defaults.idempiere_conninfo is None
    # Every language the database has translations in, unless narrowed.
    assert defaults.language_list == ["all"]
    assert defaults.kentry_client_id_list == [1000014, 11]
    monkeypatch.setenv("IDEMPIERE_DB_HOST", "erp.local")
    monkeypatch.setenv("IDEMPIERE_DB_PORT", "5433")
    monkeypatch.setenv("IDEMPIERE_DB_USER", "reader")
    monkeypatch.setenv("IDEMPIERE_DB_PASSWORD", "s3:cr@t")
    monkeypatch.setenv("RAG_LANGUAGES", " en_US , es_CO,en_US")
    monkeypatch.setenv("RAG_KENTRY_CLIENT_IDS", "1000014")
    configured = load_settings()
    assert (
        configured.idempiere_conninfo == "postgresql://reader:s3%3Acr%40t@erp.local:5433/idempiere"
    )
    assert configured.language_list == ["en_US", "es_CO"]
    assert configured.kentry_client_id_list == [1000014]
    assert load_settings(languages="en_US").language_list == ["en_US"]


def test_read_only_option_is_merged_into_existing_options() -> None:
    info = read_only_conninfo("host=h dbname=d options='-c search_path=adempiere'")
    assert "search_path=adempiere" in info
    assert "default_transaction_read_only=on" in info


def test_a_write_through_the_source_connection_is_refused(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        load_demo_content(conn)
    with connect_read_only(database_url) as conn:
        assert conn.execute("SHOW default_transaction_read_only").fetchone() == ("on",)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("UPDATE ad_window SET name = 'x' WHERE ad_window_id = 123")
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("CREATE TABLE sneaky (x int)")
    source = ADSource(database_url)
    try:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            source.conn.execute("DELETE FROM k_entry")
    finally:
        source.close()
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM k_entry").fetchone() == (14,)


def test_demo_database_is_created_once_and_concurrently_safe(pg_admin_uri: str) -> None:
    name = f"idem_demo_{uuid.uuid4().hex[:8]}"
    try:
        with ThreadPoolExecutor(3) as pool:
            urls = set(pool.map(lambda _: ensure_demo_database_on(pg_admin_uri, name), range(3)))
        (url,) = urls
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM k_entry").fetchone() == (14,)
            conn.execute("CREATE TABLE marker_of_this_load (x int)")
        # Loaded and marked: a second call leaves it alone.
        assert ensure_demo_database_on(pg_admin_uri, name) == url
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT to_regclass('marker_of_this_load')").fetchone() != (None,)
    finally:
        _drop(pg_admin_uri, name)


def test_a_half_loaded_demo_database_is_replaced(pg_admin_uri: str) -> None:
    name = f"idem_demo_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(pg_admin_uri, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            admin.execute(
                sql.SQL("COMMENT ON DATABASE {} IS 'rag_pipeline idempiere demo old'").format(
                    sql.Identifier(name)
                )
            )
        url = ensure_demo_database_on(pg_admin_uri, name)
        with psycopg.connect(admin_conninfo(url)) as admin:
            comment = admin.execute(
                "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                (name,),
            ).fetchone()
        assert comment == (demo_fingerprint(),)
    finally:
        _drop(pg_admin_uri, name)


def test_demo_is_the_default_and_ships_in_the_package(
    monkeypatch: pytest.MonkeyPatch, rag_env: object
) -> None:
    monkeypatch.delenv("IDEMPIERE_DB_HOST", raising=False)
    settings = load_settings()
    url = resolve_idempiere_conninfo(settings)
    assert f"dbname={DEMO_DATABASE}" in url
    assert url == ensure_demo_database(settings)
    folder = demo_folder()
    assert folder.is_relative_to(Path(__file__).resolve().parents[1] / "rag_pipeline")
    for name in ("schema.sql", "ad_rows_from_migrations.sql", "knowledge_base.yaml", "README.md"):
        assert (folder / name).is_file()


def _drop(admin_uri: str, name: str) -> None:
    with psycopg.connect(admin_conninfo(admin_uri), autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture
def second_server() -> Iterator[str]:
    """A database on the machine's PostgreSQL (127.0.0.1:5432), loaded with the demo content."""
    try:
        with psycopg.connect(LOCAL_SERVER, autocommit=True) as admin:
            admin.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL on 127.0.0.1:5432 (user postgres, trust auth): {exc}")
    name = f"idem_second_{uuid.uuid4().hex[:8]}"
    url = ensure_demo_database_on(LOCAL_SERVER, name)
    yield url
    _drop(LOCAL_SERVER, name)


def test_sources_read_a_second_server_independent_of_the_vector_store(
    monkeypatch: pytest.MonkeyPatch, rag_env: object, second_server: str, pg_admin_uri: str
) -> None:
    params = conninfo_to_dict(second_server)
    monkeypatch.setenv("IDEMPIERE_DB_HOST", str(params["host"]))
    monkeypatch.setenv("IDEMPIERE_DB_PORT", str(params["port"]))
    monkeypatch.setenv("IDEMPIERE_DB_NAME", str(params["dbname"]))
    monkeypatch.setenv("IDEMPIERE_DB_USER", str(params["user"]))
    monkeypatch.setenv("RAG_LANGUAGES", "all")
    settings = load_settings()
    url = resolve_idempiere_conninfo(settings)
    assert conninfo_to_dict(url)["port"] == "5432"
    with psycopg.connect(url) as conn:
        server = conn.execute("SHOW server_version_num").fetchone()
    with psycopg.connect(pg_admin_uri) as conn:
        vector_server = conn.execute("SHOW server_version_num").fetchone()
    assert server != vector_server  # PostgreSQL 15 here, the embedded 18 for the vectors

    k_entry = KEntrySource.from_settings(settings, url)
    ad = ADSource.from_settings(settings, url)
    try:
        assert k_entry.partition_keys() == ["en_US", "es_CO"]
        entries = [r for r in k_entry.list_documents("es_CO") if isinstance(r, DocumentRef)]
        assert len(list(k_entry.fetch(entries))) == 9
        windows = [r for r in ad.list_documents("window|en_US") if isinstance(r, DocumentRef)]
        assert any(r.source_id == "AD_Window:123" for r in windows)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            ad.conn.execute("UPDATE ad_window SET name = 'x'")
    finally:
        k_entry.close()
        ad.close()
