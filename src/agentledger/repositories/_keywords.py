"""Keyword search of memory items: what a word is, how many of a query's words an item
holds, and the ``words`` column each database's own text index reads.

A word is a run of letters, digits or underscores, compared lower-cased after NFC
normalisation. An item holds a query's word when its text has that word, or, for a word
with a character outside ASCII (from a script written without spaces, such as Chinese
or Japanese), when the word appears anywhere in its text. Python decides every answer,
so it is the same on every database; a database's text index only narrows what is read,
and must never leave out an item Python would keep:

- the index reads ``words`` (the item's distinct words, joined by spaces), never the raw
  text, so it splits at agentledger's word boundaries (PostgreSQL and SQLite also split
  a word at ``_``, and then find its parts side by side, which keeps every item);
- an item whose distinct words outgrow ``INDEXED_CHARS`` is indexed as ``OVERFLOW``
  alone, a word every indexed search asks for too (PostgreSQL's tsvector stops at 1 MB);
- a query holding a word an index cannot find (one outside ASCII, one without a letter
  or digit, one too long, and on MariaDB/MySQL one shorter than its shortest token or
  one of its stopwords) reads every item under the prefix instead.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Final

_WORD: Final = re.compile(r"\w+")
_INDEXABLE: Final = re.compile(r"[a-z0-9_]*[a-z0-9][a-z0-9_]*")
INDEXED_CHARS: Final = 100_000
"""The most characters of distinct words an item is indexed by: a tsvector of them
stays well under PostgreSQL's 1 MB (at most about 3 bytes per character)."""
OVERFLOW: Final = "agentledger0overflow"
"""The word an item with more words than ``INDEXED_CHARS`` is indexed by."""
LONGEST_INDEXED: Final = 84
"""The longest word looked up in an index (InnoDB's default longest token; a longer
query word reads every item)."""
MAX_QUERY_CHARS: Final = 10_000
"""The longest keyword query."""


def _normalized(text: str) -> str:
    return unicodedata.normalize("NFC", text).lower()


def words_of(text: str) -> list[str]:
    """The distinct words of ``text``, lower-cased, in the order they first appear."""
    return list(dict.fromkeys(_WORD.findall(_normalized(text))))


def search_words(text: str | None) -> str | None:
    """What the ``words`` column holds for an item's ``text``: its distinct words joined
    by spaces, ``OVERFLOW`` when they outgrow ``INDEXED_CHARS``; None without text."""
    if text is None:
        return None
    joined = " ".join(words_of(text))
    return OVERFLOW if len(joined) > INDEXED_CHARS else joined


def held(wanted: frozenset[str], text: str | None) -> int:
    """How many of the words ``wanted`` (from ``words_of``) ``text`` holds: as a word,
    or (a word with a character outside ASCII) anywhere in it."""
    if not text or not wanted:
        return 0
    normalized = _normalized(text)
    found = set(_WORD.findall(normalized))
    return sum(1 for word in wanted if word in found or (not word.isascii() and word in normalized))


@dataclass(frozen=True)
class TextIndex:
    """What one database's text index over ``words`` can be asked (read once per
    engine): whether there is one, and which words it holds."""

    present: bool
    shortest: int = 1
    """The shortest word it holds (InnoDB's ``innodb_ft_min_token_size``)."""
    longest: int = LONGEST_INDEXED
    stopwords: frozenset[str] = frozenset()
    """Words it leaves out (InnoDB's stopword list)."""

    def finds(self, word: str) -> bool:
        """Whether every item holding ``word`` is found through the index."""
        return (
            self.present
            and self.shortest <= len(word) <= self.longest
            and _INDEXABLE.fullmatch(word) is not None
            and word not in self.stopwords
        )


NO_INDEX: Final = TextIndex(present=False)
