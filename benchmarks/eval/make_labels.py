"""Regenerate queries.jsonl and qrels.tsv from the two hand-labelled query files.

    python benchmarks/eval/make_labels.py

Labels name documents as in benchmarks/retrieval.py (`wiki/<page>`, `window/<id>`,
`process/<id>`); here they become the corpus paths build_corpus.py writes. A dictionary entry
is one window or process in two languages: the query's own language counts 2; for a Spanish
query the English original counts 1.
"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = (HERE.parent / "retrieval_queries.jsonl", HERE / "spanish_and_identifier_queries.jsonl")


def paths(label: str, language: str) -> list[tuple[str, int]]:
    """Corpus paths and grades for one label."""
    if label.startswith("wiki/"):
        return [(label, 2)]
    kind, ident = label.split("/", 1)
    english, spanish = f"ad/{kind}/{ident}.md", f"ad/{kind}/{ident}.es_CO.md"
    # A Spanish reader is served by the English original too (not every help text is
    # translated); an English reader is not served by the translation.
    return [(spanish, 2), (english, 1)] if language == "es_CO" else [(english, 2)]


def main() -> None:
    queries: list[str] = []
    qrels = ["query_id\tsource_type\tsource_id\tgrade"]
    for source in SOURCES:
        for line in source.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            language = "es_CO" if record["id"].startswith("es") else "en_US"
            text = record.get("text") or record["query"]
            queries.append(
                json.dumps(
                    {"id": record["id"], "text": text, "language": language}, ensure_ascii=False
                )
            )
            for label in record["relevant"]:
                for path, grade in paths(label, language):
                    qrels.append(f"{record['id']}\tfiles\t{path}\t{grade}")
    (HERE / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (HERE / "qrels.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    print(f"{len(queries)} queries, {len(qrels) - 1} judgements")


if __name__ == "__main__":
    main()
