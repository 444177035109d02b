"""Known-answer retrieval check on the dictionary's index, built from the dictionary itself."""

import dagster as dg

from rag_pipeline.orchestration.source_registry import AD_METADATA, EMBEDDINGS
from rag_pipeline.resources.embedder import EmbedderResource
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.sources.idempiere.known_answers import known_answers_for, score_known_answers
from rag_pipeline.store.connection import connect
from rag_pipeline.store.reports import indexed_source_ids

KNOWN_ANSWERS = "known_answers_in_top_5"
# Below this share of cases found in the top 5, retrieval has regressed.
MIN_HIT_RATE = 0.8


@dg.asset_check(
    asset=AD_METADATA.asset_key(EMBEDDINGS),
    name=KNOWN_ANSWERS,
    blocking=False,
    description="For a sample of windows and processes, a query made from the entity's own "
    "description returns that entity in the top 5 (no LLM involved). Cases whose entity is "
    f"not indexed yet are left out; a hit rate under {MIN_HIT_RATE:.0%} warns.",
)
def ad_metadata_known_answers(
    vectordb: VectorDBResource, embedder: EmbedderResource
) -> dg.AssetCheckResult:
    """Score the known-answer cases against the index as it is now."""
    from rag_pipeline.search import Searcher

    settings = vectordb.settings()
    cases = known_answers_for(settings)
    with connect(vectordb.conninfo()) as conn:
        indexed = indexed_source_ids(conn, AD_METADATA.name, "en_US")
    cases = [case for case in cases if case.expected_source_id in indexed]
    searcher = Searcher(settings, embedder=embedder.embedder)
    score = score_known_answers(
        cases,
        lambda query, top_k: [
            (h.source_type, h.source_id) for h in searcher.search(query, top_k=top_k)
        ],
    )
    return dg.AssetCheckResult(
        passed=score.hit_rate >= MIN_HIT_RATE,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "cases": score.cases,
            "hit_rate_at_5": round(score.hit_rate, 3),
            "mrr_at_5": round(score.mean_reciprocal_rank, 3),
            "misses": ", ".join(m.expected_source_id for m in score.misses[:20]),
        },
    )
