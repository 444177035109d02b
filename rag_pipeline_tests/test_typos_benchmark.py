"""benchmarks/eval/typos.py: one typing error per query, reproducible, identifiers untouched."""

import random

from benchmarks.eval.typos import misspell, with_typos
from rag_pipeline.search.spelling import one_edit_variants


def test_a_misspelling_is_one_edit_away_and_keeps_the_first_letter() -> None:
    rng = random.Random(3)
    for word in ["purchasing", "statement", "conciliación", "warehouse"] * 10:
        typed = misspell(word, rng)
        assert typed != word
        assert typed[0] == word[0]
        assert typed in one_edit_variants(word)


def test_one_word_of_each_query_changes_and_identifiers_never_do() -> None:
    text = "Which window maintains C_Order records and DocStatus values?"
    for seed in range(20):
        typed = with_typos(text, random.Random(seed), 6)
        changed = [(a, b) for a, b in zip(text.split(" "), typed.split(" "), strict=True) if a != b]
        assert len(changed) == 1
        assert changed[0][0] in {"Which", "window", "maintains", "records"}
    assert with_typos("price list", random.Random(1), 6) == "price list"


def test_the_same_seed_gives_the_same_set() -> None:
    text = "Where do I configure the reminder letter levels for customers who pay late?"
    assert with_typos(text, random.Random(7), 6) == with_typos(text, random.Random(7), 6)
