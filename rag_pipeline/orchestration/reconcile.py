"""Which partitions a full reconcile of a source runs, and how their dynamic parts are added.

Read by the nightly schedules (a `RunRequest` per partition, launched by Dagster through its
run queue) and by `rag ingest` (a run per partition, executed by the command). A partition
that was ingested before but is no longer configured (a folder added in the UI, a category
dropped from the settings) still holds documents: reconciling it keeps them current, or
removes them when its source is gone.
"""

from collections.abc import Iterable

import dagster as dg

from rag_pipeline.orchestration.source_registry import RAW, SourceSpec


def reconcile_partitions(
    spec: SourceSpec, wanted: Iterable[str], instance: dg.DagsterInstance
) -> list[str]:
    """The configured partitions first, then every other one ever ingested."""
    ingested = instance.get_materialized_partitions(spec.asset_key(RAW))
    return list(dict.fromkeys([*wanted, *sorted(ingested)]))


def add_requests(
    partitions_def: dg.PartitionsDefinition | None,
    keys: Iterable[str],
    instance: dg.DagsterInstance,
) -> list[dg.AddDynamicPartitionsRequest]:
    """What `keys` need added to their dynamic partitions (a folder, the language of a
    `window|es_CO` multi-partition key) before a run can use them."""
    wanted: dict[str, set[str]] = {}
    for key in keys:
        for name, part in _dynamic_parts(partitions_def, key):
            wanted.setdefault(name, set()).add(part)
    requests: list[dg.AddDynamicPartitionsRequest] = []
    for name, parts in sorted(wanted.items()):
        new = sorted(part for part in parts if not instance.has_dynamic_partition(name, part))
        if new:
            requests.append(dg.AddDynamicPartitionsRequest(name, new))
    return requests


def register(
    partitions_def: dg.PartitionsDefinition | None,
    keys: Iterable[str],
    instance: dg.DagsterInstance,
) -> None:
    """Add the dynamic parts of `keys` to the instance, for callers that are not sensors.

    A sensor returns `add_requests(...)` in its `SensorResult`; a schedule cannot, and
    `rag ingest` runs without one, so they add them here.
    """
    for request in add_requests(partitions_def, keys, instance):
        instance.add_dynamic_partitions(request.partitions_def_name, request.partition_keys)


def _dynamic_parts(
    partitions_def: dg.PartitionsDefinition | None, key: str
) -> list[tuple[str, str]]:
    if isinstance(partitions_def, dg.DynamicPartitionsDefinition) and partitions_def.name:
        return [(partitions_def.name, key)]
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        parts = partitions_def.get_partition_key_from_str(key).keys_by_dimension
        return [
            found
            for dimension in partitions_def.partitions_defs
            for found in _dynamic_parts(dimension.partitions_def, parts[dimension.name])
        ]
    return []


def reconcile_requests(
    spec: SourceSpec, keys: Iterable[str], tags: dict[str, str]
) -> list[dg.RunRequest]:
    """One run of the source's ingest job per partition."""
    return [
        dg.RunRequest(
            job_name=spec.ingest_job, partition_key=key, run_key=f"{spec.name}:{key}", tags=tags
        )
        for key in keys
    ]


# Dagster's tag holding an observation's data version (AssetObservation takes no argument for
# it; only observable source assets' ObserveResult does).
DATA_VERSION_TAG = "dagster/data_version"


def system_observation(spec: SourceSpec, partition_key: str, version: str) -> dg.AssetObservation:
    """An observation of one partition of a source system at `version` (its data version:
    a folder's fingerprint, K_Entry's change token, the wiki's time of its newest change)."""
    return dg.AssetObservation(
        spec.system_key, partition=partition_key, tags={DATA_VERSION_TAG: version}
    )
