"""Rebuild the bundled model's vectors of the sources' vocabulary phrases (`*.vectors.npz`).

Run after editing a vocabulary file: `python -m rag_pipeline.search.vocabulary.build_vectors`.
It writes each declared vocabulary's `vector_languages` beside its files
(`VocabularyFiles.vectors_file`). The bundled MiniLM has no query or passage prefix, so
batch-embedding the phrases as passages gives the vectors `embed_query` gives one at a time.
"""

from rag_pipeline.core.embedding import BUNDLED_MODEL_ID
from rag_pipeline.search.plugins import source_vocabularies
from rag_pipeline.search.vocabulary import Vocabulary
from rag_pipeline.search.vocabulary.phrase_vectors import write_vectors
from rag_pipeline.settings import load_settings
from rag_pipeline.store.runtime import load_embedder


def main() -> None:
    """Write one vectors file per declared vocabulary and language it ships vectors of."""
    settings = load_settings()
    if settings.embedding_model != BUNDLED_MODEL_ID:
        raise SystemExit(f"RAG_EMBEDDING_MODEL must be the bundled {BUNDLED_MODEL_ID}")
    embedder = load_embedder(settings)
    for files in source_vocabularies():
        vocabulary = Vocabulary.load(declared=[files])
        for language in files.vector_languages:
            phrases = sorted({phrase for phrase, _ in vocabulary.phrases(language)})
            vectors = embedder.embed_passages(phrases)
            path = files.vectors_file(language)
            write_vectors(path, BUNDLED_MODEL_ID, phrases, vectors)
            print(f"{path}: {len(phrases)} phrases")  # noqa: T201 (a build tool's report)


if __name__ == "__main__":
    main()
