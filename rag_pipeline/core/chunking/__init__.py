"""Semantic chunking of Markdown into parent sections and embeddable chunks (seed 001).

A document is cut into *sections* at the configured heading levels (the parents, stored once)
and each section into *chunks*: runs of whole top-level blocks (paragraph, list, code fence,
table, quote, HTML block, heading line) packed toward a target size in the embedding model's
own tokens. Only a block that alone exceeds the budget is split, at the most meaningful
boundary it has.

The modules, in the order a document goes through them: `text` (the document, its line
index and token costs), `blocks` (block parsing), `sections` (parents), `pack` (greedy
packing into chunks), `split` and `atoms` (splitting an oversized block), `chunker` (the run
that ties them together, with context headers and overlap).
"""

from rag_pipeline.core.chunking.chunker import chunk_markdown
from rag_pipeline.core.chunking.settings import (
    CHUNKER_VERSION,
    DEFAULT_TIME_BUDGET_SECONDS,
    ChunkingSettings,
    ChunkLimitError,
    TokenCounter,
    context_header,
)

__all__ = [
    "CHUNKER_VERSION",
    "DEFAULT_TIME_BUDGET_SECONDS",
    "ChunkLimitError",
    "ChunkingSettings",
    "TokenCounter",
    "chunk_markdown",
    "context_header",
]
