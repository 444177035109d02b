"""The `k_entry` source: iDempiere knowledge-base entries, one document per entry and language.

Core iDempiere has `K_Entry` (TextMsg VARCHAR(2000), no format column, no translations);
installations that store Editor.js add `K_EntryEditMode` (`BLK`/`GFM`/`HTM`), widen TextMsg and
add `K_Entry_Trl`. Which one a database has is read from information_schema once per source,
so the same code serves both: without the column the format is sniffed from the text, without
the table only the base language has entries.

The listing's version is the newest `Updated` of the rows a document is built from plus an
md5 of their text (computed by PostgreSQL, so listing never ships bodies): an edit that kept
the timestamp still changes it. A broken Editor.js body is delivered as it is, labelled
EDITORJS: the chain's converter fails that one document with the reason.
"""

import html
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, cast

import psycopg
from bs4 import BeautifulSoup, Tag
from markdown_it import MarkdownIt
from psycopg import sql
from psycopg.rows import dict_row

from rag_pipeline.core.models import FailedDocument, SourceFormat
from rag_pipeline.core.source import ChainOptions, DocumentRef, SourceDocument
from rag_pipeline.settings import Settings
from rag_pipeline.sources.idempiere.base import CURSOR_ITERSIZE, IdempiereSource, cursor_name
from rag_pipeline.sources.idempiere.languages import base_language, existing_tables, has_column

SOURCE_TYPE = "k_entry"
# Part of every document's version: bump it when `with_keywords` or the metadata change.
BODY_VERSION = 2
BREADCRUMB_SEPARATOR = " › "
EDIT_MODES: dict[str, SourceFormat] = {
    "BLK": SourceFormat.EDITORJS,
    "GFM": SourceFormat.MARKDOWN,
    "HTM": SourceFormat.HTML,
    "HTML": SourceFormat.HTML,
}
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_FORMAT_CODES = {
    SourceFormat.EDITORJS: "BLK",
    SourceFormat.MARKDOWN: "GFM",
    SourceFormat.HTML: "HTM",
}
# Detection only (never parsing): an opening or closing tag of an element a rich-text editor
# writes. Markdown may hold inline HTML too, but then it is rendered as HTML anyway.
_HTML_TAG = re.compile(
    r"</?(p|div|br|h[1-6]|ul|ol|li|table|tr|td|th|strong|em|b|i|a|span|pre|code|blockquote|img)"
    r"\b[^>]*>",
    re.IGNORECASE,
)


def sniff_format(text: str) -> SourceFormat:
    """The format of a TextMsg with no edit mode: Editor.js JSON, HTML, else Markdown."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError:
            # Broken JSON that names blocks is a broken Editor.js document: let the converter
            # fail it with its reason rather than index the JSON as prose.
            if '"blocks"' in stripped:
                return SourceFormat.EDITORJS
        else:
            if isinstance(data, dict) and "blocks" in data:
                return SourceFormat.EDITORJS
    if _HTML_TAG.search(text):
        return SourceFormat.HTML
    return SourceFormat.MARKDOWN


def entry_format(edit_mode: str | None, text: str) -> tuple[SourceFormat, str]:
    """The format of an entry and how it was decided (`column` or `sniffed`)."""
    code = (edit_mode or "").strip().upper()
    if code in EDIT_MODES:
        return EDIT_MODES[code], "column"
    return sniff_format(text), "sniffed"


def keyword_line(keywords: str, url: str) -> str:
    """The entry's keywords and reference link as one line of plain text ('' if neither)."""
    parts = [f"Keywords: {keywords}." if keywords else "", f"Reference: {url}" if url else ""]
    return " ".join(p for p in parts if p)


def with_keywords(body: str, fmt: SourceFormat, keywords: str, url: str) -> str:
    """`body` with its keywords and reference link added, in the body's own format.

    Keywords are what users search for, so they belong in the text. They go into the first
    section (after a leading heading, else first): appended at the end they would often form
    a chunk of their own, and a chunk of nothing but keywords matches unrelated questions.
    An Editor.js body that does not parse is returned unchanged (the converter reports it).
    """
    line = keyword_line(keywords, url)
    if not line:
        return body
    if fmt is SourceFormat.EDITORJS:
        return _editorjs_with(body, keywords, url)
    if fmt is SourceFormat.HTML:
        return _html_with(body, keywords, url)
    # An autolink: a bare URL is not a link in CommonMark.
    return _markdown_with(body, keyword_line(keywords, f"<{url}>" if url else ""))


def _editorjs_with(body: str, keywords: str, url: str) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body
    if not isinstance(data, dict) or not isinstance(data.get("blocks"), list):
        return body
    blocks: list[Any] = list(cast(list[Any], data["blocks"]))
    text = html.escape(f"Keywords: {keywords}. " if keywords else "")
    if url:
        text += f'Reference: <a href="{html.escape(url)}">{html.escape(url)}</a>'
    first = blocks[0] if blocks else None
    at = 1 if isinstance(first, dict) and cast(dict[str, Any], first).get("type") == "header" else 0
    blocks.insert(at, {"type": "paragraph", "data": {"text": text.strip()}})
    return json.dumps({**cast(dict[str, Any], data), "blocks": blocks}, ensure_ascii=False)


def _html_with(body: str, keywords: str, url: str) -> str:
    soup = BeautifulSoup(body, "html.parser")
    paragraph = soup.new_tag("p")
    if keywords:
        paragraph.append(f"Keywords: {keywords}. ")
    if url:
        paragraph.append("Reference: ")
        link = soup.new_tag("a", href=url)
        link.string = url
        paragraph.append(link)
    first = next((c for c in soup.contents if isinstance(c, Tag)), None)
    if first is not None and first.name in _HEADINGS:
        first.insert_after(paragraph)
    else:
        soup.insert(0, paragraph)
    return str(soup)


def _markdown_with(body: str, line: str) -> str:
    # A leading ATX or setext heading keeps its place; the line becomes the first paragraph.
    tokens = MarkdownIt("commonmark").parse(body)
    lines = body.splitlines()
    first = tokens[0] if tokens else None
    if first is not None and first.type == "heading_open" and first.map:
        end = first.map[1]
        return "\n".join([*lines[:end], "", line, "", *lines[end:]]).rstrip() + "\n"
    return f"{line}\n\n{body}"


@dataclass(frozen=True)
class KEntrySchema:
    """What the database has beyond core K_Entry."""

    edit_mode: bool
    translations: bool


def detect_schema(conn: psycopg.Connection) -> KEntrySchema:
    """Read from information_schema whether K_EntryEditMode and K_Entry_Trl exist."""
    return KEntrySchema(
        has_column(conn, "k_entry", "k_entryeditmode"),
        bool(existing_tables(conn, ["k_entry_trl"])),
    )


class KEntrySource(IdempiereSource):
    """Knowledge-base entries of the configured clients: active, public, not expired."""

    source_type: ClassVar[str] = SOURCE_TYPE
    chain_options: ClassVar[ChainOptions] = ChainOptions(default_language="en_US")
    trl_tables: ClassVar[tuple[str, ...]] = ("k_entry_trl",)

    def __init__(
        self,
        conninfo: str,
        *,
        client_ids: Sequence[int],
        languages: Sequence[str] = ("en_US",),
    ) -> None:
        """Read the entries of `client_ids` at `conninfo` in `languages`."""
        super().__init__(conninfo, languages=languages)
        self._client_ids = [int(c) for c in client_ids]
        self._schema: KEntrySchema | None = None
        self._base: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings, conninfo: str) -> "KEntrySource":
        """The source as RAG_KENTRY_CLIENT_IDS and RAG_LANGUAGES configure it."""
        return cls(
            conninfo,
            client_ids=settings.kentry_client_id_list,
            languages=settings.language_list,
        )

    @property
    def schema(self) -> KEntrySchema:
        """The detected schema variant (read once)."""
        if self._schema is None:
            self._schema = detect_schema(self.conn)
        return self._schema

    @property
    def base(self) -> str:
        """The language of K_Entry's own text."""
        if self._base is None:
            self._base = base_language(self.conn)
        return self._base

    def partition_keys(self) -> list[str]:
        """One partition per configured language."""
        return self.languages()

    def _query(self, language: str, select: sql.Composable, ids: list[int] | None) -> sql.Composed:
        translated = language != self.base
        joins = [
            sql.SQL(
                "FROM k_entry e "
                "JOIN k_topic t ON t.k_topic_id = e.k_topic_id AND t.isactive = 'Y' "
                "JOIN k_type ty ON ty.k_type_id = t.k_type_id AND ty.isactive = 'Y'"
            )
        ]
        if translated:
            # An entry exists in another language only where it has a translation row.
            joins.append(
                sql.SQL(
                    "JOIN k_entry_trl trl ON trl.k_entry_id = e.k_entry_id "
                    "AND trl.ad_language = %(language)s AND trl.isactive = 'Y'"
                )
            )
        where = sql.SQL(
            "WHERE e.ad_client_id = ANY(%(clients)s) AND e.isactive = 'Y' AND e.ispublic = 'Y' "
            "AND (e.validto IS NULL OR e.validto > now())"
        )
        if ids is not None:
            where = sql.SQL("{} AND e.k_entry_id = ANY(%(ids)s)").format(where)
        return sql.SQL("SELECT {} {} {} ORDER BY e.k_entry_id").format(
            select, sql.SQL(" ").join(joins), where
        )

    def _text_columns(self, language: str) -> dict[str, sql.Composable]:
        """Each text column, falling back field by field to the base language."""
        translated = language != self.base
        columns: dict[str, sql.Composable] = {}
        for name in ("name", "keywords", "textmsg"):
            base = sql.SQL("e.{}").format(sql.Identifier(name))
            columns[name] = (
                sql.SQL("COALESCE(NULLIF(trl.{}, ''), {})").format(sql.Identifier(name), base)
                if translated
                else base
            )
        columns["descriptionurl"] = sql.SQL("e.descriptionurl")
        columns["edit_mode"] = sql.SQL(
            "e.k_entryeditmode" if self.schema.edit_mode else "NULL::varchar"
        )
        return columns

    def _version_columns(self, language: str) -> sql.Composable:
        translated = language != self.base
        columns = self._text_columns(language)
        updated = sql.SQL("GREATEST(e.updated, t.updated, ty.updated{})").format(
            sql.SQL(", trl.updated") if translated else sql.SQL("")
        )
        digest = sql.SQL("md5(concat_ws(chr(31), {}, t.name, ty.name))").format(
            sql.SQL(", ").join(columns.values())
        )
        return sql.SQL("e.k_entry_id AS id, {} AS updated, {} AS digest").format(updated, digest)

    def _languages_available(self, language: str) -> bool:
        return language == self.base or self.schema.translations

    def list_documents(self, partition_key: str) -> Iterator[DocumentRef | FailedDocument]:
        """Every indexable entry in the partition's language, with Updated + content hash."""
        language = partition_key
        if not self._languages_available(language):
            return
        query = self._query(language, self._version_columns(language), None)
        params = {"language": language, "clients": self._client_ids}
        with (
            self.conn.transaction(),
            self.conn.cursor(name=cursor_name("k_entry_list")) as cur,
        ):
            cur.itersize = CURSOR_ITERSIZE
            cur.execute(query, params)
            for entry_id, updated, digest in cur:
                yield DocumentRef(
                    source_id=str(int(entry_id)),
                    language=language,
                    version=_version(updated, digest),
                )

    def change_token(self, partition_key: str) -> str:
        """A short digest of the partition's listing: it changes when any document does.

        For a sensor: one aggregate query, no rows shipped.
        """
        language = partition_key
        if not self._languages_available(language):
            return "none"
        query = sql.SQL(
            "SELECT count(*), max(v.updated), md5(string_agg(v.id || ':' || v.digest, ',' "
            "ORDER BY v.id)) FROM ({}) v"
        ).format(self._query(language, self._version_columns(language), None))
        with self.conn.transaction():
            row = self.conn.execute(
                query, {"language": language, "clients": self._client_ids}
            ).fetchone()
        count, updated, digest = row if row else (0, None, None)
        return f"{count}/{updated.isoformat() if updated else '-'}/{(digest or '-')[:16]}"

    def fetch(self, refs: Sequence[DocumentRef]) -> Iterator[SourceDocument | FailedDocument]:
        """The entries of `refs`; one that vanished since the listing is left out."""
        by_language: dict[str, list[int]] = {}
        for ref in refs:
            by_language.setdefault(ref.language, []).append(int(ref.source_id))
        for language, ids in by_language.items():
            if self._languages_available(language):
                yield from self._fetch_language(language, ids)

    def _fetch_language(self, language: str, ids: list[int]) -> Iterator[SourceDocument]:
        columns = self._text_columns(language)
        select = sql.SQL(
            "{}, {}, t.name AS topic, ty.name AS knowledge_type, e.ad_client_id"
        ).format(
            self._version_columns(language),
            sql.SQL(", ").join(
                sql.SQL("{} AS {}").format(expr, sql.Identifier(name))
                for name, expr in columns.items()
            ),
        )
        params = {"language": language, "clients": self._client_ids, "ids": ids}
        with (
            self.conn.transaction(),
            self.conn.cursor(name=cursor_name("k_entry_fetch"), row_factory=dict_row) as cur,
        ):
            cur.itersize = CURSOR_ITERSIZE
            cur.execute(self._query(language, select, ids), params)
            for row in cur:
                yield self._document(language, row)

    def _document(self, language: str, row: dict[str, Any]) -> SourceDocument:
        text = str(row["textmsg"] or "")
        fmt, decided = entry_format(row["edit_mode"], text)
        name = str(row["name"] or "")
        keywords = str(row["keywords"] or "").strip()
        url = str(row["descriptionurl"] or "").strip()
        return SourceDocument(
            source_id=str(int(row["id"])),
            language=language,
            version=_version(row["updated"], row["digest"]),
            title=name,
            original_format=fmt,
            body=with_keywords(text, fmt, keywords, url),
            breadcrumb=BREADCRUMB_SEPARATOR.join([row["knowledge_type"], row["topic"], name]),
            url=url,
            metadata={
                "original_format": _FORMAT_CODES.get(fmt, fmt.value),
                "format_from": decided,
                "knowledge_type": row["knowledge_type"],
                "topic": row["topic"],
                "keywords": keywords,
                "ad_client_id": int(row["ad_client_id"]),
            },
        )


def _version(updated: datetime, digest: str) -> str:
    # The body builder's version is part of it: a new one rebuilds every document.
    return f"b{BODY_VERSION}:{updated.isoformat()}#{digest[:16]}"
