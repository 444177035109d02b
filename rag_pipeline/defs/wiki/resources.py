"""The `wiki` source's configuration in Dagster: RAG_WIKI_* defaults, overridable in the UI."""

from pathlib import Path

import dagster as dg
from pydantic import Field

from rag_pipeline.orchestration.pipeline import SourceResource
from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.sources.wiki.client import DEFAULT_USER_AGENT
from rag_pipeline.sources.wiki.source import WikiConfig, WikiConfigError, WikiSource


class WikiSourceResource(SourceResource):
    """Pages of a MediaWiki (the iDempiere wiki) by category and title, or of an XML export.

    With no API URL the demo export shipped in the package is read, so the default is offline.
    """

    api_url: str | None = Field(
        default=None,
        description="RAG_WIKI_API_URL: the wiki's api.php (unset: the bundled demo export)",
    )
    categories: str = Field(
        default="Developer,New_Features",
        description="RAG_WIKI_CATEGORIES: comma-separated, with or without 'Category:' "
        "(iDempiere: e.g. New_Features_v11, Plug-In_Development)",
    )
    pages: str = Field(default="", description="RAG_WIKI_PAGES: comma-separated page titles")
    namespaces: str = Field(default="0", description="RAG_WIKI_NAMESPACES: namespace ids")
    category_depth: int = Field(
        default=2, description="RAG_WIKI_CATEGORY_DEPTH: levels of subcategories followed"
    )
    max_concurrency: int = Field(
        default=4, description="RAG_WIKI_MAX_CONCURRENCY: requests in flight at most"
    )
    user_agent: str = Field(
        default=DEFAULT_USER_AGENT, description="RAG_WIKI_USER_AGENT: sent with every request"
    )
    xml_file: str | None = Field(
        default=None, description="An XML export (Special:Export) to import instead of the API"
    )

    @classmethod
    def from_settings(
        cls, settings: Settings, *, xml_file: str | None = None
    ) -> "WikiSourceResource":
        """The resource with the given settings as its defaults."""
        return cls(
            api_url=settings.wiki_api_url,
            categories=settings.wiki_categories,
            pages=settings.wiki_pages,
            namespaces=settings.wiki_namespaces,
            category_depth=settings.wiki_category_depth,
            max_concurrency=settings.wiki_max_concurrency,
            user_agent=settings.wiki_user_agent,
            xml_file=xml_file,
        )

    def config(self) -> WikiConfig:
        """The source configuration, validated like the environment variables."""
        settings = load_settings(
            wiki_api_url=self.api_url,
            wiki_categories=self.categories,
            wiki_pages=self.pages,
            wiki_namespaces=self.namespaces,
            wiki_category_depth=self.category_depth,
            wiki_max_concurrency=self.max_concurrency,
            wiki_user_agent=self.user_agent,
        )
        return WikiConfig.from_settings(
            settings, xml_file=Path(self.xml_file) if self.xml_file else None
        )

    def build(self) -> WikiSource:
        """The source for a run."""
        return WikiSource(self.config())

    def partition_keys(self) -> list[str]:
        """One partition per configured category, `pages`, or the export's partition."""
        try:
            return self.config().partition_keys()
        except WikiConfigError as exc:
            dg.get_dagster_logger().warning(str(exc))
            return []
