"""Known-answer retrieval cases built from the Application Dictionary itself (no LLM).

A window's (or process's) own description is a question its document must answer: searching
for it should return that entity near the top. Descriptions shared by several entities, or
too short to say anything ("Maintain X" where X is the name is fine; "Test" is not), are
skipped. The sample is deterministic (ordered by md5 of the id), so a check's result only
changes when the dictionary or the index does.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psycopg

from rag_pipeline.settings import Settings
from rag_pipeline.sources.idempiere.ad import SOURCE_TYPE, source_id_for
from rag_pipeline.sources.idempiere.connection import read_only, resolve_idempiere_conninfo

SearchFunction = Callable[[str, int], Sequence[tuple[str, str]]]
"""`search(query, top_k)` → `(source_type, source_id)` of the hits, best first."""

_MIN_WORDS = 3

# Per entity: the description in the requested language (falling back to the base row as the
# source does), kept where it has enough words and no other active entity shares it.
_CANDIDATES = """
WITH d AS (
    SELECT e.{key}::int AS id,
           trim(COALESCE(NULLIF(t.description, ''), e.description)) AS description
    FROM {table} e
    LEFT JOIN {table}_trl t ON t.{key} = e.{key} AND t.ad_language = %(lang)s
         AND t.isactive = 'Y'
    WHERE e.isactive = 'Y'
)
SELECT id, description FROM d
WHERE description IS NOT NULL
  AND array_length(regexp_split_to_array(description, '\\s+'), 1) >= %(min_words)s
  AND lower(description) IN (
      SELECT lower(description) FROM d GROUP BY lower(description) HAVING count(*) = 1)
ORDER BY md5(id::text)
LIMIT %(limit)s
"""


@dataclass(frozen=True)
class KnownAnswer:
    """A query and the document that must answer it."""

    query: str
    expected_source_id: str
    source_type: str = SOURCE_TYPE


@dataclass(frozen=True)
class KnownAnswerScore:
    """How many cases found their document in the top k, and which did not."""

    cases: int
    hits: int
    top_k: int
    reciprocal_rank_sum: float
    misses: tuple[KnownAnswer, ...]

    @property
    def hit_rate(self) -> float:
        """Share of cases answered in the top k (0 when there are no cases: nothing found)."""
        return self.hits / self.cases if self.cases else 0.0

    @property
    def mean_reciprocal_rank(self) -> float:
        """MRR over the top k (0 for a case not found)."""
        return self.reciprocal_rank_sum / self.cases if self.cases else 0.0


def build_known_answers(
    conn: psycopg.Connection,
    *,
    windows: int = 20,
    processes: int = 10,
    language: str = "en_US",
) -> list[KnownAnswer]:
    """Up to `windows` + `processes` cases: an entity's description → that entity.

    In a language other than the base one, the query is the translated description (the
    expected document is the same entity, in any language).
    """
    cases: list[KnownAnswer] = []
    for entity, table, key, limit in (
        ("window", "ad_window", "ad_window_id", windows),
        ("process", "ad_process", "ad_process_id", processes),
    ):
        if limit <= 0:
            continue
        query = _CANDIDATES.replace("{table}", table).replace("{key}", key)
        rows = conn.execute(
            query,  # pyright: ignore[reportArgumentType]  # built from the constants above
            {"min_words": _MIN_WORDS, "limit": limit, "lang": language},
        ).fetchall()
        cases += [
            KnownAnswer(" ".join(str(description).split()), source_id_for(entity, int(record)))
            for record, description in rows
        ]
    return cases


def score_known_answers(
    cases: Sequence[KnownAnswer], search: SearchFunction, *, top_k: int = 5
) -> KnownAnswerScore:
    """Run every case through `search` and count those whose document is in the top k."""
    hits = 0
    reciprocal = 0.0
    misses: list[KnownAnswer] = []
    for case in cases:
        found = [tuple(hit) for hit in search(case.query, top_k)][:top_k]
        target = (case.source_type, case.expected_source_id)
        if target in found:
            hits += 1
            reciprocal += 1.0 / (found.index(target) + 1)
        else:
            misses.append(case)
    return KnownAnswerScore(len(cases), hits, top_k, reciprocal, tuple(misses))


def known_answers_for(
    settings: Settings, *, windows: int = 20, processes: int = 10, language: str = "en_US"
) -> list[KnownAnswer]:
    """`build_known_answers` on the configured (or demo) iDempiere database."""
    with read_only(resolve_idempiere_conninfo(settings)) as conn:
        return build_known_answers(conn, windows=windows, processes=processes, language=language)
