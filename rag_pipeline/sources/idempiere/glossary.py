"""The dictionary's glossary: what iDempiere's own translations say each ERP word is elsewhere.

Every `_Trl` table with a `Name` holds, for one language, a row's name beside the base row's:
"Facturas y CxP (Proveedor)" ↔ "Invoice (Vendor)". `read_name_pairs` reads those pairs for one
language from the connected iDempiere (active rows of both, non-empty names, the tables that
exist), and `build_glossary` keeps them (kind 'name') and adds the single words aligned across
them (kind 'word', `glossary_alignment.py`). Its version is a fingerprint of the pairs and of
the aligner, so an unchanged dictionary is not rewritten and a search process reloads only
when it changed. The base language has no glossary of its own: the others map into it.
"""

import hashlib
from dataclasses import dataclass

import psycopg
from psycopg import sql

from rag_pipeline.sources.idempiere.glossary_alignment import (
    MIN_DICE,
    MIN_LINKS,
    MIN_SHARE,
    NamePair,
    WordPair,
    align,
)
from rag_pipeline.sources.idempiere.languages import base_language, existing_tables
from rag_pipeline.store.glossary import GlossaryRow, GlossaryState

# Bumped when the alignment changes what it makes of the same pairs.
GLOSSARY_VERSION = "1"
# The dictionary tables whose translated names the glossary reads (those that exist).
NAME_TABLES = (
    "AD_Window",
    "AD_Process",
    "AD_Element",
    "AD_Tab",
    "AD_Field",
    "AD_Process_Para",
    "AD_Table",
    "AD_Column",
    "AD_Menu",
    "AD_Ref_List",
)

_PAIRS = """
SELECT b.{key}::text, b.name, t.name
FROM {base} b JOIN {trl} t ON t.{key} = b.{key}
WHERE t.ad_language = %s AND t.isactive = 'Y' AND b.isactive = 'Y'
  AND nullif(btrim(b.name), '') IS NOT NULL AND nullif(btrim(t.name), '') IS NOT NULL
ORDER BY b.{key}
"""


@dataclass(frozen=True)
class Glossary:
    """One language's glossary as built: its state and its rows."""

    state: GlossaryState
    names: list[NamePair]
    words: list[WordPair]

    def rows(self) -> list[GlossaryRow]:
        """The rows of `rag.glossary`: one per distinct name pair, one per word pair."""
        language = self.state.language
        by_name: dict[tuple[str, str], list[str]] = {}
        for pair in self.names:
            by_name.setdefault((pair.translated, pair.base), []).append(pair.source)
        names = [
            GlossaryRow(language, "name", term, target, "", 1.0, len(found), tuple(found[:20]))
            for (term, target), found in by_name.items()
        ]
        words = [
            GlossaryRow(language, "word", w.term, w.target, w.term_stem, w.dice, w.links, w.sources)
            for w in self.words
        ]
        return names + words


def read_name_pairs(conn: psycopg.Connection, language: str) -> list[NamePair]:
    """Every active row's base name beside its `language` name, table by table."""
    present = existing_tables(conn, [f"{t}_trl" for t in NAME_TABLES] + list(NAME_TABLES))
    pairs: list[NamePair] = []
    for table in NAME_TABLES:
        base, trl = table.lower(), f"{table.lower()}_trl"
        if base not in present or trl not in present:
            continue
        query = sql.SQL(_PAIRS).format(  # pyright: ignore[reportArgumentType]
            key=sql.Identifier(f"{base}_id"), base=sql.Identifier(base), trl=sql.Identifier(trl)
        )
        for record_id, base_name, translated in conn.execute(query, (language,)):
            pairs.append(NamePair(f"{table}:{record_id}", str(base_name), str(translated)))
    return pairs


def glossary_fingerprint(pairs: list[NamePair]) -> str:
    """The version of a glossary built from `pairs`: their content and the aligner's."""
    digest = hashlib.sha256(f"{GLOSSARY_VERSION}:{MIN_LINKS}:{MIN_DICE}:{MIN_SHARE}".encode())
    for pair in sorted(pairs, key=lambda p: (p.source, p.base, p.translated)):
        digest.update(f"\0{pair.source}\0{pair.base}\0{pair.translated}".encode())
    return digest.hexdigest()[:16]


def build_glossary(conn: psycopg.Connection, language: str) -> Glossary:
    """`language`'s glossary from the iDempiere database at `conn` (empty for its base
    language, whose names are the targets)."""
    base = base_language(conn)
    pairs = [] if language == base else read_name_pairs(conn, language)
    words = align(pairs, language, base) if pairs else []
    state = GlossaryState(
        language=language,
        base_language=base,
        version=glossary_fingerprint(pairs),
        names=len({(p.translated, p.base) for p in pairs}),
        words=len(words),
    )
    return Glossary(state, pairs, words)
