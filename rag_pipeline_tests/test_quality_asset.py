"""Retrieval quality as a Dagster asset: the demo set scored on the demo files, twice.

The bundled demo set runs through the real search on an index of the bundled demo files (the
other sources' documents it names are not ingested here: they are reported, not scored). The
search vocabulary on, then off (RAG_SEARCH_VOCABULARY_WEIGHT=0): nDCG@10 falls and
`retrieval_quality_not_worse` names the questions that got worse.
"""

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from rag_pipeline.definitions import defs
from rag_pipeline.evaluation.labelled_sets import bundled_set, load_folder
from rag_pipeline.evaluation.metrics import EvaluationInputError
from rag_pipeline.orchestration.quality import NOT_WORSE, PER_QUESTION, QUALITY_ASSET, QUALITY_JOB
from rag_pipeline.settings import Settings
from rag_pipeline_tests.pipeline_helpers import ingest

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture
def instance(rag_env: Settings) -> Iterator[dg.DagsterInstance]:
    """An instance holding one run of the files job over the bundled demo files."""
    with dg.instance_for_test() as test_instance:
        yield test_instance


def _quality_run(
    instance: dg.DagsterInstance,
) -> tuple[dict[str, Any], dg.AssetCheckEvaluation, bool]:
    """Run retrieval_quality_job (definitions loaded now, as a run's code location would)."""
    result = (
        defs()
        .resolve_job_def(QUALITY_JOB)
        .execute_in_process(instance=instance, raise_on_error=False)
    )
    (materialization,) = result.asset_materializations_for_node(QUALITY_ASSET)
    (evaluation,) = result.get_asset_check_evaluations()
    metadata = {name: value.value for name, value in materialization.metadata.items()}
    return metadata, evaluation, result.success


def test_vocabulary_off_lowers_the_plotted_scores_and_the_check_names_the_questions(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    embeddings = ingest("demo", instance)
    # Every embeddings materialization plots its throughput.
    assert embeddings["documents_written"] == 9
    assert embeddings["chunks_written"] == embeddings["chunks_embedded"] > 0
    assert embeddings["documents_per_second"] > 0
    assert embeddings["chunks_per_second"] > embeddings["documents_per_second"]

    on, first_check, first_ok = _quality_run(instance)
    assert first_ok
    assert first_check.check_name == NOT_WORSE
    assert first_check.passed
    monkeypatch.setenv("RAG_SEARCH_VOCABULARY_WEIGHT", "0")
    off, check, ok = _quality_run(instance)

    # Only the files' questions are scored: the demo set's other documents are not indexed.
    demo = bundled_set()
    scored = [q for q in demo.queries if any(t == "files" for t, _ in demo.qrels[q.id])]
    assert on["questions"] == off["questions"] == len(scored)
    assert on["unknown_documents"] > 0
    assert "`demo/q10: k_entry:1000004`" in on["unknown_document_ids"]
    assert on["vocabulary_fingerprint"] != "off"
    assert off["vocabulary_fingerprint"] == "off"
    assert (on["ranking_overrides"], off["ranking_overrides"]) == ("none", "vocabulary_weight=0.0")
    assert on["model_id"] == off["model_id"]
    for key in ("ndcg@10", "mrr@10", "ndcg@10 en_US", "ndcg@10 [demo]"):
        assert off[key] < on[key], key
    assert on["latency_p95_ms"] >= on["latency_p50_ms"] > 0
    worst = off["worst_questions"].records
    assert len(worst) == min(10, len(scored))
    assert worst[0].data["ndcg@10"] < 1
    assert "expected" in worst[0].data

    # The check fails (WARN by default: the run succeeds) and names the questions.
    assert ok
    assert not check.passed
    assert check.severity == dg.AssetCheckSeverity.WARN
    worse = [
        key for key, value in off[PER_QUESTION].items() if value < on[PER_QUESTION][key] - 1e-6
    ]
    assert worse
    assert check.description is not None
    assert "nDCG@10 fell from" in check.description
    for key in worse:
        assert key in check.description


def test_a_blocking_regression_fails_the_run(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest("demo", instance)
    monkeypatch.setenv("RAG_QUALITY_SEVERITY", "error")
    _, first, ok = _quality_run(instance)
    assert ok
    assert first.passed
    monkeypatch.setenv("RAG_SEARCH_VOCABULARY_WEIGHT", "0")
    _, check, ok = _quality_run(instance)
    assert not check.passed
    assert check.severity == dg.AssetCheckSeverity.ERROR
    assert not ok


def test_a_floor_fails_the_first_materialization_too(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest("demo", instance)
    monkeypatch.setenv("RAG_QUALITY_FLOOR", "1")
    monkeypatch.setenv("RAG_SEARCH_VOCABULARY_WEIGHT", "0")  # one question below 1, at least
    metadata, check, _ = _quality_run(instance)
    assert metadata["ndcg@10"] < 1
    assert not check.passed
    assert check.description is not None
    assert "below the floor 1" in check.description


def test_a_users_set_is_scored_beside_the_bundled_one(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ingest("demo", instance)
    sets = tmp_path / "sets"
    sets.mkdir()
    (sets / "mine.jsonl").write_text(
        '{"id": "locators", "question": "storage bins", "language": "en_US", "relevant": '
        '[{"source_type": "files", "source_id": "warehouse-and-locators.md", "grade": 2},'
        ' {"source_type": "files", "source_id": "gone.md", "grade": 1}]}\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("RAG_QUALITY_SETS_DIR", str(sets))
    metadata, _, _ = _quality_run(instance)
    assert metadata["sets"] == "demo, mine"
    assert metadata["ndcg@10 [mine]"] == 1.0
    assert "`mine/locators: files:gone.md`" in metadata["unknown_document_ids"]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "not JSON"),
        ('{"id": "a", "relevant": []}', 'needs "id" and a non-empty "question"'),
        ('{"id": "a", "question": "q"}', 'needs "relevant"'),
        (
            '{"id": "a", "question": "q", "relevant": [{"source_type": "files", '
            '"source_id": "x", "grade": "high"}]}',
            '"grade" must be an integer',
        ),
    ],
)
def test_a_malformed_set_names_its_file_and_line(tmp_path: Path, line: str, reason: str) -> None:
    good = '{"id": "ok", "question": "q", "relevant": [{"source_type": "files", "source_id": "x"}]}'
    (tmp_path / "broken.jsonl").write_text(f"{good}\n\n{line}\n", encoding="utf-8")
    with pytest.raises(EvaluationInputError) as raised:
        load_folder(tmp_path)
    message = str(raised.value)
    assert message.startswith(f"{tmp_path / 'broken.jsonl'}:3: {reason}")
    assert "\n" not in message


def _readme_block(name: str) -> str:
    text = README.read_text(encoding="utf-8")
    block = text.split(f"<!-- {name}:start -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
    return block.split("```bash", 1)[1].split("```", 1)[0]


def test_the_readme_ci_recipe_fails_on_a_blocking_regression(
    instance: dg.DagsterInstance, rag_env: Settings, tmp_path: Path
) -> None:
    ingest("demo", instance)
    recipe = _readme_block("quality-ci")
    assert "dagster job execute" in recipe
    home = tmp_path / "dagster_home"
    home.mkdir()
    done = subprocess.run(
        ["bash", "-c", recipe],
        env={**os.environ, "DAGSTER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-3000:]
    assert output.count("RUN_SUCCESS") == 1, output[-3000:]
    assert "blocking asset check failed" in output, output[-3000:]


def test_an_index_update_requests_the_quality_asset_once_per_period() -> None:
    from datetime import UTC, datetime

    from rag_pipeline.defs.wiki.partitions import WIKI_PARTITIONS
    from rag_pipeline.orchestration.quality import QUALITY_KEY
    from rag_pipeline.orchestration.source_registry import EMBEDDINGS, FILES, WIKI

    definitions = defs()
    selection = dg.AssetSelection.assets(QUALITY_KEY)
    cursor = None

    def tick(hour: int, minute: int) -> int:
        nonlocal cursor
        result = dg.evaluate_automation_conditions(
            defs=definitions,
            instance=instance,
            asset_selection=selection,
            evaluation_time=datetime(2026, 1, 5, hour, minute, tzinfo=UTC),
            cursor=cursor,
        )
        cursor = result.cursor
        return result.get_num_requested(QUALITY_KEY)

    def index_updated(key: dg.AssetKey, partition: str) -> None:
        instance.report_runless_asset_event(dg.AssetMaterialization(key, partition=partition))

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("files_folders", ["demo"])
        instance.add_dynamic_partitions(WIKI_PARTITIONS, ["export:demo"])
        assert tick(9, 0) == 0  # nothing updated yet
        index_updated(FILES.asset_key(EMBEDDINGS), "demo")
        assert tick(9, 10) == 1
        assert tick(9, 20) == 0
        instance.report_runless_asset_event(dg.AssetMaterialization(QUALITY_KEY))  # its run
        assert tick(9, 30) == 0
        index_updated(WIKI.asset_key(EMBEDDINGS), "export:demo")
        assert tick(9, 40) == 0  # once per period (RAG_QUALITY_PERIOD_CRON, hourly)
        assert tick(10, 5) == 1  # the next period: the update not yet scored
        assert tick(10, 15) == 0
