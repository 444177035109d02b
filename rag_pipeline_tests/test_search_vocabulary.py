"""The search vocabulary: everyday words -> iDempiere's names, matched as a user types them."""

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from rag_pipeline.core.embedding import Embedder
from rag_pipeline.search.plugins import source_vocabularies
from rag_pipeline.search.vocabulary import (
    Vocabulary,
    VocabularyError,
    expansion_language,
    parse_entries,
)
from rag_pipeline.search.vocabulary.phrase_vectors import PhraseVectors, read_vectors
from rag_pipeline.sources.idempiere.vocabulary import SOURCE_KINDS


def _vocabulary(text: str, language: str = "en") -> Vocabulary:
    return Vocabulary({language: parse_entries(text.splitlines(), "test.tsv", SOURCE_KINDS)})


def test_the_bundled_files_map_user_words_to_idempiere_names() -> None:
    vocabulary = Vocabulary.load()
    assert vocabulary.expansion("Where do I add a new supplier?", "en_US") == (
        "business partner vendor"
    )
    assert vocabulary.expansion("who changed this field", "en_US") == "change audit"
    assert vocabulary.expansion("¿Dónde registro un contratista?", "es_CO") == "tercero"
    # A month is an accounting period ("May" is left out: it is also a verb).
    assert vocabulary.expansion("close March for posting", "en_US") == "period"
    assert vocabulary.expansion("may I post?", "en_US") == ""
    assert vocabulary.expansion("¿cómo reabro marzo?", "es_CO") == "periodo"
    # Each language has its own words: the English entry does not fire on a Spanish query.
    assert vocabulary.expansion("supplier", "es_CO") == ""
    assert vocabulary.expansion("supplier", "hu_HU") == ""


def test_words_match_whole_in_any_case_accent_and_plural() -> None:
    vocabulary = _vocabulary("bin|storage location\tlocator\ncompany\tclient\nbodega\talmacen\n")
    assert vocabulary.expansion("BINS and Storage Locations", "en") == "locator"
    assert vocabulary.expansion("our companies", "en") == "client"
    assert vocabulary.expansion("binary files", "en") == ""  # a word, not a prefix
    # The words of a phrase far apart are not that phrase.
    assert vocabulary.expansion("storage of pallets near the loading dock location", "en") == ""
    spanish = _vocabulary("bodega\talmacén\nproveedor\ttercero\n", "es")
    assert spanish.expansion("BODEGAS y Proveedores", "es_CO") == "almacén tercero"


def test_the_longest_phrase_wins_and_each_expansion_comes_once() -> None:
    vocabulary = _vocabulary(
        "stock\tstorage\nstock count\tphysical inventory\nsupplier\tbusiness partner\n"
        "supplier|vendor\tvendor\n"
    )
    assert vocabulary.expansion("stock count of the stock", "en") == ("physical inventory storage")
    # Every entry of the longest phrase at a position counts, each once per query.
    assert vocabulary.expansion("supplier or vendor", "en") == "business partner vendor"
    # Each added group knows how many query words it stands for.
    assert vocabulary.expansions("stock count of the stock", "en") == [
        ("physical inventory", 2),
        ("storage", 1),
    ]


def test_a_query_made_only_of_one_entrys_phrases_is_named_by_it() -> None:
    vocabulary = _vocabulary(
        "fixed asset|capital equipment\tasset\nsupplier\tbusiness partner\n"
        "chart of accounts\taccount element\n"
    )
    assert vocabulary.named("Fixed Assets", "en_US") == "asset"
    assert vocabulary.named("fixed assets or capital equipment", "en_US") == "asset"
    # Function words of the query's language may stand around the phrase.
    assert vocabulary.named("the chart of accounts", "en_US") == "account element"
    # Anything else in the query, or a second entry, and it names nothing.
    assert vocabulary.named("depreciate fixed assets", "en_US") is None
    assert vocabulary.named("fixed asset supplier", "en_US") is None
    assert vocabulary.named("assets", "en_US") is None
    # Stems close together are a match for expansion, not a name.
    assert vocabulary.named("assets that are fixed", "en_US") is None
    assert Vocabulary.load().named("¿Los activos fijos?", "es_CO") == "activo"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("supplier business partner", "test.tsv:2: expected 'user words<TAB>iDempiere words'"),
        ("supplier\tbusiness\tpartner", "test.tsv:2: expected"),
        ("supplier\t  ", "test.tsv:2: an entry needs words on both sides"),
        ("|\tvendor", "test.tsv:2: an entry needs words on both sides"),
        ("celular\t[en]", "test.tsv:2: an entry needs words on both sides"),
        ("celular\t[english] mobile", "test.tsv:2: a language tag is two lowercase letters"),
    ],
)
def test_a_bad_line_names_its_file_and_line(line: str, message: str) -> None:
    with pytest.raises(VocabularyError, match=message):
        parse_entries(["# a comment", line], "test.tsv", SOURCE_KINDS)


def test_files_of_a_folder_add_to_the_bundled_ones(tmp_path: Path) -> None:
    (tmp_path / "en.tsv").write_text("widget factory\tproduction\n", encoding="utf-8")
    (tmp_path / "es_CO.tsv").write_text("fábrica\tproducción\n", encoding="utf-8")
    vocabulary = Vocabulary.load(tmp_path)
    assert vocabulary.expansion("the widget factory", "en_US") == "production"
    assert vocabulary.expansion("la fabrica", "es_CO") == "producción"
    assert vocabulary.expansion("supplier", "en_US") == "business partner vendor"
    (tmp_path / "en.tsv").write_text("no tab here\n", encoding="utf-8")
    with pytest.raises(VocabularyError, match=r"en\.tsv:1"):
        Vocabulary.load(tmp_path)


def test_a_phrase_matches_by_its_stems_close_together_in_any_order() -> None:
    vocabulary = _vocabulary("stock\tstorage\nstock count|inventory count\tphysical inventory\n")
    # Inflected, reordered, with up to two other words between: the phrase, not its parts.
    assert vocabulary.expansions("counting the stock at year end", "en") == [
        ("physical inventory", 2)
    ]
    assert vocabulary.expansion("the stock we counted", "en") == "physical inventory"
    # Three words between are too many; then "stock" stands for its own entry.
    assert vocabulary.expansion("stock in all of our three warehouses counted", "en") == ("storage")
    spanish = _vocabulary(
        "llego mercancia|mercancia recibida\trecepcion\nmercancia\tproducto\n", "es"
    )
    assert spanish.expansion("la mercancía que llegó del proveedor", "es_CO") == "recepcion"
    assert spanish.expansion("mercancía en la bodega", "es_CO") == "producto"


def test_a_language_without_a_stemmer_matches_phrases_by_their_words() -> None:
    vocabulary = _vocabulary("raktar hely\tlocator\n", "xx")
    assert vocabulary.expansion("hely a raktar", "xx_XX") == "locator"
    assert vocabulary.expansion("helyek a raktarban", "xx_XX") == ""


@pytest.mark.slow
def test_expansions_are_the_same_from_many_threads_at_once() -> None:
    """Snowball stemmers keep their word in the instance; shared unguarded across the search
    threads they corrupt each other's words (IndexError, or a wrong stem)."""
    vocabulary = Vocabulary.load()
    queries = [
        ("counting the stock in the warehouses at the end of the year", "en_US"),
        ("la mercancía que llegó del proveedor ayer por la tarde", "es_CO"),
        ("internationalization of the organizational relationships", "en_US"),
        ("conciliaciones bancarias de las cuentas corrientes", "es_CO"),
    ]
    expected = [vocabulary.expansions(text, language) for text, language in queries]

    def work(_: int) -> list[list[tuple[str, int]]]:
        return [vocabulary.expansions(text, language) for text, language in queries * 50]

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(work, range(16)))
    finally:
        sys.setswitchinterval(interval)
    for result in results:
        assert result == expected * 50


@pytest.mark.slow
def test_expansions_are_the_same_in_every_process() -> None:
    """A word has two shortest singular forms ("families": famili, family); which one was
    stemmed followed the order of a set, so of the hash seed of the process: the same query
    got other words from one `rag search` to the next."""
    script = (
        "from rag_pipeline.search.vocabulary import Vocabulary, _stemmer\n"
        "print(_stemmer('es')('families'), _stemmer('es')('series'))\n"
        "print(Vocabulary.load().expansions("
        "'Where do I group our products into families so that each group gets its own "
        "default accounts and margins?', 'es_CO'))\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(6)
    }
    assert len(outputs) == 1, outputs


def test_a_phrase_does_without_its_function_words_but_not_its_negation() -> None:
    vocabulary = _vocabulary(
        "attachments in the database\tmigrate storage provider\nemail not sending\ttest email\n"
    )
    # "in the" need not be typed, and the query's own "to", "a", "and", "the" do not count as
    # words between: of the six words between "attachments" and "database", two do.
    assert vocabulary.expansion("move the attachments to a disk and shrink the database", "en") == (
        "migrate storage provider"
    )
    # Without "not", an email that is sent is not one that fails to be.
    assert vocabulary.expansion("how do I send an email to a customer", "en") == ""
    assert vocabulary.expansion("email not sending since monday", "en") == "test email"
    # One content word left is no phrase: "the invoice" is not matched as "invoice".
    assert _vocabulary("pay the invoice\tpayment\n").expansion("print the invoice", "en") == ""


def test_a_phrase_in_the_plural_matches_a_query_in_the_singular() -> None:
    # Snowball's Spanish stems "almacenes" to almacen but "almacén" to almac.
    spanish = _vocabulary("traslado entre almacenes\tmovimiento de inventario\n", "es")
    assert spanish.expansion("traslado entre un almacén y otro", "es_CO") == (
        "movimiento de inventario"
    )


def test_an_entry_may_name_the_language_of_its_words() -> None:
    vocabulary = _vocabulary("celular\t[en] mobile compatibility\nactivos fijos\tactivo\n", "es")
    assert vocabulary.expansions("¿funciona en el celular?", "es_CO") == [
        ("[en] mobile compatibility", 1)
    ]
    assert expansion_language("[en] mobile compatibility") == ("en", "mobile compatibility")
    assert expansion_language("activo") == (None, "activo")
    # A query that is only the tagged phrase names no title in its own language.
    assert vocabulary.named("celular", "es_CO") is None
    assert vocabulary.named("activos fijos", "es_CO") == "activo"


def test_the_bundled_phrase_vectors_are_those_of_the_bundled_vocabulary(embedder: Embedder) -> None:
    declared = source_vocabularies()
    assert [files.vector_languages for files in declared] == [("en",)]
    for files in declared:
        vocabulary = Vocabulary.load(declared=[files])
        for language in files.vector_languages:
            phrases, vectors = read_vectors(files.vectors_file(language), embedder.model_id)
            # Stale after a vocabulary edit: python -m rag_pipeline.search.vocabulary.build_vectors
            assert set(phrases) == {phrase for phrase, _ in vocabulary.phrases(language)}, language
            for row in range(0, len(phrases), 500):
                expected = embedder.embed_query(phrases[row])
                assert np.allclose(vectors[row], expected, atol=1e-3), phrases[row]


def test_the_closest_phrase_is_found_and_missing_vectors_are_embedded_once(tmp_path: Path) -> None:
    vocabulary = _vocabulary("stock take|stock count\tphysical inventory\nbank fee\tcharge\n")
    axes = {"stock take": [1.0, 0.0], "stock count": [0.8, 0.6], "bank fee": [0.0, 1.0]}
    embedded: list[str] = []

    def embed(text: str) -> NDArray[np.float32]:
        embedded.append(text)
        return np.asarray(axes[text], dtype=np.float32)

    vectors = PhraseVectors(vocabulary.phrases, embed, "test-model", tmp_path)
    near_count = np.asarray([0.6, 0.8], dtype=np.float32)
    found = vectors.closest("en", near_count, 0.5)
    assert found is not None
    assert (found.phrase, found.expansion) == ("stock count", "physical inventory")
    assert found.similarity == pytest.approx(0.96)
    assert vectors.closest("en", near_count, 0.97) is None
    assert vectors.closest("es", near_count, 0.0) is None  # no Spanish phrases
    assert sorted(embedded) == ["bank fee", "stock count", "stock take"]
    # A second process reads them from the cache; another model's are not reused.
    again = PhraseVectors(vocabulary.phrases, embed, "test-model", tmp_path)
    assert again.closest("en", np.asarray([0.0, 1.0], dtype=np.float32), 0.5) is not None
    assert len(embedded) == 3
    other = PhraseVectors(vocabulary.phrases, embed, "other-model", tmp_path)
    other.closest("en", near_count, 0.5)
    assert len(embedded) == 6


def test_shared_words_count_the_phrase_words_a_query_holds_as_stems() -> None:
    vocabulary = Vocabulary.load()
    query = "Where do I maintain customers and vendors?"
    assert vocabulary.shared_words("product with several vendors", query, "en_US") == 1
    assert vocabulary.shared_words("customer and vendor balance", query, "en_US") == 2
    assert vocabulary.shared_words("alert schedule", query, "en_US") == 0
