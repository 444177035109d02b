"""The `ad_metadata` source's configuration in Dagster."""

from pydantic import Field

from rag_pipeline.pipeline import SourceResource
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.sources.idempiere.ad import ENTITY_TYPES, ADSource
from rag_pipeline.sources.idempiere.connection import resolve_idempiere_conninfo


class ADSourceResource(SourceResource):
    """The Application Dictionary of the iDempiere database.

    The connection comes from IDEMPIERE_DB_* when a run starts (never shown in the UI); with
    none set, the demo iDempiere database in the embedded server is used.
    """

    languages: str = Field(
        default="en_US",
        description="RAG_LANGUAGES: AD_Language codes, comma-separated; all = every language",
    )
    entity_types: str = Field(
        default=",".join(ENTITY_TYPES),
        description="Entity types indexed, comma-separated: " + ", ".join(ENTITY_TYPES),
    )

    @classmethod
    def from_settings(cls, settings: Settings) -> "ADSourceResource":
        """The resource with the given settings as its defaults."""
        return cls(languages=settings.languages)

    def build(self) -> ADSource:
        """The source, on a read-only connection to the configured (or demo) database."""
        settings = load_settings(languages=self.languages)
        entities = [e.strip() for e in self.entity_types.split(",") if e.strip()]
        return ADSource(
            resolve_idempiere_conninfo(settings),
            languages=settings.language_list,
            entity_types=entities,
        )

    def partition_keys(self) -> list[str]:
        """`entity|language` for every configured entity type and language."""
        source = self.build()
        try:
            return source.partition_keys()
        finally:
            source.close()
