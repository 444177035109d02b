"""Every bundled vocabulary entry names where its iDempiere words come from, and that holds.

The sources are checked against the real iDempiere text of the shared fixtures: the named
window, process, element, tab, field or process parameter is a dictionary row of that name,
the named wiki page a page of that title, and together they hold the entry's words.
"""

from pathlib import Path

import pytest

import rag_pipeline.sources.idempiere.vocabulary as vocabulary_package
from benchmarks.eval.vocabulary_sources import BUNDLED, Corpus, check, find, key_words
from rag_pipeline.core.vocabulary import Source, VocabularyError, parse_entries, parse_sources
from rag_pipeline.sources.idempiere.vocabulary import SOURCE_KINDS

VOCABULARY = Path(vocabulary_package.__file__).parent


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    fixtures = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
    if not fixtures.is_dir():
        pytest.skip(f"shared fixtures not found at {fixtures}")
    return Corpus(fixtures)


@pytest.mark.parametrize("language", BUNDLED)
def test_every_bundled_entry_names_a_source_that_holds_its_words(
    language: str, corpus: Corpus
) -> None:
    path = VOCABULARY / f"{language}.tsv"
    entries = parse_entries(path.read_text(encoding="utf-8").splitlines(), path.name, SOURCE_KINDS)
    unsourced = [entry.expansion for entry in entries if not entry.sources]
    assert unsourced == [], "python -m benchmarks.eval.vocabulary_sources --write"
    wrong = {
        entry.expansion: problem
        for entry in entries
        if (problem := check(entry.sources, entry.expansion, language, corpus)) is not None
    }
    assert wrong == {}


def test_a_wrong_source_is_named_with_what_is_wrong(corpus: Corpus) -> None:
    assert check((Source("window", "Warehouse & Locators"),), "locator", "en", corpus) is None
    assert check((Source("window", "No Such Window"),), "locator", "en", corpus) == (
        "no window named 'No Such Window' in the fixtures"
    )
    # A process is not a window; a row that exists but does not hold the words is wrong too.
    assert check((Source("process", "Warehouse & Locators"),), "locator", "en", corpus)
    assert check((Source("window", "Business Partner"),), "locator", "en", corpus) == (
        "window:Business Partner holds none of 'locator'"
    )
    # Several sources together hold every word, each some.
    two = (Source("window", "Cash Journal"), Source("window", "Cashbook"))
    assert check(two, "cash journal cashbook", "en", corpus) is None
    assert check(two[:1], "cash journal cashbook", "en", corpus) == ("no source holds 'cashbook'")
    # A Spanish entry names the es_CO row; words tagged [en], an English page.
    assert check((Source("window", "Tercero"),), "tercero", "es", corpus) is None
    assert check((Source("window", "Business Partner"),), "tercero", "es", corpus)
    page = (Source("wiki", "NF5.1 Mobile Compatibility"),)
    assert check(page, "[en] mobile compatibility", "es", corpus) is None


def test_the_most_specific_source_is_found(corpus: Corpus) -> None:
    def found(expansion: str, language: str = "en") -> str:
        words, words_language = key_words(expansion, language)
        return "; ".join(map(str, find(words, corpus.named(words_language), words_language)))

    # A name that is the words, singular or plural, before a longer name holding them.
    assert found("warehouse locator") == "window:Warehouse & Locators"
    assert found("generate invoices") == "process:Generate Invoices"
    # Words of two names, each the name it is.
    assert found("cash journal cashbook") == "window:Cash Journal; window:Cashbook"
    # Words no dictionary name holds, from the wiki page that does.
    assert found("hikaricp") == "wiki:NF10 HikariCP"
    assert found("tercero", "es") == "window:Tercero"
    # Words nowhere in the dictionary or the wiki have no source.
    assert found("quantum flux capacitor") == ""


def test_the_loader_keeps_the_sources_and_rejects_a_malformed_one() -> None:
    lines = [
        "supplier\tbusiness partner\twindow:Business Partner",
        "petty cash\tcash journal cashbook\twindow:Cash Journal; window:Cashbook",
        "bin\tlocator",
    ]
    entries = parse_entries(lines, "test.tsv", SOURCE_KINDS)
    assert [entry.sources for entry in entries] == [
        (Source("window", "Business Partner"),),
        (Source("window", "Cash Journal"), Source("window", "Cashbook")),
        (),
    ]
    assert parse_sources("wiki:HowTo: Copy or Move Tenant", SOURCE_KINDS) == (
        Source("wiki", "HowTo: Copy or Move Tenant"),
    )
    for bad in ("Business Partner", "screen:Business Partner", "window:", "window:A; B"):
        with pytest.raises(VocabularyError, match=r"test\.tsv:1: expected sources"):
            parse_entries([f"supplier\tbusiness partner\t{bad}"], "test.tsv", SOURCE_KINDS)
