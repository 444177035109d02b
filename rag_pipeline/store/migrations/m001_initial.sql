-- m001: the vector store: documents, sections (parents), chunks, embedding cache,
-- per-document pipeline stages (lineage), runs and errors.
CREATE EXTENSION IF NOT EXISTS vector;
CREATE SCHEMA IF NOT EXISTS rag;

-- Key/value facts about the store, e.g. the embedding model and its dimension.
CREATE TABLE rag.store_info (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE rag.documents (
    id                  text PRIMARY KEY,      -- sha256 of (source_type, scope, source_id, language)
    source_type         text NOT NULL,
    partition_key       text NOT NULL,
    doc_key             text NOT NULL,         -- the document's key in every pipeline stage
    source_id           text NOT NULL,
    language            text NOT NULL,
    title               text NOT NULL,
    breadcrumb          text NOT NULL DEFAULT '',
    url                 text NOT NULL DEFAULT '',
    original_format     text NOT NULL,
    source_version      text NOT NULL,
    content_hash        text NOT NULL,         -- sha256 of the sanitized Markdown
    input_hash          text NOT NULL,         -- what the stored rows were built from (incl. model)
    sanitizer_version   text NOT NULL,
    chunker_fingerprint text NOT NULL,
    model_id            text NOT NULL,
    metadata            jsonb NOT NULL DEFAULT '{}',
    body                text NOT NULL,         -- the sanitized Markdown
    ingested_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (source_type, partition_key, doc_key)
);
CREATE INDEX documents_partition_idx ON rag.documents (source_type, partition_key);

-- Parents: each heading-delimited section stored once; chunks point to it.
CREATE TABLE rag.sections (
    id           text PRIMARY KEY,
    document_id  text NOT NULL REFERENCES rag.documents (id) ON DELETE CASCADE,
    ordinal      integer NOT NULL,
    title        text NOT NULL,
    heading_path text[] NOT NULL,
    text         text NOT NULL,
    start_char   integer NOT NULL,
    end_char     integer NOT NULL
);
CREATE INDEX sections_document_idx ON rag.sections (document_id);

CREATE TABLE rag.chunks (
    id            text PRIMARY KEY,
    document_id   text NOT NULL REFERENCES rag.documents (id) ON DELETE CASCADE,
    section_id    text NOT NULL REFERENCES rag.sections (id) ON DELETE CASCADE,
    source_type   text NOT NULL,              -- copied from the document: filters without a join
    language      text NOT NULL,
    ordinal       integer NOT NULL,
    heading       text NOT NULL,              -- title › breadcrumb › section (full-text weight A)
    text          text NOT NULL,              -- full-text weight B
    embedded_text text NOT NULL,
    token_count   integer NOT NULL,
    start_char    integer NOT NULL,
    end_char      integer NOT NULL,
    text_sha256   text NOT NULL,              -- sha256 of embedded_text: the embedding cache key
    ts_config     regconfig NOT NULL DEFAULT 'simple',
    -- Typed vector(dim) and HNSW-indexed once the model's dimension is known (store.migrations).
    embedding     vector NOT NULL,
    tsv           tsvector GENERATED ALWAYS AS (
                      setweight(to_tsvector(ts_config, heading), 'A')
                      || setweight(to_tsvector(ts_config, text), 'B')
                  ) STORED
);
CREATE INDEX chunks_document_idx ON rag.chunks (document_id);
CREATE INDEX chunks_section_idx ON rag.chunks (section_id);
CREATE INDEX chunks_tsv_idx ON rag.chunks USING gin (tsv);

-- Unchanged text is never embedded twice, whatever document or split it comes from.
CREATE TABLE rag.embedding_cache (
    model_id    text NOT NULL,
    text_sha256 text NOT NULL,
    embedding   vector NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model_id, text_sha256)
);

-- One row per document per pipeline stage (raw, markdown, sanitized, chunks): lineage in SQL
-- and the state that makes every stage incremental. `body` is bytea because raw text may hold
-- NUL or invalid code points that PostgreSQL text and jsonb cannot store.
CREATE TABLE rag.stage_documents (
    asset_key     text NOT NULL,
    partition_key text NOT NULL,
    doc_key       text NOT NULL,
    input_hash    text NOT NULL,
    content_hash  text NOT NULL,
    meta          jsonb NOT NULL,
    body          bytea NOT NULL,
    run_id        text NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (asset_key, partition_key, doc_key)
);

CREATE TABLE rag.ingest_runs (
    run_id        text NOT NULL,
    source_type   text NOT NULL,
    partition_key text NOT NULL,
    finished_at   timestamptz NOT NULL DEFAULT now(),
    stats         jsonb NOT NULL,
    PRIMARY KEY (run_id, source_type, partition_key)
);

-- Append-only: every failure of every run, with its stage and reason.
CREATE TABLE rag.ingest_errors (
    id            bigserial PRIMARY KEY,
    run_id        text NOT NULL,
    source_type   text NOT NULL,
    partition_key text NOT NULL,
    source_id     text NOT NULL,
    stage         text NOT NULL,
    reason        text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ingest_errors_run_idx ON rag.ingest_errors (run_id);
