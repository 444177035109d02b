"""Code identifiers in a query: `C_BPartner_ID`, `M_Locator`, `DocStatus`, `getDocStatus`.

The database indexes every identifier of a chunk as the runs of its parts, lower-cased and
joined (`rag.identifier_terms` in migration m003). A query identifier is looked up as all of
its parts joined, so it matches the same identifier verbatim, with other separators
(`MLocator` for `M_Locator`) and inside a longer one (`M_Locator_ID`, `getDocStatus`).
These patterns must stay the same as the migration's.
"""

import re

_IDENTIFIER = re.compile(
    r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+"  # snake_case, C_BPartner_ID
    r"|[A-Za-z][A-Za-z0-9]*[a-z][A-Z][A-Za-z0-9]*"  # camelCase / CamelCase, getDocStatus
    r"|[A-Z]+[A-Z][a-z][A-Za-z0-9]*"  # an acronym run before a word, MLocator
)
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# The migration indexes runs within the first 8 parts of an identifier.
_MAX_PARTS = 8


def identifier_parts(identifier: str) -> list[str]:
    """The lower-cased parts of an identifier: `C_BPartner_ID` -> c, b, partner, id."""
    return [part.lower() for part in _PART.findall(identifier)][:_MAX_PARTS]


def query_identifiers(text: str) -> list[str]:
    """The identifier terms of a query, each all of its parts joined, in order of appearance."""
    terms: list[str] = []
    for match in _IDENTIFIER.finditer(text):
        parts = identifier_parts(match.group(0))
        if len(parts) >= 2:
            term = "".join(parts)
            if term not in terms:
                terms.append(term)
    return terms
