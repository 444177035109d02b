"""A source's whole Dagster side, built once for every source: `source_definitions(...)`.

Its source system (an external asset) → raw (`raw_asset.py`) → markdown → sanitized → chunks →
embeddings (`document_assets.py`), the checks on each stage (per partition, `checks.py`), its
freshness policy and its ingest job, every name taken from the source's `SourceSpec`
(`source_registry.py`). A source plug-in only lists and fetches
documents (see `core/source.py`); its Dagster wiring is a `SourceResource` subclass (its
configuration, shown and overridable in the launchpad) and one call of `source_definitions` in
`defs/<source>/`. Assets stay thin: they plan the incremental work, call `core/` and report
what happened.
"""

from abc import abstractmethod

import dagster as dg

from rag_pipeline.core.source import ChainOptions, Source
from rag_pipeline.orchestration.asset_common import OWNERS
from rag_pipeline.orchestration.checks import source_checks
from rag_pipeline.orchestration.document_assets import document_assets
from rag_pipeline.orchestration.executors import run_tags
from rag_pipeline.orchestration.raw_asset import raw_asset
from rag_pipeline.orchestration.source_registry import STAGES, SourceSpec
from rag_pipeline.settings import load_settings


class SourceResource(dg.ConfigurableResource):
    """A source's configuration in Dagster; builds the source plug-in for a run."""

    @abstractmethod
    def build(self) -> Source:
        """The source, configured for this run."""

    @abstractmethod
    def partition_keys(self) -> list[str]:
        """The partitions the current configuration wants run (the CLI registers them)."""


def source_definitions(
    spec: SourceSpec,
    *,
    partitions_def: dg.PartitionsDefinition,
    resource: SourceResource,
    description: str,
    chain_options: ChainOptions | None = None,
) -> dg.Definitions:
    """The source system, the raw asset, the shared chain, its checks and the ingest job.

    Every name comes from `spec`: the resource is registered as `spec.resource_key`, the job is
    `spec.ingest_job`. The executor is not the job's: the code location sets one for every run
    (`defs/resources.py`), so runs launched from the asset catalog run the same way.
    """
    settings = load_settings()
    system = dg.AssetSpec(
        spec.system_key,
        description=spec.system_description,
        partitions_def=partitions_def,
        group_name=spec.group_name,
        kinds={"source"},
        owners=OWNERS,
        tags={"source": spec.name, "stage": "system"},
    )
    job = dg.define_asset_job(
        spec.ingest_job,
        selection=dg.AssetSelection.assets(*(spec.asset_key(stage) for stage in STAGES)),
        description=description,
        # Enforced by run monitoring (the daemon): a hung run is stopped, not left running.
        run_tags=run_tags(settings),
    )
    return dg.Definitions(
        assets=[
            system,
            raw_asset(spec, partitions_def),
            *document_assets(spec, partitions_def, chain_options or ChainOptions()),
        ],
        asset_checks=source_checks(spec, partitions_def),
        jobs=[job],
        resources={spec.resource_key: resource},
    )
