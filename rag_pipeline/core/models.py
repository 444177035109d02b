"""Domain records shared by every source and stage of the pipeline (no Dagster here)."""

from dataclasses import dataclass
from enum import StrEnum


class SourceFormat(StrEnum):
    """The format a document's body arrives in."""

    MARKDOWN = "markdown"
    HTML = "html"
    EDITORJS = "editorjs"
    TEXT = "text"


@dataclass(frozen=True)
class FailedDocument:
    """A document the pipeline could not process, with the reason a person can act on."""

    source_id: str
    stage: str
    reason: str


@dataclass(frozen=True)
class Section:
    """A parent: one heading-delimited section of a document, stored once."""

    ordinal: int
    title: str
    heading_path: tuple[str, ...]
    text: str
    start_char: int
    end_char: int


@dataclass(frozen=True)
class Chunk:
    """A retrievable unit: a run of whole blocks of one section.

    `embedded_text` is what the model sees: a context header, then `text`.
    """

    ordinal: int
    section_ordinal: int
    text: str
    embedded_text: str
    token_count: int
    start_char: int
    end_char: int
