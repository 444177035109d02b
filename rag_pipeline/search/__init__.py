"""Search over the index: retrieval only, no Dagster here, usable from any Python program.

from rag_pipeline.search import search
for hit in search("how do I create a locator?", top_k=5):
    print(hit.title, hit.section_title, hit.score)

This is the package's public API: `rag ask` (`rag_pipeline.answer`), the MCP server
(`rag_pipeline.mcp`), the metrics (`rag_pipeline.evaluation`), the CLI and the Dagster checks
import these names only (`.importlinter` holds them to it). What the sources declare for
search (ranking rules, vocabularies) has its types in `rag_pipeline.core`; the ranking
constants are `rag_pipeline.settings.ranking.Ranking`; the connection pool is
`rag_pipeline.store.pool`.
"""

from rag_pipeline.search.engine import Searcher, search
from rag_pipeline.search.hits import LegScores, SearchHit
from rag_pipeline.search.plugins import source_vocabularies
from rag_pipeline.search.queries import Mode
from rag_pipeline.search.query import MAX_QUERY_CHARS, Query, QueryError
from rag_pipeline.search.request import SearchRequest
from rag_pipeline.search.understanding import PreparedQuery

__all__ = [
    "MAX_QUERY_CHARS",
    "LegScores",
    "Mode",
    "PreparedQuery",
    "Query",
    "QueryError",
    "SearchHit",
    "SearchRequest",
    "Searcher",
    "search",
    "source_vocabularies",
]
