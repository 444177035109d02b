"""Every SQL statement of the `ad_metadata` source.

The records its rows become are in `ad_records`, the fragments it is assembled from in `ad_sql`.

Text columns fall back field by field from the `_Trl` row of the requested language to the
base row (`COALESCE(NULLIF(trl.x, ''), base.x)`); for the base language no translation row
exists, so the same statements serve it. Only active rows are rendered; a listing's version is
the newest `Updated` over every row a document is built from plus the number of its active
child rows, so an edit, a deactivation (which also touches `Updated`) and a deleted child all
change it, while listing stays one aggregate query per entity type.
"""

from psycopg import sql

from rag_pipeline.sources.idempiere.ad_records import (
    FieldRow,
    ProcessRow,
    TableRow,
    TabRow,
    WindowRow,
)
from rag_pipeline.sources.idempiere.ad_sql import (
    FIELD_TRL,
    PROCESS_TRL,
    TAB_TRL,
    TABLE_TRL,
    WINDOW_TRL,
    fill,
    literal_sql,
    trl,
)

# The entity types (partition dimension) and the AD table each source id names.
ENTITY_TABLES: dict[str, str] = {
    "table": "AD_Table",
    "window": "AD_Window",
    "tab": "AD_Tab",
    "field": "AD_Field",
    "process": "AD_Process",
}
TRL_TABLES = (
    "ad_table_trl",
    "ad_column_trl",
    "ad_window_trl",
    "ad_tab_trl",
    "ad_field_trl",
    "ad_process_trl",
    "ad_process_para_trl",
)


# --- listing: every document of an entity type with its version parts -------------------------
# Each statement also selects text columns (for reading it as a whole); listing wraps it and
# keeps id/updated/rows, which PostgreSQL then computes alone.

_TABLE = fill(
    """
SELECT tb.ad_table_id::int AS id,
       GREATEST(tb.updated, tt.updated, cols.updated) AS updated,
       COALESCE(cols.n, 0)::int AS rows,
       tb.tablename, {name} AS name, tb.description, tb.help, tb.isview, tb.entitytype
FROM ad_table tb
{join_trl}
LEFT JOIN (
    SELECT c.ad_table_id, max(GREATEST(c.updated, ct.updated)) AS updated,
           count(*) FILTER (WHERE c.isactive = 'Y') AS n
    FROM ad_column c
    LEFT JOIN ad_column_trl ct ON ct.ad_column_id = c.ad_column_id
         AND ct.ad_language = %(lang)s AND ct.isactive = 'Y'
    GROUP BY c.ad_table_id
) cols ON cols.ad_table_id = tb.ad_table_id
WHERE tb.isactive = 'Y'
""",
    TABLE_TRL,
)

_WINDOW = fill(
    """
SELECT w.ad_window_id::int AS id,
       GREATEST(w.updated, wt.updated, tabs.updated, fields.updated) AS updated,
       (COALESCE(tabs.n, 0) + COALESCE(fields.n, 0))::int AS rows,
       {name} AS name, {description} AS description, {help} AS help, w.windowtype, w.entitytype
FROM ad_window w
{join_trl}
LEFT JOIN (
    SELECT tab.ad_window_id, max(GREATEST(tab.updated, tt.updated, tb.updated)) AS updated,
           count(*) FILTER (WHERE tab.isactive = 'Y') AS n
    FROM ad_tab tab
    LEFT JOIN ad_tab_trl tt ON tt.ad_tab_id = tab.ad_tab_id
         AND tt.ad_language = %(lang)s AND tt.isactive = 'Y'
    LEFT JOIN ad_table tb ON tb.ad_table_id = tab.ad_table_id
    GROUP BY tab.ad_window_id
) tabs ON tabs.ad_window_id = w.ad_window_id
LEFT JOIN (
    SELECT tab.ad_window_id, max(GREATEST(f.updated, ft.updated, c.updated)) AS updated,
           count(*) FILTER (WHERE f.isactive = 'Y' AND tab.isactive = 'Y') AS n
    FROM ad_field f
    JOIN ad_tab tab ON tab.ad_tab_id = f.ad_tab_id
    LEFT JOIN ad_field_trl ft ON ft.ad_field_id = f.ad_field_id
         AND ft.ad_language = %(lang)s AND ft.isactive = 'Y'
    LEFT JOIN ad_column c ON c.ad_column_id = f.ad_column_id
    GROUP BY tab.ad_window_id
) fields ON fields.ad_window_id = w.ad_window_id
WHERE w.isactive = 'Y'
""",
    WINDOW_TRL,
)

_TAB = fill(
    """
SELECT tab.ad_tab_id::int AS id,
       GREATEST(tab.updated, tt.updated, w.updated, wt.updated, tb.updated, fields.updated)
           AS updated,
       COALESCE(fields.n, 0)::int AS rows,
       w.ad_window_id::int AS window_id, {window_name} AS window_name,
       {name} AS name, {description} AS description, {help} AS help,
       {commitwarning} AS commitwarning, tb.tablename,
       tab.tablevel::int AS tablevel, tab.seqno::int AS seqno
FROM ad_tab tab
JOIN ad_window w ON w.ad_window_id = tab.ad_window_id AND w.isactive = 'Y'
{join_window_trl}
{join_trl}
LEFT JOIN ad_table tb ON tb.ad_table_id = tab.ad_table_id
LEFT JOIN (
    SELECT f.ad_tab_id, max(GREATEST(f.updated, ft.updated, c.updated)) AS updated,
           count(*) FILTER (WHERE f.isactive = 'Y') AS n
    FROM ad_field f
    LEFT JOIN ad_field_trl ft ON ft.ad_field_id = f.ad_field_id
         AND ft.ad_language = %(lang)s AND ft.isactive = 'Y'
    LEFT JOIN ad_column c ON c.ad_column_id = f.ad_column_id
    GROUP BY f.ad_tab_id
) fields ON fields.ad_tab_id = tab.ad_tab_id
WHERE tab.isactive = 'Y'
""",
    TAB_TRL,
)

# One field per column name and window, as the seed does (`DISTINCT ON`): the same column
# shown on several tabs is one piece of help. The representative is chosen on the base row
# (help first, then tab and field order) so every language documents the same AD_Field; fields
# with neither help nor description (own or their column's) have nothing to document.
_FIELD = fill(
    """
SELECT rep.id, GREATEST(f.updated, ft.updated, tab.updated, tt.updated, w.updated,
                        wt.updated, c.updated, tb.updated) AS updated,
       0 AS rows,
       w.ad_window_id::int AS window_id, {window_name} AS window_name,
       tab.ad_tab_id::int AS tab_id, {tab_name} AS tab_name,
       {name} AS name,
       COALESCE(NULLIF(ft.description, ''), NULLIF(f.description, ''), c.description)
           AS description,
       COALESCE(NULLIF(ft.help, ''), NULLIF(f.help, ''), c.help) AS help,
       c.columnname, tb.tablename
FROM (
    SELECT DISTINCT ON (tab.ad_window_id, COALESCE(c.columnname, f.ad_field_id::text))
           f.ad_field_id::int AS id
    FROM ad_field f
    JOIN ad_tab tab ON tab.ad_tab_id = f.ad_tab_id AND tab.isactive = 'Y'
    JOIN ad_window w ON w.ad_window_id = tab.ad_window_id AND w.isactive = 'Y'
    LEFT JOIN ad_column c ON c.ad_column_id = f.ad_column_id
    WHERE f.isactive = 'Y'
      AND COALESCE(NULLIF(f.help, ''), NULLIF(f.description, ''),
                   NULLIF(c.help, ''), NULLIF(c.description, '')) IS NOT NULL
    ORDER BY tab.ad_window_id, COALESCE(c.columnname, f.ad_field_id::text),
             COALESCE(NULLIF(f.help, ''), NULLIF(c.help, '')) IS NULL,
             tab.seqno, f.seqno, f.ad_field_id
) rep
JOIN ad_field f ON f.ad_field_id = rep.id
JOIN ad_tab tab ON tab.ad_tab_id = f.ad_tab_id
JOIN ad_window w ON w.ad_window_id = tab.ad_window_id
LEFT JOIN ad_column c ON c.ad_column_id = f.ad_column_id
LEFT JOIN ad_table tb ON tb.ad_table_id = tab.ad_table_id
{join_trl}
{join_tab_trl}
{join_window_trl}
""",
    FIELD_TRL,
)

_PROCESS = fill(
    """
SELECT p.ad_process_id::int AS id,
       GREATEST(p.updated, pt.updated, params.updated) AS updated,
       COALESCE(params.n, 0)::int AS rows,
       NULLIF(p.value, '') AS value, {name} AS name, {description} AS description,
       {help} AS help, p.isreport, p.classname, p.entitytype
FROM ad_process p
{join_trl}
LEFT JOIN (
    SELECT pp.ad_process_id, max(GREATEST(pp.updated, ppt.updated)) AS updated,
           count(*) FILTER (WHERE pp.isactive = 'Y') AS n
    FROM ad_process_para pp
    LEFT JOIN ad_process_para_trl ppt ON ppt.ad_process_para_id = pp.ad_process_para_id
         AND ppt.ad_language = %(lang)s AND ppt.isactive = 'Y'
    GROUP BY pp.ad_process_id
) params ON params.ad_process_id = p.ad_process_id
WHERE p.isactive = 'Y'
""",
    PROCESS_TRL,
)

# --- fetching: the rows a document is rendered from, by primary key --------------------------
# No aggregates here: a fetched document keeps the version its listing gave it, so a batch
# costs its own rows, not a pass over the child tables.

_TABLE_ROWS = fill(
    """
SELECT tb.ad_table_id::int AS id, tb.tablename, {name} AS name, tb.description, tb.help,
       tb.isview, tb.entitytype
FROM ad_table tb
{join_trl}
WHERE tb.isactive = 'Y' AND tb.ad_table_id = ANY(%(ids)s)
""",
    TABLE_TRL,
)

_WINDOW_ROWS = fill(
    """
SELECT w.ad_window_id::int AS id, {name} AS name, {description} AS description,
       {help} AS help, w.windowtype, w.entitytype
FROM ad_window w
{join_trl}
WHERE w.isactive = 'Y' AND w.ad_window_id = ANY(%(ids)s)
""",
    WINDOW_TRL,
)

_TAB_ROWS = fill(
    """
SELECT tab.ad_tab_id::int AS id, w.ad_window_id::int AS window_id,
       {window_name} AS window_name, {name} AS name, {description} AS description,
       {help} AS help, {commitwarning} AS commitwarning, tb.tablename,
       tab.tablevel::int AS tablevel, tab.seqno::int AS seqno
FROM ad_tab tab
JOIN ad_window w ON w.ad_window_id = tab.ad_window_id AND w.isactive = 'Y'
{join_window_trl}
{join_trl}
LEFT JOIN ad_table tb ON tb.ad_table_id = tab.ad_table_id
WHERE tab.isactive = 'Y' AND {key} = ANY(%(ids)s)
""",
    TAB_TRL,
)

# The listing chose which field documents a column (DISTINCT ON); a fetch renders those.
_FIELD_ROWS = fill(
    """
SELECT f.ad_field_id::int AS id, w.ad_window_id::int AS window_id,
       {window_name} AS window_name, tab.ad_tab_id::int AS tab_id, {tab_name} AS tab_name,
       {name} AS name,
       COALESCE(NULLIF(ft.description, ''), NULLIF(f.description, ''), c.description)
           AS description,
       COALESCE(NULLIF(ft.help, ''), NULLIF(f.help, ''), c.help) AS help,
       c.columnname, tb.tablename
FROM ad_field f
JOIN ad_tab tab ON tab.ad_tab_id = f.ad_tab_id AND tab.isactive = 'Y'
JOIN ad_window w ON w.ad_window_id = tab.ad_window_id AND w.isactive = 'Y'
LEFT JOIN ad_column c ON c.ad_column_id = f.ad_column_id
LEFT JOIN ad_table tb ON tb.ad_table_id = tab.ad_table_id
{join_trl}
{join_tab_trl}
{join_window_trl}
WHERE f.isactive = 'Y' AND f.ad_field_id = ANY(%(ids)s)
""",
    FIELD_TRL,
)

_PROCESS_ROWS = fill(
    """
SELECT p.ad_process_id::int AS id, NULLIF(p.value, '') AS value, {name} AS name,
       {description} AS description, {help} AS help, p.isreport, p.classname, p.entitytype
FROM ad_process p
{join_trl}
WHERE p.isactive = 'Y' AND p.ad_process_id = ANY(%(ids)s)
""",
    PROCESS_TRL,
)

_FETCH_QUERIES = {
    "table": _TABLE_ROWS,
    "window": _WINDOW_ROWS,
    "tab": _TAB_ROWS.replace("{key}", "tab.ad_tab_id"),
    "field": _FIELD_ROWS,
    "process": _PROCESS_ROWS,
}

_LISTING_QUERIES = {
    "table": _TABLE,
    "window": _WINDOW,
    "tab": _TAB,
    "field": _FIELD,
    "process": _PROCESS,
}
DOCUMENT_ROWS: dict[str, type] = {
    "table": TableRow,
    "window": WindowRow,
    "tab": TabRow,
    "field": FieldRow,
    "process": ProcessRow,
}


def listing_query(entity: str) -> sql.Composed:
    """id, updated, rows of every document of `entity` (parameter: `lang`)."""
    inner = literal_sql(_LISTING_QUERIES[entity])
    return sql.SQL("SELECT d.id, d.updated, d.rows FROM ({}) d ORDER BY d.id").format(inner)


def change_token_query(entity: str) -> sql.Composed:
    """count, max(updated), sum(rows) over every document of `entity` (parameter: `lang`)."""
    inner = literal_sql(_LISTING_QUERIES[entity])
    return sql.SQL("SELECT count(*), max(d.updated), sum(d.rows) FROM ({}) d").format(inner)


def fetch_query(entity: str) -> sql.SQL:
    """The document rows of `entity` for the ids in `ids` (parameters: `lang`, `ids`)."""
    return literal_sql(_FETCH_QUERIES[entity] + " ORDER BY id")


# --- child rows: what a window, tab, table or process lists ------------------------------------

COLUMNS_OF_TABLES = literal_sql(
    "SELECT c.ad_table_id::int AS parent_id, "
    + trl("ct", "c", "name")
    + " AS name, c.columnname, c.description, c.iskey, c.ismandatory "
    "FROM ad_column c "
    "LEFT JOIN ad_column_trl ct ON ct.ad_column_id = c.ad_column_id "
    "AND ct.ad_language = %(lang)s AND ct.isactive = 'Y' "
    "WHERE c.isactive = 'Y' AND c.ad_table_id = ANY(%(ids)s) "
    "ORDER BY c.ad_table_id, c.iskey DESC, COALESCE(c.seqno, 0), c.columnname"
)

TABS_OF_WINDOWS = literal_sql(
    _TAB_ROWS.replace("{key}", "w.ad_window_id") + " ORDER BY window_id, seqno, id"
)

FIELDS_OF_TABS = literal_sql(
    "SELECT f.ad_tab_id::int AS parent_id, " + trl("ft", "f", "name") + " AS name, c.columnname "
    "FROM ad_field f "
    "LEFT JOIN ad_field_trl ft ON ft.ad_field_id = f.ad_field_id "
    "AND ft.ad_language = %(lang)s AND ft.isactive = 'Y' "
    "LEFT JOIN ad_column c ON c.ad_column_id = f.ad_column_id "
    "WHERE f.isactive = 'Y' AND f.ad_tab_id = ANY(%(ids)s) "
    "ORDER BY f.ad_tab_id, COALESCE(f.seqno, 0), f.ad_field_id"
)

PARAMETERS_OF_PROCESSES = literal_sql(
    "SELECT pp.ad_process_id::int AS parent_id, "
    + trl("ppt", "pp", "name")
    + " AS name, pp.columnname, "
    + trl("ppt", "pp", "description")
    + " AS description, "
    + trl("ppt", "pp", "help")
    + " AS help, pp.ismandatory, pp.isrange "
    "FROM ad_process_para pp "
    "LEFT JOIN ad_process_para_trl ppt ON ppt.ad_process_para_id = pp.ad_process_para_id "
    "AND ppt.ad_language = %(lang)s AND ppt.isactive = 'Y' "
    "WHERE pp.isactive = 'Y' AND pp.ad_process_id = ANY(%(ids)s) "
    "ORDER BY pp.ad_process_id, pp.seqno, pp.ad_process_para_id"
)
