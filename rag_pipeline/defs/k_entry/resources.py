"""The `k_entry` source's configuration in Dagster."""

from pydantic import Field

from rag_pipeline.defs.idempiere import IdempiereSourceResource
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.sources.idempiere.connection import resolve_idempiere_conninfo
from rag_pipeline.sources.idempiere.k_entry import KEntrySource


class KEntrySourceResource(IdempiereSourceResource):
    """Knowledge-base entries (K_Entry) of the iDempiere database, one partition per language."""

    client_ids: str = Field(
        default="1000014,11",
        description="RAG_KENTRY_CLIENT_IDS: AD_Client_IDs whose entries are indexed",
    )

    @classmethod
    def from_settings(cls, settings: Settings) -> "KEntrySourceResource":
        """The resource with the given settings as its defaults."""
        return cls(languages=settings.languages, client_ids=settings.kentry_client_ids)

    def build(self) -> KEntrySource:
        """The source, on a read-only connection to the configured (or demo) database."""
        # Validated like the environment variables, so an error names the setting to fix.
        settings = load_settings(languages=self.languages, kentry_client_ids=self.client_ids)
        return KEntrySource.from_settings(settings, resolve_idempiere_conninfo(settings))
