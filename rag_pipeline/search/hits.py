"""What a search returns: `SearchHit`, one section with its lineage, and `LegScores`; and
the reading of one row of the search statement (`queries.py`) into a hit, by column name."""

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class LegScores:
    """Where each leg put a hit (None: the leg did not find its section)."""

    vector_rank: int | None
    vector_score: float | None  # cosine similarity of the section's best chunk
    keyword_rank: int | None
    keyword_score: float | None  # BM25-style score of the section's best chunk


@dataclass(frozen=True)
class SearchHit:
    """One matching parent section, represented by its best chunk, with its lineage."""

    source_type: str
    source_id: str
    language: str
    title: str
    breadcrumb: str
    section_title: str
    heading_path: list[str]
    url: str
    # vector: cosine; keyword: BM25; hybrid: fused, 1.0 = first in every leg; each times the
    # weight of the document's entity type (RAG_SEARCH_ENTITY_WEIGHTS, 1 for most)
    score: float
    text: str  # the best-matching chunk
    parent_text: str  # the whole section ('' when expand='chunk')
    document_id: str
    section_id: str
    chunk_id: str
    explain: LegScores | None = None  # with explain=True
    # Lineage: the source's version of the document (wiki revision, K_Entry Updated, file
    # size+mtime), the partitions listing it (comma-separated), when its vectors were written
    # (ISO 8601) and the Dagster run that built its chunks.
    source_version: str = ""
    partition: str = ""
    ingested_at: str = ""
    run_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return asdict(self)


# Columns read into a SearchHit as they are.
_HIT_COLUMNS = (
    *("source_type", "source_id", "language", "title", "breadcrumb", "section_title", "url"),
    *("text", "parent_text", "document_id", "section_id", "chunk_id", "source_version"),
)


def hit_from_row(row: dict[str, Any], explain: bool) -> SearchHit:
    """The hit of one result row; its leg scores only with `explain`."""
    legs = LegScores(**{f.name: row[f.name] for f in fields(LegScores)}) if explain else None
    ingested = row["ingested_at"]
    return SearchHit(
        **{column: row[column] for column in _HIT_COLUMNS},
        heading_path=list(row["heading_path"]),
        score=float(row["score"]),
        explain=legs,
        partition=row["partition"] or "",
        ingested_at=ingested.isoformat() if ingested is not None else "",
        run_id=row["run_id"] or "",
    )
