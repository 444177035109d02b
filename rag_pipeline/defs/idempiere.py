"""What the two iDempiere sources (k_entry, ad_metadata) share in Dagster: the languages
setting, the partition listing and the change sensor's decision."""

import json
from abc import abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
from pydantic import Field

from rag_pipeline.orchestration.pipeline import SourceResource
from rag_pipeline.orchestration.reconcile import add_requests, system_observation
from rag_pipeline.orchestration.source_registry import SourceSpec
from rag_pipeline.settings import Settings
from rag_pipeline.sources.idempiere.base import IdempiereSource


class IdempiereSourceResource(SourceResource):
    """A source reading the iDempiere database.

    The connection comes from IDEMPIERE_DB_* when a run starts (never shown in the UI); with
    none set, the demo iDempiere database in the embedded server is used.
    """

    languages: str = Field(
        default="all",
        description=f"RAG_LANGUAGES: {Settings.model_fields['languages'].description}",
    )

    @abstractmethod
    def build(self) -> IdempiereSource:
        """The source, on a read-only connection to the configured (or demo) database."""

    @contextmanager
    def opened(self) -> Iterator[IdempiereSource]:
        """The built source, closed (with its connection) on leaving."""
        source = self.build()
        try:
            yield source
        finally:
            source.close()

    def partition_keys(self) -> list[str]:
        """The partitions the configuration covers (`all` languages resolved in the database)."""
        with self.opened() as source:
            return source.partition_keys()

    def change_tokens(self) -> dict[str, str]:
        """Every partition's change token, read on one connection."""
        with self.opened() as source:
            return source.change_tokens()


def changed_partitions(
    context: dg.SensorEvaluationContext,
    spec: SourceSpec,
    tokens: dict[str, str],
    languages: list[str],
    language_partitions: dg.DynamicPartitionsDefinition,
    partitions_def: dg.PartitionsDefinition,
) -> dg.SensorResult:
    """Run each partition whose change token moved since the cursor; register new languages.

    The cursor keeps every partition's last token, so a tick over unchanged rows requests
    nothing; a run key of partition and token makes a repeated request a no-op. A registered
    partition whose token moved is observed on the source system's asset, the token its data
    version: the UI shows when the database changed and which runs followed.
    """
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    registered = set(context.instance.get_dynamic_partitions(language_partitions.name or ""))
    new = [language for language in dict.fromkeys(languages) if language not in registered]
    changed = [key for key, token in tokens.items() if seen.get(key) != token]
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(partition_key=key, run_key=f"{key}:{tokens[key]}") for key in changed
        ],
        dynamic_partitions_requests=[language_partitions.build_add_request(new)] if new else [],
        asset_events=[
            system_observation(spec, key, tokens[key])
            for key in changed
            if not add_requests(partitions_def, [key], context.instance)
        ],
        cursor=json.dumps({**seen, **tokens}, sort_keys=True),
    )
