"""Which AD_Language codes the iDempiere sources index, and the database's base language."""

from collections.abc import Iterable, Sequence

import psycopg
from psycopg import sql

# iDempiere's base language unless the database says otherwise (AD_Language.IsBaseLanguage).
DEFAULT_BASE_LANGUAGE = "en_US"
ALL_LANGUAGES = "all"


def existing_tables(conn: psycopg.Connection, names: Iterable[str]) -> set[str]:
    """The subset of `names` (lower case) that are tables of the connection's schema."""
    rows = conn.execute(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_name = ANY(%s)",
        ([n.lower() for n in names],),
    ).fetchall()
    return {str(r[0]) for r in rows}


def has_column(conn: psycopg.Connection, table: str, column: str) -> bool:
    """Whether `table` of the connection's schema has `column` (both lower case)."""
    row = conn.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = %s AND column_name = %s",
        (table, column),
    ).fetchone()
    return row is not None


def base_language(conn: psycopg.Connection) -> str:
    """The language of the untranslated text: AD_Language's base language, else en_US."""
    if not existing_tables(conn, ["ad_language"]):
        return DEFAULT_BASE_LANGUAGE
    row = conn.execute(
        "SELECT ad_language FROM ad_language WHERE isbaselanguage = 'Y' LIMIT 1"
    ).fetchone()
    return str(row[0]) if row else DEFAULT_BASE_LANGUAGE


def translated_languages(conn: psycopg.Connection, trl_tables: Iterable[str]) -> set[str]:
    """Every AD_Language that has at least one active row in one of `trl_tables`."""
    found: set[str] = set()
    for table in sorted(existing_tables(conn, trl_tables)):
        query = sql.SQL("SELECT DISTINCT ad_language FROM {} WHERE isactive = 'Y'").format(
            sql.Identifier(table)
        )
        found.update(str(r[0]) for r in conn.execute(query))
    return found


def system_languages(conn: psycopg.Connection) -> set[str] | None:
    """AD_Language's active system languages (IsSystemLanguage: the ones the application is
    kept in), or None for a database without that table or flag."""
    if not has_column(conn, "ad_language", "issystemlanguage"):
        return None
    rows = conn.execute(
        "SELECT ad_language FROM ad_language WHERE isactive = 'Y' AND issystemlanguage = 'Y'"
    ).fetchall()
    return {str(r[0]) for r in rows}


def resolve_languages(
    conn: psycopg.Connection, configured: Sequence[str], trl_tables: Iterable[str]
) -> list[str]:
    """The configured languages; `all` = the base language, then every translated one that is
    an active system language where AD_Language says so (a language switched off keeps its
    translation rows, and they are not indexed)."""
    if list(configured) != [ALL_LANGUAGES]:
        return list(dict.fromkeys(configured))
    base = base_language(conn)
    translated = translated_languages(conn, trl_tables)
    system = system_languages(conn)
    if system is not None:
        translated &= system
    return [base, *sorted(translated - {base})]
