-- m004: words joined by a slash are words to the keyword leg.
--
-- PostgreSQL's parser reads `Bank/Cash`, `Ship/Receipt` or `Invoice/Order` as one file-path
-- token (lexeme 'bank/cash'), so neither `bank` nor `cash` matched the window named
-- "Bank/Cash Statement", and the dictionary joins words with slashes often. The full text of
-- chunks and of queries (rag_pipeline/search/queries.py) now goes through rag.keyword_text(),
-- which turns slashes and backslashes into spaces: the parts of a path or URL stay words.

CREATE FUNCTION rag.keyword_text(body text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT translate(body, '/\', '  ')
$$;

ALTER TABLE rag.chunks DROP COLUMN tsv;
ALTER TABLE rag.chunks ADD COLUMN tsv tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector(ts_config, rag.keyword_text(heading)), 'A')
    || setweight(to_tsvector(ts_config, rag.keyword_text(text)), 'B')
) STORED;
CREATE INDEX chunks_tsv_idx ON rag.chunks USING gin (tsv);

-- The term statistics counted the old lexemes: the next search rebuilds them.
SELECT nextval('rag.chunks_generation');
