"""The sources this installation runs, and every name Dagster gives their parts.

A `SourceSpec` is the one declaration of a source's names: its resource key, asset keys
(`<source>/<stage>`, built by `core/stages.py`), group, jobs, schedule, the external asset of
its source system and its CLI name all derive from it (nothing builds a stage's name or parses
a key back).
`SOURCES` is the one registry: adding a source is its folder (`sources/<name>`, `defs/<name>`)
plus one line below.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rag_pipeline.core.stages import (
    EMBEDDINGS,
    GLOSSARY,
    RAW,
    STAGES,
    check_stage,
    key_path,
    op_name,
    stored_name,
)

if TYPE_CHECKING:  # imported when used: the CLI reads the registry without loading Dagster
    import dagster as dg

__all__ = [
    "EMBEDDINGS",
    "RAW",
    "SOURCES",
    "SOURCE_NAMES",
    "STAGES",
    "SourceSpec",
    "source_spec",
    "step_label",
]


@dataclass(frozen=True)
class SourceSpec:
    """One source's names in Dagster.

    Attributes:
        name: The source type (`rag.documents.source_type`, the `--source` choice).
        system: The source system the raw stage reads, shown upstream of it in the lineage.
        system_description: What that system is, for the UI.
        glossary: Whether the source system's translations also make a glossary (one asset
            partitioned by language, refreshed after the chain's raw stage).
    """

    name: str
    system: str
    system_description: str
    glossary: bool = False

    @property
    def resource_key(self) -> str:
        """The key of the source's `SourceResource`."""
        return f"{self.name}_source"

    @property
    def group_name(self) -> str:
        """The asset group of the source's chain."""
        return self.name

    @property
    def ingest_job(self) -> str:
        """The partitioned asset job of the source's chain."""
        return f"{self.name}_ingest_job"

    @property
    def nightly_schedule(self) -> str:
        """The schedule that reconciles every partition of the source once a night."""
        return f"{self.name}_nightly_reconcile"

    @property
    def system_key(self) -> "dg.AssetKey":
        """The external asset of the source system, upstream of the raw stage."""
        import dagster as dg

        return dg.AssetKey(self.system)

    @property
    def glossary_key(self) -> "dg.AssetKey":
        """The glossary asset built from the source system's translations (`<source>/glossary`)."""
        import dagster as dg

        return dg.AssetKey(key_path(self.name, GLOSSARY))

    @property
    def glossary_job(self) -> str:
        """The job building the glossary, one run per language."""
        return f"{self.name}_glossary_job"

    def asset_key(self, stage: str) -> "dg.AssetKey":
        """The asset key of one stage of the source's chain (`STAGES`)."""
        import dagster as dg

        return dg.AssetKey(key_path(self.name, check_stage(stage)))

    def asset_name(self, stage: str) -> str:
        """The stored name of one stage (`wiki/markdown`, the asset key's string)."""
        return stored_name(self.name, check_stage(stage))


# The names are the plug-ins' `source_type`s (a test holds them equal); written out, so that
# reading the registry loads no source's dependencies.
FILES = SourceSpec("files", "folders", "The registered folders of documents.")
WIKI = SourceSpec("wiki", "mediawiki", "The MediaWiki site (or its XML export).")
K_ENTRY = SourceSpec("k_entry", "idempiere_k_entry", "K_Entry rows of the iDempiere database.")
AD_METADATA = SourceSpec(
    "ad_metadata",
    "idempiere_dictionary",
    "The iDempiere Application Dictionary tables.",
    glossary=True,
)

# The registry: one line per source.
SOURCES: tuple[SourceSpec, ...] = (FILES, WIKI, K_ENTRY, AD_METADATA)
SOURCE_NAMES: tuple[str, ...] = tuple(spec.name for spec in SOURCES)


def source_spec(name: str) -> SourceSpec:
    """The registered source called `name` (KeyError naming the choices otherwise)."""
    for spec in SOURCES:
        if spec.name == name:
            return spec
    raise KeyError(f"no source {name!r}: one of {', '.join(SOURCE_NAMES)}")


def step_label(step_key: str) -> str:
    """The asset a run's step materializes (`wiki/raw` for the step `wiki__raw`), else the key."""
    for spec in SOURCES:
        for stage in (*STAGES, *((GLOSSARY,) if spec.glossary else ())):
            if step_key == op_name(spec.name, stage):
                return stored_name(spec.name, stage)
    return step_key
