"""The token of `rag mcp --http`: generated once into RAG_HOME (0600), reused, refused when
others can read it, overridden by RAG_MCP_TOKEN; `rag mcp --show-token` prints it."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rag_pipeline.mcp.http import TOKEN_FILE, ensure_token
from rag_pipeline.settings import ConfigError, load_settings

pytestmark = pytest.mark.unit


def test_a_token_is_generated_once_readable_by_the_owner_only(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path / "home", mcp_token=None)
    first = ensure_token(settings)
    path = tmp_path / "home" / TOKEN_FILE
    assert first.path == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(first.value) >= 32
    assert path.read_text().strip() == first.value
    assert ensure_token(settings).value == first.value  # reused, not regenerated
    other = ensure_token(load_settings(home=tmp_path / "other", mcp_token=None))
    assert other.value != first.value


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path, mcp_token=None)
    path = ensure_token(settings).path
    assert path is not None
    path.chmod(0o644)
    with pytest.raises(ConfigError, match="readable by other users"):
        ensure_token(settings)
    path.chmod(0o600)
    path.write_text("short\n")
    with pytest.raises(ConfigError, match="16 or more"):
        ensure_token(settings)


def test_the_setting_wins_and_is_validated(tmp_path: Path) -> None:
    token = ensure_token(load_settings(home=tmp_path, mcp_token="a-token-of-the-user-12345"))
    assert (token.value, token.path) == ("a-token-of-the-user-12345", None)
    assert not (tmp_path / TOKEN_FILE).exists()
    with pytest.raises(ConfigError, match="RAG_MCP_TOKEN"):
        load_settings(home=tmp_path, mcp_token="too short")


def test_show_token_prints_the_token_of_the_file(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RAG_MCP_TOKEN"}
    env["RAG_HOME"] = str(tmp_path)
    shown = subprocess.run(
        [sys.executable, "-m", "rag_pipeline.cli", "mcp", "--show-token"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.strip() == (tmp_path / TOKEN_FILE).read_text().strip()
