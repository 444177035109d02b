"""benchmarks/beir.py: a BEIR-format data set converted, ingested and scored by the real CLI.

The data set here is a small one written for the test in BEIR's own file formats (real BEIR
sets are downloads, which tests do not make).
"""

import json
from pathlib import Path

import pytest

from benchmarks.beir import DatasetError, convert, file_name, main, markdown
from rag_pipeline.settings import Settings

_CORPUS = [
    {
        "_id": "d1",
        "title": "Photosynthesis",
        "text": "Green plants turn sunlight, water and "
        "carbon dioxide into sugar and oxygen in their chloroplasts.",
    },
    {
        "_id": "d2",
        "title": "Volcanic eruptions",
        "text": "Magma rises through the crust and erupts as lava, ash and gas from a volcano.",
    },
    {
        "_id": "d3",
        "title": "Black holes",
        "text": "A collapsed star whose gravity is so strong "
        "that not even light escapes beyond its event horizon.",
    },
    {
        "_id": "d4",
        "title": "",
        "text": "Honey bees dance to tell the hive where flowers with nectar can be found.",
    },
    {
        "_id": "odd/id 5",
        "title": "Tides",
        "text": "The moon's gravity pulls the oceans and raises the tides twice a day.",
    },
    {
        "_id": "d6",
        "title": "Bread baking",
        "text": "Yeast ferments the dough, and the gas it makes lets the bread rise in the oven.",
    },
]
_QUERIES = [
    {"_id": "q1", "text": "how do plants make oxygen from sunlight"},
    {"_id": "q2", "text": "why can light not escape a collapsed star"},
    {"_id": "q3", "text": "what makes the sea rise and fall each day"},
    {"_id": "q4", "text": "how do bees tell each other where flowers are"},
    {"_id": "q5", "text": "a query whose only label is not relevant"},
]
_QRELS = (
    "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t1\nq3\todd/id 5\t1\nq4\td4\t2\n"
    "q5\td2\t0\nq1\tmissing-doc\t1\n"
)


def _dataset(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    lines = "\n".join(json.dumps(r) for r in _CORPUS)
    (folder / "corpus.jsonl").write_text(lines + "\n", encoding="utf-8")
    (folder / "queries.jsonl").write_text(
        "\n".join(json.dumps(r) for r in _QUERIES) + "\n", encoding="utf-8"
    )
    (folder / "qrels" / "test.tsv").write_text(_QRELS, encoding="utf-8")
    return folder


def test_conversion_writes_one_file_per_document_and_the_eval_formats(tmp_path: Path) -> None:
    converted = convert(_dataset(tmp_path / "toy"), tmp_path / "out")

    assert converted.documents == 6
    assert converted.labelled_queries == 4  # q5 has no relevant document
    assert (
        (converted.corpus / "d1.md")
        .read_text(encoding="utf-8")
        .startswith("# Photosynthesis\n\nGreen plants")
    )
    assert (converted.corpus / "d4.md").read_text(encoding="utf-8").startswith("Honey bees")
    odd = file_name("odd/id 5")
    assert "/" not in odd
    assert (converted.corpus / odd).is_file()
    qrels = converted.qrels.read_text(encoding="utf-8").splitlines()
    assert qrels[0] == "query_id\tsource_type\tsource_id\tgrade"
    assert f"q3\tfiles\t{odd}\t1" in qrels
    assert not any("missing-doc" in line for line in qrels)
    ids = [json.loads(line)["id"] for line in converted.queries.read_text().splitlines()]
    assert ids == ["q1", "q2", "q3", "q4"]


def test_markdown_keeps_the_title_as_the_heading() -> None:
    assert markdown("  A  title\n", " Body. ") == "# A title\n\nBody.\n"
    assert markdown("", "Body only.") == "Body only.\n"


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        ("corpus.jsonl", "corpus.jsonl is missing"),
        ("qrels/test.tsv", "no qrels for this split"),
    ],
)
def test_a_folder_without_the_set_is_named(tmp_path: Path, broken: str, message: str) -> None:
    dataset = _dataset(tmp_path / "toy")
    (dataset / broken).unlink()
    with pytest.raises(DatasetError, match=message):
        convert(dataset, tmp_path / "out")


def test_a_broken_line_is_named(tmp_path: Path) -> None:
    dataset = _dataset(tmp_path / "toy")
    with (dataset / "corpus.jsonl").open("a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    with pytest.raises(DatasetError, match=r"corpus.jsonl:7: not JSON"):
        convert(dataset, tmp_path / "out")


def test_the_set_is_ingested_and_scored_through_rag(
    rag_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = _dataset(tmp_path / "toy")

    main([str(dataset), "--home", str(rag_env.home), "--modes", "hybrid,keyword", "--json"])

    figures = json.loads(capsys.readouterr().out)
    assert figures["dataset"] == "toy"
    assert set(figures["modes"]) == {"hybrid", "keyword"}
    # Four easy questions, each with one answer among six documents on different topics.
    assert figures["modes"]["hybrid"]["ndcg@10"] == pytest.approx(1.0)
    assert figures["modes"]["hybrid"]["mrr@10"] == pytest.approx(1.0)
