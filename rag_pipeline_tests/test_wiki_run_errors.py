"""Issue 49 (14): a failed wiki run names its cause in one line, not "see the Dagster UI"."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_pipeline.cli import main
from rag_pipeline.settings import Settings
from rag_pipeline_tests.mediawiki_server import FakeWiki, MediaWikiServer

pytestmark = pytest.mark.integration


@pytest.fixture
def server() -> Iterator[MediaWikiServer]:
    wiki = FakeWiki()
    wiki.add_page("Page", categories=["Developer"], log=False)
    with MediaWikiServer(wiki) as running:
        yield running


def test_a_listing_that_never_ends_fails_its_run_naming_the_cause(
    rag_env: Settings,
    server: MediaWikiServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("RAG_WIKI_API_URL", server.api_url)
    monkeypatch.setenv("RAG_WIKI_CATEGORIES", "Developer")
    monkeypatch.setenv("RAG_WIKI_PAGES", "")
    monkeypatch.setenv("RAG_WIKI_CATEGORY_DEPTH", "0")
    monkeypatch.setenv("RAG_WIKI_MAX_LISTING_REQUESTS", "3")
    server.inject("continue_forever", times=1000)
    result = CliRunner().invoke(main, ["ingest", "--source", "wiki"])
    assert result.exit_code == 1, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(
        "Error: 1 run failed: wiki/Category:Developer (wiki/raw: WikiApiError: MediaWiki API "
        "error listinglimit: listing categorymembers Category:Developer still continued after "
        "3 requests (RAG_WIKI_MAX_LISTING_REQUESTS))"
    )
    assert "listinglimit" in last
    assert "RAG_WIKI_MAX_LISTING_REQUESTS" in last
    assert "Dagster UI" not in result.output
    assert "Traceback" not in result.output  # it stays in the run's event log
    assert len(result.output.strip().splitlines()) < 10
