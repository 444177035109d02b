"""The wiki sensor and job end to end: local MediaWiki, real Dagster runs, real PostgreSQL."""

from collections.abc import Iterator
from typing import Any

import dagster as dg
import pytest

from rag_pipeline.definitions import defs
from rag_pipeline.defs.wiki.resources import WikiSourceResource
from rag_pipeline.defs.wiki.sensors import wiki_changes_sensor
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.sources.wiki.source import DEMO_EXPORT_PARTITION
from rag_pipeline.store.connection import connect
from rag_pipeline_tests.mediawiki_server import FakeWiki, MediaWikiServer

pytestmark = pytest.mark.integration

NF = "Category:New_Features"
PLUGINS = "Category:Plug-In_Development"
PAGES = "pages"


def _html(title: str, text: str) -> str:
    return (
        f'<div class="mw-parser-output"><h2><span class="mw-headline">{title}</span></h2>'
        f"<p>{text}</p></div>"
    )


@pytest.fixture
def server() -> Iterator[MediaWikiServer]:
    wiki = FakeWiki()
    wiki.add_category("New Features v11", parents=("New Features",))
    wiki.add_page(
        "NF11 Single SignOn",
        _html("Single sign-on", "Users log in through an OpenID Connect identity provider."),
        ["New Features v11"],
    )
    wiki.add_page(
        "Plugin Callouts",
        _html("Callouts", "A callout runs when the user changes a field in a window."),
        ["Plug-In Development"],
    )
    wiki.add_page(
        "Plugin Process",
        _html("Processes", "A process extends SvrProcess with prepare and doIt."),
        ["Plug-In Development", "New Features v11"],
    )
    wiki.add_page(
        "REST API",
        _html("REST API", "Tokens come from POST /api/v1/auth/tokens."),
        ["Developer"],
    )
    wiki.add_page("Manual page", _html("Manual", "Not configured."), ["Manual"])
    with MediaWikiServer(wiki) as running:
        yield running


class Harness:
    """Ticks the sensor like the daemon does and runs what it requests."""

    def __init__(self, instance: dg.DagsterInstance, database_url: str) -> None:
        self.instance = instance
        self.database_url = database_url
        self.cursor: str | None = None
        self.job = defs().resolve_job_def("wiki_ingest_job")

    def tick(self) -> list[str]:
        context = dg.build_sensor_context(
            instance=self.instance,
            cursor=self.cursor,
            resources={
                "wiki_source": WikiSourceResource.from_settings(load_settings()),
                "vectordb": VectorDBResource(),
            },
        )
        result = wiki_changes_sensor(context)
        assert isinstance(result, dg.SensorResult)
        for request in result.dynamic_partitions_requests or []:
            assert isinstance(request, dg.AddDynamicPartitionsRequest)
            self.instance.add_dynamic_partitions(
                request.partitions_def_name, list(request.partition_keys)
            )
        self.cursor = result.cursor or self.cursor
        keys = [r.partition_key or "" for r in result.run_requests or []]
        for key in keys:
            assert self.job.execute_in_process(instance=self.instance, partition_key=key).success
        return sorted(keys)

    def index(self) -> dict[str, tuple[str, str, str]]:
        """source_id → (title, url, version) of the wiki documents in the index."""
        with connect(self.database_url) as conn:
            rows = conn.execute(
                "SELECT source_id, title, url, source_version FROM rag.documents"
                " WHERE source_type = 'wiki'"
            ).fetchall()
        assert len(rows) == len({r[0] for r in rows}), "a page indexed twice"
        return {r[0]: (r[1], r[2], r[3]) for r in rows}


@pytest.fixture
def harness(
    rag_env: Settings,
    database_url: str,
    server: MediaWikiServer,
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> Harness:
    monkeypatch.setenv("RAG_WIKI_API_URL", server.api_url)
    monkeypatch.setenv("RAG_WIKI_CATEGORIES", "New_Features,Category:Plug-In_Development")
    monkeypatch.setenv("RAG_WIKI_PAGES", "REST API")
    monkeypatch.setenv("RAG_WIKI_CATEGORY_DEPTH", "1")
    return Harness(instance, database_url)


def test_edit_new_delete_move_restore_run_exactly_their_partitions(
    harness: Harness, server: MediaWikiServer
) -> None:
    wiki = server.wiki

    def pageid(title: str) -> str:
        page = wiki.by_title(title)
        assert page is not None
        return str(page.pageid)

    # First tick: the configured partitions are registered and each runs once.
    assert harness.tick() == [NF, PLUGINS, PAGES]
    index = harness.index()
    assert set(index) == {
        pageid(t) for t in ("NF11 Single SignOn", "Plugin Callouts", "Plugin Process", "REST API")
    }
    sso = pageid("NF11 Single SignOn")
    assert index[sso][:2] == (
        "NF11 Single SignOn",
        "https://wiki.idempiere.org/en/NF11_Single_SignOn",
    )
    assert harness.tick() == []

    edited = wiki.edit(
        "Plugin Callouts", html=_html("Callouts", "Callouts now also run on import.")
    )
    assert harness.tick() == [PLUGINS]
    assert harness.index()[str(edited.pageid)][2] == str(edited.revid)

    new = wiki.add_page(
        "NF11 UUID Key Tables", _html("UUID", "UUID-only keys."), ["New Features v11"]
    )
    assert harness.tick() == [NF]
    assert str(new.pageid) in harness.index()

    wiki.delete("NF11 Single SignOn")
    assert harness.tick() == [NF]
    assert sso not in harness.index()

    callouts = pageid("Plugin Callouts")
    wiki.move("Plugin Callouts", "Developing Plug-Ins - Callouts")
    assert harness.tick() == [PLUGINS]
    title, url, _ = harness.index()[callouts]
    assert title == "Developing Plug-Ins - Callouts"
    assert url == "https://wiki.idempiere.org/en/Developing_Plug-Ins_-_Callouts"

    wiki.restore("NF11 Single SignOn")
    assert harness.tick() == [NF]
    assert sso in harness.index()

    # A page in two configured categories: both partitions run, it stays one document.
    both = wiki.edit("Plugin Process", html=_html("Processes", "Processes may run on a schedule."))
    assert harness.tick() == [NF, PLUGINS]
    assert harness.index()[str(both.pageid)][2] == str(both.revid)

    # Out of every configured category: the partition that had it runs and drops it.
    wiki.edit("Plugin Process", categories=["Manual"])
    assert harness.tick() == [NF, PLUGINS]
    assert str(both.pageid) not in harness.index()

    wiki.edit("Manual page", html=_html("Manual", "Still not configured."))
    assert harness.tick() == []


def test_offline_default_registers_and_runs_the_demo_export(
    rag_env: Settings,
    database_url: str,
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RAG_WIKI_API_URL", raising=False)
    harness = Harness(instance, database_url)
    assert harness.tick() == [DEMO_EXPORT_PARTITION]
    index = harness.index()
    assert len(index) == 10
    assert index["102"][0] == "Developing Plug-Ins - Model Events"
    assert harness.tick() == []


def test_a_malformed_page_fails_alone_and_the_run_succeeds(
    harness: Harness, server: MediaWikiServer
) -> None:
    # Issue 38, item 7: a parse answer with `revid: "abc"` failed the whole partition (three
    # retries, a long traceback, the good pages not indexed). Now that page fails alone.
    bad = server.wiki.by_title("Plugin Callouts")
    assert bad is not None

    def revid_abc(data: dict[str, Any]) -> None:
        data["parse"]["revid"] = "abc"

    server.inject(
        "mutate",
        mutate=revid_abc,
        when=lambda p: p.get("action") == "parse" and p.get("pageid") == str(bad.pageid),
        times=100,
    )
    assert harness.tick() == [NF, PLUGINS, PAGES]  # every run succeeded (asserted in tick)
    titles = {title for title, _, _ in harness.index().values()}
    assert titles == {"NF11 Single SignOn", "Plugin Process", "REST API"}
    with connect(harness.database_url) as conn:
        errors = conn.execute(
            "SELECT DISTINCT source_id, stage, reason FROM rag.ingest_errors"
            " WHERE source_type = 'wiki'"
        ).fetchall()
    assert errors == [
        (f"{bad.pageid}@en_US", "raw", "malformed parse answer: parse.revid is not a number: 'abc'")
    ]


def test_a_deeply_nested_answer_skips_the_tick_and_the_next_one_polls(
    harness: Harness, server: MediaWikiServer
) -> None:
    # Issue 49, item 6: a RecursionError from the wiki's answer broke the sensor's poll.
    harness.tick()  # registers the partitions and starts the cursor
    cursor = harness.cursor
    server.inject("nested", when=lambda p: p.get("list") == "recentchanges")
    context = dg.build_sensor_context(
        instance=harness.instance,
        cursor=cursor,
        resources={
            "wiki_source": WikiSourceResource.from_settings(load_settings()),
            "vectordb": VectorDBResource(),
        },
    )
    result = wiki_changes_sensor(context)
    assert isinstance(result, dg.SensorResult)
    assert result.skip_reason is not None
    assert "nested more than 100 levels deep" in str(result.skip_reason)
    assert result.cursor is None  # the same cursor is tried again next tick
    server.wiki.tick()
    assert harness.tick() == []
