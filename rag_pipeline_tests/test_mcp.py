"""`rag mcp` driven by the official MCP SDK's own client: the server runs as a subprocess over
stdio (and over streamable HTTP on loopback, behind its token and session caps, also spoken to
in raw HTTP) against the ingested demo corpus."""

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import psycopg
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent
from psycopg.types.json import Jsonb

from rag_pipeline.mcp.tools import MAX_FILTERS, MAX_NAME_CHARS
from rag_pipeline_tests.ask_support import demo_index

TOOLS = {
    "search_knowledge",
    "get_knowledge_stats",
    "find_ad_entity",
    "lookup_development_docs",
    "get_document_lineage",
}

# Application Dictionary documents in the shape the ad_metadata source stores them (DB
# identifiers in the body, the defining one in the metadata). They are added next to the demo
# corpus (ingesting that source's ~900 entries takes minutes), copying a demo row so every
# other column keeps its stored shape.
_AD_DOCUMENTS: list[tuple[str, str, str, str, dict[str, Any]]] = [
    (
        "AD_Window:143",
        "Sales Order",
        "Sales Order",
        "Window **Sales Order** (AD_Window_ID 143).\n\nEnter and process sales orders.\n\n"
        "## Tabs\n\n- Order (`C_Order`)\n- Order Line (`C_OrderLine`)\n\n"
        "Business Partner field: `C_BPartner_ID`.",
        {"entity_type": "window", "record_id": 143, "window_type": "T", "tabs": 2},
    ),
    (
        "AD_Table:291",
        "Business Partner",
        "C_BPartner",
        "Table `C_BPartner` — **Business Partner** (AD_Table_ID 291).\n\n"
        "## Columns of `C_BPartner`\n\n| Name | Column |\n| -- | -- |\n"
        "| Business Partner | `C_BPartner_ID` (key) |\n| Customer | `IsCustomer` |",
        {"entity_type": "table", "record_id": 291, "table_name": "C_BPartner", "columns": 2},
    ),
    (
        "AD_Process:238",
        "Generate Invoices",
        "Generate Invoices",
        "Process **Generate Invoices** (AD_Process_ID 238).\n\n"
        "Generate invoices from shipments or orders.",
        {"entity_type": "process", "record_id": 238, "value": "C_Invoice_Generate"},
    ),
]


def _add_ad_documents(conninfo: str) -> None:
    with psycopg.connect(conninfo) as conn, conn.transaction():
        conn.execute("CREATE TEMP TABLE ad_row AS SELECT * FROM rag.documents ORDER BY id LIMIT 1")
        for source_id, title, breadcrumb, body, metadata in _AD_DOCUMENTS:
            conn.execute(
                "UPDATE ad_row SET id = %(id)s, source_type = 'ad_metadata',"
                " source_id = %(source_id)s, doc_key = %(doc_key)s, title = %(title)s,"
                " breadcrumb = %(breadcrumb)s, url = '', body = %(body)s, language = 'en_US',"
                " metadata = %(metadata)s",
                {
                    "id": f"test-{source_id}",
                    "source_id": source_id,
                    "doc_key": f"{source_id}@en_US",
                    "title": title,
                    "breadcrumb": breadcrumb,
                    "body": body,
                    "metadata": Jsonb(metadata),
                },
            )
            conn.execute("INSERT INTO rag.documents SELECT * FROM ad_row")


@pytest.fixture(scope="module")
def server_env(pg_admin_uri: str, rag_home: Path) -> Iterator[dict[str, str]]:
    """The environment `rag mcp` runs with: the demo index plus three dictionary entries."""
    with demo_index(pg_admin_uri, rag_home, wiki=True) as env:
        _add_ad_documents(env["RAG_VECTORDB_URL"])
        yield env


def _child_env(env: dict[str, str]) -> dict[str, str]:
    """The server's environment: the SDK passes only a safe few variables (HOME, PATH…); the
    machine's OpenBLAS settings must reach the model too."""
    inherited = {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS_")}
    return {**inherited, **env}


def _text(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def _structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, _text(result)
    if result.structured_content is not None:
        return dict(result.structured_content)
    return json.loads(_text(result))


async def _session(env: dict[str, str]) -> dict[str, Any]:
    """Every call the tests check, in one server process (starting it loads the model)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rag_pipeline.cli", "mcp"],
        env=_child_env(env),
    )
    out: dict[str, Any] = {}
    async with Client(params, read_timeout_seconds=120) as client:
        out["tools"] = (await client.list_tools()).tools
        calls = {
            "search": ("search_knowledge", {"query": "How do I set up locators in a warehouse?"}),
            "search_typo": ("search_knowledge", {"query": "set up locators in a warehose"}),
            "search_filtered": (
                "search_knowledge",
                {"query": "locators", "source_types": ["wiki"], "top_k": 3},
            ),
            "search_none": ("search_knowledge", {"query": "locators", "source_types": ["k_entry"]}),
            "stats": ("get_knowledge_stats", {}),
            "ad_name": ("find_ad_entity", {"name": "Sales Order", "entity_type": "window"}),
            "ad_identifier": ("find_ad_entity", {"name": "C_BPartner_ID"}),
            "ad_identifier_table": (
                "find_ad_entity",
                {"name": "c_bpartner", "entity_type": "table"},
            ),
            "ad_id": ("find_ad_entity", {"name": "AD_Process:238"}),
            "ad_process_key": ("find_ad_entity", {"name": "C_Invoice_Generate"}),
            "ad_wrong_type": (
                "find_ad_entity",
                {"name": "C_BPartner_ID", "entity_type": "process"},
            ),
            "ad_unknown": ("find_ad_entity", {"name": "Warehouse & Locators"}),
            "dev": (
                "lookup_development_docs",
                {"topic": "register an event handler for model events", "top_k": 8},
            ),
            "dev_new": ("lookup_development_docs", {"topic": "new features of iDempiere 11"}),
            "plain_new": ("search_knowledge", {"query": "new features of iDempiere 11"}),
            "empty_query": ("search_knowledge", {"query": "   "}),
            "bad_type": ("find_ad_entity", {"name": "x", "entity_type": "report"}),
            "bad_top_k": ("search_knowledge", {"query": "x", "top_k": 500}),
            "too_many_filters": (
                "search_knowledge",
                {"query": "locators", "languages": ["en"] * (MAX_FILTERS + 1)},
            ),
            "long_query": ("search_knowledge", {"query": "locator " * 1000}),
            "long_topic": ("lookup_development_docs", {"topic": "x" * 5000}),
        }
        for key, (tool, arguments) in calls.items():
            out[key] = await client.call_tool(tool, arguments)
        # Issue 38: a 1,000,000-character name went into a regular expression for 1,001 s.
        started = time.monotonic()
        out["ad_huge"] = await client.call_tool("find_ad_entity", {"name": "C" * 1_000_000})
        out["ad_huge_seconds"] = time.monotonic() - started
    return out


@pytest.fixture(scope="module")
def calls(server_env: dict[str, str]) -> dict[str, Any]:
    """The results of one stdio session."""
    return anyio.run(_session, server_env)


def test_the_help_lists_the_tools_the_server_has(calls: dict[str, Any]) -> None:
    from click.testing import CliRunner

    from rag_pipeline.cli import main

    help_text = " ".join(CliRunner().invoke(main, ["mcp", "--help"]).output.split())
    listed = re.search(r"Tools: ([a-z_, ]+)\.", help_text)
    assert listed is not None, help_text
    assert set(listed.group(1).split(", ")) == {tool.name for tool in calls["tools"]}


def test_list_tools_shows_the_five_tools_with_schemas(calls: dict[str, Any]) -> None:
    tools = {tool.name: tool for tool in calls["tools"]}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description
        assert len(tool.description) > 80
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is True
    search = tools["search_knowledge"].input_schema
    assert search["required"] == ["query"]
    assert set(search["properties"]) == {"query", "source_types", "languages", "top_k"}
    assert search["properties"]["query"]["description"]
    assert search["properties"]["top_k"]["maximum"] == 20
    ad = tools["find_ad_entity"].input_schema
    assert ad["required"] == ["name"]
    assert "window" in json.dumps(ad["properties"]["entity_type"])
    assert tools["get_knowledge_stats"].input_schema.get("properties", {}) == {}
    assert tools["lookup_development_docs"].input_schema["required"] == ["topic"]


def test_search_knowledge_returns_the_warehouse_page(calls: dict[str, Any]) -> None:
    result = _structured(calls["search"])
    best = result["hits"][0]
    assert best["title"] == "Setting up Warehouses and Locators"
    assert best["source_id"] == "demo/warehouse-and-locators.md"
    assert best["rank"] == 1
    assert "locator" in best["text"].lower()
    assert {"breadcrumb", "section", "url", "score"} <= set(best)
    # Issue 35: a hit carries its lineage, and the id that get_document_lineage takes.
    assert best["document_id"]
    assert best["source_version"]
    assert best["partition"] == "demo"
    assert best["ingested_at"].startswith("20")
    assert best["run_id"]
    filtered = _structured(calls["search_filtered"])["hits"]
    assert filtered
    assert {h["source_type"] for h in filtered} == {"wiki"}
    assert _structured(calls["search_none"])["hits"] == []
    assert _structured(calls["search_none"])["note"]


def test_search_knowledge_says_when_it_corrected_a_misspelled_word(calls: dict[str, Any]) -> None:
    typo = _structured(calls["search_typo"])
    assert typo["query"] == "set up locators in a warehose"
    assert typo["searched_as"] == "set up locators in a warehouse"
    assert typo["hits"][0]["source_id"] == "demo/warehouse-and-locators.md"
    assert _structured(calls["search"]).get("searched_as") is None


def test_get_knowledge_stats_counts_the_demo(calls: dict[str, Any]) -> None:
    stats = _structured(calls["stats"])
    files = [s for s in stats["sources"] if s["source_type"] == "files"]
    assert files == [
        {"source_type": "files", "language": "en_US", "documents": 9, "chunks": files[0]["chunks"]}
    ]
    assert files[0]["chunks"] > 9
    assert stats["embedding_model"] == "all-MiniLM-L6-v2-int8"
    assert stats["dimension"] == 384
    wiki = [s for s in stats["sources"] if s["source_type"] == "wiki"]
    assert sum(s["documents"] for s in wiki) == len(_DEVELOPER_WIKI_PAGES | _OTHER_WIKI_PAGES)
    assert stats["total_documents"] == 9 + 10 + len(_AD_DOCUMENTS)
    runs = {r["source_type"]: r for r in stats["last_runs"]}
    assert set(runs) == {"files", "wiki"}
    assert runs["wiki"]["partition_key"] == "export:demo"
    assert runs["files"]["finished_at"]


def test_find_ad_entity_matches_names_identifiers_and_ids(calls: dict[str, Any]) -> None:
    by_name = _structured(calls["ad_name"])["matches"]
    assert [(m["source_id"], m["match"]) for m in by_name] == [("AD_Window:143", "name")]
    assert by_name[0]["entity_type"] == "window"
    assert "C_Order" in by_name[0]["text"]
    # The table whose key column it is comes first, then entries that mention it.
    by_identifier = _structured(calls["ad_identifier"])["matches"]
    assert [(m["source_id"], m["match"]) for m in by_identifier] == [
        ("AD_Table:291", "identifier"),
        ("AD_Window:143", "mention"),
    ]
    (table,) = _structured(calls["ad_identifier_table"])["matches"]
    assert (table["source_id"], table["match"]) == ("AD_Table:291", "identifier")
    (by_key,) = _structured(calls["ad_process_key"])["matches"]
    assert (by_key["source_id"], by_key["match"]) == ("AD_Process:238", "identifier")
    (process,) = _structured(calls["ad_id"])["matches"]
    assert (process["source_id"], process["match"], process["entity_type"]) == (
        "AD_Process:238",
        "source_id",
        "process",
    )


def test_find_ad_entity_without_a_match_says_why(calls: dict[str, Any]) -> None:
    # No exact match and no searchable dictionary chunk (only the demo corpus is embedded).
    for key in ("ad_wrong_type", "ad_unknown"):
        result = _structured(calls[key])
        assert result["matches"] == []
        assert "ad_metadata" in result["note"]


# The demo wiki export: pages in Plug-In_Development or Developer, and the other one (its
# eleventh page is a redirect, not a document).
_DEVELOPER_WIKI_PAGES = {"101", "102", "103", "104", "105", "106", "107", "108", "110"}
_OTHER_WIKI_PAGES = {"109"}


def test_lookup_development_docs_keeps_to_developer_pages(calls: dict[str, Any]) -> None:
    hits = _structured(calls["dev"])["hits"]
    found = {(h["source_type"], h["source_id"]) for h in hits}
    developer = {("wiki", page) for page in _DEVELOPER_WIKI_PAGES}
    # Wiki pages by category, the files corpus's plug-in page by its title.
    assert found <= developer | {("files", "demo/developing-a-plugin.md")}
    assert ("wiki", "102") in found  # Developing Plug-Ins - Model Events
    # The release overview is found by plain search, never by the developer lookup.
    plain = {(h["source_type"], h["source_id"]) for h in _structured(calls["plain_new"])["hits"]}
    assert ("wiki", "109") in plain
    new = {(h["source_type"], h["source_id"]) for h in _structured(calls["dev_new"])["hits"]}
    assert new <= developer | {("files", "demo/developing-a-plugin.md")}


def test_bad_arguments_are_tool_errors_not_crashes(calls: dict[str, Any]) -> None:
    for key in ("empty_query", "bad_type", "bad_top_k"):
        result = calls[key]
        assert result.is_error, key
        assert _text(result)
    assert "must not be empty" in _text(calls["empty_query"])


def test_every_argument_is_bounded_before_any_sql(calls: dict[str, Any]) -> None:
    huge = calls["ad_huge"]
    assert huge.is_error
    assert f"at most {MAX_NAME_CHARS} characters" in _text(huge)
    # Refused by the argument check: well under a second here, against 1,001 s unbounded.
    assert calls["ad_huge_seconds"] < 30
    assert len(_text(huge)) < 2000  # the name is not echoed back whole
    for key, limit in (
        ("too_many_filters", f"at most {MAX_FILTERS} items"),
        ("long_query", "at most 2000 characters"),
        ("long_topic", "at most 2000 characters"),
    ):
        assert calls[key].is_error, key
        assert limit in _text(calls[key]), _text(calls[key])


def test_an_unavailable_index_is_a_tool_error(tmp_path: Path) -> None:
    env = {"RAG_HOME": str(tmp_path), "RAG_VECTORDB_URL": "postgresql://nobody@127.0.0.1:1/none"}

    async def call() -> CallToolResult:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "rag_pipeline.cli", "mcp"], env=_child_env(env)
        )
        async with Client(params, read_timeout_seconds=120) as client:
            return await client.call_tool("get_knowledge_stats", {})

    result = anyio.run(call)
    assert result.is_error
    assert "knowledge index is unavailable" in _text(result)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


TOKEN = "test-token-0123456789abcdef"
_PROTOCOL = "2025-06-18"
_MAX_SESSIONS = 4
_PER_CLIENT = 2


@pytest.fixture(scope="module")
def http_port(server_env: dict[str, str]) -> Iterator[int]:
    """`rag mcp --http PORT` with a token and small session caps, serving the demo index."""
    port = _free_port()
    env = {
        **os.environ,
        **server_env,
        "RAG_MCP_TOKEN": TOKEN,
        "RAG_MCP_MAX_SESSIONS": str(_MAX_SESSIONS),
        "RAG_MCP_MAX_SESSIONS_PER_CLIENT": str(_PER_CLIENT),
        # Long, so that only a cancellation can end a blocked statement early.
        "RAG_SEARCH_STATEMENT_TIMEOUT_MS": "60000",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "rag_pipeline.cli", "mcp", "--http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "the HTTP server did not start"
            time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
        # Where the token is, never the token itself.
        assert b"RAG_MCP_TOKEN" in stderr
        assert TOKEN.encode() not in stderr


def _headers(token: str | None = TOKEN, session: str | None = None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": _PROTOCOL,
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if session is not None:
        headers["Mcp-Session-Id"] = session
    return headers


def _initialize(port: int, client: str, token: str | None = TOKEN) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": _PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": client, "version": "1"},
        },
    }
    return httpx2.post(
        f"http://127.0.0.1:{port}/mcp", json=body, headers=_headers(token), timeout=60
    )


def _open_session(port: int, client: str) -> str:
    response = _initialize(port, client)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    response = httpx2.post(
        f"http://127.0.0.1:{port}/mcp",
        json=initialized,
        headers=_headers(session=session),
        timeout=60,
    )
    assert response.status_code == 202, response.text
    return session


def _list_tools_status(port: int, session: str) -> int:
    request = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    response = httpx2.post(
        f"http://127.0.0.1:{port}/mcp", json=request, headers=_headers(session=session), timeout=60
    )
    return response.status_code


async def _sdk_search(port: int, token: str) -> tuple[set[str], CallToolResult]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client,
    ):
        names = {tool.name for tool in (await client.list_tools()).tools}
        return names, await client.call_tool(
            "search_knowledge", {"query": "payment allocation", "top_k": 2}
        )


def test_streamable_http_with_the_token(http_port: int) -> None:
    names, result = anyio.run(_sdk_search, http_port, TOKEN)
    assert names == TOOLS
    hits = _structured(result)["hits"]
    assert hits[0]["source_id"] == "demo/payment-allocation.json"


def test_streamable_http_refuses_a_missing_or_wrong_token(http_port: int) -> None:
    for token in (None, "wrong-token-0123456789abcdef", TOKEN + "x", TOKEN[:-1]):
        response = _initialize(http_port, "intruder", token=token)
        assert response.status_code == 401, token
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert "mcp-session-id" not in response.headers
    for method in ("GET", "DELETE"):
        response = httpx2.request(method, f"http://127.0.0.1:{http_port}/mcp", timeout=30)
        assert response.status_code == 401
    # Not even a session id from a token holder lets a request without the token in.
    session = _open_session(http_port, "owner")
    request = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    headers = _headers(token=None, session=session)
    response = httpx2.post(f"http://127.0.0.1:{http_port}/mcp", json=request, headers=headers)
    assert response.status_code == 401
    # And the SDK's client without the token gets nothing.
    with pytest.raises(Exception):  # noqa: B017, PT011 — the SDK wraps the 401 its own way
        anyio.run(_sdk_search, http_port, "wrong-token-0123456789abcdef")


def test_deeply_nested_arguments_are_refused_and_the_server_serves_on(http_port: int) -> None:
    # Issue 49, item 6: a 400 KB nested array in a tool call's arguments.
    session = _open_session(http_port, "nested")
    depth = 200_000
    body = (
        b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": '
        b'"search_knowledge", "arguments": {"query": ' + b"[" * depth + b"]" * depth + b"}}}"
    )
    response = httpx2.post(
        f"http://127.0.0.1:{http_port}/mcp",
        content=body,
        headers=_headers(session=session),
        timeout=60,
    )
    assert response.status_code < 500, response.text
    assert "search_knowledge" not in response.text or "error" in response.text.lower()
    assert _list_tools_status(http_port, session) == 200
    names, result = anyio.run(_sdk_search, http_port, TOKEN)
    assert names == TOOLS
    assert not result.is_error


def test_one_client_opening_sessions_in_a_loop_locks_nobody_out(http_port: int) -> None:
    legit = _open_session(http_port, "legit")
    flood = [_open_session(http_port, "flood") for _ in range(3 * _MAX_SESSIONS)]
    # Every opening was admitted: the flooding client's own oldest idle sessions made room.
    assert _list_tools_status(http_port, flood[-1]) == 200
    assert _list_tools_status(http_port, flood[-_PER_CLIENT]) == 200
    assert _list_tools_status(http_port, flood[0]) == 404
    # The other client's session survived the flood, and new clients get in.
    assert _list_tools_status(http_port, legit) == 200
    names, result = anyio.run(_sdk_search, http_port, TOKEN)
    assert names == TOOLS
    assert not result.is_error


def test_many_clients_evict_the_idle_longest_session_at_the_total_cap(http_port: int) -> None:
    sessions = [_open_session(http_port, f"client-{n}") for n in range(_MAX_SESSIONS + 2)]
    # The newest fit; the two idle longest made room for the last two.
    for session in sessions[-_MAX_SESSIONS:]:
        assert _list_tools_status(http_port, session) == 200
    for session in sessions[:2]:
        assert _list_tools_status(http_port, session) == 404


# The first statement of get_knowledge_stats; it waits while rag.documents is locked.
_STATS_SQL = "%FROM rag.documents d GROUP BY%"


def _stats_statements(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE %s AND state = 'active'"
            " AND pid <> pg_backend_pid()",
            (_STATS_SQL,),
        ).fetchone()
    return int(row[0]) if row else 0


@contextmanager
def _documents_locked(url: str) -> Iterator[None]:
    with psycopg.connect(url) as lock:
        lock.execute("LOCK TABLE rag.documents IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            lock.rollback()


def _wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_a_client_going_away_cancels_its_statement(
    http_port: int, server_env: dict[str, str]
) -> None:
    url = server_env["RAG_VECTORDB_URL"]
    session = _open_session(http_port, "impatient")
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
    call["params"] = {"name": "get_knowledge_stats", "arguments": {}}
    endpoint = f"http://127.0.0.1:{http_port}/mcp"
    warm = httpx2.post(endpoint, json=call, headers=_headers(session=session), timeout=60)
    assert warm.status_code == 200
    with _documents_locked(url):
        with pytest.raises(httpx2.ReadTimeout):  # the raw client gives up and disconnects
            httpx2.post(endpoint, json=call, headers=_headers(session=session), timeout=3)
        # The statement was blocked behind the lock until the client went away; then it was
        # cancelled, long before its 60-second statement timeout, the lock still held.
        assert _wait_for(lambda: _stats_statements(url) == 0, 15)

        async def cancelled_sdk_call() -> int:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=120) as http,
                Client(streamable_http_client(endpoint, http_client=http)) as client,
                anyio.create_task_group() as group,
            ):
                group.start_soon(client.call_tool, "get_knowledge_stats", {})
                running = await anyio.to_thread.run_sync(
                    lambda: _wait_for(lambda: _stats_statements(url) == 1, 30)
                )
                group.cancel_scope.cancel()
                return running

        assert anyio.run(cancelled_sdk_call)
        assert _wait_for(lambda: _stats_statements(url) == 0, 15)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("get_knowledge_stats", {}),
        # Issue 49, item 12: it opened a connection of its own, without a statement timeout.
        ("get_document_lineage", {"target": "demo/payment-allocation.json"}),
    ],
)
def test_a_statement_past_the_timeout_is_a_tool_error(
    server_env: dict[str, str], tool: str, arguments: dict[str, Any]
) -> None:
    url = server_env["RAG_VECTORDB_URL"]

    async def call() -> tuple[CallToolResult, float]:
        env = _child_env({**server_env, "RAG_SEARCH_STATEMENT_TIMEOUT_MS": "1000"})
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "rag_pipeline.cli", "mcp"], env=env
        )
        async with Client(params, read_timeout_seconds=120) as client:
            assert not (await client.call_tool(tool, arguments)).is_error
            with _documents_locked(url):
                started = time.monotonic()
                result = await client.call_tool(tool, arguments)
                return result, time.monotonic() - started

    result, seconds = anyio.run(call)
    assert result.is_error
    assert "RAG_SEARCH_STATEMENT_TIMEOUT_MS" in _text(result)
    assert seconds < 30  # bounded by the 1-second timeout, not by the lock
