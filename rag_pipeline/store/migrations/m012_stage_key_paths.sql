-- m012: stage rows named by the prefixed asset keys (`wiki_raw` becomes `wiki/raw`).
--
-- The Dagster assets of a source's chain are keyed `[<source>, <stage>]` and stored under the
-- key's string (rag_pipeline/core/stages.py). Rows written before keep their stage; only the
-- name changes. Idempotent: a name that already holds a '/' is left as it is.
UPDATE rag.stage_documents
SET asset_key = regexp_replace(asset_key, '_(raw|markdown|sanitized|chunks)$', '/\1')
WHERE strpos(asset_key, '/') = 0 AND asset_key ~ '_(raw|markdown|sanitized|chunks)$';
