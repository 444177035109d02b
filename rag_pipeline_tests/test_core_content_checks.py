"""Content rules behind the asset checks."""

import pytest

from rag_pipeline.core.content_checks import editorjs_structure_leaks, forbidden_characters


def test_editorjs_json_structure_in_prose_is_a_leak() -> None:
    leaked = 'Intro\n\n{"blocks": [{"type": "paragraph", "data": {"text": "x"}}]}\n'
    assert editorjs_structure_leaks(leaked) == ['"blocks": [', '"type": "paragraph", "data": {']
    one_block = 'Text {"type": "header", "data": {"text": "Title", "level": 2}} more\n'
    assert editorjs_structure_leaks(one_block) == ['"type": "header", "data": {']


@pytest.mark.parametrize(
    "markdown",
    [
        # The false positive: an article about Editor.js, in prose and inline code.
        'The field "data": holds the payload and "blocks": lists them.\n',
        'Each block has a `"type":` and a `"data":` field; `"blocks":` is the list.\n',
        'A saved document: `{"blocks": [{"type": "paragraph", "data": {}}]}`.\n',
        'An example:\n\n```json\n{"blocks": [], "type": "x", "data": {}}\n```\n',
        "plain text with no JSON",
    ],
)
def test_mentions_and_quoted_json_are_not_leaks(markdown: str) -> None:
    assert editorjs_structure_leaks(markdown) == []


def test_forbidden_characters_are_described() -> None:
    assert forbidden_characters("clean text\n\twith tab") is None
    problem = forbidden_characters("bad\x00text\x07")
    assert problem is not None
    assert problem.startswith("2 forbidden character(s)")
