"""The embedded server's WAL budget: a large index write does not checkpoint every few seconds."""

import psycopg

from rag_pipeline.store.server_files import WAL_BUDGET


def test_the_embedded_server_runs_with_a_4_gb_wal_budget(pg_admin_uri: str) -> None:
    assert WAL_BUDGET == "max_wal_size = 4GB\n"
    with psycopg.connect(pg_admin_uri) as conn:
        row = conn.execute("SELECT pg_size_bytes(current_setting('max_wal_size'))").fetchone()
    assert row == (4 * 2**30,)
