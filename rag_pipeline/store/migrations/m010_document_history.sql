-- m010: the versions of each document (`rag show`, `rag show --diff`).
--
-- One row per indexed version of a document, the current one included: it records what the
-- index was built from (source version, the sanitized Markdown, its sections and chunk hashes)
-- and by which runs (each stage's run id, input and output hash, code version), and whether
-- each chunk's vector was computed by that version's run or reused from the embedding cache.
-- Sections keep offsets into `body`, not their text: a version costs its Markdown once.
-- RAG_HISTORY_VERSIONS bounds the earlier versions kept; store/history.py prunes the oldest.
CREATE TABLE rag.document_versions (
    document_id    text NOT NULL,
    version        integer NOT NULL,             -- 1, 2, 3… per document; the newest is current
    source_type    text NOT NULL,
    doc_key        text NOT NULL,
    source_id      text NOT NULL,
    language       text NOT NULL,
    title          text NOT NULL,
    source_version text NOT NULL,
    content_hash   text NOT NULL,
    input_hash     text NOT NULL,
    model_id       text NOT NULL,
    run_id         text,                         -- NULL: indexed before history was kept
    ingested_at    timestamptz NOT NULL,
    -- [{stage, run_id, input_hash, output_hash, code_version, at}]
    stages         jsonb NOT NULL DEFAULT '[]',
    -- [{id, ordinal, title, heading_path, start_char, end_char, sha256}]
    sections       jsonb NOT NULL DEFAULT '[]',
    -- [{id, ordinal, section_id, token_count, sha256, computed}]
    chunks         jsonb NOT NULL DEFAULT '[]',
    body           text NOT NULL,
    PRIMARY KEY (document_id, version)
);
CREATE INDEX document_versions_source_idx ON rag.document_versions (source_type, doc_key);

-- A changed document is deleted and inserted again in one transaction, so a foreign key with
-- ON DELETE CASCADE would drop its history on every change. This trigger runs at commit
-- instead and drops the history of a document only if the document is really gone (an orphan,
-- `rag clear`, a model change).
CREATE FUNCTION rag.drop_document_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM rag.documents WHERE id = OLD.id) THEN
        DELETE FROM rag.document_versions WHERE document_id = OLD.id;
    END IF;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER documents_drop_history AFTER DELETE ON rag.documents
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION rag.drop_document_history();

-- Documents indexed before this migration get their current version as version 1.
INSERT INTO rag.document_versions (
    document_id, version, source_type, doc_key, source_id, language, title, source_version,
    content_hash, input_hash, model_id, run_id, ingested_at, sections, chunks, body)
SELECT d.id, 1, d.source_type, d.doc_key, d.source_id, d.language, d.title, d.source_version,
       d.content_hash, d.input_hash, d.model_id, NULL, d.ingested_at,
       COALESCE((SELECT jsonb_agg(jsonb_build_object(
                    'id', s.id, 'ordinal', s.ordinal, 'title', s.title,
                    'heading_path', to_jsonb(s.heading_path), 'start_char', s.start_char,
                    'end_char', s.end_char,
                    'sha256', encode(sha256(convert_to(s.text, 'UTF8')), 'hex'))
                    ORDER BY s.ordinal)
                 FROM rag.sections s WHERE s.document_id = d.id), '[]'),
       COALESCE((SELECT jsonb_agg(jsonb_build_object(
                    'id', c.id, 'ordinal', c.ordinal, 'section_id', c.section_id,
                    'token_count', c.token_count, 'sha256', c.text_sha256, 'computed', NULL)
                    ORDER BY c.ordinal)
                 FROM rag.chunks c WHERE c.document_id = d.id), '[]'),
       d.body
FROM rag.documents d;
