"""Issue 49 (1, 4): configuration is trusted only from its owner.

A `RAG_HOME`/`DAGSTER_HOME` of another user, a `dagster.yaml` `rag` did not write and the
routing values of a `.env` others control are refused or ignored. The tests with a second
local user need root (as CI runs) and skip otherwise.
"""

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_pipeline.orchestration.instance import MANAGED_MARKER, dagster_home, dagster_instance
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.settings.trust import UntrustedConfigError
from rag_pipeline.store.server import private_home
from rag_pipeline.store.server_user import _account_tool  # pyright: ignore[reportPrivateUsage]

_as_root = pytest.mark.skipif(os.geteuid() != 0, reason="a second local user needs root")


def _popen_yaml(marker: Path) -> str:
    """The issue's dagster.yaml: Dagster hands its logging section to `dictConfig`."""
    return (
        "python_logs:\n"
        "  dagster_handler_config:\n"
        "    handlers:\n"
        "      pwn:\n"
        '        "()": subprocess.Popen\n'
        f'        args: "id > {marker}"\n'
        "        shell: true\n"
    )


@pytest.fixture
def stranger() -> Iterator[str]:
    """A temporary local user, removed afterwards."""
    name = f"ragt{uuid.uuid4().hex[:8]}"
    # Found like the product finds it: a root shell's PATH may lack the sbin folders.
    useradd, userdel = _account_tool("useradd"), _account_tool("userdel")
    command = [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name]
    # useradd refuses while another process edits the user database (the server users of
    # tests running beside this one): try again, as their own code does through a lock.
    for _ in range(40):
        if subprocess.run(command, check=False, capture_output=True).returncode == 0:
            break
        time.sleep(0.25)
    else:
        subprocess.run(command, check=True, capture_output=True)
    yield name
    subprocess.run([userdel, name], check=False, capture_output=True)


def _owned_by(path: Path, user: str) -> None:
    for entry in (path, *path.rglob("*")):
        shutil.chown(entry, user, user)


def _rag(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "DAGSTER_"))}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "rag_pipeline.cli", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@_as_root
def test_root_refuses_a_rag_home_of_another_user_and_runs_none_of_its_files(
    tmp_path: Path, stranger: str, database_url: str
) -> None:
    marker = tmp_path / "pwned"
    home = tmp_path / "x"
    (home / "dagster").mkdir(parents=True)
    (home / "dagster" / "dagster.yaml").write_text(_popen_yaml(marker))
    _owned_by(home, stranger)
    tmp_path.chmod(0o755)
    done = _rag(
        ["ingest", "--source", "files"],
        tmp_path,
        RAG_HOME=str(home),
        RAG_VECTORDB_URL=database_url,
    )
    assert done.returncode != 0
    assert not marker.exists()
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, done.stderr
    assert f"RAG_HOME {home} is refused" in errors[0]
    assert stranger in errors[0]
    # The embedded-server path refuses it the same way.
    with pytest.raises(UntrustedConfigError, match="belongs to"):
        private_home(load_settings(home=home, vectordb_url=None, vectordb_pg_host=None))


@_as_root
def test_a_stranger_s_dotenv_cannot_set_rag_home_or_a_base_url(
    tmp_path: Path, stranger: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text(
        f"RAG_HOME={tmp_path / 'x'}\nANTHROPIC_BASE_URL=http://127.0.0.1:9\n"
        "RAG_VECTORDB_URL=postgresql://u@127.0.0.1:9/x\nRAG_ASK_TOP_K=7\n"
    )
    _owned_by(tmp_path / ".env", stranger)
    monkeypatch.chdir(tmp_path)
    for name in ("RAG_HOME", "ANTHROPIC_BASE_URL", "RAG_VECTORDB_URL", "RAG_ASK_TOP_K"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert settings.home != tmp_path / "x"
    assert settings.anthropic_base_url == "https://api.anthropic.com"
    assert settings.vectordb_url is None
    assert settings.ask_top_k == 7  # what routes no secret is still read


def test_an_others_writable_dotenv_cannot_route_secrets_an_own_one_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("OPENAI_BASE_URL=http://127.0.0.1:9/v1\nIDEMPIERE_DB_HOST=elsewhere\n")
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_BASE_URL", "IDEMPIERE_DB_HOST"):
        monkeypatch.delenv(name, raising=False)
    dotenv.chmod(0o666)
    shared = load_settings()
    assert shared.openai_base_url is None
    assert shared.idempiere_db_host != "elsewhere"
    dotenv.chmod(0o600)
    own = load_settings()
    assert own.openai_base_url == "http://127.0.0.1:9/v1"
    assert own.idempiere_db_host == "elsewhere"


@pytest.fixture
def dagster_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    home = tmp_path / "dagster_home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    for name in ("DAGSTER_PG_URL", "DAGSTER_PG_HOST"):
        monkeypatch.delenv(name, raising=False)
    return home


def test_a_dagster_yaml_rag_did_not_write_is_refused_and_never_run(
    rag_env: Settings, dagster_dir: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    dagster_dir.mkdir(mode=0o700)
    config = dagster_dir / "dagster.yaml"
    config.write_text(_popen_yaml(marker))
    with pytest.raises(UntrustedConfigError, match="was not written by rag") as refused:
        dagster_instance(rag_env)
    assert str(config) in str(refused.value)
    assert not marker.exists()
    assert config.read_text() == _popen_yaml(marker)  # left for its owner to move


def test_a_stale_dagster_yaml_with_rag_s_first_line_is_replaced(
    rag_env: Settings, dagster_dir: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    dagster_dir.mkdir(mode=0o700)
    config = dagster_dir / "dagster.yaml"
    config.write_text(f"{MANAGED_MARKER}\n{_popen_yaml(marker)}")
    dagster_instance(rag_env)
    assert "subprocess" not in config.read_text()
    assert not marker.exists()


def test_a_dagster_home_others_can_write_is_refused(rag_env: Settings, dagster_dir: Path) -> None:
    dagster_dir.mkdir()
    dagster_dir.chmod(0o777)
    with pytest.raises(UntrustedConfigError, match="others can write it") as refused:
        dagster_home(rag_env)
    assert f"DAGSTER_HOME {dagster_dir}" in str(refused.value)
    assert not (dagster_dir / "dagster.yaml").exists()


def test_an_own_rag_home_others_can_write_is_made_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o777)
    private_home(load_settings(home=home, vectordb_url=None, vectordb_pg_host=None))
    assert home.stat().st_mode & 0o777 == 0o700
