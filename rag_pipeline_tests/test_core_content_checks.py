"""Content rules behind the asset checks."""

from rag_pipeline.core.content_checks import editorjs_syntax_leaks, forbidden_characters


def test_editorjs_words_in_prose_are_leaks() -> None:
    leaked = 'Intro\n\n{"blocks": [{"type": "paragraph", "data": {"text": "x"}}]}\n'
    assert editorjs_syntax_leaks(leaked) == ['"blocks"', '"type":', '"data"']


def test_editorjs_words_inside_code_are_allowed() -> None:
    quoted = 'An example:\n\n```json\n{"blocks": [], "type": "x", "data": {}}\n```\n'
    assert editorjs_syntax_leaks(quoted) == []
    assert editorjs_syntax_leaks("plain text with no JSON") == []


def test_forbidden_characters_are_described() -> None:
    assert forbidden_characters("clean text\n\twith tab") is None
    problem = forbidden_characters("bad\x00text\x07")
    assert problem is not None
    assert problem.startswith("2 forbidden character(s)")
