"""The vector database as a Dagster resource: external PostgreSQL or the embedded server."""

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import psycopg
from pydantic import PrivateAttr

from rag_pipeline.settings import Settings, load_settings
from rag_pipeline.store.connection import connect
from rag_pipeline.store.runtime import ready_conninfo


class VectorDBResource(dg.ConfigurableResource):
    """PostgreSQL + pgvector holding the index, stage rows and the embedding cache.

    Unset fields come from the `RAG_*` environment variables when the resource is set up for a
    run (not when the code is loaded), so the UI never shows a stale or secret value.
    """

    url: str | None = None
    home: str | None = None

    _settings: Settings | None = PrivateAttr(default=None)

    def settings(self) -> Settings:
        """The effective settings: this resource's fields over the environment."""
        if self._settings is None:
            overrides: dict[str, object] = {}
            if self.url:
                overrides["vectordb_url"] = self.url
            if self.home:
                overrides["home"] = self.home
            self._settings = load_settings(**overrides)
        return self._settings

    def conninfo(self) -> str:
        """The connection URL of the migrated database."""
        return ready_conninfo(self.settings())

    @contextmanager
    def connect(self, *, autocommit: bool = False) -> Iterator[psycopg.Connection]:
        """A connection with pgvector types registered."""
        with connect(self.conninfo(), autocommit=autocommit) as conn:
            yield conn
