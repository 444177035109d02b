"""The files sensor: registers the configured folders and ingests the ones that changed."""

import json

import dagster as dg

from rag_pipeline.defs.files.partitions import files_folders
from rag_pipeline.defs.files.resources import FilesSourceResource
from rag_pipeline.orchestration.reconcile import system_observation
from rag_pipeline.orchestration.source_registry import FILES
from rag_pipeline.sources.files import FolderError, folder_fingerprint


@dg.sensor(
    job_name=FILES.ingest_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.STOPPED,
)
def files_folders_sensor(
    context: dg.SensorEvaluationContext, files_source: FilesSourceResource
) -> dg.SensorResult:
    """Registers the configured folders and the ones added in the UI; runs those that changed.

    A folder's fingerprint (names, sizes, modification times) is kept in the cursor, so a tick
    over unchanged folders requests nothing; a registered folder whose fingerprint moved is
    observed (the fingerprint is the data version of its partition of the `folders` asset).
    """
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    configured = files_source.partition_keys()
    registered = list(context.instance.get_dynamic_partitions(files_folders.name or ""))
    fingerprints: dict[str, str] = {}
    for key in dict.fromkeys([*configured, *registered]):
        try:
            fingerprints[key] = folder_fingerprint(key)
        except FolderError as exc:
            context.log.warning(str(exc))
    new = [key for key in configured if key not in registered]
    changed = [key for key, fingerprint in fingerprints.items() if seen.get(key) != fingerprint]
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(partition_key=key, run_key=f"{key}:{fingerprints[key]}")
            for key in changed
        ],
        dynamic_partitions_requests=[files_folders.build_add_request(new)] if new else [],
        asset_events=[
            system_observation(FILES, key, fingerprints[key])
            for key in changed
            if key in registered
        ],
        cursor=json.dumps({**seen, **fingerprints}, sort_keys=True),
    )
