"""Partitions of the `ad_metadata` source: entity type × language.

Entity types are fixed (static); languages are configuration (RAG_LANGUAGES) and share the
dynamic set of the `k_entry` source. Keys read `window|en_US` (Dagster orders the dimensions
by name), which is what `ADSource` parses.
"""

import dagster as dg

from rag_pipeline.defs.k_entry.partitions import IDEMPIERE_LANGUAGES
from rag_pipeline.sources.idempiere.ad import ENTITY_TYPES

ad_languages = dg.DynamicPartitionsDefinition(name=IDEMPIERE_LANGUAGES)

ad_metadata_partitions = dg.MultiPartitionsDefinition(
    {
        "entity": dg.StaticPartitionsDefinition(list(ENTITY_TYPES)),
        "language": ad_languages,
    }
)
