"""The code location: everything under `defs/` is autoloaded."""

from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    """All assets, checks, jobs, schedules, sensors and resources of rag_pipeline."""
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
