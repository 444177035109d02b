"""`rag validate`: is this installation ready to ingest and search? One verdict per check.

Connectivity to the vector database, the iDempiere database and the wiki; the schema
version; the model's checksum and the model stored with the vectors; the extensions; code
(functions, views, triggers...) the schema does not create. Each check is independent: a
failing one never hides the next. No Dagster here.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import psycopg

from rag_pipeline.settings import Settings

# pgvector below 0.7 lacks the HNSW features the index uses.
MIN_PGVECTOR = (0, 7)
_TIMEOUT = 10.0


@dataclass(frozen=True)
class CheckResult:
    """One check: its name, whether it passed, what was found (or what to fix)."""

    name: str
    passed: bool
    detail: str


def validate(settings: Settings) -> list[CheckResult]:
    """Run every check; never raises."""
    return list(_run_all(settings))


def _run_all(settings: Settings) -> Iterator[CheckResult]:
    checks: list[tuple[str, Callable[[Settings], str]]] = [
        ("vector database", _vector_database),
        ("schema version", _schema_version),
        ("extensions", _extensions),
        ("foreign code", _foreign_code),
        ("model checksum", _model_checksum),
        ("multilingual model", _second_model_checksum),
        ("stored model", _stored_model),
        ("iDempiere database", _idempiere_database),
        ("wiki", _wiki),
    ]
    database_down = False
    failures: dict[str, str] = {}  # message -> the check that said it first
    for name, check in checks:
        if database_down and name in _NEED_THE_DATABASE:
            # The cause is said once, by the vector database check.
            yield CheckResult(name, False, "not checked: the vector database is unavailable")
            continue
        try:
            yield CheckResult(name, True, check(settings))
        except Exception as exc:  # a verdict per check, whatever went wrong
            database_down = database_down or name == "vector database"
            message = _one_line(exc)
            first = failures.setdefault(message, name)
            yield CheckResult(name, False, message if first == name else f"as {first} (above)")


_NEED_THE_DATABASE = frozenset({"schema version", "extensions", "stored model"})


class CheckFailedError(RuntimeError):
    """A check found something wrong; the message says what to fix."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, CheckFailedError) else f"{type(exc).__name__}: {text}"


def _conninfo(settings: Settings) -> str:
    from rag_pipeline.store.server import resolve_conninfo

    return resolve_conninfo(settings)


def _location(settings: Settings) -> str:
    if settings.uses_embedded_database:
        return f"embedded PostgreSQL in {settings.home / 'pgdata'}"
    conninfo = settings.external_conninfo or ""
    return conninfo.split("@")[-1] if "@" in conninfo else conninfo  # never a password


def _vector_database(settings: Settings) -> str:
    from rag_pipeline.store.reports import server_version

    with psycopg.connect(_conninfo(settings), connect_timeout=int(_TIMEOUT)) as conn:
        return f"{_location(settings)} (PostgreSQL {server_version(conn)})"


def _schema_version(settings: Settings) -> str:
    from rag_pipeline.store.migrations import available_migrations, schema_version

    latest = available_migrations()[-1].version
    with psycopg.connect(_conninfo(settings)) as conn:
        version = schema_version(conn)
    if version != latest:
        raise CheckFailedError(
            f"schema version {version}, this release needs {latest}: run `rag init`"
        )
    return f"{version} (current)"


def _extensions(settings: Settings) -> str:
    from rag_pipeline.store.reports import extension_versions

    with psycopg.connect(_conninfo(settings)) as conn:
        versions = extension_versions(conn)
    listed = ", ".join(f"{name} {version}" for name, version in versions.items())
    vector = versions.get("vector")
    if vector is None:
        raise CheckFailedError(
            f"pgvector is not installed in the database ({listed}): run `rag init`"
        )
    if tuple(int(part) for part in vector.split(".")[:2]) < MIN_PGVECTOR:
        raise CheckFailedError(f"pgvector {vector} is older than 0.7 ({listed})")
    return listed


def _foreign_code(settings: Settings) -> str:
    """No function, view, trigger, rule, event trigger or policy but the schema's own.

    Such code (left by a crafted dump, or added by hand) runs whenever the database is used,
    with the rights of whoever uses it. The schema's own is read from a scratch database
    migrated to the same version.
    """
    from rag_pipeline.store.backup import scratch_database
    from rag_pipeline.store.migrations import schema_version
    from rag_pipeline.store.schema_objects import code_objects, foreign_code, migrate_stepwise

    conninfo = _conninfo(settings)
    with psycopg.connect(conninfo) as conn:
        version = schema_version(conn)
        have = code_objects(conn)
    with scratch_database(conninfo) as scratch, psycopg.connect(scratch, autocommit=True) as conn:
        if version:
            migrate_stepwise(conn, version)
        own = code_objects(conn)
    foreign = foreign_code(have, own)
    if foreign:
        raise CheckFailedError(
            f"the database holds code the rag schema does not create: {', '.join(foreign)}; "
            "it runs with the rights of whoever uses the database: drop it (or restore a "
            "clean backup)"
        )
    return f"only the schema's own ({len(have)} functions, triggers and the like)"


def _model_checksum(settings: Settings) -> str:
    from rag_pipeline.core.embedding import (
        BUNDLED_MODEL_ID,
        BUNDLED_ONNX_SHA256,
        bundled_onnx_path,
        verify_sha256,
    )

    if settings.embedding_model_path is not None:
        return f"local model folder {settings.embedding_model_path} (no published checksum)"
    from rag_pipeline.core.multilingual_embedding import MULTILINGUAL_MODELS

    packaged = MULTILINGUAL_MODELS.get(settings.embedding_model)
    if packaged is not None:
        packaged.verified_files(packaged.load_module())
        return (
            f"{packaged.model_id} ({packaged.distribution} {packaged.version}) "
            f"sha256 of {len(packaged.files)} weight files verified"
        )
    if settings.embedding_model != BUNDLED_MODEL_ID:
        return f"{settings.embedding_model} (fastembed verifies its own download)"
    verify_sha256(bundled_onnx_path(), BUNDLED_ONNX_SHA256)
    return f"{BUNDLED_MODEL_ID} sha256 {BUNDLED_ONNX_SHA256[:16]}… verified"


def _second_model_checksum(settings: Settings) -> str:
    from rag_pipeline.core.embedding import EmbeddingModelError
    from rag_pipeline.core.multilingual_embedding import MULTILINGUAL_MODELS

    name = settings.second_vector_model
    if name is None:
        return f"off (RAG_MULTILINGUAL_MODEL={settings.multilingual_model})"
    packaged = MULTILINGUAL_MODELS[name]
    try:
        packaged.verified_files(packaged.load_module())
    except EmbeddingModelError as exc:
        raise CheckFailedError(f"RAG_MULTILINGUAL_MODEL={name}: {exc}") from exc
    return (
        f"{name} ({packaged.distribution} {packaged.version}) sha256 of "
        f"{len(packaged.files)} weight files verified"
    )


def _stored_model(settings: Settings) -> str:
    from rag_pipeline.store.migrations import stored_model

    with psycopg.connect(_conninfo(settings)) as conn:
        stored = stored_model(conn)
    configured = settings.embedding_model
    if stored is None:
        return f"no vectors yet (configured: {configured})"
    if settings.embedding_model_path is not None:
        # A local folder's id carries a fingerprint of its files; `rag init` compares it.
        return f"{stored[0]} ({stored[1]} dimensions); local model folder configured"
    if stored[0] != configured:
        raise CheckFailedError(
            f"the index holds {stored[0]} vectors, the configured model is {configured}: "
            "run `rag ingest --force` to re-embed, or configure the stored model"
        )
    return f"{stored[0]} ({stored[1]} dimensions) = the configured model"


def _idempiere_database(settings: Settings) -> str:
    from rag_pipeline.sources.idempiere.ad_queries import TRL_TABLES
    from rag_pipeline.sources.idempiere.connection import (
        configured_conninfo,
        read_only,
        resolve_idempiere_conninfo,
    )
    from rag_pipeline.sources.idempiere.languages import resolve_languages
    from rag_pipeline.store.reports import server_version, table_exists

    configured = configured_conninfo(settings)
    conninfo = resolve_idempiere_conninfo(settings)
    with read_only(conninfo) as conn:
        version = server_version(conn)
        missing = [t for t in ("AD_Table", "AD_Window", "K_Entry") if not table_exists(conn, t)]
        # What RAG_LANGUAGES (`all` by default) comes to in this database's dictionary.
        languages = [] if missing else resolve_languages(conn, settings.language_list, TRL_TABLES)
    if missing:
        raise CheckFailedError(f"tables missing in the iDempiere database: {', '.join(missing)}")
    where = (
        f"{settings.idempiere_db_host}/{settings.idempiere_db_name}"
        if configured
        else "the demo database (IDEMPIERE_DB_HOST unset)"
    )
    return (
        f"{where} (PostgreSQL {version}, AD_Table, AD_Window, K_Entry readable; "
        f"languages {', '.join(languages)})"
    )


def _wiki(settings: Settings) -> str:
    if not settings.wiki_api_url:
        return "the bundled demo export (RAG_WIKI_API_URL unset: offline)"
    response = httpx.get(
        settings.wiki_api_url,
        params={"action": "query", "meta": "siteinfo", "siprop": "general", "format": "json"},
        headers={"User-Agent": settings.wiki_user_agent},
        timeout=_TIMEOUT,
        follow_redirects=True,
    )
    response.raise_for_status()
    general = response.json().get("query", {}).get("general")
    if not isinstance(general, dict):
        raise CheckFailedError(f"{settings.wiki_api_url} did not answer like a MediaWiki api.php")
    return f"{settings.wiki_api_url}: {general.get('sitename')} ({general.get('generator')})"
