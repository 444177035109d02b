"""Numbered schema migrations (`mNNN_name.sql`) and the embedding model's place in the schema.

Migrations run in order under a transaction-level advisory lock, so two processes starting at
once apply each one exactly once, and an existing database upgrades to the newest schema.
"""

import re
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg import sql

# Any constant works: it only has to be the same in every process that migrates.
_MIGRATION_LOCK = 7_390_420_113
_NAME = re.compile(r"^m(\d{3})_(\w+)\.sql$")


class ModelMismatchError(RuntimeError):
    """The database holds vectors of another embedding model than the configured one."""


@dataclass(frozen=True)
class Migration:
    """One numbered schema change."""

    version: int
    name: str
    sql: str


def available_migrations() -> list[Migration]:
    """The migrations shipped with the package, in order."""
    found = []
    for entry in resources.files(__name__).iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda migration: migration.version)


def migrate(conn: psycopg.Connection) -> list[int]:
    """Apply every migration the database lacks; return the versions applied now."""
    applied_now: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute("CREATE SCHEMA IF NOT EXISTS rag")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS rag.schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {row[0] for row in conn.execute("SELECT version FROM rag.schema_migrations")}
        for migration in available_migrations():
            if migration.version in done:
                continue
            conn.execute(migration.sql.encode())
            conn.execute(
                "INSERT INTO rag.schema_migrations (version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
            applied_now.append(migration.version)
    return applied_now


def schema_version(conn: psycopg.Connection) -> int:
    """The newest applied migration, 0 for an empty database."""
    exists = conn.execute("SELECT to_regclass('rag.schema_migrations')").fetchone()
    if exists is None or exists[0] is None:
        return 0
    row = conn.execute("SELECT max(version) FROM rag.schema_migrations").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def stored_model(conn: psycopg.Connection) -> tuple[str, int] | None:
    """The model id and dimension the stored vectors were made with, if any."""
    return _stored(conn, "")


def _stored(conn: psycopg.Connection, prefix: str) -> tuple[str, int] | None:
    """`(model id, dimension)` under rag.store_info's `<prefix>model_id` and `<prefix>dimension`."""
    model, dimension = f"{prefix}model_id", f"{prefix}dimension"
    rows = dict(
        conn.execute(
            "SELECT key, value FROM rag.store_info WHERE key IN (%s, %s)", (model, dimension)
        ).fetchall()
    )
    if model not in rows:
        return None
    return rows[model], int(rows[dimension])


def _bind_column(
    conn: psycopg.Connection, column: str, prefix: str, model_id: str, dimension: int
) -> None:
    """Type a vector column for `dimension`, (re)build its HNSW index `chunks_<column>_hnsw`
    and record the model under `<prefix>model_id` / `<prefix>dimension`."""
    index = sql.Identifier(f"chunks_{column}_hnsw")
    conn.execute(sql.SQL("DROP INDEX IF EXISTS rag.{}").format(index))
    # A type modifier cannot be a bind parameter; Literal renders the integer safely.
    conn.execute(
        sql.SQL("ALTER TABLE rag.chunks ALTER COLUMN {} TYPE vector({})").format(
            sql.Identifier(column), sql.Literal(int(dimension))
        )
    )
    conn.execute(
        sql.SQL("CREATE INDEX {} ON rag.chunks USING hnsw ({} vector_cosine_ops)").format(
            index, sql.Identifier(column)
        )
    )
    conn.execute(
        "INSERT INTO rag.store_info (key, value) VALUES (%s, %s), (%s, %s)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (f"{prefix}model_id", model_id, f"{prefix}dimension", str(dimension)),
    )


def check_stored_model(conn: psycopg.Connection, model_id: str) -> None:
    """Refuse to compare a query's vector with vectors another model made.

    Two models of the same dimension (MiniLM and multilingual e5: 384) would otherwise search
    each other's vectors without an error, and return noise.
    """
    current = stored_model(conn)
    if current is None or current[0] == model_id:
        return
    has_chunks = conn.execute("SELECT EXISTS (SELECT 1 FROM rag.chunks)").fetchone()
    if has_chunks and has_chunks[0]:
        raise ModelMismatchError(
            f"the index holds vectors of model {current[0]!r}, but RAG_EMBEDDING_MODEL is "
            f"{model_id!r}: run `rag ingest --force` to re-embed everything with it, or set "
            "RAG_EMBEDDING_MODEL back"
        )


def ensure_model(conn: psycopg.Connection, model_id: str, dimension: int, *, force: bool) -> None:
    """Bind the store to one embedding model: type the vector column and build its HNSW index.

    A different model with vectors already stored is an error unless `force`, which drops every
    chunk (documents are re-embedded by the next run) and re-types the column.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        current = stored_model(conn)
        if current == (model_id, dimension):
            return
        if current is not None:
            has_chunks = conn.execute("SELECT EXISTS (SELECT 1 FROM rag.chunks)").fetchone()
            if has_chunks and has_chunks[0] and not force:
                raise ModelMismatchError(
                    f"the vector database holds {current[1]}-dimensional vectors of model "
                    f"{current[0]!r}, but RAG_EMBEDDING_MODEL is {model_id!r} ({dimension} "
                    "dimensions); run `rag ingest --force` to re-embed everything with the new "
                    "model, or set RAG_EMBEDDING_MODEL back"
                )
            # Documents without chunks would look unchanged to the next run: drop them too.
            conn.execute("DELETE FROM rag.documents")
        _bind_column(conn, "embedding", "", model_id, dimension)


def stored_second_model(conn: psycopg.Connection) -> tuple[str, int] | None:
    """The model id and dimension of the stored second (multilingual) vectors, if any."""
    return _stored(conn, "ml_")


def ensure_second_model(conn: psycopg.Connection, model_id: str, dimension: int) -> None:
    """Bind the second vector column to the multilingual model: its type and HNSW index.

    Another model's second vectors are dropped (set NULL): the next run re-embeds them, since
    the model is part of the embeddings stage's fingerprint, and search leaves the leg unused
    until then (`stored_second_model` names another model).
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        if stored_second_model(conn) == (model_id, dimension):
            return
        # The index goes before the update, which would otherwise maintain it row by row.
        conn.execute("DROP INDEX IF EXISTS rag.chunks_embedding_ml_hnsw")
        conn.execute("UPDATE rag.chunks SET embedding_ml = NULL WHERE embedding_ml IS NOT NULL")
        _bind_column(conn, "embedding_ml", "ml_", model_id, dimension)
