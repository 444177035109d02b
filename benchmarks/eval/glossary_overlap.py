"""Which lines of the search vocabulary the dictionary's glossary already says.

    export RAG_HOME=/tmp/eval RAG_LANGUAGES=en_US,es_CO
    rag ingest --source ad_metadata            # builds the glossary too
    python -m benchmarks.eval.glossary_overlap [--fixtures ../shared/fixtures]

An entry is redundant when the glossary maps the same term to the same target: every phrase of
the entry, carried by the glossary into the entry's target language, yields every word of its
target. Entries whose words stay in the query's language (synonyms, everyday words) are never
redundant: the glossary only crosses languages. With `--fixtures` the glossary is aligned
from the shared fixtures' es_CO export (every table it has) instead of the indexed dictionary.
"""

import argparse
import csv
from importlib import resources
from pathlib import Path

from rag_pipeline.core.vocabulary import entry_words, expansion_language, parse_entries
from rag_pipeline.search.glossary import Glossary
from rag_pipeline.sources.idempiere.glossary_alignment import NamePair, align
from rag_pipeline.sources.idempiere.vocabulary import SOURCE_KINDS
from rag_pipeline.store.glossary import GlossaryRow

_TABLES = ("AD_Window", "AD_Process", "AD_Element", "AD_Tab", "AD_Field", "AD_Process_Para")
_FILE_LANGUAGES = {"en": "en_US", "es": "es_CO"}


def fixture_glossary(fixtures: Path) -> Glossary:
    """The glossary aligned from the fixtures' es_CO translation export."""
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
    rows = [
        GlossaryRow("es_CO", "word", w.term, w.target, w.term_stem, w.dice, w.links, w.sources)
        for w in align(pairs, "es_CO", "en_US")
    ]
    return Glossary.from_rows(rows, {"es_CO": "en_US"})


def indexed_glossary() -> Glossary:
    """The glossary stored in the configured index."""
    from rag_pipeline.search.glossary import load_glossary
    from rag_pipeline.settings import load_settings
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.runtime import ready_conninfo

    with connect(ready_conninfo(load_settings())) as conn:
        return load_glossary(conn)


def redundant_lines(glossary: Glossary, language: str, lines: list[str]) -> list[int]:
    """The numbers of the lines of a `language` vocabulary file the glossary says."""
    found: list[int] = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        (entry,) = parse_entries([line], f"line {number}", SOURCE_KINDS)
        tag, words = expansion_language(entry.expansion)
        if tag is None:
            continue
        wanted = set(entry_words(words))
        if all(wanted <= _carried(glossary, phrase, language, tag) for phrase in entry.phrases):
            found.append(number)
    return found


def _carried(glossary: Glossary, phrase: tuple[str, ...], language: str, into: str) -> set[str]:
    carried = glossary.carry(" ".join(phrase), language)
    return {w for c in carried if c.language == into for t in c.targets for w in entry_words(t)}


def main() -> None:
    """Print each vocabulary file's redundant lines and their count."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--fixtures", type=Path, help="align the fixtures' es_CO export instead")
    args = parser.parse_args()
    glossary = fixture_glossary(args.fixtures) if args.fixtures else indexed_glossary()
    folder = resources.files("rag_pipeline.sources.idempiere.vocabulary")
    for name, language in _FILE_LANGUAGES.items():
        lines = (folder / f"{name}.tsv").read_text(encoding="utf-8").splitlines()
        numbers = redundant_lines(glossary, language, lines)
        print(f"{name}.tsv: {len(numbers)} of {len(lines)} lines the glossary says")
        for number in numbers:
            print(f"  {number}: {lines[number - 1]}")


if __name__ == "__main__":
    main()
