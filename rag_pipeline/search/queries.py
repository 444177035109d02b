"""The search statement: one SQL round trip of named parts, filters inside, one hit a section.

- `VECTOR_LEG`: pgvector cosine over the HNSW index (or exact below a size), each section
  represented by its best chunk; of the first model's vectors, or of the multilingual second
  model's (`embedding_ml`) for a question in a language the first does not read.
- `KEYWORD_LEG` (`keyword_leg`): BM25-style over the query's lexemes in its language's
  text-search config. Per lexeme: IDF (rag.term_stats) times a saturated term frequency, the
  frequency being `ts_rank` of that lexeme alone scaled so one body occurrence counts 1, then
  k1/b length normalisation over the chunk's tokens. Identifier terms add their IDF times
  `ident_boost`. Candidates come from the rarest lexemes first, at most `keyword_scan` chunks.
  Added terms weigh less: the vocabulary's words (`added_texts`, `vocabulary_weight` shared by
  one entry's words), a question's asking words (`request_word_weight`), a non-English
  query's words read as English (`cross_language_term_weight`).
- `TITLE_RULES`: a section whose document or own title is exactly the query (or the title the
  whole query is another name for, `named`) gets the query's IDF sum again (`title_boost`),
  more if written as typed (`typed_title_boost`); a translated entry's version in another
  language than the query's scores `other_version_weight` times as much.
- `KEYWORD_RANKS`: the keyword leg's best `leg_sections` sections, ranked.
- `FUSION` with `FUSION_SCORES[fusion]`: both legs over their best `leg_sections` sections,
  scores over each leg's best (`tmm`), min-max, or reciprocal rank fusion; scaled to (0, 1].
  `VECTOR_ONLY` / `KEYWORD_ONLY` stand for it in one-leg modes.
- `SECTION_COLLAPSE` (`collapse.py`): one hit per section across language versions, weighed
  by entity type, source title rules and page length; a document's first
  `sections_per_document` first.
- `LINEAGE` (`collapse.py`): each hit's partitions and run.

Values are bind parameters (named like the `Ranking` knobs, `settings/ranking.py`); rows are read by
column name.
"""

from typing import Literal, LiteralString, cast

from psycopg import sql

from rag_pipeline.search.collapse import LINEAGE, SECTION_COLLAPSE

Mode = Literal["hybrid", "vector", "keyword"]
VectorColumn = Literal["embedding", "embedding_ml"]
Fusion = Literal["tmm", "minmax", "rrf"]
KeywordScorer = Literal["bm25", "ts_rank"]

_FILTERS = """
    (%(source_types)s::text[] IS NULL OR c.source_type = ANY(%(source_types)s::text[]))
    AND (%(languages)s::text[] IS NULL OR c.language = ANY(%(languages)s::text[])
         OR split_part(c.language, '_', 1) = ANY(%(languages)s::text[]))
    AND (%(breadcrumb)s::text IS NULL OR EXISTS (
         SELECT 1 FROM rag.documents fd
         WHERE fd.id = c.document_id AND starts_with(fd.breadcrumb, %(breadcrumb)s::text)))
"""

VECTOR_LEG = """
vec_raw AS MATERIALIZED (
    SELECT c.id, c.section_id, c.{column} <=> %(query_vector)s AS distance
    FROM rag.chunks c
    WHERE {filters}{present}
    ORDER BY {vector_order}
    LIMIT %(vector_candidates)s
),
vec AS (
    SELECT section_id, id AS chunk_id, 1 - distance AS score,
           row_number() OVER (ORDER BY distance, id) AS rank
    FROM (SELECT DISTINCT ON (section_id) section_id, id, distance
          FROM vec_raw ORDER BY section_id, distance, id) AS best
)"""

_IDF = "ln(1 + (greatest({n}, {df}) - {df} + 0.5) / ({df} + 0.5))"
# A text lowercased, without accents, its punctuation and spacing as one space: a title "as
# typed" ("Verify BOM" and "verify bom?" alike).
_TYPED_FORM = "btrim(lower(regexp_replace(rag.folded_text({}), '[^[:alnum:]]+', ' ', 'g')))"

KEYWORD_LEG = """
stats AS (
    SELECT coalesce(max(chunks), 0)::float8 AS n, greatest(coalesce(max(avg_tokens), 1), 1) AS avgdl
    FROM rag.search_stats
),
query_words AS (
    -- The query as the keyword leg reads it, less the words whose unaccented form is a stop
    -- word: the config knows Spanish "donde", "como", "que" but not "dónde", "cómo", "qué",
    -- and "¿Dónde ...?" must not find every title starting with it. The language's words
    -- its config does not stop but English's list does ("cada", "solo") go too.
    SELECT coalesce(string_agg(w, ' '), '') AS q
    FROM regexp_split_to_table(rag.keyword_text(%(query_text)s), '[[:space:]]+') AS w
    WHERE (rag.folded_words(w) = ''
           OR to_tsvector(%(ts_config)s::regconfig, rag.folded_words(w)) <> ''::tsvector)
      AND lower(rag.folded_text(regexp_replace(w, '[^[:alnum:]]+', '', 'g')))
          <> ALL(%(query_stop_words)s::text[])
),
asking_words AS (
    SELECT unnest(tsvector_to_array(to_tsvector(%(ts_config)s::regconfig, %(request_words)s)))
           AS asking
),
terms AS (
    -- The query's own lexemes weigh 1 (its asking words less); added words weigh less.
    SELECT t.lexeme, coalesce(s.df, 0) AS df, rag.lexeme_query(t.lexeme) AS tq,
           {term_idf} AS idf, t.w, t.typed
    FROM (SELECT lexeme, max(w) AS w, bool_or(typed) AS typed
          FROM (SELECT lexeme, CASE WHEN lexeme IN (SELECT asking FROM asking_words)
                                    THEN %(request_word_weight)s ELSE 1.0 END::float8 AS w,
                       true AS typed
                FROM unnest(to_tsvector(%(ts_config)s::regconfig, (SELECT q FROM query_words)))
                UNION ALL
                -- A query in another language than the model's also as English words read
                -- ("réplica" -> replica, "plugin"), for English-only pages; at a lower weight.
                SELECT lexeme, %(cross_language_term_weight)s::float8, false
                FROM unnest(to_tsvector(%(cross_ts_config)s::regconfig,
                                        (SELECT q || ' ' || rag.folded_words(q) FROM query_words)))
                WHERE %(cross_ts_config)s::text IS NOT NULL
                UNION ALL
                -- An added group of words weighs together what the words it stands for weigh.
                SELECT e.lexeme, %(vocabulary_weight)s * least(1.0, x.covers::float8
                           / count(*) OVER (PARTITION BY x.n)), false
                FROM unnest(%(added_texts)s::text[], %(added_covers)s::int[],
                            %(added_ts_configs)s::text[])
                     WITH ORDINALITY AS x (words, covers, cfg, n)
                CROSS JOIN LATERAL unnest(
                    to_tsvector(x.cfg::regconfig, rag.keyword_text(x.words))) AS e
               ) AS u
          GROUP BY lexeme) AS t
    CROSS JOIN stats st
    LEFT JOIN rag.term_stats s ON s.lexeme = t.lexeme
    WHERE t.w > 0
),
typed_terms AS (SELECT * FROM terms WHERE typed),
picked AS (
    SELECT rag.tsquery_or_agg(tq) AS q
    FROM (SELECT tq, df, sum(df) OVER (ORDER BY df, lexeme) - df AS before FROM terms) AS x
    -- The rarest lexeme always; the next ones while all of them together stay within the
    -- scan, so the LIMIT below never drops chunks at random that a rarer lexeme matched.
    WHERE before = 0 OR before + df <= %(keyword_scan)s
),
all_terms AS (SELECT rag.tsquery_or_agg(tq) AS q FROM typed_terms),
ident_terms AS (
    SELECT i.tq, {ident_idf} AS idf
    FROM (SELECT rag.lexeme_query(term) AS tq,
                 (SELECT count(*) FROM rag.chunks ic
                  WHERE ic.ident_tsv @@ rag.lexeme_query(term))::float8 AS df
          FROM unnest(%(identifiers)s::text[]) AS term) AS i
    CROSS JOIN stats st
),
ident_q AS (SELECT rag.tsquery_or_agg(tq) AS q FROM ident_terms),
kw_raw AS MATERIALIZED (
    -- `|| ''` copies the (often TOASTed) tsvector out once; the scoring below reads it once per
    -- query term, and detoasting each time cost 8x the buffer reads at 100k chunks.
    SELECT c.id, c.section_id, c.tsv || ''::tsvector AS tsv, c.ident_tsv, c.token_count
    FROM rag.chunks c
    WHERE (c.tsv @@ (SELECT q FROM picked) OR c.ident_tsv @@ (SELECT q FROM ident_q))
      AND {filters}
    -- When even the rarest query word is in more chunks than this, score the first ones found
    -- rather than all (a one-word query of a common word would otherwise score a third of
    -- the corpus); hybrid search still has the vector leg's candidates for such a query.
    LIMIT %(keyword_scan)s
),
kw_scored AS (
    SELECT r.id, r.section_id, {lexical} + coalesce((
               SELECT sum(%(ident_boost)s * i.idf) FROM ident_terms i WHERE r.ident_tsv @@ i.tq
           ), 0) AS score
    FROM kw_raw r CROSS JOIN stats st
),
kw_best AS (
    SELECT DISTINCT ON (section_id) section_id, id, score
    FROM kw_scored ORDER BY section_id, score DESC, id
)"""

TITLE_RULES = """
as_typed AS (
    -- The query lowercased, without accents or punctuation: how it is compared with titles.
    SELECT {typed_query} AS typed
),
named AS (
    -- The iDempiere title the whole query is another name for (vocabulary `named`), if any.
    SELECT tsvector_to_array(to_tsvector(%(ts_config)s::regconfig,
               rag.keyword_text(rag.folded_text(%(named)s::text)))) AS lexemes
),
kw_titled AS (
    -- A query that is exactly a title (the same lexemes, no more, no fewer: "price list",
    -- "GL Journal") names what it looks for: the document or section of that title gets its
    -- IDF sum again, so "Price List" goes before "Import Price Lists". A question is never a
    -- title, so this changes known-item searches only (and is skipped past 8 words).
    SELECT b.section_id, b.id, (b.score + CASE WHEN (SELECT count(*) FROM typed_terms) > 8 THEN 0
           -- A title of n words has at most 2n lexemes ("re-open": re-open, re, open): one
           -- too short to hold the query's words (or the named title's) is not read at all.
           WHEN 2 * greatest(regexp_count(d.title, '[[:alnum:]]+'),
                             regexp_count(s.title, '[[:alnum:]]+'))
                < least((SELECT count(*) FROM typed_terms),
                        coalesce(cardinality((SELECT lexemes FROM named)), 1000)) THEN 0
           ELSE %(title_boost)s * coalesce((
               SELECT max(greatest((
                   SELECT sum(t.idf) FROM typed_terms t WHERE titles.v @@ t.tq
                   HAVING count(*) = length(titles.v)
                      AND count(*) = (SELECT count(*) FROM typed_terms)
               ),
               -- A query that is only a user's name for an iDempiere title ("activos fijos" ->
               -- Activo): that title counts as typed.
               CASE WHEN tsvector_to_array(titles.v) = (SELECT lexemes FROM named)
                    THEN (SELECT sum(idf) FROM typed_terms) END))
               FROM (VALUES (to_tsvector(%(ts_config)s::regconfig, rag.keyword_text(d.title))),
                            (to_tsvector(%(ts_config)s::regconfig, rag.keyword_text(s.title))),
                            -- and as typed without accents
                            (to_tsvector(%(ts_config)s::regconfig,
                                         rag.keyword_text(rag.folded_text(d.title)))),
                            (to_tsvector(%(ts_config)s::regconfig,
                                         rag.keyword_text(rag.folded_text(s.title)))))
                    AS titles (v)
           ), 0)
           -- Of titles with the same words ("Verify BOM", "Verify BOMs"; "Usuario", "Todos los
           -- Usuarios"), the one written as typed.
           + CASE WHEN (SELECT typed FROM as_typed) IN ({typed_document_title},
                                                       {typed_section_title})
                  THEN %(typed_title_boost)s * (SELECT sum(idf) FROM typed_terms) ELSE 0 END
           END)
           -- A translated entry's version in another language than the query's: its words
           -- are not what the query says ("red" is not "Red de Distribución").
           * CASE WHEN lower(split_part(d.language, '_', 1)) <> %(query_language)s
                   AND EXISTS (SELECT 1 FROM rag.documents v
                               WHERE v.source_type = d.source_type AND v.source_id = d.source_id
                                 AND lower(split_part(v.language, '_', 1)) = %(query_language)s
                               -- looked up by documents_source_idx for each of these rows, not
                               -- hashed from a scan of every document in that language
                               OFFSET 0)
                  THEN %(other_version_weight)s::float8 ELSE 1.0 END AS score
    FROM (SELECT * FROM kw_best ORDER BY score DESC, id LIMIT 2 * %(leg_sections)s) AS b
    JOIN rag.sections s ON s.id = b.section_id
    JOIN rag.documents d ON d.id = s.document_id
)"""

KEYWORD_RANKS = """
kw AS (
    SELECT section_id, id AS chunk_id, score, row_number() OVER (ORDER BY score DESC, id) AS rank
    FROM kw_titled
    ORDER BY score DESC, id
    LIMIT %(leg_sections)s
)"""

# One body occurrence of a lexeme: ts_rank = 0.4 (weight B) / 1.64493406685 (pi^2/6).
_TF = "ts_rank(r.tsv, t.tq) * 4.1123351671"
_BM25 = f"""coalesce((
        SELECT sum(t.w * t.idf * x.tf * (%(k1)s + 1)
                   / (x.tf + %(k1)s * (1 - %(b)s + %(b)s * r.token_count / st.avgdl)))
        FROM terms t CROSS JOIN LATERAL (SELECT {_TF} AS tf) AS x
        WHERE x.tf > 0
    ), 0)"""
_TS_RANK = "coalesce(ts_rank(r.tsv, (SELECT q FROM all_terms)), 0)"

FUSION_SCORES = {
    # Theoretical min-max: each leg's score over its best, from a floor of 0 (cosine of these
    # embeddings and BM25 are not below it), so a leg's weakest candidate is not pushed to 0
    # the way min-max does; the convex combination Bruch et al. (2023) found most robust.
    "tmm": """(%(vector_weight)s * coalesce(greatest(v.score, 0) / nullif(vs.hi, 0), 0)
        + %(keyword_weight)s * coalesce(k.score / nullif(ks.hi, 0), 0))
        / (%(vector_weight)s + %(keyword_weight)s)""",
    "rrf": """(coalesce(%(vector_weight)s / (%(rrf_k)s + v.rank), 0)
         + coalesce(%(keyword_weight)s / (%(rrf_k)s + k.rank), 0))
        / ((%(vector_weight)s + %(keyword_weight)s) / (%(rrf_k)s + 1.0))""",
    "minmax": """(%(vector_weight)s * coalesce((v.score - vs.lo) / nullif(vs.hi - vs.lo, 0),
                                   CASE WHEN v.score IS NULL THEN 0 ELSE 1 END)
        + %(keyword_weight)s * coalesce((k.score - ks.lo) / nullif(ks.hi - ks.lo, 0),
                            CASE WHEN k.score IS NULL THEN 0 ELSE 1 END))
        / (%(vector_weight)s + %(keyword_weight)s)""",
}

FUSION = """
vs AS (SELECT min(score) AS lo, max(score) AS hi FROM vec WHERE rank <= %(leg_sections)s),
ks AS (SELECT min(score) AS lo, max(score) AS hi FROM kw),
fused AS (
    SELECT coalesce(v.section_id, k.section_id) AS section_id,
           CASE WHEN k.rank IS NOT NULL AND (v.rank IS NULL OR k.rank < v.rank)
                THEN k.chunk_id ELSE v.chunk_id END AS chunk_id,
           {fusion}::float8 AS score,
           v.rank AS v_rank, v.score AS v_score, k.rank AS k_rank, k.score AS k_score
    FROM (SELECT * FROM vec WHERE rank <= %(leg_sections)s) AS v
    FULL JOIN kw AS k ON k.section_id = v.section_id
    CROSS JOIN vs CROSS JOIN ks
)"""
VECTOR_ONLY = """
fused AS (
    SELECT section_id, chunk_id, score::float8 AS score, rank AS v_rank, score AS v_score,
           NULL::bigint AS k_rank, NULL::float8 AS k_score
    FROM vec
)"""
KEYWORD_ONLY = """
fused AS (
    SELECT section_id, chunk_id, score::float8 AS score, NULL::bigint AS v_rank,
           NULL::float8 AS v_score, rank AS k_rank, score AS k_score
    FROM kw
)"""


def search_statement(
    mode: Mode,
    fusion: Fusion = "tmm",
    scorer: KeywordScorer = "bm25",
    *,
    exact_vectors: bool = False,
    vector_column: VectorColumn = "embedding",
) -> sql.SQL:
    """The statement for one mode: its legs, fusion, section collapse and lineage.

    Its parameters are built by `request.statement_parameters`. `exact_vectors` orders by an
    expression the HNSW index cannot serve, so the vector leg compares every (filtered)
    vector: exact, and cheap for a small index. `vector_column` is the vectors the query's
    vector was made for (the second model's are NULL where it has not embedded a chunk).
    """
    vector = vector_leg(vector_column, exact=exact_vectors)
    keyword = [
        keyword_leg(scorer),
        TITLE_RULES.format(
            typed_query=_TYPED_FORM.format("%(query_text)s::text"),
            typed_document_title=_TYPED_FORM.format("d.title"),
            typed_section_title=_TYPED_FORM.format("s.title"),
        ),
        KEYWORD_RANKS,
    ]
    if mode == "vector":
        ctes = [vector, VECTOR_ONLY]
    elif mode == "keyword":
        ctes = [*keyword, KEYWORD_ONLY]
    else:
        ctes = [vector, *keyword, FUSION.format(fusion=FUSION_SCORES[fusion])]
    read = "0::bigint" if mode == "keyword" else "(SELECT count(*) FROM vec_raw)"
    ctes.append(SECTION_COLLAPSE.format(vector_candidates_read=read))
    text = "WITH" + ",".join(ctes) + LINEAGE
    # Constant text chosen by `mode`, `fusion` and `scorer`; values are bind parameters only.
    return sql.SQL(cast(LiteralString, text))


def vector_leg(column: VectorColumn = "embedding", *, exact: bool = False) -> str:
    """The vector leg's CTEs up to `vec`: each near section's best chunk, ranked."""
    distance = f"c.{column} <=> %(query_vector)s"
    return VECTOR_LEG.format(
        column=column,
        filters=_FILTERS,
        present="" if column == "embedding" else f"    AND c.{column} IS NOT NULL\n",
        vector_order=f"({distance}) + 0" if exact else distance,
    )


def keyword_leg(scorer: KeywordScorer = "bm25") -> str:
    """The keyword leg's CTEs up to `kw_best`: each matching section's best chunk and score."""
    return KEYWORD_LEG.format(
        filters=_FILTERS,
        term_idf=_IDF.format(n="st.n", df="coalesce(s.df, 0)"),
        ident_idf=_IDF.format(n="st.n", df="i.df"),
        lexical=_BM25 if scorer == "bm25" else _TS_RANK,
    )
