"""Rebuild the bundled model's vectors of the bundled vocabulary phrases (`*.vectors.npz`).

Run after editing a vocabulary file: `python -m rag_pipeline.search.vocabulary.build_vectors`.
The bundled MiniLM has no query or passage prefix, so batch-embedding the phrases as passages
gives the vectors `embed_query` gives one at a time.
"""

from rag_pipeline.core.embedding import BUNDLED_MODEL_ID
from rag_pipeline.operations.runtime import load_embedder
from rag_pipeline.search.vocabulary import Vocabulary
from rag_pipeline.search.vocabulary.phrase_vectors import (
    BUNDLED_LANGUAGES,
    bundled_file,
    write_vectors,
)
from rag_pipeline.settings import load_settings


def main() -> None:
    """Write one vectors file per language of BUNDLED_LANGUAGES."""
    settings = load_settings()
    if settings.embedding_model != BUNDLED_MODEL_ID:
        raise SystemExit(f"RAG_EMBEDDING_MODEL must be the bundled {BUNDLED_MODEL_ID}")
    embedder = load_embedder(settings)
    vocabulary = Vocabulary.load()
    for language in BUNDLED_LANGUAGES:
        phrases = sorted({phrase for phrase, _ in vocabulary.phrases(language)})
        vectors = embedder.embed_passages(phrases)
        write_vectors(bundled_file(language), BUNDLED_MODEL_ID, phrases, vectors)
        print(f"{bundled_file(language)}: {len(phrases)} phrases")  # noqa: T201 (a build tool's report)


if __name__ == "__main__":
    main()
