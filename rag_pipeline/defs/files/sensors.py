"""The files sensor: registers the configured folders and ingests the ones that changed."""

import json

import dagster as dg

from rag_pipeline.defs.files.partitions import files_folders
from rag_pipeline.defs.files.resources import FilesSourceResource
from rag_pipeline.operations.folders import folder_lookup, names_of_path_partitions
from rag_pipeline.orchestration.reconcile import system_observation
from rag_pipeline.orchestration.source_registry import FILES
from rag_pipeline.settings import load_settings
from rag_pipeline.sources.files import folder_fingerprint, folder_for
from rag_pipeline.store.folders import FolderError


@dg.sensor(
    job_name=FILES.ingest_job,
    description="Runs each registered folder whose files changed (names, sizes, mtimes), "
    "observing its new fingerprint; registers the configured folders.",
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.STOPPED,
)
def files_folders_sensor(
    context: dg.SensorEvaluationContext, files_source: FilesSourceResource
) -> dg.SensorResult:
    """Registers the configured folders and the ones added in the UI; runs those that changed.

    A folder's fingerprint (names, sizes, modification times) is kept in the cursor, so a tick
    over unchanged folders requests nothing; a registered folder whose fingerprint moved is
    observed (the fingerprint is the data version of its partition of the `folders` asset). A
    partition added in the UI as a folder's path is registered under the folder's name, which
    replaces it.
    """
    settings = load_settings()
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    configured = files_source.partition_keys()
    registered = list(context.instance.get_dynamic_partitions(files_folders.name or ""))
    renamed: dict[str, str] = {}
    for key in registered:
        try:
            renamed.update(names_of_path_partitions(settings, [key]))
        except FolderError as exc:
            context.log.warning(str(exc))
    wanted = dict.fromkeys([*configured, *(renamed.get(key, key) for key in registered)])
    fingerprints: dict[str, str] = {}
    lookup = folder_lookup(settings)
    for key in wanted:
        try:
            fingerprints[key] = folder_fingerprint(folder_for(key, lookup))
        except FolderError as exc:
            context.log.warning(str(exc))
    new = [key for key in wanted if key not in registered]
    changed = [key for key, fingerprint in fingerprints.items() if seen.get(key) != fingerprint]
    requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
    if new:
        requests.append(files_folders.build_add_request(new))
    if renamed:
        requests.append(files_folders.build_delete_request(list(renamed)))
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(partition_key=key, run_key=f"{key}:{fingerprints[key]}")
            for key in changed
        ],
        dynamic_partitions_requests=requests,
        asset_events=[
            system_observation(FILES, key, fingerprints[key])
            for key in changed
            if key in registered
        ],
        cursor=json.dumps({**seen, **fingerprints}, sort_keys=True),
    )
