"""The per-document transforms of the shared chain: raw → Markdown → sanitized → chunks.

Pure functions over typed records; the Dagster assets only plan, call these and store.
"""

import dataclasses
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from rag_pipeline.core.chunking import CHUNKER_VERSION, ChunkingSettings, TokenCounter
from rag_pipeline.core.chunking import chunk_markdown as cut_markdown
from rag_pipeline.core.frontmatter import split_front_matter
from rag_pipeline.core.models import SourceFormat
from rag_pipeline.core.normalize import conversion_stopped, to_markdown
from rag_pipeline.core.records import ChunkedRecord, MarkdownRecord, RawRecord, SanitizedRecord
from rag_pipeline.core.sanitize import SANITIZER_VERSION, sanitize_text
from rag_pipeline.core.source import ChainOptions

# Bump when the raw stage (what a source gave, stored as it is) changes its stored form.
RAW_VERSION = "1"
# Bump when the Markdown stage's own logic (not the converters' output) changes.
MARKDOWN_STAGE_VERSION = "2"


def markdown_fingerprint(options: ChainOptions) -> str:
    """Settings identity of the Markdown stage for a source's chain options."""
    return (
        f"markdown:{MARKDOWN_STAGE_VERSION}:front_matter={options.front_matter}"
        f":lang={options.default_language}"
    )


def sanitize_fingerprint() -> str:
    """Settings identity of the sanitize stage: a new sanitizer re-processes every document."""
    return f"sanitize:{SANITIZER_VERSION}"


def chunk_fingerprint(settings: ChunkingSettings, model_id: str) -> str:
    """Settings identity of the chunk stage: token counts depend on the model's tokenizer."""
    return f"chunks:{settings.fingerprint()}:{model_id}"


def code_versions() -> dict[str, str]:
    """The code version of each stage, shown in the Dagster UI (changes mean re-processing)."""
    return {
        "markdown": MARKDOWN_STAGE_VERSION,
        "sanitized": SANITIZER_VERSION,
        "chunks": CHUNKER_VERSION,
    }


@dataclass(frozen=True)
class MarkdownStage:
    """raw → Markdown for one source (picklable, so it can run in worker processes)."""

    options: ChainOptions
    time_budget_seconds: float | None = None

    def __call__(self, raw: RawRecord) -> MarkdownRecord:
        """Convert a raw document to canonical Markdown, with title and language resolved."""
        info = raw.info
        body = raw.body
        front: dict[str, Any] = {}
        if self.options.front_matter and info.original_format is SourceFormat.MARKDOWN:
            front, body = split_front_matter(body)
        converted = to_markdown(
            body,
            info.original_format,
            base_url=info.url or None,
            time_budget_seconds=self.time_budget_seconds,
        )
        title = (
            _string(front.get("title"))
            or info.title
            or _string(converted.metadata.get("title"))  # an HTML page's <title>
            or converted.first_heading
            or PurePosixPath(info.source_id).stem.replace("-", " ")
        )
        language = (
            _string(front.get("language") or front.get("lang"))
            or info.language
            or self.options.default_language
        )
        info = dataclasses.replace(
            info,
            title=title,
            language=language,
            breadcrumb=_string(front.get("breadcrumb")) or info.breadcrumb,
            metadata={**info.metadata, **front},
        )
        return MarkdownRecord(raw.key, info, converted.markdown, converted.metadata)

    # In a worker pool (`incremental.Budgeted`): the worker runs the converters itself and
    # the pool kills it at the budget, instead of each worker running a child of its own.
    @property
    def budget_seconds(self) -> float | None:
        """Most seconds one document's conversion may take."""
        return self.time_budget_seconds

    def unbudgeted(self) -> "MarkdownStage":
        """This stage converting in the calling process, with no deadline of its own."""
        return dataclasses.replace(self, time_budget_seconds=None)

    def stopped(self, raw: RawRecord, error: BaseException) -> str:
        """The failure of a document whose worker was killed at the budget or died."""
        return str(conversion_stopped(raw.info.original_format, error, self.time_budget_seconds))


def sanitize_record(record: MarkdownRecord) -> SanitizedRecord:
    """Clean the Markdown and the document's text fields for storage and embedding."""
    result = sanitize_text(record.body)
    info = dataclasses.replace(
        record.info,
        title=sanitize_text(record.info.title).text.strip(),
        breadcrumb=sanitize_text(record.info.breadcrumb).text.strip(),
    )
    return SanitizedRecord(record.key, info, result.text, SANITIZER_VERSION, result.counts)


@dataclass(frozen=True)
class ChunkStage:
    """sanitized → sections and chunks, bound to a model's token counter and the settings."""

    count_tokens: TokenCounter
    settings: ChunkingSettings
    time_budget_seconds: float | None = None

    def __call__(self, record: SanitizedRecord) -> ChunkedRecord:
        """Split a sanitized document into parents (sections) and token-bounded chunks."""
        sections, chunks = cut_markdown(
            record.body,
            title=record.info.title,
            breadcrumb=record.info.breadcrumb,
            count_tokens=self.count_tokens,
            settings=self.settings,
            time_budget_seconds=self.time_budget_seconds,
        )
        return ChunkedRecord(
            record.key,
            record.info,
            record.body,
            record.sanitizer_version,
            self.settings.fingerprint(),
            tuple(sections),
            tuple(chunks),
        )


def _string(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""
