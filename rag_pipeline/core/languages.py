"""Languages: iDempiere codes (en_US, sk_SK, hu_HU) to PostgreSQL text-search configurations."""

# PostgreSQL ships stemmers for these; Slovak has none, so it (and anything unknown) uses
# 'simple', which still matches whole words.
TS_CONFIGS = {
    "en": "english",
    "hu": "hungarian",
    "de": "german",
    "es": "spanish",
    "fr": "french",
    "it": "italian",
    "nl": "dutch",
    "pt": "portuguese",
    "ru": "russian",
    "sv": "swedish",
}
DEFAULT_LANGUAGE = "en_US"


def language_prefix(language: str) -> str:
    """The language of a code without its region: `en_US`, `en-GB` and `EN` give `en`."""
    return language.split("_")[0].split("-")[0].lower()


def ts_config_for(language: str) -> str:
    """The text-search configuration for a language code like `en_US`, `hu` or `sk_SK`."""
    return TS_CONFIGS.get(language_prefix(language), "simple")
