"""The ranking configuration and the sources' ranking rules: one place per knob, every knob
named with a reason, overrides checked by name."""

import re
from dataclasses import fields
from pathlib import Path

import pytest

import rag_pipeline.search as search
from rag_pipeline.search.plugins import source_rankings
from rag_pipeline.settings import ConfigError, Settings, load_settings
from rag_pipeline.settings.ranking import Ranking, parse_overrides

pytestmark = pytest.mark.unit


def test_every_knob_has_a_reason_and_setting_backed_ones_default_alike() -> None:
    defaults = Ranking()
    for knob in fields(Ranking):
        assert len(knob.metadata["why"]) > 10, knob.name
        setting = knob.metadata["setting"]
        if setting:
            # The setting's default is the knob's: measured figures hold for both.
            field = Settings.model_fields[f"search_{setting}"]
            assert field.default == getattr(defaults, knob.name), knob.name


def test_settings_then_overrides_win_over_the_defaults() -> None:
    ranking = Ranking.from_settings(
        load_settings(search_vector_weight=0.5, search_ranking="k1=1.2, b=0.75,leg_sections=80")
    )
    assert (ranking.vector_weight, ranking.k1, ranking.b) == (0.5, 1.2, 0.75)
    assert ranking.leg_sections == 80
    assert isinstance(ranking.leg_sections, int)
    assert ranking.title_boost == Ranking().title_boost
    described = {name: (value, why) for name, value, why in ranking.describe()}
    assert described["k1"][0] == 1.2
    assert "RAG_SEARCH_VECTOR_WEIGHT" in described["vector_weight"][1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("k3=1", "unknown name 'k3'"),
        ("vector_weight=2", "its own setting, RAG_SEARCH_VECTOR_WEIGHT"),
        ("k1=much", "needs a number"),
        ("leg_sections=2.5", "needs a number"),
        ("b=-1", "needs a number"),
    ],
)
def test_bad_overrides_name_the_setting(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_overrides(text)
    with pytest.raises(ConfigError, match="RAG_SEARCH_RANKING"):
        load_settings(search_ranking=text)


def test_sources_declare_their_rules_and_the_engine_names_none() -> None:
    (dictionary,) = [r for r in source_rankings() if r.source_type == "ad_metadata"]
    assert dictionary.whole_documents
    (imports,) = dictionary.title_weights
    assert imports.knob in {f.name for f in fields(Ranking)}
    assert set(dictionary.wanted_entities) == {"process"}
    for path in Path(search.__file__).parent.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "ad_metadata" not in text, path.name
        # It imports the sources' package only to find their declarations, never one source.
        assert "from rag_pipeline.sources." not in text, path.name
        assert "import rag_pipeline.sources." not in text, path.name
