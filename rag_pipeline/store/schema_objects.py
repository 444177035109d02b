"""The code a rag database runs, and the schema's own code to compare it with.

Functions, procedures, aggregates, views, materialized views, triggers, rules, event triggers
and policies all run SQL - as whoever later uses the database: a trigger on rag.chunks fires
under `rag ingest`, a function called by a view or a search runs with the caller's rights,
which on the embedded server are the superuser's, able to run shell commands with
`COPY ... TO PROGRAM`. The schema's own code is exactly what the migrations create;
anything else, or anything changed, is foreign. Members of an extension (pgvector's own
functions and operators) belong to the extension and are not listed.
"""

from collections.abc import Callable

import psycopg

from rag_pipeline.store.migrations import available_migrations, migrate

# Each row: the object's kind and name as a user reads it, and its full definition as the
# server prints it (so a changed body under the same name is seen). System schemas and
# extension members (pg_depend deptype 'e') are left out.
_CODE_OBJECTS = """
WITH user_schema AS (
    SELECT oid FROM pg_namespace
    WHERE nspname NOT IN ('pg_catalog', 'information_schema') AND nspname NOT LIKE 'pg\\_%'
), extension_member AS (
    SELECT classid, objid FROM pg_depend WHERE deptype = 'e'
)
SELECT CASE p.prokind WHEN 'p' THEN 'PROCEDURE' WHEN 'a' THEN 'AGGREGATE' ELSE 'FUNCTION' END
       || ' ' || p.oid::regprocedure::text,
       CASE WHEN p.prokind = 'a' THEN
           (SELECT concat_ws(' ', a.aggtransfn, a.aggfinalfn, a.aggcombinefn, a.aggtranstype)
            FROM pg_aggregate a WHERE a.aggfnoid = p.oid)
       ELSE pg_get_functiondef(p.oid) END
FROM pg_proc p
WHERE p.pronamespace IN (SELECT oid FROM user_schema)
  AND (p.tableoid, p.oid) NOT IN (SELECT classid, objid FROM extension_member)
UNION ALL
SELECT CASE c.relkind WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'VIEW' END || ' ' || c.oid::regclass,
       pg_get_viewdef(c.oid)
FROM pg_class c
WHERE c.relkind IN ('v', 'm') AND c.relnamespace IN (SELECT oid FROM user_schema)
  AND (c.tableoid, c.oid) NOT IN (SELECT classid, objid FROM extension_member)
UNION ALL
SELECT 'TRIGGER ' || t.tgname || ' ON ' || t.tgrelid::regclass, pg_get_triggerdef(t.oid)
FROM pg_trigger t WHERE NOT t.tgisinternal
UNION ALL
SELECT 'RULE ' || r.rulename || ' ON ' || r.ev_class::regclass, pg_get_ruledef(r.oid)
FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class
WHERE r.rulename <> '_RETURN' AND c.relnamespace IN (SELECT oid FROM user_schema)
UNION ALL
SELECT 'EVENT TRIGGER ' || e.evtname, e.evtevent || ' ' || e.evtfoid::regproc
FROM pg_event_trigger e
UNION ALL
SELECT 'POLICY ' || p.polname || ' ON ' || p.polrelid::regclass,
       concat_ws(' / ', pg_get_expr(p.polqual, p.polrelid),
                 pg_get_expr(p.polwithcheck, p.polrelid))
FROM pg_policy p
"""


def code_objects(conn: psycopg.Connection) -> dict[str, str]:
    """Every piece of code the database holds outside extensions: name → definition."""
    with conn.transaction():
        # Names print qualified whatever the session's search_path, the same in any database.
        conn.execute("SELECT pg_catalog.set_config('search_path', '', true)")
        rows = conn.execute(_CODE_OBJECTS).fetchall()
    return {str(name): str(definition) for name, definition in rows}


def foreign_code(have: dict[str, str], own: dict[str, str]) -> list[str]:
    """The objects of `have` the schema does not create (`own`), or created differently."""
    found = []
    for name, definition in sorted(have.items()):
        if name not in own:
            found.append(name)
        elif own[name] != definition:
            found.append(f"{name} (changed from the schema's own)")
    return found


def migrate_stepwise(
    conn: psycopg.Connection, upto: int, after_each: Callable[[int], None] | None = None
) -> None:
    """Migrate an empty database one version at a time up to `upto`, calling `after_each(v)`.

    `migrate` applies every migration a database lacks; to stop at a version, the versions
    after it are marked applied while it runs, then unmarked. The marks are rows of
    rag.schema_migrations, which is created first with migrate's own definition.
    """
    versions = [m.version for m in available_migrations() if m.version <= upto]
    with conn.transaction():
        conn.execute("CREATE SCHEMA IF NOT EXISTS rag")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS rag.schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
    later = [m.version for m in available_migrations() if m.version > upto]
    for version in versions:
        with conn.transaction():
            skipped = [v for v in versions + later if v > version]
            conn.execute(
                "INSERT INTO rag.schema_migrations (version, name)"
                " SELECT v, 'not applied' FROM unnest(%s::integer[]) AS v",
                (skipped,),
            )
            migrate(conn)
            conn.execute("DELETE FROM rag.schema_migrations WHERE version = ANY(%s)", (skipped,))
        if after_each is not None:
            after_each(version)
