"""Throughput of `rag_pipeline.core.normalize.to_markdown` per source format, on the fixtures.

Run: `python benchmarks/normalize.py [--min-seconds 1.0]`. Each format converts its set of
fixture documents over and over, whole passes only, until at least `--min-seconds` have
elapsed, and prints documents per second, input MB per second and the mean time per document.
Then one Markdown list of 1,000 to 16,000 items each (issue 49: quadratic before), with the
ratio of each time to the one of half as many items (2.0 is linear, 4.0 quadratic).
The shared fixtures folder (beside the repository) supplies the real documents; without it
only the repository's own fixtures are used.
"""

import argparse
import json
import time
from pathlib import Path

from rag_pipeline.core.normalize import SourceFormat, to_markdown

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "fixtures"
LOCAL = REPO / "rag_pipeline_tests" / "fixtures" / "normalize"


def _read(paths: list[Path]) -> list[str]:
    return [path.read_text(encoding="utf-8") for path in paths]


def _editorjs_documents() -> list[str]:
    documents = _read(sorted((LOCAL / "triples").glob("*.json")))
    for path in sorted((SHARED / "editorjs").glob("*/*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        # The plugin README examples are single blocks.
        documents.append(json.dumps(document if "blocks" in document else {"blocks": [document]}))
    return documents


def _html_documents() -> list[str]:
    documents = _read(sorted((LOCAL / "html").glob("*.html")))
    documents += _read(sorted((LOCAL / "triples").glob("*.html")))
    parse = SHARED / "wiki" / "mediawiki_api_examples" / "parse_fv2_dewiki_Lewisit.json"
    if parse.is_file():
        documents.append(json.loads(parse.read_text(encoding="utf-8"))["response"]["parse"]["text"])
    return documents


def _markdown_documents() -> list[str]:
    documents = _read(sorted((LOCAL / "triples").glob("*.md")))
    return documents + _read(sorted((SHARED / "wiki" / "docs_md").glob("*.md")))


def _measure(documents: list[str], fmt: SourceFormat, min_seconds: float) -> tuple[int, float]:
    """Convert whole passes over `documents` until `min_seconds` passed: (documents, seconds)."""
    converted = 0
    start = time.perf_counter()
    while True:
        for body in documents:
            to_markdown(body, fmt, base_url="https://wiki.idempiere.org/en/Benchmark")
        converted += len(documents)
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return converted, elapsed


def main() -> None:
    """Print one line of throughput figures per source format."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-seconds", type=float, default=1.0, help="time per format")
    args = parser.parse_args()
    if not SHARED.is_dir():
        print(f"note: {SHARED} is absent; measuring the repository's own fixtures only")
    sets = {
        SourceFormat.EDITORJS: _editorjs_documents(),
        SourceFormat.HTML: _html_documents(),
        SourceFormat.MARKDOWN: _markdown_documents(),
        # The same Markdown files read as plain text: escaping instead of parsing.
        SourceFormat.TEXT: _markdown_documents(),
    }
    print(f"{'format':<9} {'docs':>5} {'KiB':>7} {'docs/s':>9} {'MB/s':>7} {'ms/doc':>8}")
    for fmt, documents in sets.items():
        if not documents:
            print(f"{fmt.value:<9} no fixtures found")
            continue
        size = sum(len(body.encode("utf-8")) for body in documents)
        for body in documents:  # warm-up: imports, parser construction, caches
            to_markdown(body, fmt)
        converted, elapsed = _measure(documents, fmt, args.min_seconds)
        passes = converted // len(documents)
        print(
            f"{fmt.value:<9} {len(documents):>5} {size / 1024:>7.1f} {converted / elapsed:>9.1f} "
            f"{size * passes / elapsed / 1e6:>7.2f} {1000 * elapsed / converted:>8.2f}"
        )


def long_lists() -> None:
    """Seconds to convert one Markdown list of n items, for doubling n."""
    print(f"\n{'list items':>10} {'KiB':>7} {'seconds':>8} {'ratio':>6}")
    previous = None
    for items in (1000, 2000, 4000, 8000, 16000):
        body = "".join(f"- item {n} of a long list\n" for n in range(items))
        start = time.perf_counter()
        to_markdown(body, SourceFormat.MARKDOWN, time_budget_seconds=None)
        elapsed = time.perf_counter() - start
        ratio = f"{elapsed / previous:6.2f}" if previous else ""
        print(f"{items:>10} {len(body) / 1024:>7.1f} {elapsed:>8.2f} {ratio}")
        previous = elapsed


if __name__ == "__main__":
    main()
    long_lists()
