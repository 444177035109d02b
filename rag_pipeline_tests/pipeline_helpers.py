"""Running the real files job in process, for tests."""

from pathlib import Path
from typing import Any

import dagster as dg

from rag_pipeline.definitions import defs
from rag_pipeline.operations.folders import register_folder
from rag_pipeline.settings import load_settings


def force_config(job: dg.JobDefinition, source: str = "files") -> dict[str, Any]:
    """Run config that recomputes every stage of a source's chain."""
    # The op of the asset `[source, stage]` is `source__stage`.
    stages = {
        f"{source}__{stage}" for stage in ("raw", "markdown", "sanitized", "chunks", "embeddings")
    }
    return {
        "ops": {
            node.name: {"config": {"force": True}}
            for node in job.graph.nodes
            if node.name in stages
        }
    }


def ingest(
    folder: Path | str, instance: dg.DagsterInstance, *, force: bool = False
) -> dict[str, Any]:
    """Run files_ingest_job for a folder; return the embeddings materialization's metadata."""
    key = folder_partition(folder)
    if not instance.has_dynamic_partition("files_folders", key):
        instance.add_dynamic_partitions("files_folders", [key])
    job = defs().resolve_job_def("files_ingest_job")
    result = job.execute_in_process(
        instance=instance, partition_key=key, run_config=force_config(job) if force else None
    )
    assert result.success
    (materialization,) = result.asset_materializations_for_node("files__embeddings")
    return {name: value.value for name, value in materialization.metadata.items()}


def folder_partition(folder: Path | str) -> str:
    """The partition of a folder (its name), registered in the database of RAG_* settings."""
    return register_folder(load_settings(), folder).name


def write(folder: Path, name: str, text: str | bytes) -> Path:
    """Create or replace a file below `folder`."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# Four short English pages of a user manual: what a Spanish question should find.
ENGLISH_PAGES = {
    "vendor-invoices.md": "# Vendor invoices\n\nEnter the invoice a supplier sends you in the "
    "Invoice (Vendor) window: choose the business partner, the price list and the lines, then "
    "complete the document so that it can be paid.",
    "locators.md": "# Warehouse locators\n\nEvery locator has an aisle, a bin and a level "
    "coordinate; one locator of each warehouse is the default.",
    "roles.md": "# User roles\n\nA role grants access to windows, processes and reports; users "
    "log in with one of their roles.",
    "periods.md": "# Closing periods\n\nOpen and close accounting periods per month in the "
    "Calendar, Year and Period window.",
}
