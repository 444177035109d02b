"""Shared fixtures: one real embedded PostgreSQL + pgvector per session, a fresh database per
test, and the real bundled embedding model."""

import os
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
from hypothesis import settings as hypothesis_settings
from tokenizers import Tokenizer

import rag_pipeline
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.store.server import (
    EMBEDDED_DATABASE,
    resolve_conninfo,
    stop_embedded_server,
)

if TYPE_CHECKING:
    import dagster as dg

SHARED_FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"

# Every run - CI or a user's `pytest` on a fresh clone - draws the same examples: a red
# result must be reproducible, not a dice roll, and CI must not pass where a user fails.
# Exploring new examples is opt-in: `pytest -m long --hypothesis-profile=explore`.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
hypothesis_settings.register_profile("default", derandomize=True, print_blob=True)
hypothesis_settings.register_profile("explore", derandomize=False, max_examples=1000)
hypothesis_settings.load_profile("ci" if os.environ.get("CI") else "default")

# A runner that starts pytest with SIGTERM ignored passes that on to every process the tests
# start, and Dagster stops the `tail -F` that mirrors a step's output with SIGTERM: the tails
# of `dagster job execute` and of the daemon's runs would never end. `rag ingest` restores the
# default itself (cli/run_progress.py; its test ignores SIGTERM on purpose).
if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: a worker per core, at most 4 (each starts its own PostgreSQL and model)."""
    return max(1, min(os.cpu_count() or 1, 4))


# Tiers (`pytest -m unit` for the inner loop): a module says `pytestmark = pytest.mark.unit`
# or `.integration` when it knows; otherwise a test using the server or the model is
# integration, a `slow` one stays slow only, and the rest are unit.
_NEEDS_SERVER_OR_MODEL = frozenset(
    {"pg_admin_uri", "database_url", "rag_env", "embedder", "rag_home", "cli_env", "instance"}
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test its tier; leave out `long` ones unless the -m expression names them."""
    if "long" not in (config.option.markexpr or ""):
        kept = [item for item in items if not item.get_closest_marker("long")]
        if len(kept) != len(items):
            config.hook.pytest_deselected(items=[i for i in items if i not in kept])
            items[:] = kept
    for item in items:
        if item.get_closest_marker("unit") or item.get_closest_marker("integration"):
            continue
        if item.get_closest_marker("slow"):
            continue  # a slow test without server or model is its own tier, not the inner loop
        fixtures = set(getattr(item, "fixturenames", ()))
        tier = pytest.mark.integration if fixtures & _NEEDS_SERVER_OR_MODEL else pytest.mark.unit
        item.add_marker(tier)


@pytest.fixture(scope="session")
def rag_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A RAG_HOME shared by the session: model links and the embedded server live here."""
    return tmp_path_factory.mktemp("rag_home")


@pytest.fixture(scope="session")
def pg_admin_uri(rag_home: Path) -> Iterator[str]:
    """The embedded PostgreSQL 18 + pgvector server (started as `rag` starts it), stopped at
    the end of the session."""
    settings = load_settings(home=rag_home, vectordb_url=None, vectordb_pg_host=None)
    conninfo = resolve_conninfo(settings)
    # Helpers derive other databases' URLs by replacing "/postgres?" in this one.
    yield conninfo.replace(f"/{EMBEDDED_DATABASE}?", "/postgres?")
    stop_embedded_server(settings)


@pytest.fixture
def database_url(pg_admin_uri: str) -> Iterator[str]:
    """A new, empty database on the session server, dropped after the test."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_uri, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield pg_admin_uri.replace("/postgres?", f"/{name}?")
    with psycopg.connect(pg_admin_uri, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def instance() -> Iterator["dg.DagsterInstance"]:
    """A throwaway Dagster instance (its storage in a temporary folder)."""
    import dagster as dg

    with dg.instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture
def rag_env(monkeypatch: pytest.MonkeyPatch, rag_home: Path, database_url: str) -> Settings:
    """Environment pointing every component at the test database."""
    monkeypatch.setenv("RAG_HOME", str(rag_home))
    monkeypatch.setenv("RAG_VECTORDB_URL", database_url)
    monkeypatch.delenv("RAG_EMBEDDING_MODEL", raising=False)
    monkeypatch.delenv("RAG_EMBEDDING_MODEL_PATH", raising=False)
    monkeypatch.delenv("RAG_MULTILINGUAL_MODEL", raising=False)
    return load_settings()


@pytest.fixture(scope="session")
def embedder(rag_home: Path):  # type: ignore[no-untyped-def]
    """The real bundled int8 MiniLM."""
    from rag_pipeline.store.runtime import load_embedder

    return load_embedder(load_settings(home=rag_home))


@pytest.fixture(scope="session")
def count_tokens() -> Callable[[str], int]:
    """The real MiniLM token count, special tokens included, never truncated."""
    tokenizer = Tokenizer.from_file(
        str(Path(rag_pipeline.__file__).parent / "model" / "all-MiniLM-L6-v2" / "tokenizer.json")
    )
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return lambda text: len(tokenizer.encode(text).ids)


@pytest.fixture
def shared_fixtures() -> Path:
    """The read-only real iDempiere fixtures beside the repository."""
    if not SHARED_FIXTURES.is_dir():
        pytest.skip(f"shared fixtures not found at {SHARED_FIXTURES}")
    return SHARED_FIXTURES
