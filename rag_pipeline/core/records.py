"""Typed records passed between the stages of the shared chain (no Dagster here).

raw → `RawRecord` → markdown → `MarkdownRecord` → sanitized → `SanitizedRecord` → chunks →
`ChunkedRecord` → embeddings. Every record carries the document's key, its `DocumentInfo` and
its body; each stage adds what it computed. They are stored as jsonb + bytea per document
(`store/stages.py`) through pydantic type adapters, so nothing reads them back by string key.
"""

from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol, TypeVar

from pydantic import TypeAdapter

from rag_pipeline.core.ids import content_hash
from rag_pipeline.core.models import Chunk, Section, SourceFormat


@dataclass(frozen=True)
class DocumentInfo:
    """What every stage knows about a document besides its body."""

    source_type: str
    source_id: str
    language: str
    title: str
    original_format: SourceFormat
    version: str
    breadcrumb: str = ""
    url: str = ""
    metadata: dict[str, Any] = field(default_factory=lambda: {})


@dataclass(frozen=True)
class RawRecord:
    """A document as its source gave it."""

    key: str
    info: DocumentInfo
    body: str


@dataclass(frozen=True)
class MarkdownRecord:
    """A document converted to canonical Markdown; `conversion` notes what the converter did."""

    key: str
    info: DocumentInfo
    body: str
    conversion: dict[str, Any] = field(default_factory=lambda: {})


@dataclass(frozen=True)
class SanitizedRecord:
    """Markdown cleaned for storage and embedding, with what each sanitizer rule changed."""

    key: str
    info: DocumentInfo
    body: str
    sanitizer_version: str
    sanitize_counts: dict[str, int] = field(default_factory=lambda: {})


@dataclass(frozen=True)
class ChunkedRecord:
    """A sanitized document cut into parent sections and token-bounded chunks."""

    key: str
    info: DocumentInfo
    body: str
    sanitizer_version: str
    chunker_fingerprint: str
    sections: tuple[Section, ...] = ()
    chunks: tuple[Chunk, ...] = ()


class StageRecord(Protocol):
    """What every stage record has (a structural type over the four records above)."""

    @property
    def key(self) -> str:
        """The document's key within its source."""
        ...

    @property
    def info(self) -> DocumentInfo:
        """The document's identity and descriptive fields."""
        ...

    @property
    def body(self) -> str:
        """The document's text at this stage."""
        ...


R = TypeVar("R", RawRecord, MarkdownRecord, SanitizedRecord, ChunkedRecord)


@cache
def _adapter(record_type: type[Any]) -> TypeAdapter[Any]:
    return TypeAdapter(record_type)


def record_meta(record: RawRecord | MarkdownRecord | SanitizedRecord | ChunkedRecord) -> Any:
    """Everything of a record but its body, as JSON values (what goes into jsonb)."""
    return _adapter(type(record)).dump_python(record, mode="json", exclude={"body"})


def record_from(record_type: type[R], meta: dict[str, Any], body: str) -> R:
    """Rebuild a stored record from its JSON metadata and body (validated)."""
    adapted: R = _adapter(record_type).validate_python({**meta, "body": body})
    return adapted


def record_hash(record: RawRecord | MarkdownRecord | SanitizedRecord | ChunkedRecord) -> str:
    """What a downstream stage compares to see whether this record changed.

    The source's version is left out: a new version with the same content (a file touched, a
    null edit on the wiki) costs the raw stage a fetch and nothing downstream.
    """
    return record_meta_and_hash(record)[1]


def record_meta_and_hash(
    record: RawRecord | MarkdownRecord | SanitizedRecord | ChunkedRecord,
) -> tuple[Any, str]:
    """`record_meta` and `record_hash` of a record from one pydantic dump (a store needs both)."""
    meta = record_meta(record)
    hashed = {**meta, "info": {k: v for k, v in meta["info"].items() if k != "version"}}
    return meta, content_hash(hashed, record.body)
