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


def register_partition_key(
    instance: dg.DagsterInstance, partitions_def: dg.PartitionsDefinition, key: str
) -> None:
    """Add what `key` needs to the dynamic partitions it uses (a plain or multi-partition key).

    A multi-partition key is valid only once each of its dynamic dimensions holds its part
    (`window|es_CO` needs `es_CO` in `idempiere_languages`).
    """
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        parts = partitions_def.get_partition_key_from_str(key).keys_by_dimension
        for dimension in partitions_def.partitions_defs:
            register_partition_key(instance, dimension.partitions_def, parts[dimension.name])
    elif (
        isinstance(partitions_def, dg.DynamicPartitionsDefinition)
        and partitions_def.name
        and not instance.has_dynamic_partition(partitions_def.name, key)
    ):
        instance.add_dynamic_partitions(partitions_def.name, [key])
