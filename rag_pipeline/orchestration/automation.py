"""When the downstream stages run on their own: Dagster's `eager()`, plus a catch-up condition.

`eager()` reacts to *new* upstream materializations seen between two ticks of the automation
sensor; a partition materialized while the sensor was off (or before a code change) is never
new to it, and stays stale. `BehindUpstream` compares the stored events instead: a partition
whose stage is missing, older than its upstream stage's latest materialization of the same
partition, or built by another `code_version`, is requested, so turning automation on carries
every such partition through the chain, with no new upstream materialization.

A custom condition runs in the code location, so the automation sensor is declared with
`use_user_code_server=True` (`defs/automation.py`).
"""

from collections.abc import Mapping

import dagster as dg

# Dagster's tag on a materialization naming the code version that made it (not exported at top
# level in 1.13).
CODE_VERSION_TAG = "dagster/code_version"

_MATERIALIZATION = dg.DagsterEventType.ASSET_MATERIALIZATION
# Materializations read per asset and tick to find each partition's code version.
_RECENT = 500


class BehindUpstream(dg.AutomationCondition[dg.AssetKey]):
    """Partitions missing, older than an upstream asset's same partition, or of another code
    version (partitioned assets whose upstream shares their partitions)."""

    @property
    def name(self) -> str:
        """The label shown in the UI's automation evaluations."""
        return "behind_upstream"

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:  # type: ignore[override]
        """The candidate partitions that are behind."""
        if context.partitions_def is None:
            return dg.AutomationResult(context, true_subset=context.get_empty_subset())
        instance = context.asset_graph_view.instance
        node = context.asset_graph.get(context.key)
        candidates = set(context.candidate_subset.expensively_compute_partition_keys())
        mine = instance.get_latest_storage_id_by_partition(context.key, _MATERIALIZATION)
        behind: set[str] = set()
        for parent in node.parent_keys:
            if not context.asset_graph.get(parent).is_materializable:
                continue  # a source system is observed, not materialized
            theirs = instance.get_latest_storage_id_by_partition(parent, _MATERIALIZATION)
            behind |= {key for key in candidates if _newer(theirs, mine, key)}
        behind |= _other_code_version(instance, context.key, node.code_version, candidates)
        return dg.AutomationResult(
            context,
            true_subset=context.candidate_subset.compute_intersection_with_partition_keys(behind),
        )


def _newer(theirs: Mapping[str, int], mine: Mapping[str, int], key: str) -> bool:
    return key in theirs and theirs[key] > mine.get(key, -1)


def _other_code_version(
    instance: dg.DagsterInstance, key: dg.AssetKey, code_version: str | None, candidates: set[str]
) -> set[str]:
    """Partitions whose latest materialization (among the newest `_RECENT`) had another code
    version. Dagster indexes no materialization tag by partition that would say it at once."""
    if code_version is None:
        return set()
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key), limit=_RECENT
    ).records
    latest: dict[str, str | None] = {}
    for record in records:  # newest first: the first one seen per partition is its latest
        materialization = record.asset_materialization
        if record.partition_key is None or materialization is None:
            continue
        latest.setdefault(record.partition_key, (materialization.tags or {}).get(CODE_VERSION_TAG))
    return {
        partition
        for partition, found in latest.items()
        if partition in candidates and found not in (None, code_version)
    }


# A partition that is behind is caught up once its upstream is complete (or is requested in the
# same tick: the whole rest of a chain goes in one run) and nothing runs for it; a failed attempt
# is not retried every tick (the next upstream update, `eager`, retries it).
_UPSTREAM_REQUESTED = dg.AutomationCondition.any_deps_match(
    dg.AutomationCondition.will_be_requested()
)
_UPSTREAM_MISSING = dg.AutomationCondition.any_deps_match(
    dg.AutomationCondition.missing() & ~dg.AutomationCondition.will_be_requested()
)
CATCH_UP = (
    (BehindUpstream() | _UPSTREAM_REQUESTED)
    & ~_UPSTREAM_MISSING
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
    & ~dg.AutomationCondition.execution_failed()
).with_label("catch_up")

# The downstream stages' condition: follow each new upstream update, and catch up on the rest.
DOWNSTREAM_AUTOMATION = (dg.AutomationCondition.eager() | CATCH_UP).with_label("eager_or_catch_up")
