"""The per-document transforms of the shared chain: raw → Markdown → sanitized → chunks.

Pure functions over `StageRecord`s; the Dagster assets only plan, call these and store.
"""

from collections.abc import Callable
from dataclasses import asdict
from pathlib import PurePosixPath
from typing import Any

from rag_pipeline.core.chunking import ChunkingSettings, TokenCounter, chunk_markdown
from rag_pipeline.core.frontmatter import split_front_matter
from rag_pipeline.core.incremental import StageRecord
from rag_pipeline.core.languages import DEFAULT_LANGUAGE
from rag_pipeline.core.models import SourceFormat
from rag_pipeline.core.normalize import to_markdown
from rag_pipeline.core.sanitize import SANITIZER_VERSION, sanitize_text

# Bump when the Markdown stage's own logic (not the converters' output) changes.
MARKDOWN_STAGE_VERSION = "1"


def markdown_fingerprint() -> str:
    """Settings identity of the Markdown stage."""
    return f"markdown:{MARKDOWN_STAGE_VERSION}"


def sanitize_fingerprint() -> str:
    """Settings identity of the sanitize stage: a new sanitizer re-processes every document."""
    return f"sanitize:{SANITIZER_VERSION}"


def to_markdown_record(raw: StageRecord) -> StageRecord:
    """Convert a raw document to canonical Markdown, with its title and metadata resolved."""
    meta = dict(raw.meta)
    fmt = SourceFormat(meta["original_format"])
    body = raw.body
    front: dict[str, Any] = {}
    if fmt is SourceFormat.MARKDOWN:
        front, body = split_front_matter(body)
    converted = to_markdown(body, fmt, base_url=meta.get("url") or None)
    title = (
        _string(front.get("title"))
        or meta.get("title")
        or _string(converted.metadata.get("title"))  # an HTML page's <title>
        or converted.first_heading
    )
    meta["title"] = title or PurePosixPath(meta["source_id"]).stem.replace("-", " ")
    meta["language"] = (
        _string(front.get("language") or front.get("lang"))
        or meta.get("language")
        or DEFAULT_LANGUAGE
    )
    meta["breadcrumb"] = _string(front.get("breadcrumb")) or meta.get("breadcrumb", "")
    meta["metadata"] = {**meta.get("metadata", {}), **front, "conversion": converted.metadata}
    return StageRecord(raw.doc_key, meta, converted.markdown)


def sanitize_record(record: StageRecord) -> StageRecord:
    """Clean the Markdown and the document's text fields for storage and embedding."""
    result = sanitize_text(record.body)
    meta = dict(record.meta)
    for key in ("title", "breadcrumb"):
        meta[key] = sanitize_text(str(meta.get(key, ""))).text.strip()
    meta["sanitizer_version"] = SANITIZER_VERSION
    meta["sanitize_counts"] = result.counts
    return StageRecord(record.doc_key, meta, result.text)


def chunk_record(
    record: StageRecord, *, count_tokens: TokenCounter, settings: ChunkingSettings
) -> StageRecord:
    """Split a sanitized document into parents (sections) and token-bounded chunks."""
    sections, chunks = chunk_markdown(
        record.body,
        title=record.meta["title"],
        breadcrumb=record.meta.get("breadcrumb", ""),
        count_tokens=count_tokens,
        settings=settings,
    )
    meta = dict(record.meta)
    meta["chunker_fingerprint"] = settings.fingerprint()
    meta["sections"] = [_section_dict(section) for section in sections]
    meta["chunks"] = [asdict(chunk) for chunk in chunks]
    return StageRecord(record.doc_key, meta, record.body)


def chunker(
    count_tokens: TokenCounter, settings: ChunkingSettings
) -> Callable[[StageRecord], StageRecord]:
    """The chunk transform bound to a model's token counter and the chunk settings."""
    return lambda record: chunk_record(record, count_tokens=count_tokens, settings=settings)


def _section_dict(section: Any) -> dict[str, Any]:
    data = asdict(section)
    data["heading_path"] = list(section.heading_path)
    return data


def _string(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""
