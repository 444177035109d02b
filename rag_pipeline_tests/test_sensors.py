"""The files sensor registers configured folders and requests runs only for changed ones."""

import json
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.defs.files.resources import FilesSourceResource
from rag_pipeline.defs.files.sensors import files_folders_sensor
from rag_pipeline.orchestration.source_registry import FILES
from rag_pipeline.settings import Settings, load_settings
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
    rag_env: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = tmp_path / "kb"
    write(folder, "a.md", "# A\n\ntext")
    monkeypatch.setenv("RAG_FILES_FOLDERS", f"demo:{folder}:{tmp_path / 'missing'}")
    with dg.instance_for_test() as instance:
        first = _tick(instance, None)
        # Folders are partitions by name: the path's last component.
        assert sorted(r.partition_key or "" for r in first.run_requests or []) == ["demo", "kb"]
        (add,) = first.dynamic_partitions_requests or []
        assert isinstance(add, dg.AddDynamicPartitionsRequest)
        assert sorted(add.partition_keys) == ["demo", "kb"]
        assert first.cursor is not None
        assert set(json.loads(first.cursor)) == {"demo", "kb"}

        instance.add_dynamic_partitions("files_folders", ["demo", "kb"])
        quiet = _tick(instance, first.cursor)
        assert not quiet.run_requests
        assert not quiet.dynamic_partitions_requests

        write(folder, "b.md", "# B\n\nnew file")
        changed = _tick(instance, quiet.cursor)
        assert [r.partition_key for r in changed.run_requests or []] == ["kb"]
        # The folder's partition of the `folders` system asset is observed at its fingerprint.
        (observation,) = changed.asset_events
        assert isinstance(observation, dg.AssetObservation)
        assert observation.asset_key == FILES.system_key
        assert observation.partition == "kb"
        assert observation.tags["dagster/data_version"] == json.loads(changed.cursor or "")["kb"]


def test_sensor_also_watches_folders_added_in_the_ui(
    rag_env: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = tmp_path / "added-in-ui"
    write(folder, "a.md", "# A\n\ntext")
    monkeypatch.setenv("RAG_FILES_FOLDERS", "demo")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("files_folders", ["demo", str(folder)])
        first = _tick(instance, None)
        # The path typed in the UI becomes the folder's name.
        assert sorted(r.partition_key or "" for r in first.run_requests or []) == sorted(
            ["demo", "added-in-ui"]
        )
        add, delete = first.dynamic_partitions_requests or []
        assert isinstance(add, dg.AddDynamicPartitionsRequest)
        assert list(add.partition_keys) == ["added-in-ui"]
        assert isinstance(delete, dg.DeleteDynamicPartitionsRequest)
        assert list(delete.partition_keys) == [str(folder)]
        instance.delete_dynamic_partition("files_folders", str(folder))
        instance.add_dynamic_partitions("files_folders", ["added-in-ui"])
        write(folder, "b.md", "# B\n\nnew file")
        changed = _tick(instance, first.cursor)
        assert [r.partition_key for r in changed.run_requests or []] == ["added-in-ui"]
