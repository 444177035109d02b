-- m007: a document's language versions found by its source id.
--
-- The keyword leg of search weighs a chunk in another language than the query's less when
-- its document has a version in the query's language (a dictionary window in en_US and
-- es_CO): it looks those versions up by (source_type, source_id) for its best sections.
CREATE INDEX documents_source_idx ON rag.documents (source_type, source_id);
