-- m008: rag.folded_text (m005) returns a text without a diacritic as it is.
--
-- Search folds the titles of its best sections several times per query (queries.py,
-- kw_titled), and translate() over m005's 150 letters cost about 30 microseconds a title on
-- the 2-core machine: a fifth of the keyword leg at 100k chunks. A text whose every
-- character is one byte has no letter to fold, so it is returned without scanning them.
-- Same results as m005 for every text.
CREATE OR REPLACE FUNCTION rag.folded_text(body text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN octet_length(body) = char_length(body) THEN body
           ELSE translate(body,
        'ÀÁÂÃÄÅÇÈÉÊËÌÍÎÏÑÒÓÔÕÖÙÚÛÜÝàáâãäåçèéêëìíîïñòóôõöùúûüýÿĀāĂăĄąĆćĈĉĊċČčĎďĒēĔĕĖėĘęĚěĜĝĞğĠġĢģĤĥĨĩĪīĬĭĮįİĴĵĶķĹĺĻļĽľŃńŅņŇňŌōŎŏŐőŔŕŖŗŘřŚśŜŝŞşŠšŢţŤťŨũŪūŬŭŮůŰűŲųŴŵŶŷŸŹźŻżŽž',
        'AAAAAACEEEEIIIINOOOOOUUUUYaaaaaaceeeeiiiinooooouuuuyyAaAaAaCcCcCcCcDdEeEeEeEeEeGgGgGgGgHhIiIiIiIiIJjKkLlLlLlNnNnNnOoOoOoRrRrRrSsSsSsSsTtTtUuUuUuUuUuUuWwYyYZzZzZz')
           END
$$;
