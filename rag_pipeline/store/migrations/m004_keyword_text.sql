-- m004: what the keyword leg reads, made closer to what people type.
--
-- 1. Slash-joined words are words. PostgreSQL's parser reads `Bank/Cash`, `Ship/Receipt` or
--    `Invoice/Order` as one file-path token (lexeme 'bank/cash'), so neither `bank` nor `cash`
--    matched the window named "Bank/Cash Statement", and the dictionary joins words with
--    slashes often. rag.keyword_text() turns slashes and backslashes into spaces, for chunks
--    and for queries (rag_pipeline/search/queries.py): the parts of a path or URL stay words.
-- 2. Words typed without their accents. "facturacion" or "categorias" found nothing where the
--    text says "facturación" (the Spanish stemmer makes 'factur' of one and keeps the other
--    whole), and the embedded server has no unaccent extension. rag.folded_words() adds, for
--    every word with a diacritic, its form without them (Latin-1 and Latin Extended-A, as
--    Spanish, Hungarian and Slovak write), so a query typed either way matches; words without
--    diacritics are not repeated, so no term frequency changes.

CREATE FUNCTION rag.keyword_text(body text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT translate(body, '/\', '  ')
$$;

CREATE FUNCTION rag.folded_words(body text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(string_agg(translate(m[1],
               'ÀÁÂÃÄÅÇÈÉÊËÌÍÎÏÑÒÓÔÕÖÙÚÛÜÝàáâãäåçèéêëìíîïñòóôõöùúûüýÿĀāĂăĄąĆćĈĉĊċČčĎďĒēĔĕĖėĘęĚěĜĝĞğĠġĢģĤĥĨĩĪīĬĭĮįİĴĵĶķĹĺĻļĽľŃńŅņŇňŌōŎŏŐőŔŕŖŗŘřŚśŜŝŞşŠšŢţŤťŨũŪūŬŭŮůŰűŲųŴŵŶŷŸŹźŻżŽž',
               'AAAAAACEEEEIIIINOOOOOUUUUYaaaaaaceeeeiiiinooooouuuuyyAaAaAaCcCcCcCcDdEeEeEeEeEeGgGgGgGgHhIiIiIiIiIJjKkLlLlLlNnNnNnOoOoOoRrRrRrSsSsSsSsTtTtUuUuUuUuUuUuWwYyYZzZzZz'), ' '), '')
    FROM regexp_matches(body, '([[:alnum:]]*[ÀÁÂÃÄÅÇÈÉÊËÌÍÎÏÑÒÓÔÕÖÙÚÛÜÝàáâãäåçèéêëìíîïñòóôõöùúûüýÿĀāĂăĄąĆćĈĉĊċČčĎďĒēĔĕĖėĘęĚěĜĝĞğĠġĢģĤĥĨĩĪīĬĭĮįİĴĵĶķĹĺĻļĽľŃńŅņŇňŌōŎŏŐőŔŕŖŗŘřŚśŜŝŞşŠšŢţŤťŨũŪūŬŭŮůŰűŲųŴŵŶŷŸŹźŻżŽž][[:alnum:]]*)', 'g') AS m
$$;

ALTER TABLE rag.chunks DROP COLUMN tsv;
ALTER TABLE rag.chunks ADD COLUMN tsv tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector(ts_config, rag.keyword_text(heading)), 'A')
    || setweight(to_tsvector(ts_config, rag.keyword_text(text)), 'B')
    || setweight(to_tsvector(ts_config, rag.folded_words(heading)), 'A')
    || setweight(to_tsvector(ts_config, rag.folded_words(text)), 'B')
) STORED;
CREATE INDEX chunks_tsv_idx ON rag.chunks USING gin (tsv);

-- The term statistics counted the old lexemes: the next search rebuilds them.
SELECT nextval('rag.chunks_generation');
