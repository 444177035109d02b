"""Print how long the issue-14 hostile inputs take to convert and chunk (figures, not a test).

python benchmarks/hostile.py
"""

import sys
import time
from pathlib import Path

from tokenizers import Tokenizer

import rag_pipeline
from rag_pipeline.core.chunking import chunk_markdown
from rag_pipeline.core.normalize import SourceFormat, to_markdown

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rag_pipeline_tests.hostile_inputs import FULL_SIZE

CASES = {
    **FULL_SIZE,
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
