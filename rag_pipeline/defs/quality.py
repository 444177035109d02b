"""Retrieval quality: the `retrieval_quality` asset, its regression check and its job."""

import dagster as dg

from rag_pipeline.orchestration.quality import quality_asset, quality_check, quality_job
from rag_pipeline.settings import load_settings


@dg.definitions
def quality() -> dg.Definitions:
    """Labelled questions scored after the index changed (`orchestration/quality.py`)."""
    settings = load_settings()
    return dg.Definitions(
        assets=[quality_asset(settings)],
        asset_checks=[quality_check(settings)],
        jobs=[quality_job(settings)],
    )
