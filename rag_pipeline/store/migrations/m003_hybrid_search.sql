-- m003: what hybrid search needs besides the weighted tsvector of m001.
--
-- 1. Identifier terms. PostgreSQL's parser splits `C_BPartner_ID` into `c`, `bpartner`, `id`
--    and keeps `getDocStatus` whole, so neither the verbatim identifier nor a part of a longer
--    one can be matched. `ident_tsv` holds, for every snake_case / CamelCase identifier of a
--    chunk, each run of two or more consecutive parts lower-cased and joined
--    (`C_BPartner_ID` -> cb, cbpartner, cbpartnerid, bpartner, bpartnerid, partnerid), so the
--    query identifier `M_Locator` (-> mlocator) finds `M_Locator`, `M_Locator_ID` and `MLocator`,
--    and `DocStatus` finds `getDocStatus()`. rag_pipeline/search/identifiers.py splits queries
--    with the same rules.
-- 2. BM25 term statistics. ts_rank knows no document frequencies; the keyword leg computes a
--    BM25-style score from `rag.term_stats` (lexeme -> chunks holding it) and
--    `rag.search_stats` (chunk count, mean length). They are rebuilt by
--    `rag.refresh_term_stats()`, which the searcher calls when `rag.chunks_generation` (bumped
--    by every statement that writes rag.chunks, a sequence so writers never wait on it) has
--    moved since the last rebuild.

CREATE FUNCTION rag.identifier_terms(body text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    identifier text;
    parts text[];
    n integer;
    terms text[] := '{}';
BEGIN
    -- An identifier: letters/digits with an underscore between parts, or a lower-to-upper
    -- case change (getDocStatus, MLocator, BPartner).
    FOR identifier IN
        SELECT DISTINCT m[1] FROM regexp_matches(
            body,
            '([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|[A-Za-z][A-Za-z0-9]*[a-z][A-Z][A-Za-z0-9]*|[A-Z]+[A-Z][a-z][A-Za-z0-9]*)',
            'g') AS m
    LOOP
        SELECT array_agg(lower(p[1])) INTO parts
        FROM regexp_matches(identifier, '[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+', 'g') AS p;
        n := least(coalesce(array_length(parts, 1), 0), 8);
        FOR i IN 1 .. n - 1 LOOP
            FOR j IN i + 1 .. n LOOP
                terms := terms || array_to_string(parts[i:j], '');
            END LOOP;
        END LOOP;
    END LOOP;
    RETURN array_to_string(terms, ' ');
END
$$;

ALTER TABLE rag.chunks ADD COLUMN ident_tsv tsvector GENERATED ALWAYS AS (
    to_tsvector('simple'::regconfig, rag.identifier_terms(heading || E'\n' || text))
) STORED;
CREATE INDEX chunks_ident_tsv_idx ON rag.chunks USING gin (ident_tsv);

-- A lexeme as a one-term tsquery, quoted so no character of it is read as tsquery syntax.
CREATE FUNCTION rag.lexeme_query(lexeme text) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT ('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''')::tsquery
$$;

-- OR of many tsqueries (tsquery_or is strict: the first non-null input starts the state).
CREATE AGGREGATE rag.tsquery_or_agg(tsquery) (SFUNC = tsquery_or, STYPE = tsquery);

CREATE TABLE rag.term_stats (
    lexeme text PRIMARY KEY,
    df     integer NOT NULL            -- chunks whose tsv holds the lexeme
);

CREATE TABLE rag.search_stats (
    id          boolean PRIMARY KEY DEFAULT true CHECK (id),  -- a single row
    chunks      bigint NOT NULL,
    avg_tokens  double precision NOT NULL,
    generation  bigint NOT NULL,       -- rag.chunks_generation when the stats were built
    built_at    timestamptz NOT NULL DEFAULT now()
);

CREATE SEQUENCE rag.chunks_generation;

CREATE FUNCTION rag.bump_chunks_generation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM nextval('rag.chunks_generation');
    RETURN NULL;
END
$$;

CREATE TRIGGER chunks_generation_bump
AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON rag.chunks
FOR EACH STATEMENT EXECUTE FUNCTION rag.bump_chunks_generation();

-- Rebuild the statistics in one transaction: readers keep the previous ones until it commits,
-- and an advisory lock makes concurrent callers wait for one rebuild instead of repeating it.
CREATE FUNCTION rag.refresh_term_stats() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    current_generation bigint;
    built bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(7390420114);
    -- A sequence never advanced reports last_value 1 with is_called false.
    SELECT CASE WHEN is_called THEN last_value ELSE 0 END INTO current_generation
        FROM rag.chunks_generation;
    SELECT generation INTO built FROM rag.search_stats;
    IF built IS NOT NULL AND built = current_generation THEN
        RETURN built;
    END IF;
    DELETE FROM rag.term_stats;
    INSERT INTO rag.term_stats (lexeme, df)
        SELECT word, ndoc FROM ts_stat('SELECT tsv FROM rag.chunks');
    INSERT INTO rag.search_stats (id, chunks, avg_tokens, generation, built_at)
        SELECT true, count(*), coalesce(avg(token_count), 0), current_generation, now()
        FROM rag.chunks
    ON CONFLICT (id) DO UPDATE SET chunks = excluded.chunks, avg_tokens = excluded.avg_tokens,
        generation = excluded.generation, built_at = excluded.built_at;
    RETURN current_generation;
END
$$;
