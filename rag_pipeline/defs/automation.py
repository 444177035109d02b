"""The automation-condition sensor: evaluates the stages' `AutomationCondition`s.

The downstream stages (markdown → embeddings) are `eager()` or catching up
(`orchestration/automation.py`): when a raw partition is materialized alone (from the UI, or
a partial run), the rest of its chain follows; when the sensor is turned on, every partition
whose downstream is missing, older than its upstream or of another code version is carried
through. The raw stages have no condition: the sources' sensors and the nightly schedules run
them. The `ingest_errors` report refreshes after any source's index changed. Defined
explicitly (not Dagster's implicit default sensor) so that its interval, default status and
run tags are ours: stopped in local development, started with the daemon when
`RAG_AUTOMATION=true`; evaluated in the code location, as the catch-up condition is ours.
"""

import warnings

import dagster as dg

from rag_pipeline.orchestration.executors import run_tags
from rag_pipeline.settings import load_settings

AUTOMATION_SENSOR = "rag_automation_sensor"


@dg.definitions
def automation() -> dg.Definitions:
    """The one automation-condition sensor of the code location."""
    settings = load_settings()
    with warnings.catch_warnings():
        # use_user_code_server is beta in 1.13 and said so at every load of the code location;
        # the catch-up condition is ours, so it must be evaluated in the code location.
        warnings.simplefilter("ignore", dg.BetaWarning)
        sensor = dg.AutomationConditionSensorDefinition(
            AUTOMATION_SENSOR,
            target=dg.AssetSelection.all(),
            minimum_interval_seconds=60,
            use_user_code_server=True,
            run_tags=run_tags(settings),
            description="Carries partial updates through each source's chain, and "
            "refreshes ingest_errors after runs.",
            default_status=(
                dg.DefaultSensorStatus.RUNNING
                if settings.automation
                else dg.DefaultSensorStatus.STOPPED
            ),
        )
    return dg.Definitions(sensors=[sensor])
