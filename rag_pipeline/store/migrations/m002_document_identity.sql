-- m002: a document's identity is (source_type, source_id, language), whatever partition lists
-- it. Partitions only decide which run handles a document; rag.document_partitions records
-- which partitions list it, and a document is deleted when none does any more.
CREATE TABLE rag.document_partitions (
    source_type   text NOT NULL,
    doc_key       text NOT NULL,
    partition_key text NOT NULL,
    PRIMARY KEY (source_type, doc_key, partition_key)
);
CREATE INDEX document_partitions_partition_idx
    ON rag.document_partitions (source_type, partition_key);

-- The files source named a document by its path relative to the folder (the partition); it
-- now names it by its path: '<folder>/<relative path>' ('demo/<relative path>' for the
-- bundled corpus), so a file reachable from two registered folders is one document.
INSERT INTO rag.document_partitions (source_type, doc_key, partition_key)
SELECT DISTINCT source_type,
       CASE WHEN source_type = 'files' THEN partition_key || '/' || doc_key ELSE doc_key END,
       partition_key
FROM rag.documents;

-- Of a file indexed through two folders, keep one row.
DELETE FROM rag.documents d
USING rag.documents o
WHERE d.source_type = 'files' AND o.source_type = 'files'
  AND d.partition_key || '/' || d.doc_key = o.partition_key || '/' || o.doc_key
  AND d.id > o.id;
UPDATE rag.documents
SET doc_key = partition_key || '/' || doc_key, source_id = partition_key || '/' || source_id
WHERE source_type = 'files';

ALTER TABLE rag.documents DROP CONSTRAINT documents_source_type_partition_key_doc_key_key;
ALTER TABLE rag.documents DROP COLUMN partition_key;
ALTER TABLE rag.documents ADD CONSTRAINT documents_identity_key UNIQUE (source_type, doc_key);

-- Stage rows are a cache of the chain's intermediate results, now stored as typed records
-- keyed by document alone. The old rows cannot be read as such: they are dropped, and the
-- next run recomputes them (vectors come from rag.embedding_cache, nothing is re-embedded;
-- the index stays searchable meanwhile).
TRUNCATE rag.stage_documents;
ALTER TABLE rag.stage_documents DROP CONSTRAINT stage_documents_pkey;
ALTER TABLE rag.stage_documents DROP COLUMN partition_key;
ALTER TABLE rag.stage_documents ADD PRIMARY KEY (asset_key, doc_key);
