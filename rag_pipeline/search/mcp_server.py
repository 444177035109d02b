"""The knowledge tools for AI agents, as a Model Context Protocol server (`rag mcp`).

Five tools over the same index `rag search` uses: search, statistics, Application Dictionary
lookups, developer documentation, the lineage of one document. Descriptions and argument
schemas are written for the model that chooses among them. A failure (no database, bad
arguments) comes back as a tool error the model can read, never as a crash of the server.

Every argument is bounded (lengths, counts) before any SQL runs; every statement runs on the
shared search pool (`pool.py`): with a statement timeout, reconnecting after a restart of the
server, and cancelled when the request that asked is cancelled or its client goes away.

Transports: stdio (what Claude Desktop, Claude Code and most clients launch; whoever starts
the process owns it, so no token), or streamable HTTP on the loopback interface only
(`--http PORT`), behind a bearer token and session caps (`mcp_http.py`).

A new tool: a method of `KnowledgeTools` (bounding its arguments with `_bounded`), and a
function registered with `_tool` in one of the `_add_*` functions, calling it through `_run`,
with `Field` bounds in its signature and its description as its docstring.
"""

import logging
import os
import sys
import threading
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from rag_pipeline.search.engine import Searcher, SearchHit
from rag_pipeline.search.mcp_http import ensure_token, http_app
from rag_pipeline.search.pool import Interrupt, SearchPool, search_pool
from rag_pipeline.search.query import MAX_QUERY_CHARS
from rag_pipeline.settings import ConfigError, Settings, load_settings
from rag_pipeline.store.knowledge import (
    AD_ENTITY_PREFIXES,
    AD_SOURCE_TYPE,
    developer_documents,
    entity_of,
    find_ad_entities,
    knowledge_stats,
)

logger = logging.getLogger(__name__)

SERVER_NAME = "rag-pipeline-knowledge"
LOOPBACK = "127.0.0.1"
HTTP_PATH = "/mcp"
# A section can be long; an agent reading ten of them needs them bounded.
_MAX_SECTION_CHARS = 6000
_MAX_AD_BODY_CHARS = 2000
# Developer pages are found by searching widely, then keeping the developer documents.
_DEVELOPER_POOL = 100

# Bounds of the tools' arguments, checked before any SQL (issue 38: a 1,000,000-character name
# in a regular expression ran for 1,001 s). Dictionary names and DB identifiers are at most 60
# characters in iDempiere; a source type or language code is a short word.
MAX_NAME_CHARS = 200
MAX_FILTERS = 10
MAX_FILTER_CHARS = 32
MAX_TOP_K = 20

EntityType = Literal["window", "tab", "field", "process", "table"]
_T = TypeVar("_T")

INSTRUCTIONS = """\
Knowledge about the iDempiere ERP (open-source ERP/CRM on Java/OSGi/PostgreSQL): user how-tos, \
wiki pages, knowledge-base articles and the Application Dictionary (windows, tabs, fields, \
processes, tables with their DB column names). Use search_knowledge for any question about \
using or configuring iDempiere; find_ad_entity when a window, table, field, process or DB \
identifier (like C_BPartner_ID or M_Locator) is named; lookup_development_docs for plug-in \
and Java/OSGi development; get_knowledge_stats to see what the index holds. Cite the url of \
what you use."""


class KnowledgeHit(BaseModel):
    """One matching section of a document."""

    rank: int = Field(description="1 = best match")
    title: str = Field(description="Title of the document")
    breadcrumb: str = Field(description="Where the document sits (menu path, wiki category…)")
    section: str = Field(description="Heading of the matching section")
    url: str = Field(description="Link to the original; cite it")
    score: float = Field(description="Relevance, higher is better (cosine similarity)")
    source_type: str = Field(description="wiki, k_entry, ad_metadata or files")
    source_id: str
    language: str
    text: str = Field(description="The whole section the match is in, as Markdown")
    truncated: bool = Field(description=f"True when text was cut at {_MAX_SECTION_CHARS} chars")
    document_id: str = Field(description="Give it to get_document_lineage for its lineage")
    source_version: str = Field(description="The source's version (wiki revision, Updated…)")
    partition: str = Field(description="The partitions listing the document, comma-separated")
    ingested_at: str = Field(description="When its index rows were written (ISO 8601)")
    run_id: str = Field(description="The Dagster run that built it")


class KnowledgeResult(BaseModel):
    """Sections matching a query, best first."""

    query: str
    searched_as: str | None = Field(
        default=None, description="The query as searched, when misspelled words were corrected"
    )
    hits: list[KnowledgeHit]
    note: str | None = Field(default=None, description="Why there are few or no hits")


class SourceStats(BaseModel):
    """Documents and chunks of one source in one language."""

    source_type: str
    language: str
    documents: int
    chunks: int


class LastRun(BaseModel):
    """The newest ingest run of a source."""

    source_type: str
    partition_key: str
    finished_at: str = Field(description="ISO 8601 timestamp")
    stats: dict[str, Any] = Field(description="Documents new/changed/deleted/failed, chunks…")


class KnowledgeStatsResult(BaseModel):
    """What the knowledge index holds."""

    total_documents: int
    total_chunks: int
    embedding_model: str | None
    dimension: int | None
    sources: list[SourceStats]
    last_runs: list[LastRun]


class ADMatch(BaseModel):
    """One Application Dictionary entry."""

    entity_type: str = Field(description="window, tab, field, process or table")
    source_id: str = Field(description="AD_<Entity>:<id>, e.g. AD_Window:143")
    language: str
    title: str
    breadcrumb: str
    url: str
    match: Literal["source_id", "name", "identifier", "mention", "search"] = Field(
        description="How it was found: its id, its name, the DB identifier it defines (table "
        "or column name), a mention of the identifier in its text, or search by meaning"
    )
    score: float | None = Field(default=None, description="Search relevance (search only)")
    text: str = Field(description="The entry's description: help text, columns, fields…")


class ADResult(BaseModel):
    """Application Dictionary entries for a name, exact matches first."""

    name: str
    matches: list[ADMatch]
    note: str | None = None


class KnowledgeTools:
    """The tools' logic; the index and model are opened on first use and then kept."""

    def __init__(self, settings: Settings | None = None) -> None:
        """Use `settings` (default: the environment, read on first use)."""
        self._settings = settings
        self._searcher: Searcher | None = None
        self._pool: SearchPool | None = None
        self._lock = threading.Lock()

    @property
    def settings(self) -> Settings:
        """The configuration in use."""
        if self._settings is None:
            self._settings = load_settings()
        return self._settings

    def searcher(self) -> Searcher:
        """The shared searcher (built once; loading the model takes about a second)."""
        with self._lock:
            if self._searcher is None:
                self._searcher = Searcher(self.settings)
            return self._searcher

    def pool(self) -> SearchPool:
        """The process's search pool (shared with the searcher; needs no model)."""
        with self._lock:
            if self._pool is None:
                self._pool = search_pool(self.settings)
            return self._pool

    def warm_up(self) -> None:
        """Open the index and load the model now, so the first tool call is fast."""
        self.searcher()

    def search_knowledge(
        self,
        query: str,
        source_types: list[str] | None = None,
        languages: list[str] | None = None,
        top_k: int = 5,
    ) -> KnowledgeResult:
        """Sections matching `query`."""
        query = _bounded(query, "query", MAX_QUERY_CHARS)
        source_types = _filters(source_types, "source_types")
        languages = _filters(languages, "languages")
        top_k = _top_k(top_k)
        searcher = self.searcher()
        typed = searcher.prepare(query, None, languages or None)
        searched = searcher.corrected(typed)
        hits = searcher.search(
            searched,
            top_k=top_k,
            source_types=source_types or None,
            languages=languages or None,
        )
        note = None if hits else "no matching sections; try other words or fewer filters"
        return KnowledgeResult(
            query=query,
            searched_as=searched.text if searched.text != typed.text else None,
            hits=_hits(hits),
            note=note,
        )

    def get_knowledge_stats(self) -> KnowledgeStatsResult:
        """Counts per source and language, the model, the last run per source."""
        stats = self.pool().run(knowledge_stats)
        return KnowledgeStatsResult(
            total_documents=sum(c.documents for c in stats.counts),
            total_chunks=sum(c.chunks for c in stats.counts),
            embedding_model=stats.model_id,
            dimension=stats.dimension,
            sources=[SourceStats.model_validate(c, from_attributes=True) for c in stats.counts],
            last_runs=[
                LastRun(
                    source_type=r.source_type,
                    partition_key=r.partition_key,
                    finished_at=r.finished_at.isoformat(),
                    stats=r.stats,
                )
                for r in stats.last_runs
            ],
        )

    def find_ad_entity(
        self, name: str, entity_type: EntityType | None = None, top_k: int = 5
    ) -> ADResult:
        """Exact source id, name or DB identifier matches first, then search."""
        name = _bounded(name, "name", MAX_NAME_CHARS)
        if entity_type is not None and entity_type not in AD_ENTITY_PREFIXES:
            raise ToolError(f"entity_type must be one of {', '.join(AD_ENTITY_PREFIXES)}")
        top_k = _top_k(top_k)
        exact = self.pool().run(
            lambda conn: find_ad_entities(conn, name, entity_type=entity_type, limit=top_k)
        )
        matches = [
            ADMatch.model_validate(
                asdict(e) | {"match": _exact(e.match), "text": _cut(e.body, _MAX_AD_BODY_CHARS)[0]}
            )
            for e in exact
        ]
        seen = {(m.source_id, m.language) for m in matches}
        if len(matches) < top_k:
            prefix = AD_ENTITY_PREFIXES[entity_type] + ":" if entity_type else ""
            # Several entity types share the pool: ask for more when one type is wanted.
            pool = top_k * (4 if entity_type else 1)
            for hit in self.searcher().search(name, top_k=pool, source_types=[AD_SOURCE_TYPE]):
                if len(matches) >= top_k:
                    break
                if not hit.source_id.startswith(prefix) or (hit.source_id, hit.language) in seen:
                    continue
                seen.add((hit.source_id, hit.language))
                matches.append(
                    ADMatch(
                        entity_type=entity_of(hit.source_id),
                        source_id=hit.source_id,
                        language=hit.language,
                        title=hit.title,
                        breadcrumb=hit.breadcrumb,
                        url=hit.url,
                        match="search",
                        score=round(hit.score, 4),
                        text=_cut(hit.parent_text or hit.text, _MAX_AD_BODY_CHARS)[0],
                    )
                )
        note = (
            None
            if matches
            else "nothing in the Application Dictionary index matches; is ad_metadata ingested? "
            "(see get_knowledge_stats)"
        )
        return ADResult(name=name, matches=matches, note=note)

    def lookup_development_docs(self, topic: str, top_k: int = 5) -> KnowledgeResult:
        """Search restricted to developer documentation."""
        topic = _bounded(topic, "topic", MAX_QUERY_CHARS)
        top_k = _top_k(top_k)
        names = [n.strip() for n in self.settings.developer_categories.split(",") if n.strip()]
        developer = self.pool().run(lambda conn: developer_documents(conn, names))
        if not developer:
            return KnowledgeResult(
                query=topic,
                hits=[],
                note="no developer documentation is indexed (wiki pages in the categories "
                f"{', '.join(names)} or plug-in pages); use search_knowledge instead",
            )
        pool = self.searcher().search(topic, top_k=max(_DEVELOPER_POOL, top_k))
        kept = [h for h in pool if (h.source_type, h.source_id, h.language) in developer]
        hits = _hits(kept[:top_k])
        note = None if hits else "no developer page matches; try search_knowledge"
        return KnowledgeResult(query=topic, hits=hits, note=note)


def _exact(match: str) -> Literal["source_id", "name", "identifier", "mention"]:
    if match in ("source_id", "name", "identifier"):
        return match  # pyright: ignore[reportReturnType]  # narrowed by the test above
    return "mention"


def _bounded(value: str, name: str, limit: int) -> str:
    """`value` stripped; a tool error when empty or longer than `limit` characters."""
    if len(value) > limit:
        raise ToolError(f"{name} has {len(value):,} characters; at most {limit:,} are allowed")
    value = value.strip()
    if not value:
        raise ToolError(f"{name} must not be empty")
    return value


def _filters(values: list[str] | None, name: str) -> list[str] | None:
    """A filter list within MAX_FILTERS entries of MAX_FILTER_CHARS characters (None: none)."""
    if not values:
        return None
    if len(values) > MAX_FILTERS:
        raise ToolError(f"{name} has {len(values)} entries; at most {MAX_FILTERS} are allowed")
    for value in values:
        if len(value) > MAX_FILTER_CHARS:
            raise ToolError(
                f"an entry of {name} has {len(value):,} characters; at most {MAX_FILTER_CHARS}"
            )
    return values


def _top_k(top_k: int) -> int:
    if not 1 <= top_k <= MAX_TOP_K:
        raise ToolError(f"top_k must be between 1 and {MAX_TOP_K}")
    return top_k


def _cut(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit] + " […]", True)


def _hits(hits: list[SearchHit]) -> list[KnowledgeHit]:
    result: list[KnowledgeHit] = []
    for rank, hit in enumerate(hits, 1):
        text, truncated = _cut(hit.parent_text or hit.text, _MAX_SECTION_CHARS)
        shown = {"rank": rank, "section": hit.section_title, "score": round(hit.score, 4)}
        # The hit's other fields carry over by name; fields KnowledgeHit lacks are dropped.
        fields = hit.to_dict() | shown | {"text": text, "truncated": truncated}
        result.append(KnowledgeHit.model_validate(fields))
    return result


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


def _lineage_json(
    tools: KnowledgeTools, target: str, source_type: str | None, language: str | None
) -> dict[str, Any]:
    from rag_pipeline.operations.runtime import ready_conninfo
    from rag_pipeline.store import lineage
    from rag_pipeline.store.connection import connect

    wanted = _bounded(target, "target", MAX_NAME_CHARS * 10)
    settings = tools.settings
    with connect(ready_conninfo(settings)) as conn:
        try:
            return lineage.lineage_of(
                conn,
                wanted,
                source_type=source_type,
                language=language,
                ui_url=settings.dagster_ui_url,
            )
        except lineage.UnknownDocumentError as exc:
            raise ToolError(str(exc)) from exc


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
        return await _run(lambda: _lineage_json(tools, target, source_type, language))


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

    Over HTTP every request must carry `token` (default: `mcp_http.ensure_token`).
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
    config = uvicorn.Config(
        http_app(app, settings, token), host=LOOPBACK, port=http_port, log_level="warning"
    )
    uvicorn.Server(config).run()
