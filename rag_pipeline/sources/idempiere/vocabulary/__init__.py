"""The iDempiere search vocabulary: everyday words -> the names iDempiere gives the same things.

Users ask for a "supplier", a "bin" or "who changed this field"; iDempiere calls them Business
Partner (or Vendor), Locator and Change Audit. `en.tsv` and `es.tsv` map such words to
iDempiere's; `en.vectors.npz` holds the bundled model's vectors of their English phrases
(rebuilt by `python -m rag_pipeline.search.vocabulary.build_vectors`). The search engine
loads the vocabularies every source declares (`search/plugins.py`) and reads them as
`rag_pipeline.search.vocabulary` describes; this package only declares its files.
"""

from rag_pipeline.core.vocabulary import VocabularyFiles

# What an entry's source column may name: a dictionary window, process, element, tab, field or
# process parameter by its name, or a wiki page by its title.
SOURCE_KINDS = ("window", "process", "element", "tab", "field", "parameter", "wiki")

VOCABULARIES = (
    VocabularyFiles(package=__name__, source_kinds=SOURCE_KINDS, vector_languages=("en",)),
)
