"""The `ad_metadata` source's configuration in Dagster."""

from pydantic import Field

from rag_pipeline.defs.idempiere import IdempiereSourceResource
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.sources.idempiere.ad import ENTITY_TYPES, ADSource
from rag_pipeline.sources.idempiere.connection import resolve_idempiere_conninfo


class ADSourceResource(IdempiereSourceResource):
    """The Application Dictionary of the iDempiere database, one partition per entity type
    and language (`entity|language`)."""

    entity_types: str = Field(
        default=",".join(ENTITY_TYPES),
        description="RAG_AD_ENTITY_TYPES: entity types indexed, comma-separated: "
        + ", ".join(ENTITY_TYPES),
    )

    @classmethod
    def from_settings(cls, settings: Settings) -> "ADSourceResource":
        """The resource with the given settings as its defaults."""
        return cls(languages=settings.languages, entity_types=settings.ad_entity_types)

    def build(self) -> ADSource:
        """The source, on a read-only connection to the configured (or demo) database."""
        settings = load_settings(languages=self.languages)
        entities = [e.strip() for e in self.entity_types.split(",") if e.strip()]
        return ADSource(
            resolve_idempiere_conninfo(settings),
            languages=settings.language_list,
            entity_types=entities,
        )
