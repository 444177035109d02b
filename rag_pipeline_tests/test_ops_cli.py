"""`rag validate`, `rag status` and `rag dev` as a person runs them."""

import os
import signal
import socket
import tomllib
from pathlib import Path

import dagster as dg
import pytest
from click.testing import CliRunner

from rag_pipeline.cli import main
from rag_pipeline.settings import Settings
from rag_pipeline_tests.pipeline_helpers import ingest, write


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def dagster_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    home = tmp_path / "dagster_home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    for name in ("DAGSTER_PG_URL", "DAGSTER_PG_HOST"):
        monkeypatch.delenv(name, raising=False)
    return home


def test_validate_passes_on_the_embedded_defaults(
    rag_env: Settings, dagster_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAG_LANGUAGES", raising=False)
    CliRunner().invoke(main, ["init"], catch_exceptions=False)
    result = CliRunner().invoke(main, ["validate"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for name in (
        "vector database",
        "schema version",
        "extensions",
        "foreign code",
        "model checksum",
        "stored model",
        "iDempiere database",
        "wiki",
        "dagster storage",
    ):
        assert any(line.startswith("PASS") and name in line for line in lines), name
    assert "vector 0." in result.output
    assert "verified" in result.output
    # RAG_LANGUAGES=all, resolved in the demo database: its base language and its translation.
    assert "languages en_US, es_CO)" in result.output
    assert "all 10 checks passed" in result.output


def test_validate_names_what_fails_and_exits_1(
    rag_env: Settings, dagster_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    CliRunner().invoke(main, ["init"], catch_exceptions=False)
    monkeypatch.setenv("RAG_WIKI_API_URL", f"http://127.0.0.1:{_closed_port()}/w/api.php")
    monkeypatch.setenv("IDEMPIERE_DB_HOST", "127.0.0.1")
    monkeypatch.setenv("IDEMPIERE_DB_PORT", str(_closed_port()))
    result = CliRunner().invoke(main, ["validate"])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    failed = {line.split()[1] for line in lines if line.startswith("FAIL")}
    assert failed == {"iDempiere", "wiki"}, result.output
    assert "2 of 10 checks failed: iDempiere database, wiki" in result.output
    assert any(line.startswith("PASS") and "vector database" in line for line in lines)


def test_status_shows_freshness_failures_and_size(
    rag_env: Settings, dagster_home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "docs"
    write(folder, "ok.md", "# Fine\n\nA document about warehouses.\n")
    write(folder, "bad.md", b"\xff\xfe not UTF-8")
    with dg.instance_for_test() as instance:
        ingest(folder, instance)
    result = CliRunner().invoke(main, ["status"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "index:    1 documents" in result.output
    assert " MB (database " in result.output
    assert "source:   files" in result.output
    assert "1 failed, " in result.output
    assert "failed documents (1):" in result.output
    assert "bad.md" in result.output


def test_dev_passes_every_argument_to_dg_dev(
    rag_env: Settings, dagster_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launched: list[list[str]] = []
    handlers_at_exec: list[tuple[object, object]] = []

    class LaunchedError(Exception):
        pass

    def execv(path: str, argv: list[str]) -> None:
        launched.append(argv)
        handlers_at_exec.append((signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)))
        raise LaunchedError

    # Replacing the process would end the test; record what would run instead. Started in the
    # background by a script (SIGINT ignored) or by a runner that ignores SIGTERM, `dagster
    # dev` must get both back at their default, or nothing but SIGKILL stops it.
    monkeypatch.setattr(os, "execv", execv)
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = CliRunner().invoke(main, ["dev", "-h", "127.0.0.1", "-p", "3333"])
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert isinstance(result.exception, LaunchedError), result.output
    assert handlers_at_exec == [(signal.SIG_DFL, signal.SIG_DFL)]
    (argv,) = launched
    # `dg dev`, which supersedes `dagster dev`, beside this interpreter; the module, so no
    # project file is needed and the location gets its one name.
    assert Path(argv[0]).name == "dg"
    assert argv[1:] == [
        "dev", "-m", "rag_pipeline.definitions", "-h", "127.0.0.1", "-p", "3333",
    ]  # fmt: skip
    assert os.environ["DAGSTER_HOME"] == str(dagster_home)
    assert (dagster_home / "dagster.yaml").read_text().startswith("# written by rag_pipeline")
    # One name for the code location everywhere; a mismatch is a warning at every load
    # of the UI ("The code location name ... does not match").
    from rag_pipeline.definitions import CODE_LOCATION_NAME

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert pyproject["tool"]["dg"]["project"]["code_location_name"] == argv[3]
    assert pyproject["tool"]["dagster"]["code_location_name"] == argv[3]
    assert argv[3] == CODE_LOCATION_NAME
