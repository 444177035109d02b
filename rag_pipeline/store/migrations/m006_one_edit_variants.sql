-- m006: the words one typing error away from a word, for the keyword leg's typo correction.
--
-- A typed word the index does not hold ("comission", "requisision", "conciliasion") matched
-- nothing, so the keyword leg lost it. Search now looks its lexeme's variants one edit away
-- (a letter dropped, doubled or added, replaced, or two neighbours swapped: Damerau-Levenshtein
-- distance 1) up in rag.term_stats, and reads the most frequent one found instead
-- (rag_pipeline/search/queries.py, typo_fixes). The letters inserted or substituted are those
-- of the indexed words typed without accents: every word with a diacritic is also indexed
-- without them (m004), so the folded form is always there to be found. The embedded server has
-- no fuzzystrmatch or pg_trgm, hence this function.

CREATE FUNCTION rag.one_edit_variants(word text) RETURNS SETOF text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT left(word, i - 1) || substr(word, i + 1)            -- a letter dropped
    FROM generate_series(1, char_length(word)) AS i
    UNION
    SELECT left(word, i - 1) || substr(word, i + 1, 1) || substr(word, i, 1)
           || substr(word, i + 2)                              -- two neighbours swapped
    FROM generate_series(1, char_length(word) - 1) AS i
    UNION
    SELECT left(word, i - 1) || letter || substr(word, i + 1)  -- a letter replaced
    FROM generate_series(1, char_length(word)) AS i,
         regexp_split_to_table('abcdefghijklmnopqrstuvwxyzñ', '') AS letter
    UNION
    SELECT left(word, i) || letter || substr(word, i + 1)      -- a letter added
    FROM generate_series(0, char_length(word)) AS i,
         regexp_split_to_table('abcdefghijklmnopqrstuvwxyzñ', '') AS letter
$$;
