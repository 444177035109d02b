"""Retrieval quality of our chunking against the seeds' baseline, on the same model.

    python benchmarks/retrieval.py [--shared ../shared]

Corpus: the 47 iDempiere wiki pages of the fixtures plus every Application Dictionary window
and process (name, description, help) as one document each. Queries: the 80 hand-labelled
questions of `benchmarks/retrieval_queries.jsonl`, each with the documents that answer it.

- **ours**: canonical Markdown, sanitized, structure-aware chunks measured in model tokens, each
  embedded with its context header (title › section); hits grouped by parent section.
- **seed baseline**: the seed's `DocumentSplitters.recursive(500, 50)`: recursive character
  chunks of 500 characters with 50 overlap, no context header, no parents.

Both rank documents by their best chunk (exact cosine, no index) and are scored at document
level: nDCG@10 and Recall@5, overall and per query kind.
"""

import argparse
import csv
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
QUERIES = Path(__file__).with_name("retrieval_queries.jsonl")


@dataclass(frozen=True)
class Document:
    """One corpus document as Markdown."""

    id: str
    title: str
    markdown: str


def load_corpus(shared: Path) -> list[Document]:
    """Wiki pages and AD windows/processes, with the ids the query labels use."""
    documents = []
    for page in sorted((shared / "fixtures" / "wiki" / "docs_md").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        title = next(
            (line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("# ")),
            page.stem,
        )
        documents.append(Document(f"wiki/{page.name}", title, text))
    ad = shared / "fixtures" / "ad" / "core_es_CO"
    for file, kind, key in (
        ("ad_window.csv", "window", "AD_Window_ID"),
        ("ad_process.csv", "process", "AD_Process_ID"),
    ):
        with (ad / file).open(encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle):
                name = (row.get("Name") or "").strip()
                if not name:
                    continue
                parts = [f"# {name}", row.get("Description") or "", row.get("Help") or ""]
                markdown = "\n\n".join(p.strip() for p in parts if p.strip()) + "\n"
                documents.append(Document(f"{kind}/{row[key]}", name, markdown))
    return documents


def recursive_split(text: str, size: int = 500, overlap: int = 50) -> list[str]:
    """The seed's baseline: LangChain-style recursive character splitting."""
    return _split(text, ["\n\n", "\n", " ", ""], size, overlap)


def _split(text: str, separators: list[str], size: int, overlap: int) -> list[str]:
    separator = next((s for s in separators if s == "" or s in text), "")
    rest = separators[separators.index(separator) + 1 :] if separator else []
    pieces = list(text) if separator == "" else text.split(separator)
    chunks: list[str] = []
    good: list[str] = []
    for piece in pieces:
        if len(piece) <= size:
            good.append(piece)
            continue
        if good:
            chunks.extend(_merge(good, separator, size, overlap))
            good = []
        chunks.extend(_split(piece, rest, size, overlap) if rest else [piece])
    if good:
        chunks.extend(_merge(good, separator, size, overlap))
    return [c for c in chunks if c.strip()]


def _merge(pieces: list[str], separator: str, size: int, overlap: int) -> list[str]:
    chunks: list[str] = []
    current: list[str] = []
    total = 0
    for piece in pieces:
        extra = len(separator) if current else 0
        if current and total + len(piece) + extra > size:
            chunks.append(separator.join(current).strip())
            # Keep a tail of at most `overlap` characters as the next chunk's start.
            while current and (total > overlap or total + len(piece) + len(separator) > size):
                total -= len(current[0]) + (len(separator) if len(current) > 1 else 0)
                current.pop(0)
        current.append(piece)
        total += len(piece) + (len(separator) if len(current) > 1 else 0)
    if current:
        chunks.append(separator.join(current).strip())
    return chunks


def ours(
    documents: Sequence[Document], count_tokens: Callable[[str], int], target_tokens: int
) -> list[tuple[str, str]]:
    """(document id, embedded text) of every chunk of our pipeline."""
    from rag_pipeline.core.chunking import ChunkingSettings, chunk_markdown
    from rag_pipeline.core.models import SourceFormat
    from rag_pipeline.core.normalize import to_markdown
    from rag_pipeline.core.sanitize import sanitize_text

    chunks = []
    settings = ChunkingSettings(target_tokens=target_tokens)
    for document in documents:
        markdown = sanitize_text(
            to_markdown(document.markdown, SourceFormat.MARKDOWN).markdown
        ).text
        _, pieces = chunk_markdown(
            markdown,
            title=document.title,
            breadcrumb="",
            count_tokens=count_tokens,
            settings=settings,
        )
        chunks.extend((document.id, chunk.embedded_text) for chunk in pieces)
    return chunks


def baseline(documents: Sequence[Document]) -> list[tuple[str, str]]:
    """(document id, text) of every chunk of the seed's baseline."""
    return [(d.id, piece) for d in documents for piece in recursive_split(d.markdown)]


def structure_damage(texts: Sequence[str]) -> dict[str, int]:
    """Chunks that hand an LLM broken structure: an open code fence, a table without its header."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark").enable("table")
    open_fences = headless_tables = 0
    for text in texts:
        lines = text.splitlines()
        tokens = parser.parse(text)
        for token in tokens:
            # A fence the parser sees running to the end of the chunk without its closing line
            # (a ```` fence may legitimately contain ``` lines: count as the parser does).
            if token.type == "fence" and token.map is not None:
                last = lines[token.map[1] - 1].strip() if token.map[1] <= len(lines) else ""
                closed = token.map[1] - token.map[0] >= 2 and set(last) == {token.markup[0]}
                open_fences += not (closed and len(last) >= len(token.markup))
        # A table row ("| a | b |") with no header + delimiter row before it in the chunk.
        if any(line.lstrip().startswith("|") for line in lines) and not any(
            token.type == "table_open" for token in tokens
        ):
            headless_tables += 1
    return {"open code fence": open_fences, "table rows without header": headless_tables}


def rank_documents(
    query_vector: np.ndarray, chunk_vectors: np.ndarray, chunk_docs: Sequence[str], k: int
) -> list[str]:
    """Documents in the order of their best chunk's cosine similarity."""
    order = np.argsort(-(chunk_vectors @ query_vector))
    ranked: list[str] = []
    for index in order:
        doc = chunk_docs[index]
        if doc not in ranked:
            ranked.append(doc)
            if len(ranked) == k:
                break
    return ranked


def ndcg(ranked: Sequence[str], relevant: set[str], k: int = 10) -> float:
    """Binary-relevance nDCG@k."""
    gain = sum(1 / math.log2(i + 2) for i, doc in enumerate(ranked[:k]) if doc in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return gain / ideal if ideal else 0.0


def recall(ranked: Sequence[str], relevant: set[str], k: int = 5) -> float:
    """Share of the relevant documents found in the first k."""
    return len(set(ranked[:k]) & relevant) / len(relevant)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--target-tokens", type=int, default=200, help="our chunk size aim")
    args = parser.parse_args()
    if not (args.shared / "fixtures").is_dir():
        sys.exit(f"fixtures not found under {args.shared}; pass --shared")

    from rag_pipeline.core.embedding import BUNDLED_MODEL_ID, ModelSpec, open_embedder

    queries = [json.loads(line) for line in QUERIES.read_text(encoding="utf-8").splitlines()]
    documents = load_corpus(args.shared)
    known = {d.id for d in documents}
    missing = {r for q in queries for r in q["relevant"]} - known
    if missing:
        sys.exit(f"labels name documents not in the corpus: {sorted(missing)}")
    with tempfile.TemporaryDirectory() as models:
        embedder = open_embedder(ModelSpec(BUNDLED_MODEL_ID), models_dir=Path(models))
        query_vectors = np.stack([embedder.embed_query(q["query"]) for q in queries])
        print(
            f"corpus: {len(documents)} documents; {len(queries)} labelled queries; "
            f"model {embedder.model_id}"
        )
        results: dict[str, dict[str, list[float]]] = {}
        damage: dict[str, dict[str, int]] = {}
        for name, build in (
            ("ours", lambda: ours(documents, embedder.count_tokens, args.target_tokens)),
            ("seed baseline", lambda: baseline(documents)),
        ):
            started = time.perf_counter()
            chunks = build()
            vectors = embedder.embed_passages([text for _, text in chunks])
            seconds = time.perf_counter() - started
            docs = [doc for doc, _ in chunks]
            tokens = embedder.count_tokens_batch([text for _, text in chunks])
            truncated = sum(1 for t in tokens if t > embedder.max_tokens)
            scores: dict[str, list[float]] = {}
            for query, vector in zip(queries, query_vectors, strict=True):
                ranked = rank_documents(vector, vectors, docs, 10)
                relevant = set(query["relevant"])
                for kind in ("all", query["kind"]):
                    scores.setdefault(f"ndcg@10 {kind}", []).append(ndcg(ranked, relevant))
                    scores.setdefault(f"recall@5 {kind}", []).append(recall(ranked, relevant))
            results[name] = scores
            damage[name] = structure_damage([text for _, text in chunks])
            print(
                f"{name}: {len(chunks)} chunks ({truncated} over the model's "
                f"{embedder.max_tokens} tokens, silently truncated), built and embedded in "
                f"{seconds:.1f} s"
            )
    print()
    print(f"{'metric':<24}{'ours':>10}{'seed baseline':>16}")
    for metric in results["ours"]:
        a = float(np.mean(results["ours"][metric]))
        b = float(np.mean(results["seed baseline"][metric]))
        print(f"{metric:<24}{a:>10.3f}{b:>16.3f}")
    print()
    print("chunks handing the LLM broken structure:")
    for problem in damage["ours"]:
        print(f"  {problem:<26}{damage['ours'][problem]:>8}{damage['seed baseline'][problem]:>16}")


if __name__ == "__main__":
    main()
