"""The Dagster instance's storage follows the environment: SQLite, or PostgreSQL."""

import os
from pathlib import Path

import psycopg
import pytest

from rag_pipeline.orchestration.instance import MANAGED_MARKER, dagster_home, dagster_instance
from rag_pipeline.settings import Settings
from rag_pipeline.settings.trust import UntrustedConfigError


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    for name in ("DAGSTER_PG_URL", "DAGSTER_PG_HOST"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "dagster_home"


def test_sqlite_by_default(rag_env: Settings, home: Path) -> None:
    instance = dagster_instance(rag_env)
    assert type(instance.run_storage).__name__ == "SqliteRunStorage"
    config = (home / "dagster.yaml").read_text()
    assert config.startswith(MANAGED_MARKER)
    assert "postgres" not in config.split("\n", 1)[1].split("#")[0]


def test_postgres_in_the_embedded_server_keeps_runs_there(
    rag_env: Settings, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_PG_URL", "embedded")
    instance = dagster_instance(rag_env)
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert "env: DAGSTER_PG_URL" in (home / "dagster.yaml").read_text()
    instance.add_dynamic_partitions("files_folders", ["from-the-test"])
    with psycopg.connect(os.environ["DAGSTER_PG_URL"]) as conn:
        row = conn.execute(
            "SELECT count(*) FROM dynamic_partitions WHERE partition = 'from-the-test'"
        ).fetchone()
    assert row == (1,)
    instance.delete_dynamic_partition("files_folders", "from-the-test")


def test_a_dagster_yaml_written_by_a_person_is_refused_not_replaced(
    rag_env: Settings, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home.mkdir(parents=True)
    own = "telemetry:\n  enabled: true\n"
    (home / "dagster.yaml").write_text(own)
    monkeypatch.setenv("DAGSTER_PG_URL", "postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(UntrustedConfigError, match="not written by rag"):
        dagster_home(rag_env)
    assert (home / "dagster.yaml").read_text() == own
