"""Wall-clock budgets for work on one document, without interrupting threads.

markdown-it and mdformat are linear but slow on hostile input: 200,000 `[` take about 20 s,
an 820 KB table about 18 s, so a 5 MiB file could hold a worker for minutes. Neither can
be told to stop, and signals (SIGALRM) reach only the main thread.

Decision: two ways, neither injecting exceptions into threads.
- Code we write checks a `Deadline` as it goes (the chunker, at every token count, block
  and section), and so does markdown-it through a rule added with its plugin API
  (`watch_parser`), which runs at every block the parser tries.
- Third-party converters that have no such hook (BeautifulSoup, markdownify, mdformat)
  run in a child process that is killed when the deadline passes (`workers.DeadlineRunner`).
In both cases the document fails alone with one line saying which budget it spent.
"""

import time
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any, Final

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline

_ENV_KEY: Final = "rag_pipeline.deadline"


class TimeBudgetError(Exception):
    """The work ran past its deadline."""


@dataclass(frozen=True)
class Deadline:
    """A point in time (monotonic clock) after which `check` raises; None means never."""

    at: float | None = None

    @classmethod
    def after(cls, seconds: float | None) -> "Deadline":
        """The deadline `seconds` from now (None: no deadline)."""
        return cls(None if seconds is None else time.monotonic() + seconds)

    def check(self) -> None:
        """Raise `TimeBudgetError` if the deadline has passed."""
        if self.at is not None and time.monotonic() > self.at:
            raise TimeBudgetError

    def env(self) -> dict[str, object]:
        """A markdown-it `env` that makes a watched parser check this deadline."""
        return {_ENV_KEY: self}


def _check_env(env: MutableMapping[str, Any]) -> None:
    deadline: object = env.get(_ENV_KEY)
    if isinstance(deadline, Deadline):
        deadline.check()


def _check_block(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    _check_env(state.env)
    return False  # matches nothing: the parser goes on with its own rules


def _check_inline(state: StateInline, silent: bool) -> bool:
    _check_env(state.env)
    return False


def watch_parser(md: MarkdownIt) -> MarkdownIt:
    """Make `md` check the `Deadline` passed in its `env` (see `Deadline.env`).

    The check runs before every block and every inline token the parser tries (silent
    look-aheads included, where hostile input spends its time).

    Returns:
        `md`, for chaining.
    """
    md.block.ruler.before(md.block.ruler.get_all_rules()[0], "rag_pipeline_deadline", _check_block)
    md.inline.ruler.before("text", "rag_pipeline_deadline", _check_inline)
    return md
