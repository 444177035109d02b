"""Search over the index: no Dagster here, usable from any Python program.

from rag_pipeline.search import search
for hit in search("how do I create a locator?", top_k=5):
    print(hit.title, hit.section_title, hit.score)
"""

from rag_pipeline.search.engine import LegScores, Searcher, SearchHit, search
from rag_pipeline.search.query import MAX_QUERY_CHARS, QueryError

__all__ = ["MAX_QUERY_CHARS", "LegScores", "QueryError", "SearchHit", "Searcher", "search"]
