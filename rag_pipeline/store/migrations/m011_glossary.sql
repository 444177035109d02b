-- m011: the dictionary's glossary, built at ingest time from the iDempiere `_Trl` tables.
--
-- Per translated language: the name pairs (a dictionary row's base-language name beside its
-- translation, kind 'name') and the single words aligned across them (kind 'word',
-- `factura` -> `invoice`), each with the rows it came from. Search carries a query's words
-- into the other languages through the 'word' rows; a language's version changes whenever
-- its glossary is rebuilt from other rows, and tells a search process to reload it.
CREATE TABLE rag.glossary (
    language   text NOT NULL,             -- the translated language (es_CO, de_DE)
    kind       text NOT NULL CHECK (kind IN ('name', 'word')),
    term       text NOT NULL,             -- in `language`: a name as written, or a folded word
    target     text NOT NULL,             -- in the base language
    term_stem  text NOT NULL DEFAULT '',  -- Snowball stem of a word ('' for a name)
    dice       real NOT NULL DEFAULT 1,   -- association of the two words over the name pairs
    links      integer NOT NULL DEFAULT 1,  -- name pairs in which they were aligned
    sources    text[] NOT NULL,           -- the dictionary rows, as `AD_Window:143` (at most 20)
    PRIMARY KEY (language, kind, term, target)
);
CREATE INDEX glossary_stem_idx ON rag.glossary (language, term_stem) WHERE kind = 'word';

CREATE TABLE rag.glossary_versions (
    language      text PRIMARY KEY,
    base_language text NOT NULL,
    version       text NOT NULL,          -- fingerprint of the name pairs and the aligner
    names         integer NOT NULL,
    words         integer NOT NULL,
    built_at      timestamptz NOT NULL DEFAULT now()
);
