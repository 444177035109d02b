"""Word pairs aligned across the dictionary's name pairs: factura → invoice, almacén → warehouse.

Input: the names of one language's `_Trl` rows beside the base row's name ("Facturas y CxP
(Proveedor)" ↔ "Invoice (Vendor)"). Each name is reduced to its content words — folded, less
digits, one-letter words and the language's 50 commonest words (wordfreq: "de", "y", "the", "of")
— and each word to its Snowball stem, so "Factura" and "Facturas" count as one.

Decision: association by the Dice coefficient of two stems over the name pairs (how often
they occur in the same pair against how often each occurs), then *competitive linking*
(Melamed, 2000) inside each pair: candidate links are taken best Dice first, each word linked
at most once, so "factura" takes "invoice" and "proveedor" is left "vendor" rather than both
linking to the commonest English word. Two words that always come together ("Ayuda
Contextual" ↔ "Context Help") tie on Dice; the pair written more alike (cognates) goes first.
When one word is left on each side after that (two one-word names, or the second words of
"Orden de Venta" ↔ "Sales Order"), the two are linked: position-free, as Spanish puts the
noun first. A word pair is kept when it was linked in at least `MIN_LINKS` name pairs, its Dice
is at least `MIN_DICE`, and it holds at least `MIN_SHARE` of the links its translated word
made (a usual translation, not a stray one); a word keeps every target that passes.
"""

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import cache

from rag_pipeline.core.languages import language_prefix
from rag_pipeline.core.stemming import stemmer
from rag_pipeline.core.words import fold

MIN_LINKS = 2
MIN_DICE = 0.2
MIN_SHARE = 0.25
# The language's commonest words (wordfreq), treated as function words.
FUNCTION_WORDS = 50
# Source rows kept per word pair (its lineage; the links count them all).
MAX_SOURCES = 20
_WORD = re.compile(r"[^\W\d_]{2,}")


@dataclass(frozen=True)
class NamePair:
    """One dictionary row's name in the base language and in the translated one."""

    source: str  # the row, as `AD_Window:143`
    base: str
    translated: str


@dataclass(frozen=True)
class WordPair:
    """A translated word and the base-language word it was aligned with."""

    term: str  # the translated word, folded (its commonest form: "factura")
    target: str  # the base-language word, folded ("invoice")
    term_stem: str
    dice: float
    links: int  # name pairs in which the two were linked
    sources: tuple[str, ...]  # the first MAX_SOURCES of those rows


@dataclass(frozen=True)
class _Name:
    stems: tuple[str, ...]
    forms: tuple[str, ...]


@cache
def function_words(language: str) -> frozenset[str]:
    """The commonest words of `language`, folded (empty for a language wordfreq lacks)."""
    from wordfreq import top_n_list

    words = top_n_list(language_prefix(language), FUNCTION_WORDS, wordlist="small")
    return frozenset(fold(word) for word in words)


def content_words(name: str, language: str) -> _Name:
    """The stems of `name`'s content words and the folded words they come from, in order."""
    stem = stemmer(language)
    others = function_words(language)
    seen: dict[str, str] = {}
    for word in _WORD.findall(fold(name)):
        if word not in others:
            seen.setdefault(stem(word), word)
    return _Name(tuple(seen), tuple(seen.values()))


def align(pairs: Iterable[NamePair], language: str, base_language: str) -> list[WordPair]:
    """The word pairs of `pairs` (names in `language` beside `base_language`), by term."""
    names = [
        (
            pair.source,
            content_words(pair.translated, language),
            content_words(pair.base, base_language),
        )
        for pair in pairs
    ]
    names = [(source, src, tgt) for source, src, tgt in names if src.stems and tgt.stems]
    single: Counter[str] = Counter()
    single_target: Counter[str] = Counter()
    joint: Counter[tuple[str, str]] = Counter()
    for _, src, tgt in names:
        single.update(src.stems)
        single_target.update(tgt.stems)
        joint.update((s, t) for s in src.stems for t in tgt.stems)

    def dice(s: str, t: str) -> float:
        return 2 * joint[s, t] / (single[s] + single_target[t])

    links: Counter[tuple[str, str]] = Counter()
    made: Counter[str] = Counter()
    sources: dict[tuple[str, str], list[str]] = defaultdict(list)
    forms: dict[str, Counter[str]] = defaultdict(Counter)
    for source, src, tgt in names:
        for s, t in _link(src.stems, tgt.stems, dice):
            links[s, t] += 1
            made[s] += 1
            if len(sources[s, t]) < MAX_SOURCES:
                sources[s, t].append(source)
        for s, word in zip(src.stems, src.forms, strict=True):
            forms[s][word] += 1
        for t, word in zip(tgt.stems, tgt.forms, strict=True):
            forms["\0" + t][word] += 1
    found = [
        WordPair(
            term=_commonest(forms[s]),
            target=_commonest(forms["\0" + t]),
            term_stem=s,
            dice=round(dice(s, t), 4),
            links=count,
            sources=tuple(sources[s, t]),
        )
        for (s, t), count in links.items()
        if count >= MIN_LINKS and dice(s, t) >= MIN_DICE and count >= MIN_SHARE * made[s]
    ]
    return sorted(found, key=lambda pair: (pair.term, -pair.links, pair.target))


def _link(
    src: Sequence[str], tgt: Sequence[str], dice: Callable[[str, str], float]
) -> list[tuple[str, str]]:
    """Competitive linking inside one name pair, then the last word of each side together."""
    candidates = sorted(
        ((dice(s, t), _similarity(s, t), s, t) for s in src for t in tgt),
        key=lambda c: (-c[0], -c[1], c[2], c[3]),
    )
    linked: list[tuple[str, str]] = []
    left_src, left_tgt = set(src), set(tgt)
    for score, _, s, t in candidates:
        if score > 0 and s in left_src and t in left_tgt:
            linked.append((s, t))
            left_src.discard(s)
            left_tgt.discard(t)
    if len(left_src) == 1 and len(left_tgt) == 1:
        linked.append((left_src.pop(), left_tgt.pop()))
    return linked


def _similarity(a: str, b: str) -> float:
    """How alike two stems are written (cognates: "contextu", "context"): breaks Dice ties."""
    return SequenceMatcher(None, a, b).ratio()


def _commonest(counts: Counter[str]) -> str:
    """The most frequent form; of equally frequent ones the shortest, then the first."""
    best = max(counts.values())
    return min((word for word, n in counts.items() if n == best), key=lambda w: (len(w), w))
