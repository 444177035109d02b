"""Known-answer retrieval check on the dictionary's index, built from the dictionary itself.

Partitioned like the dictionary: it runs once in each dictionary run, on that partition's
entity type and language. Only windows and processes have cases; another partition, or one
whose cases are not indexed yet, has nothing to judge and records no result (skipped).
"""

from typing import Any

import dagster as dg

from rag_pipeline.defs.ad_metadata.partitions import ad_metadata_partitions
from rag_pipeline.orchestration.checks import (
    CheckEvents,
    check_op_name,
    judged_partitions,
    partition_check,
    per_partition,
)
from rag_pipeline.orchestration.source_registry import AD_METADATA, EMBEDDINGS
from rag_pipeline.resources.embedder import EmbedderResource
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.sources.idempiere.ad import parse_partition_key
from rag_pipeline.sources.idempiere.known_answers import known_answers_for, score_known_answers
from rag_pipeline.store.connection import connect
from rag_pipeline.store.reports import indexed_source_ids

KNOWN_ANSWERS = "known_answers_in_top_5"
# Below this share of cases found in the top 5, retrieval has regressed.
MIN_HIT_RATE = 0.8
# Cases per partition, for the entity types that have them.
CASES = {"window": 20, "process": 10}

_SPEC = partition_check(
    AD_METADATA,
    ad_metadata_partitions,
    stage=EMBEDDINGS,
    name=KNOWN_ANSWERS,
    blocking=False,
    description="For a sample of the partition's windows or processes, a query made from the "
    "entity's own description (in the partition's language) returns that entity in the top 5 "
    "(no LLM involved). Cases whose entity is not indexed are left out; a hit rate under "
    f"{MIN_HIT_RATE:.0%} warns. Other entity types have no case: skipped.",
)


@dg.multi_asset_check(specs=[_SPEC], can_subset=True, name=check_op_name(_SPEC))
def ad_metadata_known_answers(
    context: dg.AssetCheckExecutionContext,
    vectordb: VectorDBResource,
    embedder: EmbedderResource,
) -> CheckEvents:
    """Score the partition's known-answer cases against the index as it is now."""
    yield from judged_partitions(
        context, _SPEC.key, lambda key: judge_known_answers(vectordb, embedder, key)
    )


def judge_known_answers(
    vectordb: VectorDBResource, embedder: EmbedderResource, partition_key: str
) -> dg.AssetCheckResult | None:
    """The partition's score, or None when it has no indexed case (nothing to judge)."""
    from rag_pipeline.search import Searcher

    partition = parse_partition_key(partition_key)
    limit = CASES.get(partition.entity, 0)
    if not limit:
        return None
    settings = vectordb.settings()
    cases = known_answers_for(
        settings,
        windows=limit if partition.entity == "window" else 0,
        processes=limit if partition.entity == "process" else 0,
        language=partition.language,
    )
    with connect(vectordb.conninfo()) as conn:
        indexed = indexed_source_ids(conn, AD_METADATA.name, partition.language)
    cases = [case for case in cases if case.expected_source_id in indexed]
    if not cases:
        return None
    searcher = Searcher(settings, embedder=embedder.embedder)
    score = score_known_answers(
        cases,
        lambda query, top_k: [
            (h.source_type, h.source_id) for h in searcher.search(query, top_k=top_k)
        ],
    )
    metadata: dict[str, Any] = {
        "partition": partition_key,
        "cases": score.cases,
        "hit_rate_at_5": round(score.hit_rate, 3),
        per_partition("hit_rate_at_5", partition_key): round(score.hit_rate, 3),
        "mrr_at_5": round(score.mean_reciprocal_rank, 3),
    }
    if score.misses:
        metadata["misses"] = ", ".join(m.expected_source_id for m in score.misses[:20])
    return dg.AssetCheckResult(
        passed=score.hit_rate >= MIN_HIT_RATE,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{AD_METADATA.name}/{partition_key}: {score.hits} of {score.cases} "
        "cases in the top 5",
        metadata=metadata,
    )
