"""Known-item search over the configured index: every dictionary window and process title,
typed as it is, should find its own entity first.

    export RAG_HOME=/tmp/eval-dedicated RAG_LANGUAGES=en_US,es_CO
    rag ingest --source ad_metadata
    python benchmarks/eval/known_items.py [--misses]

Prints, per language and entity type, how many titles find their entity first (a hit whose
title reads the same, another entity of one name, counts too) and, with --misses, what came
first instead.
"""

import argparse
from collections import Counter

import psycopg

from rag_pipeline.search import Searcher

_TITLES = """
    SELECT source_id, language, title, metadata ->> 'entity_type'
    FROM rag.documents
    WHERE source_type = 'ad_metadata' AND metadata ->> 'entity_type' IN ('window', 'process')
    ORDER BY source_id, language
"""


def main() -> None:
    """Search every window and process title; print the share found first."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list what came first instead")
    args = parser.parse_args()
    searcher = Searcher()
    with psycopg.connect(searcher.conninfo) as conn:
        titles = conn.execute(_TITLES).fetchall()
    found: Counter[tuple[str, str]] = Counter()
    total: Counter[tuple[str, str]] = Counter()
    misses: list[str] = []
    for source_id, language, title, entity in titles:
        hits = searcher.search(title, top_k=1)
        first = hits[0] if hits else None
        total[language, entity] += 1
        if first and (first.source_id == source_id or first.title.lower() == title.lower()):
            found[language, entity] += 1
        else:
            misses.append(
                f"  {language} {title!r} ({source_id}): "
                + (f"{first.title!r} ({first.source_id})" if first else "nothing")
            )
    for key in sorted(total):
        print(f"{key[0]:<7}{key[1]:<9}{found[key]:>5} of {total[key]:>5} first")
    print(f"all            {sum(found.values()):>5} of {sum(total.values()):>5} first")
    if args.misses:
        print("\n".join(misses))


if __name__ == "__main__":
    main()
