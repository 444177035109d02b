"""The dictionary's glossary as an asset: one partition per language, after the dictionary.

Downstream of the iDempiere dictionary (the source system, whose `_Trl` tables it reads) and of
the `ad_metadata` raw stage: when the source's sensor, its nightly schedule or `rag ingest` has
read a language's dictionary, the automation sensor rebuilds that language's glossary (the
multi-partitions `entity|language` map to their language). `rag ingest --source ad_metadata`
runs its job after the dictionary's partitions. The building is `sources/idempiere/glossary.py`.
"""

import warnings

import dagster as dg

from rag_pipeline.defs.ad_metadata.partitions import ad_languages
from rag_pipeline.defs.ad_metadata.resources import ADSourceResource
from rag_pipeline.orchestration.asset_common import OWNERS
from rag_pipeline.orchestration.executors import run_tags
from rag_pipeline.orchestration.raw_asset import requests_pool
from rag_pipeline.orchestration.source_registry import AD_METADATA, RAW
from rag_pipeline.resources.vectordb import VectorDBResource
from rag_pipeline.settings import load_settings
from rag_pipeline.sources.idempiere.glossary import GLOSSARY_VERSION, Glossary, build_glossary
from rag_pipeline.store.glossary import replace_glossary, stored_version

with warnings.catch_warnings():
    # Beta in 1.13, and said so at every load of the code location.
    warnings.simplefilter("ignore", dg.BetaWarning)
    _BY_LANGUAGE = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="language")
# After the dictionary of its language was read again by the raw stage (the source system is
# not materialized, and Dagster's condition does not count its observations), once no run of
# it is going on.
_AFTER_THE_DICTIONARY = (
    dg.AutomationCondition.any_deps_updated().since_last_handled()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
).with_label("after_the_dictionary")
_PREVIEW_WORDS = 30


@dg.asset(
    key=AD_METADATA.glossary_key,
    description="ERP words in each language beside the base language's, aligned over the "
    "dictionary's own translated names (factura → invoice), with the rows they come from.",
    partitions_def=ad_languages,
    deps=[
        dg.AssetDep(AD_METADATA.system_key, partition_mapping=_BY_LANGUAGE),
        dg.AssetDep(AD_METADATA.asset_key(RAW), partition_mapping=_BY_LANGUAGE),
    ],
    required_resource_keys={AD_METADATA.resource_key, "vectordb"},
    group_name=AD_METADATA.group_name,
    kinds={"python", "postgres"},
    code_version=GLOSSARY_VERSION,
    pool=requests_pool(AD_METADATA),
    owners=OWNERS,
    tags={"source": AD_METADATA.name, "stage": "glossary"},
    automation_condition=_AFTER_THE_DICTIONARY,
)
def dictionary_glossary(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """Name pairs and aligned word pairs of one language, in `rag.glossary`."""
    source: ADSourceResource = getattr(context.resources, AD_METADATA.resource_key)
    vectordb: VectorDBResource = context.resources.vectordb
    with source.opened() as opened:
        glossary = build_glossary(opened.conn, context.partition_key)
    with vectordb.connect() as conn:
        unchanged = stored_version(conn, glossary.state.language) == glossary.state.version
        if not unchanged:
            replace_glossary(conn, glossary.state, glossary.rows())
    return dg.MaterializeResult(
        metadata={
            "name_pairs": glossary.state.names,
            "word_pairs": glossary.state.words,
            "base_language": glossary.state.base_language,
            "glossary_version": glossary.state.version,
            "rewritten": not unchanged,
            "preview": dg.MetadataValue.md(preview(glossary)),
        },
        data_version=dg.DataVersion(glossary.state.version),
    )


def preview(glossary: Glossary) -> str:
    """The best-supported word pairs as a Markdown table."""
    if glossary.state.language == glossary.state.base_language:
        return f"{glossary.state.language} is the base language: the others map into it."
    words = sorted(glossary.words, key=lambda w: (-w.links, w.term))[:_PREVIEW_WORDS]
    lines = ["| term | target | name pairs | Dice |", "| --- | --- | --- | --- |"]
    lines += [f"| {w.term} | {w.target} | {w.links} | {w.dice:.2f} |" for w in words]
    return "\n".join(lines)


@dg.definitions
def glossary() -> dg.Definitions:
    """The glossary asset and its job (run per language by `rag ingest`)."""
    job = dg.define_asset_job(
        AD_METADATA.glossary_job,
        selection=dg.AssetSelection.assets(AD_METADATA.glossary_key),
        description="Build the dictionary's glossary of one language.",
        run_tags=run_tags(load_settings()),
    )
    return dg.Definitions(assets=[dictionary_glossary], jobs=[job])
