"""The `ad_metadata` source: the Application Dictionary as one Markdown document per entity.

Entities are tables (with columns), windows (with tabs and a field summary), tabs, fields
(one per column name and window) and processes/reports (with parameters), each in every
configured language. A partition is one entity type in one language (`window|es_CO`): the
two dimensions of a Dagster multi-partition, in its key order.

Listing is one aggregate query per partition streamed through a server-side cursor; fetching
reads the requested ids in batches, each batch's child rows in one query per kind, so memory
follows the batch size, never the dictionary's size.
"""

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from psycopg import sql
from psycopg.rows import class_row

from rag_pipeline.core.models import FailedDocument, SourceFormat
from rag_pipeline.core.source import ChainOptions, DocumentError, DocumentRef, SourceDocument
from rag_pipeline.settings import Settings
from rag_pipeline.sources.idempiere import ad_queries as q
from rag_pipeline.sources.idempiere import ad_render as render
from rag_pipeline.sources.idempiere.ad_records import ColumnRow, FieldLine, ParameterRow, TabRow
from rag_pipeline.sources.idempiere.base import CURSOR_ITERSIZE, IdempiereSource, cursor_name

SOURCE_TYPE = "ad_metadata"
ENTITY_TYPES: tuple[str, ...] = tuple(q.ENTITY_TABLES)
# Dagster joins multi-partition keys with "|" in the order of the dimension names.
PARTITION_SEPARATOR = "|"
_ENTITY_OF_TABLE = {table: entity for entity, table in q.ENTITY_TABLES.items()}
# Ids per fetch query: bounds memory and the size of `= ANY(%s)` arrays.
FETCH_BATCH = 500


@dataclass(frozen=True)
class ADPartition:
    """One partition: an entity type in one language."""

    entity: str
    language: str

    @property
    def key(self) -> str:
        """The Dagster multi-partition key (`entity|language`)."""
        return f"{self.entity}{PARTITION_SEPARATOR}{self.language}"


def parse_partition_key(key: str) -> ADPartition:
    """The entity type and language of a partition key, in either dimension order."""
    parts = key.split(PARTITION_SEPARATOR)
    entities = [p for p in parts if p in ENTITY_TYPES]
    if len(parts) != 2 or len(entities) != 1:
        raise ValueError(
            f"ad_metadata partition key {key!r}: expected '<entity>|<language>' with an entity "
            f"type of {', '.join(ENTITY_TYPES)}"
        )
    language = parts[1] if parts[0] == entities[0] else parts[0]
    return ADPartition(entities[0], language)


def source_id_for(entity: str, record_id: int) -> str:
    """`AD_Window:143` and the like."""
    return f"{q.ENTITY_TABLES[entity]}:{record_id}"


def parse_source_id(source_id: str) -> tuple[str, int]:
    """The entity type and record id of a source id."""
    table, _, record = source_id.partition(":")
    if table not in _ENTITY_OF_TABLE or not record.isdigit():
        raise DocumentError(f"not an ad_metadata source id: {source_id!r}")
    return _ENTITY_OF_TABLE[table], int(record)


def _version(updated: datetime, rows: int) -> str:
    # The renderer's version is part of it: new rendering code re-renders every document.
    return f"r{render.RENDER_VERSION}:{updated.isoformat()}/{rows}"


class ADSource(IdempiereSource):
    """Tables, windows, tabs, fields and processes of the Application Dictionary."""

    source_type: ClassVar[str] = SOURCE_TYPE
    chain_options: ClassVar[ChainOptions] = ChainOptions(default_language="en_US")
    trl_tables: ClassVar[tuple[str, ...]] = q.TRL_TABLES

    def __init__(
        self,
        conninfo: str,
        *,
        languages: Sequence[str] = ("en_US",),
        entity_types: Sequence[str] = ENTITY_TYPES,
    ) -> None:
        """Read the dictionary at `conninfo` in `languages`, for `entity_types`."""
        super().__init__(conninfo, languages=languages)
        unknown = set(entity_types) - set(ENTITY_TYPES)
        if unknown:
            raise ValueError(f"unknown AD entity types: {', '.join(sorted(unknown))}")
        self._entity_types = tuple(entity_types)

    @classmethod
    def from_settings(cls, settings: Settings, conninfo: str) -> "ADSource":
        """The source as RAG_LANGUAGES configures it."""
        return cls(conninfo, languages=settings.language_list)

    def partitions(self) -> list[ADPartition]:
        """Every entity type in every configured language."""
        return [ADPartition(e, lang) for lang in self.languages() for e in self._entity_types]

    def partition_keys(self) -> list[str]:
        """The keys of `partitions()`."""
        return [p.key for p in self.partitions()]

    def list_documents(self, partition_key: str) -> Iterator[DocumentRef | FailedDocument]:
        """Every active entity of the partition, versioned by max(Updated) and row count."""
        partition = parse_partition_key(partition_key)
        params = {"lang": partition.language}
        with (
            self.conn.transaction(),
            self.conn.cursor(name=cursor_name(f"ad_{partition.entity}_list")) as cur,
        ):
            cur.itersize = CURSOR_ITERSIZE
            cur.execute(q.listing_query(partition.entity), params)
            for record_id, updated, rows in cur:
                yield DocumentRef(
                    source_id=source_id_for(partition.entity, int(record_id)),
                    language=partition.language,
                    version=_version(updated, int(rows)),
                )

    def change_token(self, partition_key: str) -> str:
        """max(Updated), documents and rows of the partition: changes when any document does.

        For a sensor: the listing's aggregate, no rows shipped.
        """
        partition = parse_partition_key(partition_key)
        with self.conn.transaction():
            row = self.conn.execute(
                q.change_token_query(partition.entity), {"lang": partition.language}
            ).fetchone()
        count, updated, rows = row if row else (0, None, 0)
        return f"{count}/{updated.isoformat() if updated else '-'}/{rows or 0}"

    def fetch(self, refs: Sequence[DocumentRef]) -> Iterator[SourceDocument | FailedDocument]:
        """The documents of `refs`; ones that vanished since the listing are left out.

        A document keeps the version its listing gave it (`ref.version`): recomputing it would
        cost a pass over the child tables per batch.
        """
        groups: dict[tuple[str, str], dict[int, str]] = {}
        for ref in refs:
            try:
                entity, record_id = parse_source_id(ref.source_id)
            except DocumentError as exc:
                yield FailedDocument(ref.key, "raw", str(exc))
                continue
            groups.setdefault((entity, ref.language), {})[record_id] = ref.version
        for (entity, language), versions in groups.items():
            ids = list(versions)
            for start in range(0, len(ids), FETCH_BATCH):
                batch = {i: versions[i] for i in ids[start : start + FETCH_BATCH]}
                yield from self._fetch_batch(entity, language, batch)

    def _fetch_batch(
        self, entity: str, language: str, versions: dict[int, str]
    ) -> Iterator[SourceDocument]:
        params: dict[str, Any] = {"lang": language, "ids": list(versions)}
        row_type: type[Any] = q.DOCUMENT_ROWS[entity]
        with self.conn.transaction():
            with self.conn.cursor(row_factory=class_row(row_type)) as cur:
                rows: list[Any] = cur.execute(q.fetch_query(entity), params).fetchall()
            render_row = self._renderer(entity, language, [r.id for r in rows])
            for row in rows:
                rendered = render_row(row)
                yield SourceDocument(
                    source_id=source_id_for(entity, row.id),
                    language=language,
                    version=versions[row.id],
                    title=rendered.title,
                    original_format=SourceFormat.MARKDOWN,
                    body=rendered.body,
                    breadcrumb=rendered.breadcrumb,
                    metadata={
                        "entity_type": entity,
                        "ad_table": q.ENTITY_TABLES[entity],
                        "record_id": row.id,
                        "original_format": "GFM",
                        **rendered.metadata,
                    },
                )

    def _children(self, query: sql.SQL, row_type: type[Any], params: dict[str, Any]) -> Any:
        grouped: dict[int, list[Any]] = {}
        with self.conn.cursor(row_factory=class_row(row_type)) as cur:
            for child in cur.execute(query, params):
                key = child.window_id if isinstance(child, TabRow) else child.parent_id
                grouped.setdefault(key, []).append(child)
        return grouped

    def _renderer(
        self, entity: str, language: str, ids: list[int]
    ) -> Callable[[Any], render.Rendered]:
        """A function rendering one row of `entity`, with the children of `ids` preloaded."""
        params: dict[str, Any] = {"lang": language, "ids": ids}
        labels = render.labels_for(language)
        if entity == "table":
            columns = self._children(q.COLUMNS_OF_TABLES, ColumnRow, params)
            return lambda row: render.render_table(row, columns.get(row.id, []), labels)
        if entity == "window":
            tabs: dict[int, list[TabRow]] = self._children(q.TABS_OF_WINDOWS, TabRow, params)
            tab_ids = [t.id for ts in tabs.values() for t in ts]
            fields = self._children(q.FIELDS_OF_TABS, FieldLine, {**params, "ids": tab_ids})
            return lambda row: render.render_window(row, tabs.get(row.id, []), fields, labels)
        if entity == "tab":
            fields = self._children(q.FIELDS_OF_TABS, FieldLine, params)
            return lambda row: render.render_tab(row, fields.get(row.id, []), labels)
        if entity == "process":
            parameters = self._children(q.PARAMETERS_OF_PROCESSES, ParameterRow, params)
            return lambda row: render.render_process(row, parameters.get(row.id, []), labels)
        return lambda row: render.render_field(row, labels)
