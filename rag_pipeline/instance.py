"""The Dagster instance the `rag` command and `dagster` share: `DAGSTER_HOME`, or a folder
under `RAG_HOME` when it is unset (exported, so `dagster` started from `rag` uses it too)."""

import os
from pathlib import Path
from typing import Any

from rag_pipeline.settings import Settings

DAGSTER_YAML = "telemetry:\n  enabled: false\n"


def dagster_home(settings: Settings) -> Path:
    """DAGSTER_HOME if set, else `RAG_HOME/dagster` (created with a minimal dagster.yaml)."""
    configured = os.environ.get("DAGSTER_HOME")
    home = Path(configured) if configured else settings.home / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(DAGSTER_YAML, encoding="utf-8")
    return home


def dagster_instance(settings: Settings) -> Any:
    """The persistent Dagster instance of `dagster_home(settings)`."""
    import dagster as dg

    os.environ["DAGSTER_HOME"] = str(dagster_home(settings))
    return dg.DagsterInstance.get()
