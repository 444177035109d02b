"""Where `rag ask` sends the API key, said when it is not the provider's own address (issue 49).

A `.env` in the current folder setting `ANTHROPIC_BASE_URL` sent the key to a listener of its
choosing, and nothing said so. The routing values of a `.env` others control are not read at
all (`settings/trust.py`); one of the user's own still may point elsewhere, so the address is
named, and where it came from.
"""

from pathlib import Path

from rag_pipeline.answer.llm import OPENAI_DEFAULT_BASE_URL, ProviderConfig
from rag_pipeline.core.redact import url_without_credentials
from rag_pipeline.settings import Settings
from rag_pipeline.settings.trust import set_in_environment


def _default_url(provider: str) -> str:
    if provider == "anthropic":
        return str(Settings.model_fields["anthropic_base_url"].default)
    return OPENAI_DEFAULT_BASE_URL


def endpoint_notice(config: ProviderConfig) -> str | None:
    """The line naming the address the question (and the key) go to, or None for the
    provider's default address."""
    url = config.base_url.rstrip("/")
    if url == _default_url(config.provider).rstrip("/"):
        return None
    variable = config.url_variable
    origin = (
        f"{variable} in the environment"
        if set_in_environment(variable)
        else f"{variable} from {Path('.env').absolute()}"
    )
    key = f"with {config.key_variable}" if config.api_key else "without a key"
    return f"asking {url_without_credentials(url)} ({origin}) {key}"
