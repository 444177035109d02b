"""The dictionary's glossary: word pairs aligned over the fixtures' es_CO names, and carrying
a query's words across languages with them."""

import csv
from pathlib import Path

import pytest

from rag_pipeline.search.glossary import Glossary
from rag_pipeline.sources.idempiere.glossary_alignment import NamePair, WordPair, align
from rag_pipeline.store.glossary import GlossaryRow

pytestmark = pytest.mark.unit

_TABLES = ("AD_Window", "AD_Process", "AD_Element", "AD_Tab", "AD_Field", "AD_Process_Para")


def _fixture_pairs(fixtures: Path) -> list[NamePair]:
    """The es_CO name pairs of the fixtures' translation export, as the _Trl tables hold them."""
    folder = fixtures / "ad" / "core_es_CO"
    pairs: list[NamePair] = []
    for table in _TABLES:
        key = f"{table}_ID"
        with (folder / f"{table.lower()}.csv").open(encoding="utf-8") as handle:
            base = {row[key]: row["Name"] for row in csv.DictReader(handle) if row[key]}
        with (folder / f"{table.lower()}_trl_es_CO.csv").open(encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                if row[key] in base and row["Name"]:
                    pairs.append(NamePair(f"{table}:{row[key]}", base[row[key]], row["Name"]))
    return pairs


@pytest.fixture(scope="module")
def es_words() -> dict[str, list[WordPair]]:
    fixtures = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
    if not fixtures.is_dir():
        pytest.skip(f"shared fixtures not found at {fixtures}")
    pairs = _fixture_pairs(fixtures)
    assert len({(p.base, p.translated) for p in pairs}) > 1500
    by_term: dict[str, list[WordPair]] = {}
    for pair in align(pairs, "es_CO", "en_US"):
        by_term.setdefault(pair.term, []).append(pair)
    return by_term


def _targets(words: dict[str, list[WordPair]], term: str) -> set[str]:
    return {pair.target for pair in words.get(term, [])}


@pytest.mark.parametrize(
    ("term", "target"),
    [
        ("factura", "invoice"),
        ("proveedor", "vendor"),
        ("almacen", "warehouse"),
        ("tercero", "partner"),
        ("asignacion", "allocation"),
        ("orden", "order"),
        ("impuesto", "tax"),
        ("pago", "payment"),
        # Two words that always come together, told apart by how they are written.
        ("ayuda", "help"),
        ("contextual", "context"),
    ],
)
def test_the_dictionary_translates_its_erp_words(
    es_words: dict[str, list[WordPair]], term: str, target: str
) -> None:
    assert target in _targets(es_words, term)


def test_function_words_and_crossed_pairs_are_not_word_pairs(
    es_words: dict[str, list[WordPair]],
) -> None:
    for function_word in ("de", "y", "la", "el", "del", "para", "en", "por", "los"):
        assert function_word not in es_words
    # Words of one name pair that are not each other's translation.
    assert "vendor" not in _targets(es_words, "factura")
    assert "invoice" not in _targets(es_words, "proveedor")
    assert "order" not in _targets(es_words, "venta")
    assert "warehouse" not in _targets(es_words, "ubicacion")
    # Every pair was aligned in two name pairs at least, and says which rows.
    for pairs in es_words.values():
        for pair in pairs:
            assert pair.links >= 2
            assert 1 <= len(pair.sources) <= min(pair.links, 20)
            assert pair.sources[0].split(":")[0] in _TABLES


def test_a_pair_seen_once_is_not_a_word_pair() -> None:
    pairs = [
        NamePair("AD_Window:1", "Invoice Batch", "Lote de Facturas"),
        NamePair("AD_Window:2", "Invoice", "Factura"),
        NamePair("AD_Window:3", "Dry Ice", "Hielo Seco"),
    ]
    words = {(w.term, w.target) for w in align(pairs, "es_CO", "en_US")}
    assert ("factura", "invoice") in words
    assert not {term for term, _ in words} & {"hielo", "seco", "lote"}


def _glossary() -> Glossary:
    def row(term: str, target: str, stem: str, links: int) -> GlossaryRow:
        return GlossaryRow("es_CO", "word", term, target, stem, 0.9, links, ("AD_Window:1",))

    rows = [
        row("factura", "invoice", "factur", 55),
        row("tercero", "partner", "tercer", 33),
        row("tercero", "business", "tercer", 20),
        row("web", "web", "web", 21),
    ]
    return Glossary.from_rows(rows, {"es_CO": "en_US"})


def test_a_spanish_query_is_carried_into_english_by_stem() -> None:
    carried = _glossary().carry("¿Cómo anulo las facturas de un tercero en la web?", "es_CO")
    assert [(c.word, c.targets, c.language) for c in carried] == [
        ("facturas", ("invoice",), "en"),
        ("tercero", ("partner", "business"), "en"),
    ]
    assert carried[0].expansion == "[en] invoice"
    assert str(carried[0]) == "facturas → invoice (en)"


def test_an_english_query_is_carried_into_the_translated_languages() -> None:
    carried = _glossary().carry("void the invoices of a partner", "en_US")
    assert [(c.word, c.targets, c.language) for c in carried] == [
        ("invoices", ("factura",), "es"),
        ("partner", ("tercero",), "es"),
    ]
    assert _glossary().carry("facturas", "de_DE") == []
    assert Glossary().carry("facturas", "es_CO") == []


# Raised inside Dagster's own automation tester (AssetSelection.all(include_sources=True)).
@pytest.mark.filterwarnings("ignore::dagster.BetaWarning")
def test_a_language_s_glossary_follows_its_dictionary() -> None:
    import dagster as dg

    from rag_pipeline.definitions import defs
    from rag_pipeline.defs.k_entry.partitions import IDEMPIERE_LANGUAGES
    from rag_pipeline.orchestration.source_registry import AD_METADATA, RAW

    definitions = defs()
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(IDEMPIERE_LANGUAGES, ["en_US", "es_CO"])
        # The automation sensor's previous tick: conditions compare with what it saw then.
        before = dg.evaluate_automation_conditions(defs=definitions, instance=instance)
        assert not before.get_requested_partitions(AD_METADATA.glossary_key)
        # A run of the dictionary's raw stage for one entity type in Spanish.
        instance.report_runless_asset_event(
            dg.AssetMaterialization(AD_METADATA.asset_key(RAW), partition="window|es_CO")
        )
        after = dg.evaluate_automation_conditions(
            defs=definitions, instance=instance, cursor=before.cursor
        )
        assert after.get_requested_partitions(AD_METADATA.glossary_key) == {"es_CO"}
        # The source system is upstream for the lineage; runs of its raw stage refresh it.
        raw = AD_METADATA.asset_key(RAW)
        assert after.get_requested_partitions(raw) == set()
        instance.report_runless_asset_event(dg.AssetMaterialization(raw, partition="tab|en_US"))
        again = dg.evaluate_automation_conditions(
            defs=definitions, instance=instance, cursor=after.cursor
        )
        assert again.get_requested_partitions(AD_METADATA.glossary_key) == {"en_US"}
