"""Issue 38, item 1: a crafted dump never runs anything at restore (real pg_dump / pg_restore).

Each crafted dump would run `touch MARKER` as the database server's OS user; the marker is in
the system's temporary folder, where that user can write (a control proves the server can
create it), and must never appear. The data must be as it was.
"""

import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import psycopg
import pytest
from click.testing import CliRunner

from rag_pipeline.cli import main
from rag_pipeline.operations.validation import validate
from rag_pipeline.settings import Settings
from rag_pipeline.store import backup
from rag_pipeline.store.connection import connect
from rag_pipeline.store.dump_loader import loader_login
from rag_pipeline.store.migrations import available_migrations
from rag_pipeline.store.schema_objects import migrate_stepwise
from rag_pipeline_tests.pipeline_helpers import ingest, write

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def indexed(rag_env: Settings, database_url: str, instance: dg.DagsterInstance, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A database holding two ingested documents."""
    write(tmp_path / "kb", "a.md", "# Period control\n\nOpen and close accounting periods.\n")
    write(tmp_path / "kb", "b.md", "# Warehouses\n\nLocators hold the stock of a warehouse.\n")
    ingest(tmp_path / "kb", instance)
    return database_url


@pytest.fixture
def marker(pg_admin_uri: str) -> Iterator[Path]:
    """A path the server's OS user can create, proven by creating it once, then removed."""
    path = Path(tempfile.gettempdir()) / f"rag-crafted-dump-{uuid.uuid4().hex}"
    with psycopg.connect(pg_admin_uri, autocommit=True) as conn:
        # `cat` reads the row it is sent: a program that exits unread (touch) can make the
        # server fail with a broken pipe when the machine is busy.
        conn.execute(f"COPY (SELECT 1) TO PROGRAM 'cat > {path}'")  # type: ignore[arg-type]
    assert path.exists()
    path.unlink()
    yield path
    path.unlink(missing_ok=True)


def _state(conninfo: str) -> list[tuple[str, str]]:
    with connect(conninfo) as conn:
        rows = conn.execute("SELECT id, body FROM rag.documents ORDER BY id").fetchall()
    assert len(rows) == 2
    return [(str(a), str(b)) for a, b in rows]


def _restore(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["restore", "-y", str(path)])
    return result.exit_code, result.output


def _plain(indexed: str, tmp_path: Path) -> list[str]:
    dump = tmp_path / "clean.sql"
    backup.dump(indexed, dump, "plain")
    return dump.read_text(encoding="utf-8").splitlines(keepends=True)


def _restrict_line(lines: list[str]) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith("\\restrict "))


def test_copy_to_program_after_the_restrict_line_is_refused(
    indexed: str, tmp_path: Path, marker: Path
) -> None:
    before = _state(indexed)
    lines = _plain(indexed, tmp_path)
    at = _restrict_line(lines) + 1
    crafted = tmp_path / "evil.sql"
    payload = f"COPY (SELECT 1) TO PROGRAM 'touch {marker}';\n"
    crafted.write_text("".join([*lines[:at], payload, *lines[at:]]), encoding="utf-8")
    code, output = _restore(crafted)
    assert code == 1, output
    assert f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'" in output
    assert "refused before anything was restored" in output
    assert len(output.strip().splitlines()) == 1, output
    assert not marker.exists()
    assert _state(indexed) == before


def test_a_shell_command_before_the_restrict_line_is_refused(
    indexed: str, tmp_path: Path, marker: Path
) -> None:
    before = _state(indexed)
    lines = _plain(indexed, tmp_path)
    at = _restrict_line(lines)
    crafted = tmp_path / "evil.sql"
    crafted.write_text("".join([*lines[:at], f"\\! touch {marker}\n", *lines[at:]]), "utf-8")
    code, output = _restore(crafted)
    assert code == 1, output
    assert "psql meta-command (\\!) before \\restrict" in output
    assert not marker.exists()
    assert _state(indexed) == before


def test_a_meta_command_after_an_early_unrestrict_is_refused(
    indexed: str, tmp_path: Path, marker: Path
) -> None:
    # psql obeys `\unrestrict KEY` wherever it stands; the command after it is on the same
    # line as SQL, where a check of line starts alone would not see it.
    lines = _plain(indexed, tmp_path)
    at = _restrict_line(lines)
    key = lines[at].split()[1]
    payload = [f"\\unrestrict {key}\n", f"SELECT 1 \\! touch {marker}\n"]
    crafted = tmp_path / "evil.sql"
    crafted.write_text("".join([*lines[: at + 1], *payload, *lines[at + 1 :]]), "utf-8")
    code, output = _restore(crafted)
    assert code == 1, output
    assert "more after its \\unrestrict line" in output
    assert not marker.exists()


def test_copy_data_ended_by_a_carriage_return_marker_is_refused(
    indexed: str, tmp_path: Path, marker: Path
) -> None:
    # psql ends COPY data at "\.\r\n" as well; what follows would be SQL to psql.
    lines = _plain(indexed, tmp_path)
    at = next(i for i, line in enumerate(lines) if line.startswith("COPY rag.documents ")) + 1
    payload = ["\\.\r\n", f"COPY (SELECT 1) TO PROGRAM 'touch {marker}';\n"]
    crafted = tmp_path / "evil.sql"
    crafted.write_bytes("".join([*lines[:at], *payload, *lines[at:]]).encode())
    code, output = _restore(crafted)
    assert code == 1, output
    assert "carriage return" in output
    assert not marker.exists()


def test_a_changed_own_function_is_refused(indexed: str, tmp_path: Path) -> None:
    lines = _plain(indexed, tmp_path)
    at = next(i for i, line in enumerate(lines) if "translate(body, '/\\', '  ')" in line)
    lines[at] = lines[at].replace("translate(body, '/\\', '  ')", "body")
    crafted = tmp_path / "changed.sql"
    crafted.write_text("".join(lines), encoding="utf-8")
    code, output = _restore(crafted)
    assert code == 1, output
    assert "FUNCTION rag.keyword_text(body text), changed from the rag schema's own" in output


def _add_evil_objects(conninfo: str, marker: Path) -> None:
    """A function running a program (not in this database: creating them runs nothing here)
    and a materialized view calling it, refreshed by every restore of a dump."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
        assert name
        conn.execute(
            f"""CREATE FUNCTION rag.evil() RETURNS integer LANGUAGE plpgsql AS $$
            BEGIN
                IF current_database() <> '{name[0]}' THEN
                    COPY (SELECT 1) TO PROGRAM 'touch {marker}';
                END IF;
                RETURN 1;
            END $$"""  # type: ignore[arg-type]
        )
        conn.execute("CREATE MATERIALIZED VIEW rag.innocent AS SELECT rag.evil() AS one")
    assert not marker.exists()


def test_a_custom_dump_with_a_program_running_function_is_refused(
    indexed: str, tmp_path: Path, marker: Path
) -> None:
    before = _state(indexed)
    _add_evil_objects(indexed, marker)
    crafted = tmp_path / "evil.dump"
    backup.dump(indexed, crafted, "custom")
    with psycopg.connect(indexed, autocommit=True) as conn:
        conn.execute("DROP MATERIALIZED VIEW rag.innocent")
        conn.execute("DROP FUNCTION rag.evil()")
    code, output = _restore(crafted)
    assert code == 1, output
    assert "the dump holds FUNCTION rag.evil(), which the rag schema does not have" in output
    assert "refused before anything was restored" in output
    assert not marker.exists()
    assert _state(indexed) == before


def test_backup_refuses_its_own_dump_of_a_database_holding_foreign_code(
    indexed: str, rag_env: Settings, tmp_path: Path, marker: Path
) -> None:
    # The objects the issue found staying after a crafted restore: every later backup's
    # check restore ran them again. Now the check restore refuses, and validate names them.
    _add_evil_objects(indexed, marker)
    result = CliRunner().invoke(main, ["backup", str(tmp_path / "kb.dump")])
    assert result.exit_code == 1, result.output
    assert "FUNCTION rag.evil()" in result.output
    assert not marker.exists()
    checks = {check.name: check for check in validate(rag_env)}
    foreign = checks["foreign code"]
    assert not foreign.passed
    assert "FUNCTION rag.evil()" in foreign.detail
    assert "MATERIALIZED VIEW rag.innocent" in foreign.detail


def test_validate_passes_a_clean_database_and_names_a_changed_function(
    indexed: str, rag_env: Settings
) -> None:
    checks = {check.name: check for check in validate(rag_env)}
    assert checks["foreign code"].passed, checks["foreign code"].detail
    with psycopg.connect(indexed, autocommit=True) as conn:
        conn.execute(
            "CREATE OR REPLACE FUNCTION rag.keyword_text(body text) RETURNS text"
            " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT body $$"
        )
        conn.execute(
            "CREATE FUNCTION public.spy() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN END $$"
        )
        conn.execute("CREATE EVENT TRIGGER spy ON ddl_command_end EXECUTE FUNCTION public.spy()")
    try:
        detail = {check.name: check for check in validate(rag_env)}["foreign code"].detail
    finally:
        with psycopg.connect(indexed, autocommit=True) as conn:
            conn.execute("DROP EVENT TRIGGER spy")
    assert "FUNCTION rag.keyword_text(text) (changed from the schema's own)" in detail
    assert "EVENT TRIGGER spy" in detail
    assert "FUNCTION public.spy()" in detail


def test_a_dump_of_another_database_is_refused_before_any_statement(
    pg_admin_uri: str, rag_env: Settings, tmp_path: Path
) -> None:
    for label, ddl in [("empty", None), ("other", "CREATE TABLE public.ledger (id int)")]:
        other = pg_admin_uri.replace("/postgres?", f"/other_{uuid.uuid4().hex[:8]}?")
        name = psycopg.conninfo.conninfo_to_dict(other)["dbname"]
        with psycopg.connect(pg_admin_uri, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
        try:
            if ddl:
                with psycopg.connect(other, autocommit=True) as conn:
                    conn.execute(ddl)  # type: ignore[arg-type]
            dump = tmp_path / f"{label}.sql"
            backup.dump(other, dump, "plain")
        finally:
            with psycopg.connect(pg_admin_uri, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')  # type: ignore[arg-type]
        code, output = _restore(dump)
        assert code == 1, output
        if ddl:
            assert "the dump holds TABLE public.ledger, which the rag schema does not" in output
        else:
            assert "holds no rag schema: it is not a dump of this index; refused" in output


def test_the_restore_role_cannot_run_programs_and_is_gone_afterwards(
    database_url: str, marker: Path
) -> None:
    with loader_login(database_url) as login:
        assert login.extension_made  # the embedded server's user is a superuser
        assert not login.switch  # the role logs in itself: it cannot switch back
        with login.connect() as conn:
            role = conn.execute("SELECT current_user").fetchone()
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'")  # type: ignore[arg-type]
            conn.rollback()
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SET ROLE postgres")  # no way back to the superuser
            conn.rollback()
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT pg_read_file('/etc/hostname')")
    assert role
    assert str(role[0]).startswith("rag_loader_")
    assert not marker.exists()
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", role).fetchone() is None
        owner = conn.execute(
            "SELECT pg_get_userbyid(datdba) = current_user FROM pg_database"
            " WHERE datname = current_database()"
        ).fetchone()
    assert owner == (True,)


@pytest.mark.parametrize("version", [1, 4])
def test_a_dump_of_an_older_schema_version_still_restores(
    pg_admin_uri: str, database_url: str, tmp_path: Path, version: int
) -> None:
    # The allowlist holds every version's statements: an older release's dump is upgraded.
    with backup.scratch_database(pg_admin_uri) as old:
        with psycopg.connect(old, autocommit=True) as conn:
            migrate_stepwise(conn, version)
            conn.execute(
                "INSERT INTO rag.store_info (key, value) VALUES ('note', 'from an old release')"
            )
        dump = tmp_path / "old.sql"
        backup.dump(old, dump, "plain")
    report = backup.replace_database(database_url, dump)
    assert report.schema_version == available_migrations()[-1].version
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT value FROM rag.store_info WHERE key = 'note'").fetchone()
    assert row == ("from an old release",)
