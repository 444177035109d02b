"""Where each bundled vocabulary entry's iDempiere words come from: found, written, checked.

    python -m benchmarks.eval.vocabulary_sources [--fixtures DIR] [--write]

A maintainer's tool. It reads the real iDempiere text of the shared fixtures (`DIR`, default
`../shared/fixtures` beside the repository; see its README): the dictionary's windows,
processes, elements, tabs, fields and process parameters in English and es_CO, and the wiki
pages of `wiki/docs_md`. For every entry of `en.tsv` and `es.tsv` it looks for the most
specific text holding the entry's iDempiere words (whole words, ignoring case and accents,
singular or plural, as the loader matches them; function words aside), in this order:

1. a dictionary name that is those words ("warehouse locator": window Warehouse & Locators);
2. the shortest dictionary name holding them all;
3. a wiki page holding them all close together (`_NEARBY`), the page where they are so most
   often;
4. a dictionary row whose description or help holds them all close together;
5. two dictionary names, each holding a run of the words ("cash journal cashbook": window
   Cash Journal; window Cashbook);
6. a wiki page holding them all, wherever;
7. names for the words names hold and a row or page for the others.

A Spanish entry's words are looked up in the es_CO translation, then in English (some are
English terms, "hikaricp"); words tagged `[en]` in English. The tool prints the count of
sources per kind and the entries with none: words in no name or text of the dictionary or
the wiki, which are not iDempiere's. `--write` puts the sources in each entry's third column;
an entry keeps the sources it has while they still check, so a source chosen by hand stays.
`check` is what rag_pipeline_tests/test_vocabulary_sources.py asserts of every entry: each
named row or page exists, and together they hold the entry's words.
"""

import argparse
import csv
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from rag_pipeline.core.vocabulary import (
    SOURCE_SEPARATOR,
    Source,
    entry_words,
    expansion_language,
    parse_entries,
    parse_sources,
    singular_forms,
)
from rag_pipeline.core.words import function_words
from rag_pipeline.sources.idempiere.vocabulary import SOURCE_KINDS

REPO = Path(__file__).resolve().parents[2]
VOCABULARY = REPO / "rag_pipeline" / "sources" / "idempiere" / "vocabulary"
DEFAULT_FIXTURES = REPO.parent / "shared" / "fixtures"
BUNDLED = ("en", "es")

# Dictionary CSV file stem per source kind, in both fixture folders.
_TABLES = {
    "window": "ad_window",
    "process": "ad_process",
    "element": "ad_element",
    "tab": "ad_tab",
    "field": "ad_field",
    "parameter": "ad_process_para",
}
# In a long text, the words of an entry count as held when they all stand within this many
# words of each other beyond their own number: "on hand quantity" in one sentence of a page,
# not "on" in its first paragraph and "quantity" in its last.
_NEARBY = 6
# Words that take more names than this to hold come from a page holding them all, if any:
# "tenant key name copy template" is the wiki's Copy or Move Tenant, not five names.
_FEW_NAMES = 2


@dataclass(frozen=True)
class Named:
    """One thing a source can name: a dictionary row or a wiki page, with its text."""

    source: Source
    language: str
    text: str

    @cached_property
    def name_words(self) -> tuple[str, ...]:
        return entry_words(self.source.name)

    @cached_property
    def name_forms(self) -> frozenset[str]:
        return _forms(self.name_words)

    @cached_property
    def text_words(self) -> tuple[str, ...]:
        return entry_words(self.text)

    @cached_property
    def text_forms(self) -> frozenset[str]:
        return _forms(self.text_words)


def _forms(words: Iterable[str]) -> frozenset[str]:
    """Every singular form of every word (`singular_forms`, as the loader reads plurals)."""
    return frozenset(form for word in words for form in singular_forms(word))


def _same(word: str, other: str) -> bool:
    return bool(singular_forms(word) & singular_forms(other))


def key_words(expansion: str, language: str) -> tuple[tuple[str, ...], str]:
    """An entry's iDempiere words without function words (all when nothing else is left), and
    the language they are written in."""
    tag, text = expansion_language(expansion)
    language = tag or language
    words = entry_words(text)
    others = function_words(language)
    content = tuple(word for word in words if word not in others)
    return content or words, language


def _read_csv(path: Path) -> Iterator[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        yield from csv.DictReader(handle)


def _row_text(row: dict[str, str]) -> tuple[str, str]:
    """A dictionary row's name and its name, description and help as one text."""
    lowered = {key.lower(): value or "" for key, value in row.items()}
    name = " ".join(lowered.get("name", "").split())
    return name, " \n".join(lowered.get(key, "") for key in ("name", "description", "help"))


def dictionary(fixtures: Path, language: str) -> list[Named]:
    """The dictionary rows of the fixtures in `language` (en: the base text, es: es_CO)."""
    found: list[Named] = []
    for kind, table in _TABLES.items():
        if language == "en":
            paths = [fixtures / "ad" / "core_es_CO" / f"{table}.csv"]
            paths.append(fixtures / "ad" / "from_migrations" / f"{table}.csv")
        else:
            paths = [fixtures / "ad" / "core_es_CO" / f"{table}_trl_es_CO.csv"]
        for path in paths:
            for row in _read_csv(path):
                name, text = _row_text(row)
                if name:
                    found.append(Named(Source(kind, name), language, text))
    return found


def wiki_title(entry: dict[str, str], markdown: str) -> str:
    """A page's wiki title; for a developer guide not migrated from the wiki, its own."""
    title = entry.get("wiki_title") or entry.get("frontmatter_title")
    if title:
        return title
    heading = re.search(r"^# (.+)$", markdown, re.MULTILINE)
    return heading.group(1).strip() if heading else Path(entry["file"]).stem


def wiki_pages(fixtures: Path) -> list[Named]:
    """The wiki pages of the fixtures (English), by title; two files of one title are one."""
    folder = fixtures / "wiki"
    texts: dict[str, str] = {}
    with (folder / "docs_md_manifest.jsonl").open(encoding="utf-8") as manifest:
        for line in manifest:
            entry: dict[str, str] = json.loads(line)
            markdown = (folder / entry["file"]).read_text(encoding="utf-8")
            title = wiki_title(entry, markdown)
            texts[title] = texts.get(title, "") + "\n" + markdown
    return [Named(Source("wiki", title), "en", text) for title, text in sorted(texts.items())]


@dataclass(frozen=True)
class Corpus:
    """What sources may name: the fixtures' dictionary rows and wiki pages."""

    fixtures: Path

    @cached_property
    def _by_language(self) -> dict[str, list[Named]]:
        return {
            "en": dictionary(self.fixtures, "en") + wiki_pages(self.fixtures),
            "es": dictionary(self.fixtures, "es"),
        }

    def named(self, language: str) -> list[Named]:
        """What the words of `language` may come from: its own rows first, then English ones
        (a Spanish entry may expand to English terms, "hikaricp", "display logic")."""
        own = self._by_language.get(language, [])
        return own if language == "en" else own + self._by_language["en"]

    @cached_property
    def _by_source(self) -> dict[Source, list[Named]]:
        found: dict[Source, list[Named]] = {}
        for items in self._by_language.values():
            for item in items:
                found.setdefault(item.source, []).append(item)
        return found

    def lookup(self, source: Source, language: str) -> list[Named]:
        """The rows or pages `source` names among those `named(language)` holds."""
        allowed = {language, "en"}
        return [item for item in self._by_source.get(source, []) if item.language in allowed]


def _nearby(words: Iterable[str], item: Named) -> int:
    """How many places of the item's text hold every word of `words` within `_NEARBY` words."""
    words = tuple(words)
    if not all(singular_forms(word) & item.text_forms for word in words):
        return 0
    span = len(words) + _NEARBY
    text = item.text_words
    places = [[i for i, word in enumerate(text) if _same(wanted, word)] for wanted in words]
    count = 0
    for start in places[0]:
        if all(any(abs(i - start) < span for i in others) for others in places[1:]):
            count += 1
    return count


def _least(words: Iterable[str], item: Named) -> int:
    """How often the item's text holds the rarest of `words` there (0: not all are)."""
    counts = [sum(1 for word in item.text_words if _same(wanted, word)) for wanted in words]
    return min(counts, default=0)


def _in_name(words: Iterable[str], item: Named) -> set[str]:
    """The words of `words` the item's name holds."""
    return {word for word in words if singular_forms(word) & item.name_forms}


def holds(item: Named, words: Iterable[str]) -> set[str]:
    """The words of `words` a row's name, description or help, or a page, holds."""
    return {word for word in words if singular_forms(word) & (item.name_forms | item.text_forms)}


def _equal(words: tuple[str, ...], item: Named) -> bool:
    return len(item.name_words) == len(words) and all(
        _same(a, b) for a, b in zip(item.name_words, words, strict=True)
    )


def _order(language: str) -> Callable[[Named], tuple[bool, int, int, str]]:
    """Sort key of rows: the words' language first, then the shortest name, then by kind."""
    rank = {kind: n for n, kind in enumerate(SOURCE_KINDS)}

    def order(item: Named) -> tuple[bool, int, int, str]:
        kind = rank[item.source.kind]
        return (item.language != language, len(item.name_words), kind, item.source.name)

    return order


def _best_page(
    words: tuple[str, ...], pages: list[Named], count: Callable[[tuple[str, ...], Named], int]
) -> Named | None:
    """The page of the highest `count` of `words` (None: every count is 0)."""
    counted = [(count(words, page), page) for page in pages]
    counted = [(n, page) for n, page in counted if n]
    if not counted:
        return None
    return min(counted, key=lambda found: (-found[0], found[1].source.name))[1]


def find_one(words: tuple[str, ...], items: list[Named], language: str) -> Named | None:
    """The most specific row or page holding all `words` close together, or None: a name that
    is the words, the shortest name holding them, a page, a row's description or help."""
    order = _order(language)
    rows = [item for item in items if item.source.kind != "wiki"]
    equal = [item for item in rows if _equal(words, item)]
    if equal:
        return min(equal, key=order)
    named = [item for item in rows if len(_in_name(words, item)) == len(words)]
    if named:
        return min(named, key=order)
    page = _best_page(words, [item for item in items if item.source.kind == "wiki"], _nearby)
    if page is not None:
        return page
    described = [item for item in rows if _nearby(words, item)]
    return min(described, key=order) if described else None


def _named_by(
    words: tuple[str, ...], rows: list[Named], language: str
) -> tuple[Named, bool] | None:
    """The row whose name is `words` (True) or else the shortest holding them (False)."""
    order = _order(language)
    equal = [item for item in rows if _equal(words, item)]
    if equal:
        return min(equal, key=order), True
    named = [item for item in rows if len(_in_name(words, item)) == len(words)]
    return (min(named, key=order), False) if named else None


def _segments(words: tuple[str, ...], rows: list[Named], language: str) -> list[Named] | None:
    """Names for `words` cut into the fewest runs, each held by a name, runs that are a name
    preferred ("business partner open items": Business Partner, Open Items); None if a word
    is in no name."""
    # best[i]: (runs, runs not a name, the rows) for words[:i].
    nothing: list[Named] = []
    best: list[tuple[int, int, list[Named]] | None] = [(0, 0, nothing)]
    best += [None] * len(words)
    for end in range(1, len(words) + 1):
        for start in range(end):
            before = best[start]
            found = _named_by(words[start:end], rows, language) if before else None
            if before is None or found is None:
                continue
            item, equal = found
            candidate = (before[0] + 1, before[1] + (not equal), [*before[2], item])
            here = best[end]
            if here is None or candidate[:2] < here[:2]:
                best[end] = candidate
    last = best[-1]
    return last[2] if last else None


def find(words: tuple[str, ...], items: list[Named], language: str) -> tuple[Source, ...]:
    """Where `words` come from: one row or page holding them all (`find_one`); else, when
    two dictionary names hold every word, those (`_segments`); else a page holding them all
    apart; else names for what they hold and a row or page for the rest. () when a word is
    in no name or text at all: not iDempiere's."""
    one = find_one(words, items, language)
    if one is not None:
        return (one.source,)
    rows = [item for item in items if item.source.kind != "wiki"]
    pages = [item for item in items if item.source.kind == "wiki"]
    nameless = tuple(word for word in words if not any(_in_name((word,), row) for row in rows))
    named = tuple(word for word in words if word not in nameless)
    names = _segments(named, rows, language) or []
    if not nameless and len(names) <= _FEW_NAMES:
        return tuple(dict.fromkeys(item.source for item in names))
    page = _best_page(words, pages, _least)
    if page is not None:
        return (page.source,)
    if not nameless:
        return tuple(dict.fromkeys(item.source for item in names))
    rest = find_one(nameless, items, language) or _best_page(nameless, pages, _least)
    if rest is None:
        return ()
    return tuple(dict.fromkeys(item.source for item in [*names, rest]))


def check(sources: tuple[Source, ...], expansion: str, language: str, corpus: Corpus) -> str | None:
    """What is wrong with an entry's sources (None: each exists, and together they hold the
    entry's words)."""
    words, language = key_words(expansion, language)
    held: set[str] = set()
    for source in sources:
        items = corpus.lookup(source, language)
        if not items:
            return f"no {source.kind} named {source.name!r} in the fixtures"
        found = {word for item in items for word in holds(item, words)}
        if not found:
            return f"{source} holds none of {' '.join(words)!r}"
        held |= found
    missing = [word for word in words if word not in held]
    if missing:
        return f"no source holds {' '.join(missing)!r}"
    return None


def source_lines(path: Path, language: str, corpus: Corpus) -> tuple[list[str], list[str]]:
    """The file's lines with sources on each entry found some, and the entries without."""
    out: list[str] = []
    missing: list[str] = []
    for text in path.read_text(encoding="utf-8").splitlines():
        if not text.strip() or text.lstrip().startswith("#"):
            out.append(text)
            continue
        fields = text.split("\t")
        users, expansion = fields[0], " ".join(fields[1].split())
        kept = parse_sources(fields[2], SOURCE_KINDS) if len(fields) > 2 else ()
        if kept and check(kept, expansion, language, corpus) is None:
            sources = kept
        else:
            words, words_language = key_words(expansion, language)
            sources = find(words, corpus.named(words_language), words_language)
        if sources:
            out.append(f"{users}\t{expansion}\t{SOURCE_SEPARATOR.join(map(str, sources))}")
        else:
            missing.append(f"{users}\t{expansion}")
            out.append(f"{users}\t{expansion}")
    return out, missing


def main() -> None:
    parser = argparse.ArgumentParser(description="Find, check and write vocabulary sources.")
    parser.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
    parser.add_argument("--write", action="store_true", help="write the sources into the files")
    args = parser.parse_args()
    if not (args.fixtures / "ad").is_dir():
        raise SystemExit(f"{args.fixtures}: no shared fixtures here; pass --fixtures DIR")
    corpus = Corpus(args.fixtures)
    for language in BUNDLED:
        path = VOCABULARY / f"{language}.tsv"
        lines, missing = source_lines(path, language, corpus)
        entries = parse_entries(lines, path.name, SOURCE_KINDS)
        kinds = Counter(source.kind for entry in entries for source in entry.sources)
        sizes = Counter(len(entry.sources) for entry in entries if entry.sources)
        print(
            f"{path.name}: {len(entries) - len(missing)} entries with sources, "
            f"sources per kind {dict(kinds.most_common())}, "
            f"entries per number of sources {dict(sorted(sizes.items()))}; "
            f"{len(missing)} without a source"
        )
        for entry in missing:
            print(f"  {entry}")
        if args.write:
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
