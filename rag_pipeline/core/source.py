"""The source contract: what a source plug-in implements, and nothing more.

A source lists what exists, each document with a cheap version (a wiki revid, an `Updated`
timestamp, a file's size and mtime), and fetches the documents whose version changed as typed
`SourceDocument`s. The shared pipeline (`rag_pipeline.orchestration.pipeline`) does everything
else once:
comparing versions with what is stored, the new/changed/unchanged/deleted/failed bookkeeping,
the Markdown → sanitized → chunks → embeddings chain, its checks and its job.

A document's identity is `(source_type, source_id, language)`. Partitions only decide which run
handles a document: one seen through two partitions is stored once.
"""

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rag_pipeline.core.models import FailedDocument, SourceFormat

# Placed between source id and language in a document key; neither iDempiere language codes
# nor the source ids we build contain it.
_KEY_SEPARATOR = "@"


def document_key(source_id: str, language: str) -> str:
    """The key of a document within its source: the source id, plus `@language` if any."""
    return f"{source_id}{_KEY_SEPARATOR}{language}" if language else source_id


class DocumentError(ValueError):
    """One document cannot be read or converted; the message is the reason a person reads.

    Raise it from `Source.fetch` (or yield a `FailedDocument`): that document is recorded as
    failed with the reason, its previous version stays searchable, and the run goes on.
    """


@dataclass(frozen=True)
class DocumentRef:
    """One document as a listing names it: identity and a cheap version, no body.

    `language` is empty when the source only learns it from the body (the `files` source reads
    it from front matter); `locator` is whatever the source needs to fetch the document again
    (a path, a row id) and is not part of its identity.
    """

    source_id: str
    language: str
    version: str
    locator: str = ""

    @property
    def key(self) -> str:
        """The document's key within its source."""
        return document_key(self.source_id, self.language)


@dataclass(frozen=True)
class SourceDocument:
    """One document as a source gives it: the record every source yields.

    `version` is the source's own notion of a version (the same as its `DocumentRef`'s);
    `body` is in `original_format`. `metadata` is shown in the UI and stored with the document
    (JSON values only); the pipeline never reads it back.
    """

    source_id: str
    language: str
    version: str
    title: str
    original_format: SourceFormat
    body: str
    breadcrumb: str = ""
    url: str = ""
    metadata: dict[str, Any] = field(default_factory=lambda: {})

    @property
    def key(self) -> str:
        """The document's key within its source."""
        return document_key(self.source_id, self.language)


@dataclass(frozen=True)
class ChainOptions:
    """How the shared chain treats one source's documents.

    Attributes:
        front_matter: read YAML front matter (title, language, breadcrumb) from Markdown bodies.
        default_language: the language of documents whose source and front matter name none.
    """

    front_matter: bool = False
    default_language: str = "en_US"


class Source(ABC):
    """A source plug-in: list what exists cheaply, fetch what changed.

    Subclasses set `source_type` (a short lowercase name: `files`, `wiki`, `k_entry`,
    `ad_metadata`) and may set `chain_options`.
    """

    source_type: ClassVar[str]
    chain_options: ClassVar[ChainOptions] = ChainOptions()

    @abstractmethod
    def list_documents(self, partition_key: str) -> Iterator[DocumentRef | FailedDocument]:
        """Every document the partition holds now, with its cheap version.

        A document missing from the listing is deleted from the index (unless another
        partition still lists it). Yield a `FailedDocument` (stage `raw`) for an entry that
        exists but cannot even be listed (a file name that is not UTF-8): it is recorded, and
        its previous version is kept.
        """

    @abstractmethod
    def fetch(self, refs: Sequence[DocumentRef]) -> Iterator[SourceDocument | FailedDocument]:
        """The documents of `refs` (a batch of changed ones), in any order.

        A document that cannot be read is yielded as a `FailedDocument` (stage `raw`) or raises
        `DocumentError` when fetched alone; a ref that vanished since the listing may simply be
        left out (it is then treated as deleted).
        """

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release connections or clients (called once when the run's raw step ends)."""


def fetch_each(
    refs: Sequence[DocumentRef], fetch_one: Callable[[DocumentRef], SourceDocument | None]
) -> Iterator[SourceDocument | FailedDocument]:
    """`Source.fetch` for sources that read one document at a time.

    A `DocumentError` (or any `ValueError`, `OSError`) from `fetch_one` fails that document
    alone; `None` means it vanished.
    """
    for ref in refs:
        try:
            document = fetch_one(ref)
        except (ValueError, OSError) as exc:  # DocumentError and UnicodeError are ValueErrors
            yield FailedDocument(ref.key, "raw", str(exc) or type(exc).__name__)
            continue
        if document is not None:
            yield document


__all__ = [
    "ChainOptions",
    "DocumentError",
    "DocumentRef",
    "FailedDocument",
    "Source",
    "SourceDocument",
    "SourceFormat",
    "document_key",
    "fetch_each",
]
