"""Retrieval quality as an asset: labelled questions scored on the index after it changed.

`retrieval_quality` depends on every source's embeddings asset (taken from the registry, so a
renamed key carries over). It runs the labelled sets (`evaluation/labelled_sets.py`) through
`Searcher.search`, the API users call, and records numeric metadata Dagster plots across
materializations: nDCG@10, hit@1, Recall@10, MRR@10 overall, per language and per set, p50/p95
latency and question counts, with the model, ranking overrides and vocabulary in effect as
text, and a table of the 10 worst questions. The check `retrieval_quality_not_worse` compares
the latest materialization with the one before it, and names the questions that got worse.

It runs by itself (the automation sensor) after any embeddings partition it reads was updated,
once those runs are over, at most once per tick of RAG_QUALITY_PERIOD_CRON: so also after the
nightly reconcile. `retrieval_quality_job` runs it with its check, from the UI or CI.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from rag_pipeline.evaluation.labelled_sets import configured_sets
from rag_pipeline.evaluation.scoring import (
    QualityReport,
    ScoredQuestion,
    ranking_overrides,
    score_sets,
    vocabulary_fingerprint,
)
from rag_pipeline.orchestration.asset_common import OWNERS
from rag_pipeline.orchestration.executors import run_tags
from rag_pipeline.orchestration.source_registry import EMBEDDINGS, SOURCES
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.settings import Settings

QUALITY_ASSET = "retrieval_quality"
QUALITY_KEY = dg.AssetKey(QUALITY_ASSET)
QUALITY_GROUP = "quality"
QUALITY_JOB = "retrieval_quality_job"
NOT_WORSE = "retrieval_quality_not_worse"
# Plotted per materialization: overall, per language (`ndcg@10 en_US`) and per set
# (`ndcg@10 [demo]`, nDCG only).
PLOTTED = ("ndcg@10", "hit@1", "recall@10", "mrr@10")
NDCG = "ndcg@10"
# Per-question nDCG@10, read back by the check to name the questions that got worse.
PER_QUESTION = "per_question_ndcg@10"
WORST_SHOWN = 10
# A question counts as worse when its nDCG@10 fell by more than this (float noise aside).
_QUESTION_EPSILON = 1e-6


def quality_automation(cron: str, timezone: str) -> dg.AutomationCondition:
    """After any embeddings partition updated and none is running, at most once per cron tick."""
    ran_this_period = dg.AutomationCondition.newly_requested().since(
        dg.AutomationCondition.cron_tick_passed(cron, timezone)
    )
    return (
        dg.AutomationCondition.any_deps_updated().since_last_handled()
        & ~ran_this_period
        & ~dg.AutomationCondition.any_deps_in_progress()
        & ~dg.AutomationCondition.in_progress()
    ).with_label(f"after_index_updates_at_most_once_per({cron})")


def quality_asset(settings: Settings) -> dg.AssetsDefinition:
    """The `retrieval_quality` asset, downstream of every source's embeddings."""

    @dg.asset(
        name=QUALITY_ASSET,
        group_name=QUALITY_GROUP,
        deps=[spec.asset_key(EMBEDDINGS) for spec in SOURCES],
        kinds={"python", "postgres"},
        owners=OWNERS,
        automation_condition=quality_automation(settings.quality_period_cron, settings.timezone),
        description="Search quality on the labelled questions (the bundled demo set and "
        "RAG_QUALITY_SETS_DIR's): nDCG@10, hit@1, Recall@10, MRR@10, latency.",
    )
    def retrieval_quality(
        context: dg.AssetExecutionContext, vectordb: VectorDBResource
    ) -> dg.MaterializeResult:
        from rag_pipeline.search import Searcher  # loads the query model: only when it runs

        effective = vectordb.settings()
        sets = configured_sets(effective.quality_sets_dir, effective.quality_bundled_set)
        searcher = Searcher(effective, conninfo=vectordb.conninfo())
        report = score_sets(searcher, sets)
        context.log.info(
            f"{len(report.questions)} questions scored, nDCG@10 {report.overall[NDCG]:.4f}; "
            f"{len(report.unknown)} labelled documents not in the index"
        )
        return dg.MaterializeResult(
            metadata={
                **quality_metadata(report),
                "sets": ", ".join(s.name for s in sets),
                "model_id": searcher.embedder.model_id,
                "second_model_id": searcher.settings.second_vector_model or "none",
                "ranking_overrides": ranking_overrides(searcher.ranking) or "none",
                "vocabulary_fingerprint": vocabulary_fingerprint(searcher),
                "vocabulary_weight": dg.MetadataValue.float(searcher.ranking.vocabulary_weight),
            }
        )

    return retrieval_quality


def quality_metadata(report: QualityReport) -> dict[str, Any]:
    """The numbers Dagster plots, the unknown documents and the worst questions."""
    metadata: dict[str, Any] = {
        name: dg.MetadataValue.float(round(value, 4))
        for name, value in report.overall.items()
        if name in PLOTTED
    }
    for language, values in report.by_language.items():
        metadata |= {
            f"{m} {language}": dg.MetadataValue.float(round(values[m], 4)) for m in PLOTTED
        }
    for name, values in report.by_set.items():
        metadata[f"{NDCG} [{name}]"] = dg.MetadataValue.float(round(values[NDCG], 4))
    metadata |= {
        "latency_p50_ms": dg.MetadataValue.float(report.latency_ms(50)),
        "latency_p95_ms": dg.MetadataValue.float(report.latency_ms(95)),
        "questions": dg.MetadataValue.int(len(report.questions)),
        "questions_unscored": dg.MetadataValue.int(len(report.unscored)),
        "unknown_documents": dg.MetadataValue.int(len(report.unknown)),
        PER_QUESTION: dg.MetadataValue.json(
            {q.key: round(q.result.metrics[NDCG], 6) for q in report.questions}
        ),
        "worst_questions": worst_table(report.worst(WORST_SHOWN)),
    }
    if report.unknown:
        metadata["unknown_document_ids"] = dg.MetadataValue.md(
            "Labelled documents the index does not hold (left out of the scores):\n\n"
            + "\n".join(f"- `{u}`" for u in report.unknown)
        )
    if report.unscored:
        metadata["unscored_questions"] = dg.MetadataValue.text(", ".join(report.unscored))
    return metadata


def worst_table(questions: Sequence[ScoredQuestion]) -> dg.TableMetadataValue:
    """The worst questions with what they expected and what search returned."""
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn("question", "string"),
            dg.TableColumn("ndcg@10", "float"),
            dg.TableColumn("hit@1", "float"),
            dg.TableColumn("expected", "string"),
            dg.TableColumn("returned", "string"),
        ]
    )
    rows = [
        dg.TableRecord(
            {
                "question": f"{q.key} ({q.result.language or '?'}): {q.question}",
                "ndcg@10": round(q.result.metrics[NDCG], 4),
                "hit@1": q.result.metrics["hit@1"],
                "expected": "; ".join(
                    f"{t}:{i} ({g})" for (t, i), g in q.expected.items() if g > 0
                ),
                "returned": "; ".join(f"{t}:{i}" for t, i in q.result.ranked[:5]) or "nothing",
            }
        )
        for q in questions
    ]
    return dg.MetadataValue.table(rows, schema)


def quality_check(settings: Settings) -> dg.AssetChecksDefinition:
    """`retrieval_quality_not_worse`: nDCG@10 against the previous materialization and a floor."""
    max_drop, floor = settings.quality_max_drop, settings.quality_floor
    severity = (
        dg.AssetCheckSeverity.ERROR
        if settings.quality_severity == "error"
        else dg.AssetCheckSeverity.WARN
    )
    rule = f"nDCG@10 falls more than {max_drop} below the previous materialization's"
    if floor is not None:
        rule += f" or below {floor}"

    @dg.asset_check(
        asset=QUALITY_KEY,
        name=NOT_WORSE,
        blocking=severity is dg.AssetCheckSeverity.ERROR,
        description=f"Fails ({severity.value}) when {rule}; names the questions that got worse.",
    )
    def not_worse(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        records = context.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=QUALITY_KEY), limit=2
        ).records
        found = [r.asset_materialization.metadata for r in records if r.asset_materialization]
        if not found:
            return dg.AssetCheckResult(
                passed=False, severity=dg.AssetCheckSeverity.WARN,
                description="retrieval_quality was never materialized: nothing to judge",
            )  # fmt: skip
        return judge(found[0], found[1] if len(found) > 1 else None, max_drop, floor, severity)

    return not_worse


def _value(metadata: Mapping[str, dg.MetadataValue], key: str) -> Any:
    entry = metadata.get(key)
    return None if entry is None else entry.value


def judge(
    latest: Mapping[str, dg.MetadataValue],
    previous: Mapping[str, dg.MetadataValue] | None,
    max_drop: float,
    floor: float | None,
    severity: dg.AssetCheckSeverity,
) -> dg.AssetCheckResult:
    """The check's verdict on the latest materialization's metadata against the previous one."""
    current = _value(latest, NDCG)
    if not _value(latest, "questions") or current is None:
        return dg.AssetCheckResult(
            passed=False,
            severity=dg.AssetCheckSeverity.WARN,
            description="no labelled question could be scored: the index holds none of their "
            "documents (see unknown_document_ids)",
        )
    before = None if previous is None else _value(previous, NDCG)
    problems: list[str] = []
    if before is not None and current < before - max_drop:
        problems.append(f"nDCG@10 fell from {before:.4f} to {current:.4f} (more than {max_drop})")
    if floor is not None and current < floor:
        problems.append(f"nDCG@10 {current:.4f} is below the floor {floor}")
    worse = _worse_questions(latest, previous)
    metadata: dict[str, Any] = {
        NDCG: dg.MetadataValue.float(current),
        "questions_worse": dg.MetadataValue.int(len(worse)),
    }
    if before is not None:
        metadata["previous_ndcg@10"] = dg.MetadataValue.float(before)
    if worse:
        metadata["worse_questions"] = dg.MetadataValue.md(
            "\n".join(f"- `{key}`: {old:.3f} → {new:.3f}" for key, old, new in worse)
        )
    named = ", ".join(f"{key} ({old:.2f} → {new:.2f})" for key, old, new in worse[:WORST_SHOWN])
    if problems:
        more = f" (and {len(worse) - WORST_SHOWN} more)" if len(worse) > WORST_SHOWN else ""
        return dg.AssetCheckResult(
            passed=False,
            severity=severity,
            description="; ".join(problems) + (f"; worse: {named}{more}" if worse else ""),
            metadata=metadata,
        )
    if before is None:
        description = f"nDCG@10 {current:.4f}; no previous materialization to compare with"
    else:
        description = f"nDCG@10 {current:.4f}, previously {before:.4f}"
    return dg.AssetCheckResult(passed=True, description=description, metadata=metadata)


def _worse_questions(
    latest: Mapping[str, dg.MetadataValue], previous: Mapping[str, dg.MetadataValue] | None
) -> list[tuple[str, float, float]]:
    """`(set/id, previous, latest)` nDCG@10 of the questions that fell, the largest fall first."""
    now = _value(latest, PER_QUESTION) or {}
    then = (_value(previous, PER_QUESTION) if previous is not None else None) or {}
    worse = [
        (key, float(then[key]), float(value))
        for key, value in now.items()
        if key in then and float(value) < float(then[key]) - _QUESTION_EPSILON
    ]
    return sorted(worse, key=lambda item: (item[2] - item[1], item[0]))


def quality_job(settings: Settings) -> Any:
    """`retrieval_quality_job`: the asset and its check (from the UI, a schedule or CI).

    (Typed Any: `define_asset_job`'s result type is not exported at dagster's top level.)
    """
    return dg.define_asset_job(
        QUALITY_JOB,
        selection=dg.AssetSelection.assets(QUALITY_KEY),
        description="Score search on the labelled questions and check it got no worse.",
        run_tags=run_tags(settings),
    )
