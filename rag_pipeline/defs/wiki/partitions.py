"""Partitions of the `wiki` source: one per configured category, plus `pages` and exports.

Dynamic: categories are configuration (RAG_WIKI_CATEGORIES), and an XML import (`--xml FILE`)
adds its own `export:<path>` partition; a static set would freeze them at code load. Coarse on
purpose: a category holds hundreds of pages, and an unchanged page costs its share of one
`prop=revisions` request inside its partition's run (see `sources/wiki/source.py`).
"""

import dagster as dg

WIKI_PARTITIONS = "wiki_partitions"

wiki_partitions = dg.DynamicPartitionsDefinition(name=WIKI_PARTITIONS)
