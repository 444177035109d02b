-- m013: a second vector per chunk, from the multilingual model (RAG_MULTILINGUAL_MODEL), for
-- questions in a language the embedding model does not read (a Spanish question, an English
-- page). Untyped until `ensure_second_model` binds it to a model: its dimension and HNSW index
-- come with the model, as the first vector's do. NULL where no such model embedded the chunk.
ALTER TABLE rag.chunks ADD COLUMN embedding_ml vector;
