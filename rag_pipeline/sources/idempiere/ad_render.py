"""Markdown for Application Dictionary entities: what a person (and the embedder) reads.

Every document names the entity in words and by its database identifiers (`TableName`,
`C_BPartner_ID`, `AD_Window_ID 123`) so both a question and an identifier search find it.
Dictionary text is plain text, except that some Help uses HTML (`<br>`, `<b>`): that goes
through the HTML converter, everything else is escaped so a `*` or `_` in it stays literal.
The words of the templates around it are in the document's language (English and Spanish;
another language falls back to English), so a Spanish document reads as Spanish.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_pipeline.core.normalize import html_to_markdown
from rag_pipeline.core.normalize.inline import collapse_whitespace
from rag_pipeline.sources.idempiere.ad_records import (
    ColumnRow,
    FieldLine,
    FieldRow,
    ParameterRow,
    ProcessRow,
    TableRow,
    TabRow,
    WindowRow,
)

# Part of every document's version: bump it when the Markdown below changes.
RENDER_VERSION = 3
SEPARATOR = " › "


@dataclass(frozen=True)
class Labels:
    """The template words of the rendered documents, in one language."""

    window: str = "Window"
    window_types: tuple[tuple[str, str], ...] = (
        ("M", "Maintain"),
        ("T", "Transaction"),
        ("Q", "Query"),
    )
    with_tabs: str = "with the tabs"
    tabs: str = "Tabs"
    table: str = "Table"
    view: str = "View"
    tab_level: str = "tab level"
    fields: str = "Fields"
    columns_of: str = "Columns of"
    column_header: str = "| Name | Column | Description |"
    key: str = "key"
    tab: str = "Tab"
    of_window: str = "of the window"
    on_table: str = "on table"
    note_when_saving: str = "Note when saving"
    field: str = "Field"
    in_context: str = "in"
    column: str = "column"
    no_column: str = "a field without column"
    of_table: str = "of table"
    report: str = "Report"
    process: str = "Process"
    search_key: str = "search key"
    implemented_by: str = "Implemented by"
    parameters: str = "Parameters"
    mandatory: str = "mandatory"
    range: str = "range"

    def window_type(self, code_: str) -> str:
        """The words of a window type code (`M` → Maintain); an unknown code as it is."""
        return dict(self.window_types).get(code_, code_)


ENGLISH = Labels()
SPANISH = Labels(
    window="Ventana",
    window_types=(("M", "Mantener"), ("T", "Transacción"), ("Q", "Consulta")),
    with_tabs="con las pestañas",
    tabs="Pestañas",
    table="Tabla",
    view="Vista",
    tab_level="nivel de pestaña",
    fields="Campos",
    columns_of="Columnas de",
    column_header="| Nombre | Columna | Descripción |",
    key="clave",
    tab="Pestaña",
    of_window="de la ventana",
    on_table="en la tabla",
    note_when_saving="Nota al guardar",
    field="Campo",
    in_context="en",
    column="columna",
    no_column="un campo sin columna",
    of_table="de la tabla",
    report="Informe",
    process="Proceso",
    search_key="clave de búsqueda",
    implemented_by="Implementado por",
    parameters="Parámetros",
    mandatory="obligatorio",
    range="rango",
)
# By the language part of an iDempiere language code (`es_CO` → `es`).
_LABELS = {"en": ENGLISH, "es": SPANISH}


def labels_for(language: str) -> Labels:
    """The template words for an iDempiere language (`es_CO`); English when not translated."""
    return _LABELS.get(language.split("_", 1)[0].lower(), ENGLISH)


_HTML_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
# Characters that can start Markdown syntax anywhere in a line; `_` only where it could open or
# close emphasis (not inside identifiers like C_BPartner_ID, which stay readable in raw).
_MARKDOWN_SPECIAL = re.compile(r"[\\`*\[\]<>|]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# A line that would start a heading, list, quote or thematic break.
_BLOCK_START = re.compile(r"^(\s*\d*)([#+\-=>.)])", re.MULTILINE)


def escape_markdown(value: str) -> str:
    """Escape what would turn plain dictionary text into Markdown syntax, and nothing else."""
    escaped = _MARKDOWN_SPECIAL.sub(lambda m: "\\" + m.group(0), value)
    return _BLOCK_START.sub(lambda m: m.group(1) + "\\" + m.group(2), escaped)


@dataclass(frozen=True)
class Rendered:
    """A rendered entity: the parts of a `SourceDocument` that depend on its rows."""

    title: str
    breadcrumb: str
    body: str
    metadata: dict[str, Any] = field(default_factory=lambda: {})


def text(value: str | None) -> str:
    """Dictionary text as Markdown ('' for NULL or blank)."""
    if value is None or not value.strip():
        return ""
    if _HTML_TAG.search(value):
        return html_to_markdown(value)[0].strip()
    return escape_markdown(value.strip())


def cell(value: str | None) -> str:
    """Dictionary text for one table cell: one line, pipes escaped."""
    return escape_markdown(collapse_whitespace(value or ""))


def code(identifier: str | None) -> str:
    """A database identifier as a code span."""
    return f"`{identifier}`" if identifier else ""


def _paragraphs(*parts: str) -> str:
    return "\n\n".join(p for p in parts if p) + "\n"


def _field_list(fields: Sequence[FieldLine]) -> str:
    items = [
        f"{cell(f.name)} ({code(f.columnname)})" if f.columnname else cell(f.name) for f in fields
    ]
    return ", ".join(items)


def render_table(
    table: TableRow, columns: Sequence[ColumnRow], labels: Labels = ENGLISH
) -> Rendered:
    """A table with its columns: name, column name, description."""
    kind = labels.view if table.isview == "Y" else labels.table
    lines = [
        f"{kind} {code(table.tablename)} — **{cell(table.name)}** (AD_Table_ID {table.id}).",
        text(table.description),
        text(table.help),
    ]
    if columns:
        key = f" ({labels.key})"
        rows = [labels.column_header, "| --- | --- | --- |"]
        rows += [
            f"| {cell(c.name)} | {code(c.columnname)}{key if c.iskey == 'Y' else ''} "
            f"| {cell(c.description)} |"
            for c in columns
        ]
        lines.append(f"## {labels.columns_of} {code(table.tablename)}\n\n" + "\n".join(rows))
    return Rendered(
        title=table.name,
        breadcrumb=table.tablename,
        body=_paragraphs(*lines),
        metadata={"table_name": table.tablename, "columns": len(columns)},
    )


def render_window(
    window: WindowRow,
    tabs: Sequence[TabRow],
    fields: dict[int, list[FieldLine]],
    labels: Labels = ENGLISH,
) -> Rendered:
    """A window with its tabs and a summary of each tab's fields."""
    kind = labels.window_type(window.windowtype)
    # The tab names in the lead: they say what the window is for ("Customer", "Vendor") and
    # belong to the first section, which the window's own description opens.
    tab_names = f" {labels.with_tabs} {', '.join(cell(t.name) for t in tabs)}" if tabs else ""
    lines = [
        f"{labels.window} **{cell(window.name)}** ({kind}, AD_Window_ID {window.id}){tab_names}.",
        text(window.description),
        text(window.help),
    ]
    if tabs:
        lines.append(f"## {labels.tabs}")
    for tab in tabs:
        where = (
            f"{labels.table} {code(tab.tablename)}, {labels.tab_level} {tab.tablevel}."
            if tab.tablename
            else ""
        )
        tab_fields = fields.get(tab.id, [])
        summary = f"{labels.fields}: {_field_list(tab_fields)}." if tab_fields else ""
        lines.append(
            _paragraphs(f"### {cell(tab.name)}", where, text(tab.description), summary).strip()
        )
    return Rendered(
        title=window.name,
        breadcrumb=window.name,
        body=_paragraphs(*lines),
        metadata={"window_type": window.windowtype, "tabs": len(tabs)},
    )


def render_tab(tab: TabRow, fields: Sequence[FieldLine], labels: Labels = ENGLISH) -> Rendered:
    """A tab's help, in the context of its window."""
    where = f" {labels.on_table} {code(tab.tablename)}" if tab.tablename else ""
    warning = text(tab.commitwarning)
    lines = [
        f"{labels.tab} **{cell(tab.name)}** {labels.of_window} **{cell(tab.window_name)}**{where} "
        f"(AD_Tab_ID {tab.id}, {labels.tab_level} {tab.tablevel}).",
        text(tab.description),
        text(tab.help),
        f"{labels.note_when_saving}: {warning}" if warning else "",
        f"{labels.fields}: {_field_list(fields)}." if fields else "",
    ]
    return Rendered(
        title=tab.name,
        breadcrumb=SEPARATOR.join([tab.window_name, tab.name]),
        body=_paragraphs(*lines),
        metadata={"window_id": tab.window_id, "table_name": tab.tablename, "fields": len(fields)},
    )


def render_field(row: FieldRow, labels: Labels = ENGLISH) -> Rendered:
    """A field's help, in the context `Window › Tab › Field`."""
    context = SEPARATOR.join([row.window_name, row.tab_name, row.name])
    column = f"{labels.column} {code(row.columnname)}" if row.columnname else labels.no_column
    table = f" {labels.of_table} {code(row.tablename)}" if row.tablename else ""
    lines = [
        f"{labels.field} **{cell(row.name)}** {labels.in_context} {cell(context)}: "
        f"{column}{table} (AD_Field_ID {row.id}).",
        text(row.description),
        text(row.help),
    ]
    return Rendered(
        title=row.name,
        breadcrumb=context,
        body=_paragraphs(*lines),
        metadata={
            "window_id": row.window_id,
            "tab_id": row.tab_id,
            "column_name": row.columnname,
            "table_name": row.tablename,
        },
    )


def render_process(
    process: ProcessRow, parameters: Sequence[ParameterRow], labels: Labels = ENGLISH
) -> Rendered:
    """A process or report with its parameters."""
    kind = labels.report if process.isreport == "Y" else labels.process
    key = f", {labels.search_key} {code(process.value)}" if process.value else ""
    implementation = (
        f" {labels.implemented_by} {code(process.classname)}." if process.classname else ""
    )
    lines = [
        f"{kind} **{cell(process.name)}** (AD_Process_ID {process.id}{key}).{implementation}",
        text(process.description),
        text(process.help),
    ]
    if parameters:
        items: list[str] = []
        for p in parameters:
            flags = ", ".join(
                flag
                for flag, on in (
                    (labels.mandatory, p.ismandatory == "Y"),
                    (labels.range, p.isrange == "Y"),
                )
                if on
            )
            head = f"- **{cell(p.name)}** ({code(p.columnname)}{', ' + flags if flags else ''})"
            detail = " ".join(x for x in (cell(p.description), cell(p.help)) if x)
            items.append(f"{head}: {detail}" if detail else head)
        lines.append(f"## {labels.parameters}\n\n" + "\n".join(items))
    return Rendered(
        title=process.name,
        breadcrumb=SEPARATOR.join([kind, process.name]),
        body=_paragraphs(*lines),
        metadata={
            "kind": "report" if process.isreport == "Y" else "process",
            "value": process.value,
            "parameters": len(parameters),
        },
    )
