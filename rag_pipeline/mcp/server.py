"""The knowledge tools for AI agents, as a Model Context Protocol server (`rag mcp`).

Five tools over the same index `rag search` uses: search, statistics, Application Dictionary
lookups, developer documentation, the lineage of one document. Descriptions and argument
schemas are written for the model that chooses among them. A failure (no database, bad
arguments) comes back as a tool error the model can read, never as a crash of the server.

Every argument is bounded (lengths, counts) before any SQL runs; every statement runs on the
shared search pool (`store/pool.py`): with a statement timeout, reconnecting after a restart
of the server, and cancelled when the request that asked is cancelled or its client goes
away. Search goes through `rag_pipeline.search`'s public API, as any caller's does.

Transports: stdio (what Claude Desktop, Claude Code and most clients launch; whoever starts
the process owns it, so no token), or streamable HTTP on the loopback interface only
(`--http PORT`), behind a bearer token and session caps (`http.py`).

A new tool: a method of `KnowledgeTools` (`tools.py`, bounding its arguments with
`_bounded`), and a function registered here with `_tool` in one of the `_add_*` functions,
calling it through `_run`, with `Field` bounds in its signature and its description as its
docstring.
"""

import logging
import os
import sys
from collections.abc import Callable, Generator
from contextlib import contextmanager
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from rag_pipeline.mcp.http import ensure_token, http_app, http_config
from rag_pipeline.mcp.tools import (
    MAX_FILTER_CHARS,
    MAX_FILTERS,
    MAX_NAME_CHARS,
    MAX_TOP_K,
    ADResult,
    EntityType,
    KnowledgeResult,
    KnowledgeStatsResult,
    KnowledgeTools,
)
from rag_pipeline.search import MAX_QUERY_CHARS
from rag_pipeline.settings import ConfigError, Settings
from rag_pipeline.store.pool import Interrupt

logger = logging.getLogger(__name__)

SERVER_NAME = "rag-pipeline-knowledge"
LOOPBACK = "127.0.0.1"
HTTP_PATH = "/mcp"
_T = TypeVar("_T")

INSTRUCTIONS = """\
Knowledge about the iDempiere ERP (open-source ERP/CRM on Java/OSGi/PostgreSQL): user how-tos, \
wiki pages, knowledge-base articles and the Application Dictionary (windows, tabs, fields, \
processes, tables with their DB column names). Use search_knowledge for any question about \
using or configuring iDempiere; find_ad_entity when a window, table, field, process or DB \
identifier (like C_BPartner_ID or M_Locator) is named; lookup_development_docs for plug-in \
and Java/OSGi development; get_knowledge_stats to see what the index holds. Cite the url of \
what you use."""


def _as_tool_error(call: Callable[[], _T]) -> _T:
    """Run a tool; expected failures become tool errors the model reads, not crashes."""
    from psycopg import Error as DatabaseError
    from psycopg.errors import QueryCanceled

    from rag_pipeline.core.embedding import EmbeddingModelError
    from rag_pipeline.store.migrations import ModelMismatchError

    try:
        return call()
    except ToolError:
        raise
    except (ConfigError, EmbeddingModelError, ModelMismatchError) as exc:
        raise ToolError(f"the knowledge index is not usable: {exc}") from exc
    except QueryCanceled as exc:
        raise ToolError(
            "the query ran past RAG_SEARCH_STATEMENT_TIMEOUT_MS and was cancelled; "
            "try fewer or more specific words"
        ) from exc
    except DatabaseError as exc:
        raise ToolError(f"the knowledge index is unavailable: {_first_line(exc)}") from exc
    except ValueError as exc:
        raise ToolError(str(exc)) from exc


async def _run(call: Callable[[], _T]) -> _T:
    """Run a tool's blocking work in a worker thread, its failures as tool errors.

    When the request is cancelled — the client sent `notifications/cancelled`, or the HTTP
    request it came on went away — the statement it runs is cancelled on the server too,
    instead of running on for nobody.
    """
    interrupt = Interrupt()

    def work() -> _T:
        with interrupt.bound():
            return _as_tool_error(call)

    try:
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(interrupt.cancel)
        raise


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# The tools' arguments, bounded in their schema too (the model sees the limits).
TopK = Annotated[int, Field(description="How many sections to return.", ge=1, le=MAX_TOP_K)]
FilterEntry = Annotated[str, Field(max_length=MAX_FILTER_CHARS)]
SourceTypes = Annotated[
    list[FilterEntry] | None,
    Field(
        max_length=MAX_FILTERS,
        description="Only these sources: 'wiki' (community wiki), 'k_entry' "
        "(knowledge-base articles), 'ad_metadata' (Application Dictionary), 'files' "
        "(local documents). Omit to search everything.",
    ),
]
Languages = Annotated[
    list[FilterEntry] | None,
    Field(
        max_length=MAX_FILTERS,
        description="Only these languages, as iDempiere codes ('en_US', 'sk_SK') or "
        "two letters ('en'). Omit for all.",
    ),
]
# Every tool only reads the local index: clients may run them without asking each time.
_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
_F = TypeVar("_F", bound=Callable[..., Any])


def _tool(server: "MCPServer[Any]", title: str) -> Callable[[_F], _F]:
    """Register the decorated function as a read-only tool; its docstring is the description."""

    def register(fn: _F) -> _F:
        description = " ".join((fn.__doc__ or "").split())
        server.add_tool(fn, title=title, description=description, annotations=_READ_ONLY)
        return fn

    return register


def build_server(tools: KnowledgeTools | None = None) -> "MCPServer[Any]":
    """The MCP server with the five knowledge tools."""
    tools = tools or KnowledgeTools()
    server: MCPServer[Any] = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")
    _add_search_tools(server, tools)
    _add_lookup_tools(server, tools)
    _add_lineage_tool(server, tools)
    return server


def _add_search_tools(server: "MCPServer[Any]", tools: KnowledgeTools) -> None:
    @_tool(server, "Search iDempiere knowledge")
    async def search_knowledge(
        query: Annotated[
            str,
            Field(
                description="What to look for, in natural language or keywords, e.g. "
                "'how to set up a default locator for a warehouse'.",
                min_length=1,
                max_length=MAX_QUERY_CHARS,
            ),
        ],
        source_types: SourceTypes = None,
        languages: Languages = None,
        top_k: TopK = 5,
    ) -> KnowledgeResult:
        """Search all iDempiere knowledge (wiki, knowledge-base articles, Application
        Dictionary, local how-to documents) by meaning. Returns the best matching sections
        with title, breadcrumb, URL, score and the section's full text. Use it first for any
        question about using, configuring or administering iDempiere."""
        return await _run(lambda: tools.search_knowledge(query, source_types, languages, top_k))

    @_tool(server, "What the knowledge index holds")
    async def get_knowledge_stats() -> KnowledgeStatsResult:
        """Counts of documents and chunks per source and language, the embedding model, and
        when each source was last ingested. Use it to know which sources and languages exist
        before filtering, or to explain an empty result."""
        return await _run(tools.get_knowledge_stats)


def _add_lookup_tools(server: "MCPServer[Any]", tools: KnowledgeTools) -> None:
    @_tool(server, "Find Application Dictionary entries")
    async def find_ad_entity(
        name: Annotated[
            str,
            Field(
                description="A window, tab, field, process or table name as shown in iDempiere "
                "('Sales Order', 'Business Partner'), a DB identifier ('C_BPartner_ID', "
                "'C_Order'), or an id like 'AD_Window:143'.",
                min_length=1,
                max_length=MAX_NAME_CHARS,
            ),
        ],
        entity_type: Annotated[
            EntityType | None,
            Field(description="Only this kind of dictionary entry. Omit for all kinds."),
        ] = None,
        top_k: Annotated[
            int, Field(description="How many entries at most.", ge=1, le=MAX_TOP_K)
        ] = 5,
    ) -> ADResult:
        """Look up iDempiere Application Dictionary entries — windows, tabs, fields,
        processes, tables — by exact name, DB identifier (e.g. C_BPartner_ID, C_Order) or id
        (AD_Window:143). Exact matches come first, then the closest by meaning. Returns each
        entry's description, help, columns or fields. Use it when a question names a window,
        table, column or process."""
        return await _run(lambda: tools.find_ad_entity(name, entity_type, top_k))

    @_tool(server, "Search developer documentation")
    async def lookup_development_docs(
        topic: Annotated[
            str,
            Field(
                description="A development topic, e.g. 'register an event handler in a "
                "plug-in', 'model factory', 'OSGi component'.",
                min_length=1,
                max_length=MAX_QUERY_CHARS,
            ),
        ],
        top_k: TopK = 5,
    ) -> KnowledgeResult:
        """Search only developer documentation: plug-in (OSGi bundle) development, event
        handlers, model classes, callouts, processes in Java, build and deployment. Use it
        for programming questions; use search_knowledge for how to use the ERP."""
        return await _run(lambda: tools.lookup_development_docs(topic, top_k))


# Issue 35: a document's lineage (store/lineage.py), the JSON of `rag show --json`.
def _add_lineage_tool(server: "MCPServer[Any]", tools: KnowledgeTools) -> None:
    @_tool(server, "Lineage of one document")
    async def get_document_lineage(
        target: Annotated[
            str,
            Field(
                description="A hit's document_id or chunk_id, or a document's source_id.",
                min_length=1,
                max_length=MAX_NAME_CHARS * 10,
            ),
        ],
        source_type: Annotated[
            str | None,
            Field(
                description="The source, where a source_id is ambiguous.",
                max_length=MAX_FILTER_CHARS,
            ),
        ] = None,
        language: Annotated[
            str | None,
            Field(
                description="The language, where a source_id is ambiguous.",
                max_length=MAX_FILTER_CHARS,
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Where a search hit comes from and how it was built: the document's source,
        partitions, source version and fetch time; each pipeline stage (raw, markdown,
        sanitized, chunks, embeddings) with its run id, hashes, code version and time, and
        failed stages with their reason; its sections and chunks (vector computed or reused);
        the versions kept. Give a hit's document_id or chunk_id."""
        return await _run(lambda: tools.get_document_lineage(target, source_type, language))


@contextmanager
def _stdout_to_stderr() -> Generator[None]:
    """Send file descriptor 1 to stderr for a while.

    Over stdio, stdout carries only protocol messages; starting the embedded PostgreSQL or
    loading the model may write to it (from Python or from a child process inheriting it).
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def serve(settings: Settings, *, http_port: int | None = None, token: str | None = None) -> None:
    """Run the server over stdio, or streamable HTTP on 127.0.0.1:`http_port`, until stopped.

    Over HTTP every request must carry `token` (default: `http.ensure_token`).
    """
    tools = KnowledgeTools(settings)
    if http_port is not None and token is None:
        token = ensure_token(settings).value  # a bad token file fails before the model loads
    with _stdout_to_stderr():
        try:
            tools.warm_up()
        except Exception as exc:  # reported by each tool call; the server still starts
            logger.warning("the knowledge index is not ready yet: %s", _first_line(exc))
    server = build_server(tools)
    if http_port is None or token is None:
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app(
        streamable_http_path=HTTP_PATH,
        host=LOOPBACK,
        session_idle_timeout=settings.mcp_session_idle_seconds,
        # The limiter in front keeps fewer; the SDK's cap is only a backstop.
        max_sessions=settings.mcp_max_sessions,
    )
    uvicorn.Server(http_config(http_app(app, settings, token), settings, http_port)).run()
