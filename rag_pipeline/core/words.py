"""Which language a query is in, from its words, and the words with which it asks.

Shared text helpers of every layer (`fold`, `function_words`): the search, the vocabularies
the sources declare and the labelled-set checks read words alike.

Queries are short, so statistical detectors trained on documents guess wildly on them; the
languages the index holds are few. Distinctive letters decide first (ñ ¿ ¡ for Spanish, ő ű for
Hungarian, ľ ĺ ŕ ä ô for Slovak); otherwise the share of each language's commonest function
words. A query with neither ("activo fijo", "calcular mrp", "caja menor") is read in the
language whose words it uses most commonly (wordfreq's Zipf scale, averaged over its words),
when that is clearly not English (by `_ZIPF_MARGIN`); else, and with no signal at all, it is
English, the language of the default model and of most documents.
"""

import re
import unicodedata
from functools import cache

from rag_pipeline.core.languages import language_prefix

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)

_LETTERS = {
    "es_CO": set("ñ¿¡"),
    "hu_HU": set("őű"),
    "sk_SK": set("ľĺŕäôčďňšťž"),
}


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_FUNCTION_WORDS = {
    "en_US": _words(
        "the a an of to in is are how do does what which where why when can i my "
        "with for on from and or not this that it be"
    ),
    "es_CO": _words(
        "el la los las un una de del que en es son cómo como qué cuál dónde por para con "
        "se y o no al lo su sus puedo debo hay esta este donde cual cuales cuando"
    ),
    "hu_HU": _words("a az egy és hogy nem van mi mit hol hogyan melyik meg is ez azt"),
    "sk_SK": _words("a je sú ako čo kde prečo na sa v vo z zo pre do ten táto"),
}
_ACCENTS_ES = set("áéíóú")


def detect_language(text: str, default: str = "en_US") -> str:
    """An iDempiere language code (en_US, es_CO, hu_HU, sk_SK) for a query."""
    lowered = text.lower()
    letters = set(lowered)
    for language, marks in _LETTERS.items():
        if letters & marks:
            return language
    words = _WORD.findall(lowered)
    if not words:
        return default
    scores = {
        language: sum(1 for word in words if word in vocabulary)
        for language, vocabulary in _FUNCTION_WORDS.items()
    }
    if letters & _ACCENTS_ES:
        scores["es_CO"] += 1
    best = max(scores, key=lambda language: (scores[language], language == default))
    if scores[best] > 0:
        return best
    return _by_word_frequency(words, default)


# How much more common (Zipf, averaged over the query's words) another language's words must be
# than English for a query without letters or function words to be read in that language: 1.0
# is ten times. "activo fijo" is Spanish (4.5 against 1.8), "balance general" stays English.
_ZIPF_MARGIN = 1.0
_WORDFREQ_CODES = {"en_US": "en", "es_CO": "es", "hu_HU": "hu", "sk_SK": "sk"}


def _by_word_frequency(words: list[str], default: str) -> str:
    from wordfreq import zipf_frequency  # 0.1 s to import, 10 ms per small list: only when needed

    def common(language: str) -> float:
        code = _WORDFREQ_CODES[language]
        return sum(zipf_frequency(word, code, wordlist="small") for word in words) / len(words)

    english = common("en_US")
    scores = {language: common(language) for language in _WORDFREQ_CODES if language != "en_US"}
    best = max(scores, key=lambda language: scores[language])
    return best if scores[best] >= english + _ZIPF_MARGIN else default


# The words people ask with, whatever they ask about: "where do I create a new ...", "how do
# I set up ...", "¿dónde registro ...?". They say little about which entity is meant, but the
# dictionary's titles are full of them ("Create ...", "Crear ..."), so the keyword leg counts
# them at a lower weight (Ranking.request_word_weight). Stemmed with the query's config.
_REQUEST_WORDS = {
    "en": "create add new enter set setup configure define register record maintain manage "
    "see view find show use change make do get system want need",
    "es": "crear creo cree agregar agrego nuevo nueva ingresar ingreso registrar registro "
    "configurar configuro definir defino manejar manejo ver veo buscar busco hacer hago usar "
    "uso sistema quiero necesito puedo",
}


@cache
def function_words(language: str) -> frozenset[str]:
    """The commonest function words of `language` ("the", "de", "cómo"), folded (see `fold`);
    empty for a language without a list."""
    prefix = language_prefix(language)
    return frozenset(
        fold(word)
        for code, words in _FUNCTION_WORDS.items()
        if language_prefix(code) == prefix
        for word in words
    )


# Words the keyword leg leaves out of a query, beside its text-search config's stop words:
# Spanish words for what English's list already drops ("each", "only", "own", "same", "such",
# "here", "then", "now", "both"). Without them "¿... solo vean ... su propia sucursal?" found
# every help text saying "solamente" (stem 'sol'). Folded (see `fold`).
_QUERY_STOP_WORDS = {
    "es": "cada solo solamente unicamente propio propia propios propias mismo misma mismos mismas "
    "tal tales aqui alli ahi entonces luego ahora ambos ambas",
}


def query_stop_words(text: str, language: str) -> list[str]:
    """The words the keyword leg drops from `text` in `language`, besides its config's; none
    when they are all the query has ("solo" alone is searched as typed)."""
    stops = _QUERY_STOP_WORDS.get(language_prefix(language), "").split()
    words = re.findall(r"\w+", fold(text))
    return [] if all(word in stops for word in words) else stops


def request_words(language: str) -> str:
    """The words a query in `language` asks with ('' for a language without a list)."""
    return _REQUEST_WORDS.get(language_prefix(language), "")


def fold(text: str) -> str:
    """`text` lowercased, without accents or other combining marks, compatibility forms
    unified ("Cálculo" -> "calculo", full-width "ＣＳＶ" -> "csv"): how query words are matched
    against word lists here and in the search vocabulary."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))
