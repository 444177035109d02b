"""The files sensor registers configured folders and requests runs only for changed ones."""

import json
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.defs.files.resources import FilesSourceResource
from rag_pipeline.defs.files.sensors import files_folders_sensor
from rag_pipeline.orchestration.source_registry import FILES
from rag_pipeline.settings import load_settings
from rag_pipeline_tests.pipeline_helpers import write


def _tick(instance: dg.DagsterInstance, cursor: str | None) -> dg.SensorResult:
    context = dg.build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={"files_source": FilesSourceResource.from_settings(load_settings())},
    )
    result = files_folders_sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def test_sensor_adds_partitions_and_runs_changed_folders(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = tmp_path / "kb"
    write(folder, "a.md", "# A\n\ntext")
    monkeypatch.setenv("RAG_FILES_FOLDERS", f"demo:{folder}:{tmp_path / 'missing'}")
    with dg.instance_for_test() as instance:
        first = _tick(instance, None)
        assert sorted(r.partition_key or "" for r in first.run_requests or []) == sorted(
            ["demo", str(folder)]
        )
        (add,) = first.dynamic_partitions_requests or []
        assert isinstance(add, dg.AddDynamicPartitionsRequest)
        assert sorted(add.partition_keys) == sorted(["demo", str(folder)])
        assert first.cursor is not None
        assert set(json.loads(first.cursor)) == {"demo", str(folder)}

        instance.add_dynamic_partitions("files_folders", ["demo", str(folder)])
        quiet = _tick(instance, first.cursor)
        assert not quiet.run_requests
        assert not quiet.dynamic_partitions_requests

        write(folder, "b.md", "# B\n\nnew file")
        changed = _tick(instance, quiet.cursor)
        assert [r.partition_key for r in changed.run_requests or []] == [str(folder)]
        # The folder's partition of the `folders` system asset is observed at its fingerprint.
        (observation,) = changed.asset_events
        assert isinstance(observation, dg.AssetObservation)
        assert observation.asset_key == FILES.system_key
        assert observation.partition == str(folder)
        assert (
            observation.tags["dagster/data_version"]
            == json.loads(changed.cursor or "")[str(folder)]
        )


def test_sensor_also_watches_folders_added_in_the_ui(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = tmp_path / "added-in-ui"
    write(folder, "a.md", "# A\n\ntext")
    monkeypatch.setenv("RAG_FILES_FOLDERS", "demo")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("files_folders", ["demo", str(folder)])
        first = _tick(instance, None)
        assert sorted(r.partition_key or "" for r in first.run_requests or []) == sorted(
            ["demo", str(folder)]
        )
        write(folder, "b.md", "# B\n\nnew file")
        changed = _tick(instance, first.cursor)
        assert [r.partition_key for r in changed.run_requests or []] == [str(folder)]
