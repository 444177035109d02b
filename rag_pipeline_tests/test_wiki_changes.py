"""Change polling: recentchanges + logevents since a JSON cursor → the partitions to run."""

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

import pytest

from rag_pipeline.sources.wiki.changes import (
    ChangeCursor,
    ChangeSet,
    poll_changes,
    start_cursor,
)
from rag_pipeline.sources.wiki.client import MediaWikiClient
from rag_pipeline.sources.wiki.source import PAGES_PARTITION, WikiConfig, WikiConfigError
from rag_pipeline_tests.mediawiki_server import FakeWiki, MediaWikiServer

NF = "Category:New_Features"
PLUGINS = "Category:Plug-In_Development"


@pytest.fixture
def server() -> Iterator[MediaWikiServer]:
    wiki = FakeWiki()
    wiki.add_category("New Features v11", parents=("New Features",))
    wiki.add_page("NF11 Single SignOn", categories=["New Features v11"])
    wiki.add_page("Plugin Callouts", categories=["Plug-In Development"])
    wiki.add_page("Plugin Process", categories=["Plug-In Development", "New Features v11"])
    wiki.add_page("REST API", categories=["Developer"])
    wiki.add_page("Manual page", categories=["Manual"])
    with MediaWikiServer(wiki) as running:
        yield running


class Poller:
    """Polls like the sensor does: a stored JSON cursor between calls."""

    def __init__(
        self,
        server: MediaWikiServer,
        stored: Mapping[str, Collection[str]] | None = None,
        **config: object,
    ) -> None:
        defaults: dict[str, object] = {
            "categories": ("New_Features", "Plug-In_Development"),
            "pages": ("REST API",),
            "category_depth": 1,
        }
        defaults.update(config)
        self.config = WikiConfig(api_url=server.api_url, **defaults)  # type: ignore[arg-type]
        self.client = MediaWikiClient(server.api_url)
        self.stored = stored
        self.cursor = start_cursor(self.client, self.config).to_json()
        self.server = server

    def lookup(self, ids: Sequence[str]) -> Mapping[str, Collection[str]]:
        assert self.stored is not None
        return {i: self.stored[i] for i in ids if i in self.stored}

    def poll(self) -> ChangeSet:
        cursor = ChangeCursor.from_json(self.cursor)
        assert cursor is not None
        result = poll_changes(
            self.client,
            self.config,
            cursor,
            stored_partitions=self.lookup if self.stored is not None else None,
        )
        self.cursor = result.cursor.to_json()
        return result


def test_nothing_changed_costs_two_requests(server: MediaWikiServer) -> None:
    poller = Poller(server)
    server.reset_counts()
    result = poller.poll()
    assert result.changes == ()
    assert result.partitions == ()
    assert len(server.requests) == 2
    assert server.count(list="recentchanges") == server.count(list="logevents") == 1


def test_the_first_cursor_skips_history(server: MediaWikiServer) -> None:
    # Pages created before the sensor started are the initial sync's business, not changes.
    assert Poller(server).poll().changes == ()


def test_an_edit_runs_the_partitions_holding_the_page(server: MediaWikiServer) -> None:
    poller = Poller(server)
    server.wiki.edit("Plugin Process", html="<p>v2</p>")
    result = poller.poll()
    assert [(c.kind, c.title) for c in result.changes] == [("edit", "Plugin Process")]
    # In Plug-In Development directly and in New Features through its v11 subcategory.
    assert result.partitions == (NF, PLUGINS)
    assert poller.poll().changes == ()  # reported once


def test_a_new_page_in_a_subcategory_runs_the_root_category(server: MediaWikiServer) -> None:
    poller = Poller(server)
    server.wiki.add_page("NF11 UUID Key Tables", categories=["New Features v11"])
    result = poller.poll()
    assert [(c.kind, c.title) for c in result.changes] == [("new", "NF11 UUID Key Tables")]
    assert result.partitions == (NF,)


def test_a_subcategory_beyond_the_depth_limit_runs_nothing(server: MediaWikiServer) -> None:
    poller = Poller(server, category_depth=0)
    server.wiki.add_page("NF11 UUID Key Tables", categories=["New Features v11"])
    assert poller.poll().partitions == ()


def test_an_edit_outside_the_configuration_runs_nothing(server: MediaWikiServer) -> None:
    poller = Poller(server)
    server.wiki.edit("Manual page", html="<p>v2</p>")
    result = poller.poll()
    assert len(result.changes) == 1
    assert result.partitions == ()


def test_an_explicit_page_runs_the_pages_partition(server: MediaWikiServer) -> None:
    poller = Poller(server)
    server.wiki.edit("REST API", html="<p>v2</p>")
    assert poller.poll().partitions == (PAGES_PARTITION,)


def test_a_delete_runs_the_partition_the_index_holds_it_in(server: MediaWikiServer) -> None:
    callouts = server.wiki.by_title("Plugin Callouts")
    assert callouts is not None
    poller = Poller(server, stored={str(callouts.pageid): [PLUGINS]})
    server.wiki.delete("Plugin Callouts")
    result = poller.poll()
    assert [(c.kind, c.pageid, c.title) for c in result.changes] == [
        ("delete", callouts.pageid, "Plugin Callouts")
    ]
    assert result.partitions == (PLUGINS,)


def test_a_delete_nobody_can_place_runs_every_category(server: MediaWikiServer) -> None:
    poller = Poller(server)
    server.wiki.delete("Plugin Callouts")
    assert poller.poll().partitions == (NF, PLUGINS)


def test_a_move_keeps_the_page_id(server: MediaWikiServer) -> None:
    callouts = server.wiki.by_title("Plugin Callouts")
    assert callouts is not None
    poller = Poller(server)
    server.wiki.move("Plugin Callouts", "Developing Plug-Ins - Callouts")
    result = poller.poll()
    (move,) = result.changes
    assert (move.kind, move.pageid, move.title, move.new_title) == (
        "move",
        callouts.pageid,
        "Plugin Callouts",
        "Developing Plug-Ins - Callouts",
    )
    assert result.partitions == (PLUGINS,)


def test_a_move_out_of_a_category_runs_the_partition_that_had_it(
    server: MediaWikiServer,
) -> None:
    callouts = server.wiki.by_title("Plugin Callouts")
    assert callouts is not None
    poller = Poller(server, stored={str(callouts.pageid): [PLUGINS]})
    server.wiki.edit("Plugin Callouts", categories=["Manual"])
    assert poller.poll().partitions == (PLUGINS,)


def test_a_restore_runs_the_partitions_of_the_restored_page(server: MediaWikiServer) -> None:
    sso = server.wiki.by_title("NF11 Single SignOn")
    assert sso is not None
    server.wiki.delete(sso.title)
    poller = Poller(server)
    server.wiki.restore(sso.title)
    result = poller.poll()
    assert [(c.kind, c.pageid) for c in result.changes] == [("restore", sso.pageid)]
    assert result.partitions == (NF,)


def test_events_in_the_cursor_second_are_not_lost_or_repeated(server: MediaWikiServer) -> None:
    poller = Poller(server)
    server.wiki.edit("Plugin Callouts", html="<p>a</p>")
    assert len(poller.poll().changes) == 1
    # The clock does not move: a second edit in the same second as the first.
    server.wiki.seconds -= 1
    server.wiki.edit("Plugin Process", html="<p>b</p>")
    result = poller.poll()
    assert [c.title for c in result.changes] == ["Plugin Process"]
    assert poller.poll().changes == ()


def test_many_changes_follow_continuation(server: MediaWikiServer) -> None:
    poller = Poller(server)
    for i in range(510):
        server.wiki.edit("REST API", html=f"<p>{i}</p>")
    server.reset_counts()
    result = poller.poll()
    assert len(result.changes) == 510
    assert server.count(list="recentchanges") == 2
    assert result.partitions == (PAGES_PARTITION,)


def test_cursor_is_json_and_tolerates_garbage() -> None:
    cursor = ChangeCursor("2026-01-01T00:00:05Z", ("log:3", "rc:7"))
    assert ChangeCursor.from_json(cursor.to_json()) == cursor
    assert ChangeCursor.from_json(None) is None
    assert ChangeCursor.from_json("{not json") is None
    assert ChangeCursor.from_json('{"other": 1}') is None


def test_an_export_has_nothing_to_poll(server: MediaWikiServer) -> None:
    with pytest.raises(WikiConfigError, match="RAG_WIKI_API_URL"):
        poll_changes(MediaWikiClient(server.api_url), WikiConfig(), ChangeCursor("x"))


def test_a_malformed_event_is_skipped_and_the_others_run(
    server: MediaWikiServer, caplog: pytest.LogCaptureFixture
) -> None:
    poller = Poller(server)
    server.wiki.edit("Plugin Callouts", html="<p>v2</p>")
    server.wiki.edit("NF11 Single SignOn", html="<p>v2</p>")

    def superscript_id(data: dict[str, Any]) -> None:
        for change in data["query"]["recentchanges"]:
            if change["title"] == "Plugin Callouts":
                change["pageid"] = "²"  # str.isdigit() says yes; int() raises

    server.inject("mutate", mutate=superscript_id, when=lambda p: p.get("list") == "recentchanges")
    result = poller.poll()
    assert [c.title for c in result.changes] == ["NF11 Single SignOn"]
    assert result.partitions == (NF,)
    assert "wiki recent change for 'Plugin Callouts' skipped: pageid is not a number" in (
        caplog.text
    )
