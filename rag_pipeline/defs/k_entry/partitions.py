"""Partitions of the `k_entry` source: one per language.

Dynamic, not static: the languages are configuration (RAG_LANGUAGES, where `all` is found in
the database), and a static set would freeze them when the code location loads. The same set
is the language dimension of `ad_metadata`, which reads the same setting.
"""

import dagster as dg

IDEMPIERE_LANGUAGES = "idempiere_languages"

k_entry_languages = dg.DynamicPartitionsDefinition(name=IDEMPIERE_LANGUAGES)
