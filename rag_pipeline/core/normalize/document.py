"""The result and error types of normalization (re-exported by the package)."""

from dataclasses import dataclass, field
from typing import Any


class NormalizationError(ValueError):
    """Raised for malformed input; str(e) is a reason a person can act on."""


@dataclass(frozen=True)
class MarkdownDocument:
    """One document in canonical GFM.

    Attributes:
        markdown: Canonical GFM that ends with exactly one newline ("" for an empty document).
        metadata: JSON-serialisable facts about the conversion, e.g. the Editor.js block types
            that were not recognised (`unknown_block_types`) and how often each block type
            occurred (`block_counts`).
        first_heading: The plain text of the document's first heading ("" when it has none).
    """

    markdown: str
    metadata: dict[str, Any] = field(default_factory=dict)
    first_heading: str = ""
