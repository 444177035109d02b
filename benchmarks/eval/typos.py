"""A labelled set's queries with one typing error each, to measure typo correction.

    python benchmarks/eval/typos.py benchmarks/eval/queries.jsonl > /tmp/typos.jsonl
    rag eval --queries /tmp/typos.jsonl --qrels /tmp/qrels_dedicated.tsv
    RAG_SEARCH_TYPO_CORRECTION=false rag eval --queries /tmp/typos.jsonl --qrels ...

In each query one word of at least `--min-letters` letters (chosen at random, seeded) gets one
edit of the four kinds people make: a letter dropped, doubled, replaced by a neighbour on the
keyboard, or two neighbours swapped. Identifiers (`C_Order_ID`, `DocStatus`) are left alone. A
query without such a word is written unchanged. The ids stay, so the set's qrels apply.
"""

import argparse
import json
import random
import sys
from pathlib import Path

_KEYBOARD = ["qwertyuiop", "asdfghjklñ", "zxcvbnm"]


def _neighbours(letter: str) -> str:
    for row_index, row in enumerate(_KEYBOARD):
        column = row.find(letter)
        if column < 0:
            continue
        near = row[max(column - 1, 0) : column] + row[column + 1 : column + 2]
        for other in (row_index - 1, row_index + 1):
            if 0 <= other < len(_KEYBOARD) and column < len(_KEYBOARD[other]):
                near += _KEYBOARD[other][column]
        return near
    return ""


def misspell(word: str, rng: random.Random) -> str:
    """`word` with one typing error (never the first letter: people rarely miss it)."""
    for _ in range(20):
        position = rng.randrange(1, len(word))
        kind = rng.choice(["drop", "double", "neighbour", "swap"])
        if kind == "drop":
            typed = word[:position] + word[position + 1 :]
        elif kind == "double":
            typed = word[:position] + word[position] + word[position:]
        elif kind == "neighbour":
            near = _neighbours(word[position].lower())
            if not near:
                continue
            typed = word[:position] + rng.choice(near) + word[position + 1 :]
        else:
            if position + 1 >= len(word):
                continue
            typed = word[:position] + word[position + 1] + word[position] + word[position + 2 :]
        if typed != word:
            return typed
    return word


def _plain(word: str) -> bool:
    return word.isalpha() and not any(letter.isupper() for letter in word[1:])


def with_typos(text: str, rng: random.Random, min_letters: int) -> str:
    """`text` with one of its plain words of `min_letters` or more misspelled."""
    words = text.split(" ")
    eligible = [i for i, w in enumerate(words) if len(w) >= min_letters and _plain(w)]
    if not eligible:
        return text
    index = rng.choice(eligible)
    words[index] = misspell(words[index], rng)
    return " ".join(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("queries", type=Path, help="a queries.jsonl of a labelled set")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--min-letters", type=int, default=6)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    for line in args.queries.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        record["text"] = with_typos(record["text"], rng, args.min_letters)
        sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
