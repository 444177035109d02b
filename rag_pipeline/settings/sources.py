"""The settings of the sources that read a server: the MediaWiki wiki and the iDempiere database.

`SourceSettings` holds them with their validators (URLs, namespace ids, AD_Language codes,
client ids) and the values derived from them (the iDempiere connection URL, the language and
client lists); `rag_pipeline.settings.Settings` combines it with the other groups.
"""

import re
from typing import Annotated
from urllib.parse import quote

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings

# An iDempiere AD_Language code: en_US, es_CO, sk_SK, pt_BR …
_AD_LANGUAGE = re.compile(r"[a-z]{2,3}_[A-Z]{2}")
# An id in a list setting: ASCII digits only ('²'.isdigit() is True, and int('٣') is 3).
_ASCII_ID = re.compile(r"[0-9]{1,18}")


class SourceSettings(BaseSettings):
    """Which wiki pages and which iDempiere database, clients and languages are indexed."""

    # wiki
    wiki_api_url: str | None = Field(
        default=None,
        description="MediaWiki api.php URL (e.g. https://wiki.idempiere.org/w-en/api.php); "
        "unset = the demo XML export shipped in the package (offline).",
    )
    wiki_categories: str = Field(
        default="Developer,New_Features",
        description="Comma-separated categories, with or without 'Category:'. The iDempiere "
        "wiki names them per release, e.g. New_Features_v11, Plug-In_Development.",
    )
    wiki_pages: str = Field(default="", description="Comma-separated explicit page titles.")
    wiki_namespaces: str = Field(
        default="0", description="Comma-separated namespace ids whose pages are indexed."
    )
    wiki_category_depth: Annotated[int, Field(ge=0, le=10)] = Field(
        default=2, description="How many levels of subcategories are followed (0 = none)."
    )
    wiki_max_concurrency: Annotated[int, Field(ge=1, le=16)] = Field(
        default=4, description="Parallel requests to the wiki (be polite: keep it small)."
    )
    wiki_user_agent: str = Field(
        default="rag_pipeline/0.1 (iDempiere knowledge index; https://www.idempiere.org)",
        description="User-Agent sent to the wiki (its policy asks for a contact).",
    )

    @field_validator("wiki_api_url")
    @classmethod
    def _wiki_url_is_http(cls, value: str | None) -> str | None:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s):// URL of api.php")
        return value or None

    @field_validator("wiki_namespaces")
    @classmethod
    def _namespaces_are_ids(cls, value: str) -> str:
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if not parts or not all(_ASCII_ID.fullmatch(p.removeprefix("-")) for p in parts):
            raise ValueError("must be comma-separated namespace numbers, e.g. 0 or 0,4")
        return value

    # iDempiere: the database the k_entry and ad_metadata sources read (read-only). The
    # IDEMPIERE_DB_* names are the seeds' (ADR-021), without the RAG_ prefix; none set = the
    # demo iDempiere database created in the embedded server.
    idempiere_db_host: str | None = Field(
        default=None,
        validation_alias=AliasChoices("IDEMPIERE_DB_HOST", "idempiere_db_host"),
        description="Host of the iDempiere PostgreSQL; unset = the bundled demo database.",
    )
    idempiere_db_port: Annotated[int, Field(ge=1, le=65535)] = Field(
        default=5432,
        validation_alias=AliasChoices("IDEMPIERE_DB_PORT", "idempiere_db_port"),
        description="The iDempiere database's port.",
    )
    idempiere_db_name: str = Field(
        default="idempiere",
        validation_alias=AliasChoices("IDEMPIERE_DB_NAME", "idempiere_db_name"),
        description="The iDempiere database's name.",
    )
    idempiere_db_user: str = Field(
        default="adempiere",
        validation_alias=AliasChoices("IDEMPIERE_DB_USER", "idempiere_db_user"),
        description="Its user (read through a read-only connection).",
    )
    idempiere_db_password: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("IDEMPIERE_DB_PASSWORD", "idempiere_db_password"),
        description="Its password.",
    )
    languages: str = Field(
        default="all",
        description="Comma-separated AD_Language codes indexed by k_entry and ad_metadata; "
        "'all' (the default) = the base language plus every language with translations "
        "that AD_Language marks an active system language (where it has that flag).",
    )
    kentry_client_ids: str = Field(
        default="1000014,11",
        description="Comma-separated AD_Client_IDs whose knowledge-base entries are indexed "
        "(1000014 as in the seed, 11 = the demo database's client).",
    )

    @field_validator("languages")
    @classmethod
    def _languages_are_codes(cls, value: str) -> str:
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if parts == ["all"]:
            return "all"
        if not parts or not all(_AD_LANGUAGE.fullmatch(p) for p in parts):
            raise ValueError("must be comma-separated AD_Language codes like en_US,es_CO, or all")
        return ",".join(dict.fromkeys(parts))

    @field_validator("kentry_client_ids")
    @classmethod
    def _client_ids_are_numbers(cls, value: str) -> str:
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if not parts or not all(_ASCII_ID.fullmatch(p) for p in parts):
            raise ValueError("must be comma-separated AD_Client_ID numbers, e.g. 1000014,11")
        return ",".join(dict.fromkeys(parts))

    @property
    def language_list(self) -> list[str]:
        """The configured AD_Language codes (`['all']` when every language is wanted)."""
        return self.languages.split(",")

    @property
    def kentry_client_id_list(self) -> list[int]:
        """The AD_Client_IDs whose knowledge-base entries are indexed."""
        return [int(p) for p in self.kentry_client_ids.split(",")]

    @property
    def idempiere_conninfo(self) -> str | None:
        """The URL of the configured iDempiere database; None = use the demo database."""
        if self.idempiere_db_host is None:
            return None
        auth = quote(self.idempiere_db_user, safe="")
        if self.idempiere_db_password is not None:
            auth += ":" + quote(self.idempiere_db_password.get_secret_value(), safe="")
        return (
            f"postgresql://{auth}@{self.idempiere_db_host}:{self.idempiere_db_port}/"
            f"{quote(self.idempiere_db_name, safe='')}"
        )
