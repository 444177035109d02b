"""What every stage asset of a source's chain shares.

Its run configuration (`IngestConfig`, shown in the launchpad), its kinds, owners and tags,
and the metadata a stage materialization reports in the UI (counts, seconds, failures, a
preview of one document).
"""

import time
from collections.abc import Sequence
from typing import Any

import dagster as dg

from rag_pipeline.core.incremental import StageSummary
from rag_pipeline.core.models import FailedDocument

KINDS = {"python", "postgres"}
OWNERS = ["team:knowledge-pipeline"]
_PREVIEW_CHARS = 1500


class IngestConfig(dg.Config):
    """Run configuration of every stage of a source's chain."""

    force: bool = False
    """Recompute every stage, even for unchanged documents (vectors still come from the cache)."""
    workers: int = 0
    """Worker processes converting, sanitizing and chunking (0: RAG_WORKERS, else the CPU
    count, at most 8)."""


def stage_tags(source_type: str, stage: str) -> dict[str, str]:
    """Tags of a stage asset: filter by source or stage in the UI (`tag:stage=embeddings`)."""
    return {"source": source_type, "stage": stage}


def stage_metadata(summary: StageSummary, started: float, **extra: Any) -> dict[str, Any]:
    """What a person reads in the UI for a stage materialization."""
    metadata: dict[str, Any] = {
        **{f"documents_{name}": value for name, value in summary.counts().items()},
        "seconds": round(time.perf_counter() - started, 3),
        **extra,
    }
    if summary.failed:
        metadata["failures"] = dg.MetadataValue.md(failures_table(summary.failed))
    if summary.preview_key:
        text = summary.preview_text
        shown = text[:_PREVIEW_CHARS] + ("\n\n…" if len(text) > _PREVIEW_CHARS else "")
        metadata["preview"] = dg.MetadataValue.md(f"**{summary.preview_key}**\n\n{shown}")
        metadata["preview_document"] = summary.preview_key
    return metadata


def failures_table(failed: Sequence[FailedDocument], limit: int = 20) -> str:
    """A Markdown table of failed documents and their reasons."""
    lines = ["| document | stage | reason |", "| --- | --- | --- |"]
    for failure in failed[:limit]:
        reason = failure.reason.replace("|", "\\|").replace("\n", " ")[:300]
        lines.append(f"| `{failure.source_id}` | {failure.stage} | {reason} |")
    if len(failed) > limit:
        lines.append(f"| … | | {len(failed) - limit} more |")
    return "\n".join(lines)
