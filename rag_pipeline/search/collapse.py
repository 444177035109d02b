"""The search statement's last parts (`queries.py` puts them after the legs and fusion):
`SECTION_COLLAPSE`, the fused sections as the ranked hits, one a section across language
versions; and `LINEAGE`, each hit with the partitions and run it came from.
"""

# One hit per section across a document's language versions (same source type and id, e.g. a
# window in en_US and es_CO, or an untranslated es_CO copy of it): the version in the query's
# language when it matched, else the best one, with the best version's score times the weight
# of the document's entity type (RAG_SEARCH_ENTITY_WEIGHTS) and of the first title rule of its
# source that matches it (`core/source_rules.py`: a source declares them). A page of n sections
# (not a document of a source whose sections are always the same few: `whole_document_sources`)
# scores (1 + ln n) ^ -sections_exponent times its best section: long pages matched some
# section of too many questions. A document's first `sections_per_document` sections come
# before any further section of it (0: no limit).
SECTION_COLLAPSE = """

top_hits AS (
SELECT * FROM (
SELECT *, row_number() OVER (PARTITION BY source_type, source_id ORDER BY score DESC, chunk_id)
          AS document_rank
FROM (
    SELECT DISTINCT ON (d.source_type, d.source_id, s.ordinal)
           d.source_type, d.source_id, d.language, d.title, d.breadcrumb, d.doc_key,
           d.source_version, d.ingested_at,
           s.title AS section_title, s.heading_path, d.url,
           max(f.score * coalesce(
               (%(entity_weights)s::jsonb ->> (d.metadata ->> 'entity_type'))::float8, 1.0)
               -- the first title rule of the document's source that matches it
               * coalesce((SELECT r.weight FROM unnest(%(rule_sources)s::text[],
                               %(rule_entity_types)s::text[], %(rule_patterns)s::text[],
                               %(rule_weights)s::float8[]) WITH ORDINALITY
                               AS r (source_type, entity_types, pattern, weight, n)
                           WHERE r.source_type = d.source_type
                             AND d.metadata ->> 'entity_type'
                                 = ANY(string_to_array(r.entity_types, ','))
                             AND d.title ~* r.pattern
                           ORDER BY r.n LIMIT 1), 1.0)
               -- a page of n sections has n chances to match: its best is the best of n
               * CASE WHEN d.source_type = ANY(%(whole_document_sources)s::text[]) THEN 1.0
                      ELSE power(1 + ln((SELECT count(*) FROM rag.sections AS n
                                         WHERE n.document_id = d.id)),
                                 -%(sections_exponent)s::float8) END)
               OVER (PARTITION BY d.source_type, d.source_id, s.ordinal) AS score,
           c.text, CASE WHEN %(with_parent)s THEN s.text ELSE '' END AS parent_text,
           d.id AS document_id, s.id AS section_id, c.id AS chunk_id,
           f.v_rank AS vector_rank, f.v_score AS vector_score, f.k_rank AS keyword_rank,
           f.k_score AS keyword_score, {vector_candidates_read} AS vector_candidates_read
    FROM fused f
    JOIN rag.chunks c ON c.id = f.chunk_id
    JOIN rag.sections s ON s.id = f.section_id
    JOIN rag.documents d ON d.id = c.document_id
    ORDER BY d.source_type, d.source_id, s.ordinal,
             lower(split_part(d.language, '_', 1)) = %(query_language)s DESC, f.score DESC, c.id
) AS hits
WHERE %(min_score)s::float8 IS NULL OR score >= %(min_score)s::float8
) AS ranked
ORDER BY %(sections_per_document)s > 0 AND document_rank > %(sections_per_document)s,
         score DESC, chunk_id
LIMIT %(top_k)s
)"""

# Each hit with where it came from: every partition that lists its document (comma-separated,
# sorted; partition keys hold no comma), and the run that built its chunks, which is the run
# that embedded them (the embeddings stage keeps no per-document row; rag.documents.ingested_at
# is when its vectors were written). That run is read from the indexed version's lineage
# (`rag.document_versions.stages`, by stage), not from a stage row found by building its name.
LINEAGE = """
SELECT h.*,
       (SELECT string_agg(p.partition_key, ',' ORDER BY p.partition_key)
        FROM rag.document_partitions p
        WHERE p.source_type = h.source_type AND p.doc_key = h.doc_key) AS partition,
       (SELECT st ->> 'run_id'
        FROM (SELECT v.stages FROM rag.document_versions v WHERE v.document_id = h.document_id
              ORDER BY v.version DESC LIMIT 1) AS newest,
             jsonb_array_elements(newest.stages) AS st
        WHERE st ->> 'stage' = %(chunks_stage)s LIMIT 1) AS run_id
FROM top_hits h
ORDER BY %(sections_per_document)s > 0 AND h.document_rank > %(sections_per_document)s,
         h.score DESC, h.chunk_id
"""
