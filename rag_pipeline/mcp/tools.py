"""The knowledge tools' logic for the MCP server (`server.py`): what each tool computes
and returns, the result models the agent reads, and the bounds every argument is checked
against before any SQL runs.
"""

import threading
from dataclasses import asdict
from typing import Any, Literal

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from rag_pipeline.search import MAX_QUERY_CHARS, Searcher, SearchHit
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.sources.idempiere.ad import SOURCE_TYPE as DICTIONARY
from rag_pipeline.store.knowledge import (
    AD_ENTITY_PREFIXES,
    developer_documents,
    entity_of,
    find_ad_entities,
    knowledge_stats,
)
from rag_pipeline.store.pool import SearchPool, search_pool

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
            lambda conn: find_ad_entities(
                conn, name, source_type=DICTIONARY, entity_type=entity_type, limit=top_k
            )
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
            for hit in self.searcher().search(name, top_k=pool, source_types=[DICTIONARY]):
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

    def get_document_lineage(
        self, target: str, source_type: str | None = None, language: str | None = None
    ) -> dict[str, Any]:
        """The lineage of the document of `target` (store/lineage.py): `rag show --json`."""
        from rag_pipeline.store import lineage

        wanted = _bounded(target, "target", MAX_NAME_CHARS * 10)
        ui_url = self.settings.dagster_ui_url
        try:
            # The shared pool, as every tool: its statement timeout and cancellation (issue 49).
            return self.pool().run(
                lambda conn: lineage.lineage_of(
                    conn, wanted, source_type=source_type, language=language, ui_url=ui_url
                )
            )
        except lineage.UnknownDocumentError as exc:
            raise ToolError(str(exc)) from exc


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
