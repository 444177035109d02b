"""The files sensor: registers the configured folders and ingests the ones that changed."""

import json

import dagster as dg

from rag_pipeline.core.sources.files import FolderError, folder_fingerprint, partition_key_for
from rag_pipeline.defs.files.partitions import files_folders
from rag_pipeline.settings import load_settings


@dg.sensor(
    job_name="files_ingest_job",
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def files_folders_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """Adds a partition for each folder of RAG_FILES_FOLDERS and runs those whose files changed.

    A folder's fingerprint (names, sizes, modification times) is kept in the cursor, so a tick
    over unchanged folders requests nothing.
    """
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    fingerprints: dict[str, str] = {}
    for folder in load_settings().files_folder_list:
        try:
            key = partition_key_for(folder)
            fingerprints[key] = folder_fingerprint(key)
        except FolderError as exc:
            context.log.warning(f"RAG_FILES_FOLDERS: {exc}")
    new = [
        key
        for key in fingerprints
        if not context.instance.has_dynamic_partition(files_folders.name or "", key)
    ]
    changed = [key for key, fingerprint in fingerprints.items() if seen.get(key) != fingerprint]
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(partition_key=key, run_key=f"{key}:{fingerprints[key]}")
            for key in changed
        ],
        dynamic_partitions_requests=[files_folders.build_add_request(new)] if new else [],
        cursor=json.dumps({**seen, **fingerprints}, sort_keys=True),
    )
