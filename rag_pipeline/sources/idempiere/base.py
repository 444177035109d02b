"""What both iDempiere sources share: a lazy read-only connection and language partitions."""

import itertools
from abc import abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import psycopg

from rag_pipeline.core.source import Source
from rag_pipeline.sources.idempiere.connection import connect_read_only
from rag_pipeline.sources.idempiere.languages import resolve_languages

# Rows a server-side cursor sends per round trip: memory stays constant however big the table.
CURSOR_ITERSIZE = 2000
_cursor_ids = itertools.count(1)


class IdempiereSource(Source):
    """A source reading the iDempiere database through one read-only connection.

    Subclasses set `trl_tables`: the translation tables that tell which languages exist when
    `all` languages are configured.
    """

    trl_tables: ClassVar[tuple[str, ...]] = ()

    def __init__(self, conninfo: str, *, languages: Sequence[str] = ("en_US",)) -> None:
        """Read the database at `conninfo` in `languages` (AD_Language codes, or `["all"]`)."""
        self._conninfo = conninfo
        self._configured_languages = tuple(languages)
        self._conn: psycopg.Connection | None = None

    @property
    def conn(self) -> psycopg.Connection:
        """The read-only connection, opened on first use."""
        if self._conn is None or self._conn.closed:
            self._conn = connect_read_only(self._conninfo)
        return self._conn

    def languages(self) -> list[str]:
        """The AD_Language codes this configuration indexes (`all` resolved in the database)."""
        return resolve_languages(self.conn, self._configured_languages, self.trl_tables)

    @abstractmethod
    def partition_keys(self) -> list[str]:
        """The partitions this configuration covers."""

    @abstractmethod
    def change_token(self, partition_key: str) -> str:
        """A cheap fingerprint of a partition's rows: it moves when any of them changes."""

    def change_tokens(self) -> dict[str, str]:
        """Every partition's change token."""
        return {key: self.change_token(key) for key in self.partition_keys()}

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def cursor_name(prefix: str) -> str:
    """A name for a server-side cursor, unique within the process."""
    return f"rag_{prefix}_{next(_cursor_ids)}"
