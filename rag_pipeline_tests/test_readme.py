"""The README stays a user's document and stays short; the settings table is the code's."""

from pathlib import Path

import pytest

from rag_pipeline.operations.settings_doc import END, START, settings_table, with_table
from rag_pipeline.settings import Settings

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SETTINGS_DOC = ROOT / "docs" / "settings.md"


def test_the_settings_table_is_generated_from_settings() -> None:
    text = SETTINGS_DOC.read_text(encoding="utf-8")
    assert with_table(text) == text, (
        "docs/settings.md is stale: python -m rag_pipeline.operations.settings_doc docs/settings.md"
    )
    assert "docs/settings.md" in README.read_text(encoding="utf-8")


def test_every_setting_says_what_it_does() -> None:
    missing = [name for name, field in Settings.model_fields.items() if not field.description]
    assert not missing
    assert settings_table().count("\n") == len(Settings.model_fields) + 1


def test_the_table_markers_are_required() -> None:
    with pytest.raises(ValueError, match="settings:start"):
        with_table("no markers here")
    assert with_table(f"a\n{START}\nold\n{END}\nb").startswith(f"a\n{START}\n| variable")


def test_the_readme_is_at_most_400_lines() -> None:
    assert README.read_text(encoding="utf-8").count("\n") <= 400
