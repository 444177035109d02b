"""The README stays a user's document: its settings table is the code's, and it stays short."""

from pathlib import Path

import pytest

from rag_pipeline.operations.settings_doc import END, START, settings_table, with_table
from rag_pipeline.settings import Settings

pytestmark = pytest.mark.unit

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_settings_table_is_generated_from_settings() -> None:
    text = README.read_text(encoding="utf-8")
    assert with_table(text) == text, (
        "README's settings table is stale: python -m rag_pipeline.operations.settings_doc README.md"
    )


def test_every_setting_says_what_it_does() -> None:
    missing = [name for name, field in Settings.model_fields.items() if not field.description]
    assert not missing
    assert settings_table().count("\n") == len(Settings.model_fields) + 1


def test_the_table_markers_are_required() -> None:
    with pytest.raises(ValueError, match="settings:start"):
        with_table("no markers here")
    assert with_table(f"a\n{START}\nold\n{END}\nb").startswith(f"a\n{START}\n| variable")


def test_the_readme_is_at_most_425_lines() -> None:
    assert README.read_text(encoding="utf-8").count("\n") <= 425
