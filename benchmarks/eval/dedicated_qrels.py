"""Judgements of the labelled set for the dedicated sources instead of the files corpus.

    python benchmarks/eval/dedicated_qrels.py > /tmp/qrels_dedicated.tsv
    export RAG_HOME=/tmp/eval-dedicated RAG_LANGUAGES=en_US,es_CO
    rag ingest --source ad_metadata && rag ingest --path ../shared/fixtures/wiki/docs_md
    rag eval --queries benchmarks/eval/queries.jsonl --qrels /tmp/qrels_dedicated.tsv

A window or process label names the `ad_metadata` entity (`AD_Window:<id>`), whichever
language version of it is found; a wiki label names the fixture page ingested as a file (the
evaluation matches a file's path by its last part).
"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = (HERE.parent / "retrieval_queries.jsonl", HERE / "spanish_and_identifier_queries.jsonl")


def main() -> None:
    """Print qrels.tsv for the dedicated sources."""
    print("query_id\tsource_type\tsource_id\tgrade")
    for source in SOURCES:
        for line in source.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            for label in record["relevant"]:
                kind, ident = label.split("/", 1)
                if kind == "wiki":
                    print(f"{record['id']}\tfiles\t{ident}\t2")
                else:
                    print(f"{record['id']}\tad_metadata\tAD_{kind.capitalize()}:{ident}\t2")


if __name__ == "__main__":
    main()
