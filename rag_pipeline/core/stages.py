"""The stages of every source's chain and the names they go by.

One place for the stage list and for the two names a stage of a source has: its Dagster asset
key path (`["wiki", "raw"]`, shown as `wiki/raw`) and its stored name in
`rag.stage_documents.asset_key` (the same `wiki/raw`). Everything else (the source registry,
the store, the CLI) asks these functions; nothing builds or parses a name on its own, and no
SQL derives a stage from a name.
"""

from typing import Final

RAW: Final = "raw"
MARKDOWN: Final = "markdown"
SANITIZED: Final = "sanitized"
CHUNKS: Final = "chunks"
EMBEDDINGS: Final = "embeddings"
# The stage of the source system's translations (`ad_metadata/glossary`), outside the chain.
GLOSSARY: Final = "glossary"

# The chain's stages, in order: raw first, the searchable index last.
STAGES: Final = (RAW, MARKDOWN, SANITIZED, CHUNKS, EMBEDDINGS)
# The stages stored row by row in `rag.stage_documents` (the index holds the last one).
STORED_STAGES: Final = STAGES[:-1]


def check_stage(stage: str) -> str:
    """`stage` if it is one of the chain's stages (ValueError naming the choices otherwise)."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}: one of {', '.join(STAGES)}")
    return stage


def key_path(source: str, stage: str) -> list[str]:
    """The Dagster asset key path of a source's stage: the source, then the stage."""
    return [source, stage]


def stored_name(source: str, stage: str) -> str:
    """The name of a source's stage in the store and the UI (`wiki/raw`, the key's string)."""
    return "/".join(key_path(source, stage))


def op_name(source: str, stage: str) -> str:
    """The op (and step) that materializes a source's stage: Dagster joins the key's path
    with `__` (`AssetKey.to_python_identifier`)."""
    return "__".join(key_path(source, stage))


def stored_names(source: str, stages: tuple[str, ...] = STORED_STAGES) -> dict[str, str]:
    """Stored name → stage, for the given stages of a source (in stage order)."""
    return {stored_name(source, stage): stage for stage in stages}
