"""The search vocabulary read from its cache under RAG_HOME is the one read from the files.

A cold `rag search` reads the parsed entries and the stemmed phrases from
`core/vocabulary_cache.py`'s file instead of parsing and stemming again; it must match exactly
what the files give, and a cache that is stale, damaged or unwritable must never change it.
"""

import json
import shutil
import sys
from pathlib import Path

import pytest

import rag_pipeline.search.vocabulary as vocabulary_module
from rag_pipeline.core.vocabulary_cache import VocabularyCache, cache_key
from rag_pipeline.search.plugins import source_vocabularies
from rag_pipeline.search.vocabulary import Vocabulary

pytestmark = pytest.mark.unit

CACHE = "vocabulary.json"


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """A cache file holding both languages' stems, and the state of the files' vocabulary."""
    folder = tmp_path_factory.mktemp("cache")
    _state(Vocabulary.load(cache_dir=folder))
    return folder / CACHE, _state(Vocabulary.load())


def _state(vocabulary: Vocabulary) -> dict[str, object]:
    """Everything a vocabulary matches with, its stems of both languages included."""
    for prefix in ("en", "es"):
        vocabulary.expansions("warm up the stems", prefix)
    return {
        "by_first": vocabulary._by_first,
        "phrases": vocabulary._phrases,
        "stemmed": vocabulary._stemmed,
        "user_words": vocabulary._user_words,
    }


def _queries() -> list[tuple[str, str]]:
    """Queries in both languages: every 20th bundled phrase as typed, in the plural, in
    reverse order with words between, with a negation; and whole questions."""
    found: list[tuple[str, str]] = []
    for files in source_vocabularies():
        for item in files.tsv_files():
            language = item.name.removesuffix(".tsv")
            lines = item.read_text(encoding="utf-8").splitlines()
            for line in lines[::20]:
                if not line.strip() or line.startswith("#"):
                    continue
                phrase = line.split("\t")[0].split("|")[0]
                words = phrase.split()
                found += [
                    (phrase, language),
                    (" ".join(w + "s" for w in words), language),
                    (" the ".join(reversed(words)) + " for our company", language),
                    (f"not {phrase} in the new version", language),
                ]
    found += [
        ("Where do I record a new supplier and their bank account?", "en_US"),
        ("move the attachments to a disk and shrink the database", "en_US"),
        ("¿Cómo registro las órdenes de venta de un tercero?", "es_CO"),
        ("la mercancía que llegó del proveedor ayer", "es_CO"),
    ]
    return found


def _behaviour(vocabulary: Vocabulary, queries: list[tuple[str, str]]) -> list[object]:
    return [
        (
            vocabulary.expansions(text, language),
            vocabulary.named(text, language),
            [vocabulary.knows(word, language) for word in text.split()],
        )
        for text, language in queries
    ]


def test_a_vocabulary_from_the_cache_matches_the_one_from_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_files = Vocabulary.load()
    first = Vocabulary.load(cache_dir=tmp_path)  # parses, stems and keeps them
    queries = _queries()
    assert len(queries) > 400
    expected = _behaviour(from_files, queries)
    assert _behaviour(first, queries) == expected
    assert _state(first) == _state(from_files)

    # The next process parses and stems nothing: both come from the cache, unchanged.
    def refused(*args: object) -> object:
        raise AssertionError("read from the files, not from the cache")

    monkeypatch.setattr(vocabulary_module, "parse_entries", refused)
    monkeypatch.setattr(vocabulary_module, "_stem_phrases", refused)
    cached = Vocabulary.load(cache_dir=tmp_path)
    assert _state(cached) == _state(from_files)
    assert _behaviour(cached, queries) == expected
    assert cached.phrases("es_CO") == from_files.phrases("es_CO")
    assert cached.shared_words("stock count", "counting stock", "en") == 2


def test_a_changed_vocabulary_file_is_read_again(tmp_path: Path) -> None:
    folder, cache = tmp_path / "words", tmp_path / "cache"
    folder.mkdir()
    (folder / "en.tsv").write_text("widget factory\tproduction\n", encoding="utf-8")
    assert Vocabulary.load(folder, cache_dir=cache).expansion("widget factory", "en") == (
        "production"
    )
    (folder / "en.tsv").write_text("widget factory\tmanufacturing order\n", encoding="utf-8")
    again = Vocabulary.load(folder, cache_dir=cache)
    assert again.expansion("widget factory", "en") == "manufacturing order"
    assert again.expansion("the widget factories", "en") == "manufacturing order"
    (folder / "en.tsv").unlink()
    bundled = Vocabulary.load(folder)
    assert bundled.expansion("widget factory", "en") != "manufacturing order"
    assert _state(Vocabulary.load(folder, cache_dir=cache)) == _state(bundled)


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    head, _, body = data.partition(b"\n")
    header = json.loads(head)
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "a byte changed":
        at = body.index(b"vendor")
        path.write_bytes(head + b"\n" + body[:at] + b"x" + body[at + 1 :])
    elif how == "another key":
        path.write_bytes(json.dumps(header | {"key": "0" * 64}).encode() + b"\n" + body)
    elif how == "not JSON":
        path.write_bytes(b"\x80\x04\x95 not json at all")
    elif how == "empty":
        path.write_bytes(b"")
    else:  # intact and keyed, but of another shape: a list where strings belong
        shaped = json.loads(body)
        shaped["entries"]["en"][0] = [["supplier"], "business partner"]
        new = json.dumps(shaped).encode()
        header["sha256"] = VocabularyCache.digest(new)
        path.write_bytes(json.dumps(header).encode() + b"\n" + new)


@pytest.mark.parametrize(
    "how",
    ["truncated", "a byte changed", "another key", "not JSON", "empty", "another shape"],
)
def test_a_damaged_cache_is_rebuilt_not_trusted(
    tmp_path: Path, how: str, kept: tuple[Path, dict[str, object]]
) -> None:
    path = tmp_path / CACHE
    shutil.copy(kept[0], path)
    _damage(path, how)
    rebuilt = Vocabulary.load(cache_dir=tmp_path)
    assert _state(rebuilt) == kept[1]
    assert rebuilt.expansion("Where do I add a new supplier?", "en_US") == (
        "business partner vendor"
    )
    # Rebuilt and written again: the next process reads it.
    assert rebuilt._cache is not None
    assert VocabularyCache(path, rebuilt._cache.key).read() is not None


def test_damaged_stems_are_made_again(tmp_path: Path, kept: tuple[Path, dict[str, object]]) -> None:
    path = tmp_path / CACHE
    shutil.copy(kept[0], path)
    head, _, body = path.read_bytes().partition(b"\n")
    shaped = json.loads(body)
    shaped["stemmed"]["en"][0] = "only one field"
    new = json.dumps(shaped).encode()
    header = json.loads(head) | {"sha256": VocabularyCache.digest(new)}
    path.write_bytes(json.dumps(header).encode() + b"\n" + new)
    assert _state(Vocabulary.load(cache_dir=tmp_path)) == kept[1]


def test_a_cache_that_cannot_be_written_changes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kept: tuple[Path, dict[str, object]]
) -> None:
    blocked = tmp_path / "a file"
    blocked.write_text("not a folder", encoding="utf-8")
    vocabulary = Vocabulary.load(cache_dir=blocked)
    assert _state(vocabulary) == kept[1]
    assert "cannot keep the search vocabulary" in caplog.text


def test_the_key_follows_the_files_and_the_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "vocabulary_code_probe.py"
    module.write_text("STEM = 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    files = [("en rag_pipeline/en.tsv", "supplier\tbusiness partner\n")]
    key = cache_key(files, ["vocabulary_code_probe"])
    assert cache_key(files, ["vocabulary_code_probe"]) == key
    assert (
        cache_key([(files[0][0], files[0][1] + "bin\tlocator\n")], ["vocabulary_code_probe"]) != key
    )
    assert cache_key([("es rag_pipeline/en.tsv", files[0][1])], ["vocabulary_code_probe"]) != key
    module.write_text("STEM = 2\n", encoding="utf-8")
    assert cache_key(files, ["vocabulary_code_probe"]) != key
    assert cache_key(files) != key
    module.unlink()  # code that cannot be read: nothing is cached
    assert cache_key(files, ["vocabulary_code_probe"]) is None
    sys.modules.pop("vocabulary_code_probe", None)
