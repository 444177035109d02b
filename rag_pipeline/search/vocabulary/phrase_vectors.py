"""The vocabulary's user phrases as vectors: a question worded like no phrase can be close to one.

The vocabulary matches its phrases as typed, or their stems close together. "I want to be
warned automatically whenever something happens in the data, for example sales orders left in
draft for more than a week" holds no phrase of the Alert entries, yet its vector lies close to
"alert schedule" (cosine 0.53, an Alert Processor entry). For a query
of four words or more in a language the model knows, the search adds the entry of the phrase
closest to the query's vector when their cosine reaches RAG_SEARCH_VOCABULARY_SIMILARITY, as
if one query word had named it (`Searcher.similar_entry`). The model reads the entry's words
too, unless the phrase shares exactly one word with the query: then the two are close mostly
through that word ("product with several vendors" for "where do I maintain customers and
vendors"), and only the keyword leg weighs the entry, among the words typed.

Only phrases of two words or more take part: one word alone says too little to be compared
with a question. The vectors of a source's phrases for the bundled model ship with its
vocabulary files (`<language>.vectors.npz`, `VocabularyFiles.vectors_file`, float16, rebuilt by
`python -m rag_pipeline.search.vocabulary.build_vectors` after a vocabulary file changes; a
test fails while it is stale), so a cold `rag search` only reads them. Phrases they lack —
added from RAG_SEARCH_VOCABULARY_DIR, or all of them for another model — are embedded on
first use in their language and kept under RAG_HOME for the next process.
"""

import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

logger = logging.getLogger(__name__)

Embed = Callable[[str], NDArray[np.float32]]


@dataclass(frozen=True)
class SimilarEntry:
    """The vocabulary phrase closest to a query and the iDempiere words of its entry."""

    phrase: str
    expansion: str
    similarity: float
    shared_words: int = 0  # the phrase's words, other than function words, the query holds


def read_vectors(path: Path, model_id: str) -> tuple[list[str], NDArray[np.float32]]:
    """The phrases and their vectors (one row each) of a vectors file made for `model_id`;
    none when the file is absent, unreadable or another model's."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["model_id"]) == model_id:
                # tolist() first: iterating numpy strings cost a cold search 8 ms more.
                phrases = [str(p) for p in data["phrases"].tolist()]
                return phrases, np.asarray(data["vectors"], dtype=np.float32)
    except (OSError, KeyError, ValueError):
        pass
    return [], np.zeros((0, 0), np.float32)


def write_vectors(
    path: Path, model_id: str, phrases: Sequence[str], vectors: NDArray[np.float32]
) -> None:
    """Write phrases and their vectors (float16, uncompressed: read in milliseconds) atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".npz")
    try:
        with os.fdopen(handle, "wb") as out:
            np.savez(
                out,
                model_id=np.array(model_id),
                phrases=np.array(list(phrases), dtype=str),
                vectors=vectors.astype(np.float16),
            )
        os.chmod(temporary, 0o644)  # mkstemp's 0600 would ship in the package
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class PhraseVectors:
    """The vectors of one vocabulary's phrases, per language, loaded on first use."""

    def __init__(
        self,
        phrases: Callable[[str], Sequence[tuple[str, str]]],
        embed: Embed,
        model_id: str,
        cache_dir: Path | None,
        bundled: Callable[[str], Sequence[Path]] = lambda language: (),
    ) -> None:
        """`phrases(language)` gives (phrase, expansion) pairs; `embed` the model's vectors;
        `bundled(language)` the vectors files shipped for the language's phrases.

        `cache_dir` keeps the vectors of phrases the package does not ship (None: kept in
        memory only).
        """
        self._phrases = phrases
        self._embed = embed
        self._model_id = model_id
        self._cache_dir = cache_dir
        self._bundled = bundled
        self._lock = threading.Lock()
        self._loaded: dict[str, tuple[list[tuple[str, str]], NDArray[np.float32]]] = {}

    def closest(
        self, language: str, vector: NDArray[np.float32], threshold: float
    ) -> SimilarEntry | None:
        """The entry of the phrase of `language` closest to `vector`, if its cosine reaches
        `threshold` (vectors are normalised, so the dot product is the cosine)."""
        pairs, matrix = self._load(language)
        if not pairs:
            return None
        similarities = matrix @ vector
        best = int(np.argmax(similarities))
        similarity = float(similarities[best])
        if similarity < threshold:
            return None
        phrase, expansion = pairs[best]
        return SimilarEntry(phrase, expansion, similarity)

    def _load(self, language: str) -> tuple[list[tuple[str, str]], NDArray[np.float32]]:
        with self._lock:
            loaded = self._loaded.get(language)
            if loaded is None:
                loaded = self._build(language)
                self._loaded[language] = loaded
            return loaded

    def _build(self, language: str) -> tuple[list[tuple[str, str]], NDArray[np.float32]]:
        pairs = list(self._phrases(language))
        if not pairs:
            return [], np.zeros((0, 0), np.float32)
        wanted = {phrase for phrase, _ in pairs}
        phrases: list[str] = []
        blocks: list[NDArray[np.float32]] = []

        def add(found: tuple[list[str], NDArray[np.float32]]) -> dict[str, int]:
            if found[0]:
                phrases.extend(found[0])
                blocks.append(found[1])
            return {phrase: row for row, phrase in enumerate(phrases)}

        rows: dict[str, int] = {}
        for path in self._bundled(language):
            rows = add(read_vectors(path, self._model_id))
        cache = self._cache_file(language)
        if cache is not None and not wanted <= rows.keys():
            rows = add(read_vectors(cache, self._model_id))
        missing = sorted(wanted - rows.keys())
        if missing:
            logger.info("embedding %d vocabulary phrases (%s)", len(missing), language)
            rows = add((missing, np.stack([self._embed(phrase) for phrase in missing])))
        matrix = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
        if missing and cache is not None:
            kept = sorted(wanted)
            try:
                write_vectors(cache, self._model_id, kept, matrix[[rows[p] for p in kept]])
            except OSError as exc:
                logger.warning("cannot keep the vocabulary's vectors in %s: %s", cache, exc)
        return pairs, matrix[[rows[phrase] for phrase, _ in pairs]].astype(np.float32)

    def _cache_file(self, language: str) -> Path | None:
        if self._cache_dir is None:
            return None
        model = hashlib.sha256(self._model_id.encode()).hexdigest()[:16]
        return self._cache_dir / f"{model}-{language}.npz"
