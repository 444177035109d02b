"""Print how long the issue-14 hostile inputs take to convert and chunk (figures, not a test).

python benchmarks/hostile.py
"""

import time
from pathlib import Path

from tokenizers import Tokenizer

import rag_pipeline
from rag_pipeline.core.chunking import chunk_markdown
from rag_pipeline.core.normalize import SourceFormat, to_markdown

CASES = {
    "1 MB of #": "#" * 1_000_000,
    "500,000 empty headings": "#\n" * 500_000,
    "820 KB table": "| a | b | c |\n|---|---|---|\n" + "| x y z w | q r s | t u v |\n" * 30_000,
    "200,000 [": "[" * 200_000,
    "4.9 MB word": "x" * 4_900_000,
    "list nested 1,500 levels": "".join("  " * i + f"- w{i}\n" for i in range(1500)),
    "blockquote 100,000 levels": ">" * 100_000 + " text\n",
}


def main() -> None:
    """Convert and chunk each case with the default caps; print seconds and the outcome."""
    tokenizer = Tokenizer.from_file(
        str(Path(rag_pipeline.__file__).parent / "model" / "all-MiniLM-L6-v2" / "tokenizer.json")
    )
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def count(text: str) -> int:
        return len(tokenizer.encode(text).ids)

    for name, body in CASES.items():
        started = time.perf_counter()
        try:
            markdown = to_markdown(body, SourceFormat.MARKDOWN).markdown
            _, chunks = chunk_markdown(markdown, title="T", breadcrumb="", count_tokens=count)
            outcome = f"{len(chunks)} chunks"
        except ValueError as error:
            outcome = f"failed: {error}"
        print(f"{name:<28} {time.perf_counter() - started:6.1f} s  {outcome}")


if __name__ == "__main__":
    main()
