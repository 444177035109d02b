-- m009: a folder of the files source is a named partition.
--
-- A folder's partition key was its absolute path, and every document's source id began with
-- it: moving the folder, mounting it elsewhere or restoring a backup on another machine made
-- every document new and deleted the old ones. Now the partition key is a name (`docs`), the
-- source id is `<name>/<relative path>`, and rag.folders says where each name's folder is on
-- this machine (`rag folders add NAME PATH` re-points it).
CREATE TABLE rag.folders (
    name     text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    path     text NOT NULL UNIQUE,
    added_at timestamptz NOT NULL DEFAULT now()
);

-- Existing folders get the name of their last path component (made unique).
CREATE TEMP TABLE m009_folders ON COMMIT DROP AS
WITH paths AS (
    SELECT DISTINCT partition_key AS path
    FROM rag.document_partitions
    WHERE source_type = 'files' AND partition_key LIKE '/%'
), based AS (
    SELECT path,
           left(regexp_replace(regexp_replace(path, '^.*/', ''), '[^A-Za-z0-9._-]', '-', 'g'),
                56) AS base
    FROM paths
), cleaned AS (
    SELECT path, CASE WHEN base ~ '^[A-Za-z0-9]' THEN base ELSE 'folder' || base END AS base
    FROM based
), numbered AS (
    SELECT path, base, row_number() OVER (PARTITION BY base ORDER BY path) AS n FROM cleaned
)
SELECT path,
       CASE WHEN n = 1 AND base <> 'demo' THEN base
            ELSE base || '-' || left(md5(path), 6) END AS name
FROM numbered;

INSERT INTO rag.folders (name, path) SELECT name, path FROM m009_folders;

-- core/ids.py stable_id: sha256 over each part's UTF-8 length (8 bytes, big-endian) and bytes.
CREATE FUNCTION pg_temp.m009_stable_id(VARIADIC parts text[]) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT left(encode(sha256(string_agg(
        int8send(octet_length(convert_to(p, 'UTF8'))) || convert_to(p, 'UTF8'),
        ''::bytea ORDER BY i)), 'hex'), 32)
    FROM unnest(parts) WITH ORDINALITY AS t(p, i)
$$;

-- Each document under a converted folder (the longest matching path names it).
CREATE TEMP TABLE m009_documents ON COMMIT DROP AS
SELECT DISTINCT ON (d.id)
       d.id AS old_id,
       f.name || substr(d.doc_key, length(f.path) + 1) AS doc_key,
       f.name || substr(d.source_id, length(f.path) + 1) AS source_id
FROM rag.documents d
JOIN m009_folders f ON starts_with(d.doc_key, f.path || '/')
WHERE d.source_type = 'files'
ORDER BY d.id, length(f.path) DESC;
ALTER TABLE m009_documents ADD COLUMN new_id text;
UPDATE m009_documents SET new_id = pg_temp.m009_stable_id('files', doc_key);

-- Copies under the new ids (ids derive from the document's), then the old rows go.
INSERT INTO rag.documents (
    id, source_type, doc_key, source_id, language, title, breadcrumb, url, original_format,
    source_version, content_hash, input_hash, sanitizer_version, chunker_fingerprint,
    model_id, metadata, body, ingested_at)
SELECT m.new_id, d.source_type, m.doc_key, m.source_id, d.language, d.title, d.breadcrumb,
       d.url, d.original_format, d.source_version, d.content_hash, d.input_hash,
       d.sanitizer_version, d.chunker_fingerprint, d.model_id, d.metadata, d.body,
       d.ingested_at
FROM rag.documents d JOIN m009_documents m ON m.old_id = d.id;

INSERT INTO rag.sections (
    id, document_id, ordinal, title, heading_path, text, start_char, end_char)
SELECT pg_temp.m009_stable_id(m.new_id, 'section', s.ordinal::text,
                              encode(sha256(convert_to(s.text, 'UTF8')), 'hex')),
       m.new_id, s.ordinal, s.title, s.heading_path, s.text, s.start_char, s.end_char
FROM rag.sections s JOIN m009_documents m ON m.old_id = s.document_id;

INSERT INTO rag.chunks (
    id, document_id, section_id, source_type, language, ordinal, heading, text,
    embedded_text, token_count, start_char, end_char, text_sha256, ts_config, embedding)
SELECT pg_temp.m009_stable_id(m.new_id, 'chunk', c.ordinal::text, c.text_sha256),
       m.new_id,
       pg_temp.m009_stable_id(m.new_id, 'section', s.ordinal::text,
                              encode(sha256(convert_to(s.text, 'UTF8')), 'hex')),
       c.source_type, c.language, c.ordinal, c.heading, c.text, c.embedded_text,
       c.token_count, c.start_char, c.end_char, c.text_sha256, c.ts_config, c.embedding
FROM rag.chunks c
JOIN m009_documents m ON m.old_id = c.document_id
JOIN rag.sections s ON s.id = c.section_id;

DELETE FROM rag.documents d USING m009_documents m WHERE d.id = m.old_id;

UPDATE rag.document_partitions p
SET doc_key = f.name || substr(p.doc_key, length(f.path) + 1), partition_key = f.name
FROM m009_folders f
WHERE p.source_type = 'files' AND p.partition_key = f.path;

-- Stage rows are a cache keyed by the old names: the next run rebuilds them (every vector
-- comes from rag.embedding_cache; the index stays searchable meanwhile).
DELETE FROM rag.stage_documents s
USING m009_folders f
WHERE s.asset_key LIKE 'files\_%' AND starts_with(s.doc_key, f.path || '/');

UPDATE rag.ingest_errors e
SET partition_key = f.name,
    source_id = CASE WHEN starts_with(e.source_id, f.path || '/')
                     THEN f.name || substr(e.source_id, length(f.path) + 1)
                     ELSE e.source_id END
FROM m009_folders f
WHERE e.source_type = 'files' AND e.partition_key = f.path;

UPDATE rag.ingest_runs r SET partition_key = f.name
FROM m009_folders f
WHERE r.source_type = 'files' AND r.partition_key = f.path;
