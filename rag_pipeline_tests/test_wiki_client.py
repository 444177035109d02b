"""The MediaWiki client and discovery against a local MediaWiki API (real HTTP, real client)."""

import json
import math
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from rag_pipeline.core.http_retry import RetryPolicy
from rag_pipeline.sources.wiki.client import MediaWikiClient, WikiApiError
from rag_pipeline.sources.wiki.discovery import (
    category_members,
    category_name,
    revisions_by_ids,
    revisions_by_titles,
)
from rag_pipeline_tests.mediawiki_server import FakeWiki, MediaWikiServer, shared_wiki_file

SITEINFO = {"action": "query", "meta": "siteinfo", "siprop": "general"}


@pytest.fixture
def server() -> Iterator[MediaWikiServer]:
    wiki = FakeWiki()
    wiki.add_category("Plug-In Development", parents=("Developer",))
    wiki.add_category("Event Handlers", parents=("Plug-In Development",))
    wiki.add_category("Deep", parents=("Event Handlers",))
    for i in range(7):
        wiki.add_page(f"Developer page {i}", categories=["Developer"])
    wiki.add_page("Plugin: Attachment Scanner", categories=["Plug-In Development"])
    wiki.add_page("Model Events", categories=["Event Handlers", "Developer"])
    wiki.add_page("Deep Page", categories=["Deep"])
    wiki.add_page("User:Someone/Notes", categories=["Developer"], ns=2)
    with MediaWikiServer(wiki) as running:
        yield running


def make_client(server: MediaWikiServer, delays: list[float], **kwargs: object) -> MediaWikiClient:
    retry = kwargs.pop("retry", RetryPolicy(attempts=4, base_delay=0.01, max_delay=30))
    return MediaWikiClient(
        server.api_url,
        sleep=delays.append,
        retry=retry,  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )


def test_every_request_is_polite(server: MediaWikiServer) -> None:
    with MediaWikiClient(server.api_url, user_agent="rag-test/1 (ops@example.org)") as client:
        info = client.siteinfo()
        client.siteinfo()
    assert info.generator == "MediaWiki 1.35.2"
    assert info.page_url("NF11 Single SignOn") == "https://wiki.idempiere.org/en/NF11_Single_SignOn"
    assert server.user_agents == {"rag-test/1 (ops@example.org)"}
    # siteinfo is cached; every request carries maxlag and asks for formatversion 2.
    assert len(server.requests) == 1
    assert server.requests[0]["maxlag"] == "5"
    assert server.requests[0]["formatversion"] == "2"


def test_maxlag_error_is_retried_after_retry_after(server: MediaWikiServer) -> None:
    delays: list[float] = []
    server.inject("maxlag", retry_after="5")
    with make_client(server, delays) as client:
        assert client.siteinfo().sitename == "iDempiere en"
    assert delays == [5.0]
    assert len(server.requests) == 2


def test_429_honours_retry_after_and_503_backs_off(server: MediaWikiServer) -> None:
    delays: list[float] = []
    server.inject("429", retry_after="3")
    server.inject("503", times=2)
    with make_client(server, delays) as client:
        client.get(SITEINFO)
    assert len(delays) == 3
    assert delays[0] == 3.0
    # Without Retry-After: full jitter below base * 2^(attempt-1).
    assert 0 <= delays[1] <= 0.02
    assert 0 <= delays[2] <= 0.04


def test_retry_after_is_capped(server: MediaWikiServer) -> None:
    delays: list[float] = []
    server.inject("429", retry_after="3600")
    with make_client(server, delays, retry=RetryPolicy(attempts=2, max_delay=30)) as client:
        client.get(SITEINFO)
    assert delays == [30.0]


def test_malformed_json_is_retried(server: MediaWikiServer) -> None:
    delays: list[float] = []
    server.inject("malformed")
    with make_client(server, delays) as client:
        assert client.get(SITEINFO)["query"]["general"]["sitename"] == "iDempiere en"
    assert len(delays) == 1


def test_timeout_is_retried(server: MediaWikiServer) -> None:
    delays: list[float] = []
    server.inject("slow", retry_after="1.0")
    with make_client(server, delays, timeout=0.2) as client:
        client.get(SITEINFO)
    assert len(delays) == 1


def test_persistent_failure_raises_after_every_attempt(server: MediaWikiServer) -> None:
    delays: list[float] = []
    server.inject("503", times=10)
    with make_client(server, delays) as client, pytest.raises(WikiApiError) as raised:
        client.get(SITEINFO)
    assert raised.value.code == "unavailable"
    assert "HTTP 503 after 4 attempts" in str(raised.value)
    assert len(server.requests) == 4


def test_api_error_is_surfaced_without_retry(server: MediaWikiServer) -> None:
    delays: list[float] = []
    with make_client(server, delays) as client, pytest.raises(WikiApiError) as raised:
        client.get({"action": "parse", "pageid": 999999})
    assert raised.value.code == "nosuchpageid"
    assert delays == []


def test_api_warnings_are_kept(server: MediaWikiServer, caplog: pytest.LogCaptureFixture) -> None:
    server.inject("warning")
    with MediaWikiClient(server.api_url) as client:
        client.get(SITEINFO)
    assert client.warnings == ['main: Unrecognized parameter: "bogus".']
    assert "Unrecognized parameter" in caplog.text


def test_concurrency_is_bounded_across_threads(server: MediaWikiServer) -> None:
    server.slow_seconds = 0.05
    with (
        MediaWikiClient(server.api_url, max_concurrency=2) as client,
        ThreadPoolExecutor(max_workers=8) as pool,
    ):
        list(pool.map(lambda _: client.get(SITEINFO), range(16)))
    assert server.max_in_flight <= 2
    assert client.request_count == 16


@pytest.mark.parametrize(
    ("configured", "expected"),
    [
        ("Category:New_Features_v11", "New Features v11"),
        ("new features v11", "New features v11"),
        ("  category:Plug-In_Development ", "Plug-In Development"),
    ],
)
def test_category_names_with_or_without_prefix(configured: str, expected: str) -> None:
    assert category_name(configured) == expected


def test_categories_follow_continuation(server: MediaWikiServer) -> None:
    for i in range(1203):
        server.wiki.add_page(f"NF11 Feature {i:04d}", categories=["New Features v11"], log=False)
    with MediaWikiClient(server.api_url) as client:
        members = category_members(client, "Category:New_Features_v11")
    assert len(members) == 1203
    assert len({m.pageid for m in members}) == 1203
    # 500 per request: three requests, each resending cmcontinue from the previous answer.
    listing = [r for r in server.requests if r.get("list") == "categorymembers"]
    assert len(listing) == 3
    assert "cmcontinue" not in listing[0]
    assert listing[1]["cmcontinue"].startswith("page|")


@pytest.mark.parametrize(
    ("depth", "titles"),
    [
        (0, {f"Developer page {i}" for i in range(7)} | {"Model Events"}),
        (
            1,
            {f"Developer page {i}" for i in range(7)}
            | {"Model Events", "Plugin: Attachment Scanner"},
        ),
        (
            3,
            {f"Developer page {i}" for i in range(7)}
            | {"Model Events", "Plugin: Attachment Scanner", "Deep Page"},
        ),
    ],
)
def test_subcategories_to_the_depth_limit(
    server: MediaWikiServer, depth: int, titles: set[str]
) -> None:
    with MediaWikiClient(server.api_url) as client:
        members = category_members(client, "Developer", depth=depth)
    assert {m.title for m in members} == titles
    # The User: page is outside namespace 0; a page reached twice is listed once.
    assert len(members) == len(titles)


def test_breadcrumb_is_the_shortest_category_path(server: MediaWikiServer) -> None:
    with MediaWikiClient(server.api_url) as client:
        members = {m.title: m for m in category_members(client, "Developer", depth=3)}
    assert members["Model Events"].path == ("Developer",)
    assert members["Deep Page"].path == (
        "Developer",
        "Plug-In Development",
        "Event Handlers",
        "Deep",
    )


def test_category_cycles_terminate(server: MediaWikiServer) -> None:
    server.wiki.add_category("Developer", parents=("Deep",))
    with MediaWikiClient(server.api_url) as client:
        members = category_members(client, "Developer", depth=10)
    assert "Deep Page" in {m.title for m in members}


def test_revisions_in_batches_of_fifty(server: MediaWikiServer) -> None:
    for i in range(120):
        server.wiki.add_page(f"Bulk {i}", categories=["Bulk"], log=False)
    with MediaWikiClient(server.api_url) as client:
        members = category_members(client, "Bulk")
        server.reset_counts()
        listing = revisions_by_ids(client, members)
    assert len(listing.pages) == 120
    assert all(p.revid > 0 and p.timestamp for p in listing.pages)
    assert server.count(prop="revisions") == math.ceil(120 / 50) == len(server.requests)


def test_titles_are_normalized_redirects_resolved_missing_reported(
    server: MediaWikiServer,
) -> None:
    server.wiki.move("Model Events", "Developing Plug-Ins - Model Events")
    with MediaWikiClient(server.api_url) as client:
        listing = revisions_by_titles(
            client, ["Model_Events", "Developing Plug-Ins - Model Events", "No such page"]
        )
    # The old title redirects to the moved page: one page, not two.
    assert [p.title for p in listing.pages] == ["Developing Plug-Ins - Model Events"]
    assert listing.missing == ("No such page",)
    assert listing.redirects == (("Model Events", "Developing Plug-Ins - Model Events"),)


def test_a_page_deleted_after_listing_is_missing_not_an_error(server: MediaWikiServer) -> None:
    with MediaWikiClient(server.api_url) as client:
        members = category_members(client, "Developer")
        server.wiki.delete("Developer page 3")
        listing = revisions_by_ids(client, members)
    assert "Developer page 3" not in {p.title for p in listing.pages}
    assert len(listing.pages) == len(members) - 1
    assert len(listing.missing) == 1


def _recorded(name: str) -> dict[str, Any]:
    path = shared_wiki_file("mediawiki_api_examples", name)
    return json.loads(path.read_text(encoding="utf-8"))["response"]


def _shape(value: object) -> object:
    """A JSON value's structure: keys and types, not contents (lists by their first item)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}  # type: ignore[misc]
    if isinstance(value, list):
        return [_shape(value[0])] if value else []  # type: ignore[index]
    return type(value).__name__


def test_the_stand_in_answers_in_the_recorded_shapes(server: MediaWikiServer) -> None:
    recorded = _recorded("categorymembers_fv2_continue_wikipedia.json")
    with MediaWikiClient(server.api_url) as client:
        ours = client.get(
            {
                "action": "query",
                "list": "categorymembers",
                "cmtitle": "Category:Developer",
                "cmlimit": 1,
                "cmprop": "ids|title",
            }
        )
    expected = _shape(recorded)
    got = _shape(ours)
    assert isinstance(expected, dict)
    assert isinstance(got, dict)
    assert got.keys() == expected.keys()
    assert got["continue"] == expected["continue"]
    member = ours["query"]["categorymembers"][0]
    assert {"pageid", "ns", "title"} <= member.keys()
    pattern = re.compile(r"^page\|[0-9a-f]+\|\d+$")
    assert pattern.match(recorded["continue"]["cmcontinue"])
    assert pattern.match(ours["continue"]["cmcontinue"])


def test_recorded_parse_output_is_served_and_read(server: MediaWikiServer) -> None:
    recorded = _recorded("parse_fv2_dewiki_Lewisit.json")["parse"]
    page = server.wiki.add_page("Lewisit", recorded["text"], ["Developer"])
    with MediaWikiClient(server.api_url) as client:
        ours = client.get({"action": "parse", "pageid": page.pageid, "prop": "text"})["parse"]
    for key in ("title", "pageid", "redirects", "text", "displaytitle"):
        assert type(ours[key]) is type(recorded[key]), key
    assert ours["text"].startswith(recorded["text"])
