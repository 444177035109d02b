"""The dictionary's glossary in `rag.glossary` (m011): written per language, read by search.

A language's rows are replaced in one transaction with its `rag.glossary_versions` row, so a
search never reads half a glossary; `glossary_version` is the cheap question a search process
asks to know whether the copy it holds is still current.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import psycopg


@dataclass(frozen=True)
class GlossaryRow:
    """One row of `rag.glossary`: a name pair (kind 'name') or a word pair (kind 'word')."""

    language: str
    kind: str
    term: str
    target: str
    term_stem: str
    dice: float
    links: int
    sources: tuple[str, ...]


@dataclass(frozen=True)
class GlossaryState:
    """A language's glossary as last built."""

    language: str
    base_language: str
    version: str
    names: int
    words: int


def stored_version(conn: psycopg.Connection, language: str) -> str | None:
    """The version of `language`'s stored glossary, None if it has none."""
    row = conn.execute(
        "SELECT version FROM rag.glossary_versions WHERE language = %s", (language,)
    ).fetchone()
    return None if row is None else str(row[0])


def replace_glossary(
    conn: psycopg.Connection, state: GlossaryState, rows: Sequence[GlossaryRow]
) -> None:
    """`state.language`'s glossary replaced by `rows`, in one transaction."""
    with conn.transaction():
        conn.execute("DELETE FROM rag.glossary WHERE language = %s", (state.language,))
        with (
            conn.cursor() as cursor,
            cursor.copy(
                "COPY rag.glossary (language, kind, term, target, term_stem, dice, links, sources)"
                " FROM STDIN"
            ) as copy,
        ):
            for row in rows:
                copy.write_row(
                    (row.language, row.kind, row.term, row.target, row.term_stem, row.dice,
                     row.links, list(row.sources))
                )  # fmt: skip
        conn.execute(
            "INSERT INTO rag.glossary_versions"
            " (language, base_language, version, names, words, built_at)"
            " VALUES (%s, %s, %s, %s, %s, now())"
            " ON CONFLICT (language) DO UPDATE SET base_language = excluded.base_language,"
            " version = excluded.version, names = excluded.names, words = excluded.words,"
            " built_at = excluded.built_at",
            (state.language, state.base_language, state.version, state.names, state.words),
        )


def glossary_version(conn: psycopg.Connection) -> str:
    """Every language's glossary version in one string ('' with none): it changes whenever
    any glossary is rebuilt from other rows or removed."""
    row = conn.execute(
        "SELECT coalesce(string_agg(language || '=' || version, ',' ORDER BY language), '')"
        " FROM rag.glossary_versions"
    ).fetchone()
    return str(row[0]) if row else ""


def glossary_states(conn: psycopg.Connection) -> list[GlossaryState]:
    """Each language's glossary state."""
    rows = conn.execute(
        "SELECT language, base_language, version, names, words FROM rag.glossary_versions"
        " ORDER BY language"
    ).fetchall()
    return [GlossaryState(str(a), str(b), str(c), int(d), int(e)) for a, b, c, d, e in rows]


def word_pairs(conn: psycopg.Connection) -> list[GlossaryRow]:
    """Every language's word pairs, strongest first within a term."""
    rows = conn.execute(
        "SELECT language, kind, term, target, term_stem, dice, links, sources FROM rag.glossary"
        " WHERE kind = 'word' ORDER BY language, term_stem, links DESC, target"
    ).fetchall()
    return [
        GlossaryRow(str(a), str(b), str(c), str(d), str(e), float(f), int(g), tuple(h))
        for a, b, c, d, e, f, g, h in rows
    ]
