"""CPU seconds of the stages beside the embedding model, per source format, in one process.

    python benchmarks/stage_cpu.py [--docs 1000] [--repeat 3] [--shared ../shared]
                                   [--profile /tmp/stages.prof]

Generates the corpus of `benchmarks/ingest.py` (a third Markdown, HTML and Editor.js each,
made from the iDempiere fixtures), reads it as the files source does (front matter on, each
document's `file://` address as its base URL), and times with `time.process_time()`, with no
database and no worker process:

- conversion: `document_stages.MarkdownStage` without a time budget (with one, each document
  is converted in a child process, whose CPU this process does not see);
- sanitizing: `document_stages.sanitize_record`;
- chunking: `document_stages.ChunkStage` with the bundled model's tokenizer, counting tokens
  as `core.embedding.Embedder.count_tokens` does, and the default chunk settings of the
  bundled model (200 target tokens, 256 at most).

Each stage runs over every document of a format `--repeat` times; the fastest pass is
printed, since other work on a shared machine can only add to a pass. CPU time, not wall
time: it is what the stage costs whatever else runs.
"""

import argparse
import cProfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from benchmarks.ingest import generate_corpus
from rag_pipeline.core import document_stages
from rag_pipeline.core.chunking import ChunkingSettings, TokenCounter
from rag_pipeline.core.embedding import BUNDLED_MAX_TOKENS
from rag_pipeline.core.models import SourceFormat
from rag_pipeline.core.records import DocumentInfo, RawRecord
from rag_pipeline.sources.files import CHAIN_OPTIONS, FORMATS

REPO = Path(__file__).resolve().parents[1]
TOKENIZER = REPO / "rag_pipeline" / "model" / "all-MiniLM-L6-v2" / "tokenizer.json"


def read_corpus(folder: Path) -> dict[SourceFormat, list[RawRecord]]:
    """The corpus's documents as raw records, by format."""
    records: dict[SourceFormat, list[RawRecord]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        fmt = FORMATS[path.suffix.lower()]
        info = DocumentInfo("files", relative, "", "", fmt, "1", url=path.as_uri())
        body = path.read_text(encoding="utf-8").removeprefix("\ufeff")
        records.setdefault(fmt, []).append(RawRecord(relative, info, body))
    return records


def token_counter() -> TokenCounter:
    """The bundled model's token count, as `Embedder.count_tokens` computes it."""
    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def count_tokens(text: str) -> int:
        return len(tokenizer.encode(text).ids)

    return count_tokens


def fastest(work: Callable[[Any], object], items: Sequence[Any], repeat: int) -> float:
    """The least CPU seconds of `repeat` passes of `work` over `items`."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for item in items:
            work(item)
        best = min(best, time.process_time() - started)
    return best


def measure(
    records: dict[SourceFormat, list[RawRecord]], repeat: int
) -> dict[SourceFormat, tuple[float, float, float, int]]:
    """Conversion, sanitizing and chunking CPU seconds and the chunk count, per format."""
    convert = document_stages.MarkdownStage(CHAIN_OPTIONS, None)
    settings = ChunkingSettings(target_tokens=200, max_tokens=BUNDLED_MAX_TOKENS)
    chunk = document_stages.ChunkStage(token_counter(), settings, None)
    figures: dict[SourceFormat, tuple[float, float, float, int]] = {}
    for fmt, raws in records.items():
        markdown = [convert(raw) for raw in raws]
        sanitized = [document_stages.sanitize_record(record) for record in markdown]
        chunks = sum(len(chunk(record).chunks) for record in sanitized)
        figures[fmt] = (
            fastest(convert, raws, repeat),
            fastest(document_stages.sanitize_record, markdown, repeat),
            fastest(chunk, sanitized, repeat),
            chunks,
        )
    return figures


def report(records: dict[SourceFormat, list[RawRecord]], repeat: int) -> None:
    """Print the table of CPU seconds per format."""
    figures = measure(records, repeat)
    print("| format | documents | chunks | conversion s | sanitizing s | chunking s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    totals = [0.0, 0.0, 0.0]
    for fmt in sorted(figures):
        seconds = figures[fmt][:3]
        totals = [a + b for a, b in zip(totals, seconds, strict=True)]
        row: Sequence[object] = (fmt.value, len(records[fmt]), figures[fmt][3], *seconds)
        print("| {} | {} | {} | {:.3f} | {:.3f} | {:.3f} |".format(*row))
    documents = sum(len(raws) for raws in records.values())
    chunks = sum(f[3] for f in figures.values())
    print("| all | {} | {} | {:.3f} | {:.3f} | {:.3f} |".format(documents, chunks, *totals))


def main() -> None:
    """Parse the arguments, build the corpus and print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="passes per stage; the fastest")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--profile", type=Path, help="write a cProfile of one pass here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rag-stage-cpu-") as tmp:
        corpus = Path(tmp)
        generate_corpus(args.shared, corpus, args.docs)
        records = read_corpus(corpus)
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(measure, records, 1)
        profiler.dump_stats(args.profile)
    report(records, args.repeat)


if __name__ == "__main__":
    main()
