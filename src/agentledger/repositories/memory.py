"""Long-term memory: items under namespaces, kept across sessions.

An item is a JSON object under a namespace (a tuple of labels, ``("memories",
"ada")``) and a key, with its own revision. ``put`` without ``expected_revision``
overwrites whatever is stored (last write wins, as LangGraph's stores do, and never a
conflict: one upsert statement); with it, the write is a compare-and-set: 0 creates
only, ``n`` replaces only revision ``n``, else ``ConflictError`` (``exists`` or
``stale``). An item may live for ``ttl_minutes`` from its last write, or from its last
``refresh`` (LangGraph's stores refresh what they read); once expired it is never read
again, and retention purges it. ``search`` reads a namespace and everything under it,
newest write first, filtered on the values' fields, or by meaning among the items that carry vectors
(exact cosine scoring over every stored vector, on every database). ``list_namespaces``
lists the namespaces stored, matched by prefix and suffix (``*`` a wildcard label) and
cut to a depth.

A namespace is stored as its labels joined by ``.`` (``memories.ada``), each ``.`` and
``%`` inside a label written ``%2E`` and ``%25``, so a namespace and everything under
it is one range of the primary key (``memories.ada`` and ``memories.ada.%``).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from operator import mul, sub
from typing import Any, Literal, cast

from sqlalchemy import (
    ColumnElement,
    Select,
    Table,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    table,
    text,
    update,
)

from .._checks import bounded_int, checked_text, text_problem
from .._dialects import Capabilities, capabilities, locking
from .._json import Limits, check_object, decode_json
from .._limits import (
    MAX_EMBEDDING_PATH_LENGTH,
    MAX_MEMORY_KEY_LENGTH,
    MAX_MEMORY_NAMESPACE_LENGTH,
    MAX_MEMORY_PAGE,
)
from .._translate import duplicate_as
from ..errors import ConflictError, CorruptRecordError, ValidationError
from ..models import WORDS_TABLE, AgentMemoryItem
from ..models.types import TEXT_SEARCH_CONFIG, json_text, simple_tsvector
from ..records import MemoryItem, from_stored
from ._base import Repository, operation
from ._keywords import (
    LONGEST_INDEXED,
    MAX_QUERY_CHARS,
    NO_INDEX,
    OVERFLOW,
    TextIndex,
    held,
    search_words,
    words_of,
)
from ._statements import inserted_unless_stored, json_key_equals, rows_in

ITEMS = cast(Table, AgentMemoryItem.__table__)
_KEY = (ITEMS.c.namespace, ITEMS.c.key)
"""An item's primary key, for matching a set of them (``rows_in``)."""
TABLE = ITEMS.name
Namespace = tuple[str, ...]
Embedding = tuple[str, Sequence[float]]
"""One vector of an item: the path of the field it embeds, and the vector."""

MAX_TTL_MINUTES = 1_000_000_000.0
"""The longest time to live (about 1,900 years): beyond it a datetime overflows."""
_KEYS_AT_ONCE = 500
"""The most (namespace, key) pairs one statement names."""
MAX_PAGE = MAX_MEMORY_PAGE
FILTER_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
"""The comparisons a search filter may use, as LangGraph's stores spell them."""


# -- namespaces -----------------------------------------------------------------------------


_ESCAPED = re.compile(r"[%.\x00-\x1f]| +$")
"""What a label's stored form escapes: ``%`` and ``.`` (the separator), control
characters, and spaces at its end (MariaDB/MySQL's binary collation pads text with
spaces, so ``ada`` and ``ada `` would be one namespace there, and sorts a control
character before the end of a text, out of a namespace's range)."""
_ESCAPE = re.compile(r"%([0-9A-F]{2})")


def _escaped(found: re.Match[str]) -> str:
    return "".join(f"%{ord(character):02X}" for character in found.group())


def encode_namespace(labels: Sequence[str]) -> str:
    """The stored form of a namespace: its labels joined by ``.``, each label's ``%``,
    ``.``, control characters and trailing spaces escaped (``%25``, ``%2E``, ``%0A``,
    ``%20``)."""
    return ".".join(_ESCAPED.sub(_escaped, label) for label in labels)


def decode_namespace(stored: str) -> Namespace:
    """The labels of a stored namespace (``encode_namespace`` undone)."""
    return tuple(
        _ESCAPE.sub(lambda found: chr(int(found.group(1), 16)), part) for part in stored.split(".")
    )


def checked_namespace(value: object, *, name: str = "namespace", empty: bool = False) -> Namespace:
    """``value`` as a namespace: a tuple (or list) of labels, each 1 or more characters
    of text every database stores exactly, at most 512 characters once stored. With
    ``empty``, no labels at all is allowed (a prefix that matches everything)."""
    if not isinstance(value, tuple | list):
        raise ValidationError(
            f"{name} must be a tuple of strings, got {type(value).__name__}", path=name
        )
    if not value and not empty:
        raise ValidationError(f"{name} must have at least one label", path=name)
    for index, label in enumerate(value):
        if not isinstance(label, str):
            raise ValidationError(
                f"{name}[{index}] must be a string, got {type(label).__name__}", path=name
            )
        if not label:
            raise ValidationError(f"{name}[{index}] is empty; labels cannot be", path=name)
        problem = text_problem(label)
        if problem is not None:
            raise ValidationError(f"{name}[{index}] {problem}", path=name)
    labels = tuple(value)
    stored = len(encode_namespace(labels))
    if stored > MAX_MEMORY_NAMESPACE_LENGTH:
        raise ValidationError(
            f"{name} is {stored:,} characters stored (labels joined by '.'), over the "
            f"limit of {MAX_MEMORY_NAMESPACE_LENGTH}",
            path=name,
        )
    return labels


_CONTROL = re.compile(r"[\x00-\x1f]")


def padding_problem(key: str) -> str | None:
    """What makes ``key`` one MariaDB/MySQL would mix up, or None. Their binary
    collation pads with spaces (``"k"`` and ``"k "`` are one key there) and sorts a
    control character before the end of a text. Refused on every database, so each
    stores the same items. (A namespace's label escapes them instead.)"""
    if key.endswith(" "):
        return "ends with a space, which MariaDB/MySQL cannot tell from the text without it"
    found = _CONTROL.search(key)
    if found is not None:
        return (
            f"contains a control character (U+{ord(found.group()):04X}), which "
            "MariaDB/MySQL sorts out of place"
        )
    return None


def _under(prefix: Namespace) -> ColumnElement[bool]:
    """The namespace ``prefix`` and every namespace under it (all, for no labels)."""
    if not prefix:
        return ITEMS.c.namespace.is_not(None)
    stored = encode_namespace(prefix)
    # Below it: the range from "<stored>." up to "<stored>/" ("/" follows "." byte for
    # byte, and the namespace sorts byte for byte on every database), which each reads
    # through the primary key (a LIKE would not be on SQLite, whose LIKE ignores case).
    return or_(
        ITEMS.c.namespace == stored,
        and_(ITEMS.c.namespace >= stored + ".", ITEMS.c.namespace < stored + "/"),
    )


# -- values, times and vectors ----------------------------------------------------------------


def _ttl(value: object) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 < value <= MAX_TTL_MINUTES
    ):
        return float(value)
    raise ValidationError(
        f"ttl_minutes must be a number of minutes above 0 and at most {MAX_TTL_MINUTES:,.0f}, "
        f"or None, got {value!r}",
        path="ttl_minutes",
    )


def _expiry(now: datetime, ttl_minutes: float | None) -> datetime | None:
    return None if ttl_minutes is None else now + timedelta(minutes=ttl_minutes)


def _packed(embeddings: Sequence[Embedding] | None) -> tuple[list[str] | None, bytes | None]:
    """The paths and the float32 bytes of an item's vectors, checked: every vector of
    finite numbers, all of one length."""
    if embeddings is None or len(embeddings) == 0:
        return None, None
    paths: list[str] = []
    packed = array("f")
    length: int | None = None
    for index, entry in enumerate(embeddings):
        where = f"embeddings[{index}]"
        if not isinstance(entry, tuple | list) or len(entry) != 2:
            raise ValidationError(f"{where} must be a (path, vector) pair", path="embeddings")
        path, vector = entry
        paths.append(checked_text(path, f"{where} path", max_length=MAX_EMBEDDING_PATH_LENGTH))
        try:
            numbers = [float(number) for number in vector]
        except (TypeError, ValueError):
            raise ValidationError(
                f"{where} must be a sequence of numbers", path="embeddings"
            ) from None
        if not numbers or not all(math.isfinite(number) for number in numbers):
            raise ValidationError(
                f"{where} must be a non-empty vector of finite numbers", path="embeddings"
            )
        if length is not None and len(numbers) != length:
            raise ValidationError(
                f"{where} has {len(numbers)} dimensions, the others {length}", path="embeddings"
            )
        length = len(numbers)
        packed.extend(numbers)
    return paths, packed.tobytes()


def _vectors(
    paths: list[str] | None, stored: bytes | None, key: object, length: int
) -> list[array[float]]:
    """The item's vectors if they have ``length`` numbers each, else none; a column that
    does not hold one vector per path, all of one length, is corrupt."""
    if not paths or stored is None:
        return []
    if len(stored) % (4 * len(paths)):
        raise CorruptRecordError(
            f"{TABLE} row {key!r}: column embeddings does not hold {len(paths)} vectors "
            "of one length; it was written by something other than agentledger",
            table=TABLE,
            key=key,
            column="embeddings",
        )
    if len(stored) != 4 * length * len(paths):
        return []  # vectors of another model: not comparable with the query
    numbers = array("f")
    numbers.frombytes(stored)
    return [numbers[start : start + length] for start in range(0, len(numbers), length)]


Metric = Literal["cosine", "inner_product", "l2"]
"""How a search by meaning scores a vector against the query (higher is closer):
cosine similarity, the dot product, or the Euclidean distance negated (LangGraph's
PostgreSQL store's three)."""
METRICS: tuple[str, ...] = ("cosine", "inner_product", "l2")


def _scorer(metric: str, query: Sequence[float]) -> Callable[[Sequence[float]], float]:
    """How one stored vector scores against ``query`` under ``metric`` (higher is closer).

    ``map(mul, ...)`` keeps each product and sum in C, in the same order (and so with
    the same rounding) as a Python loop would: the score does not depend on the path.
    """
    if metric == "l2":

        def l2(vector: Sequence[float]) -> float:
            differences = list(map(sub, query, vector))
            return -math.sqrt(sum(map(mul, differences, differences)))

        return l2
    if metric == "inner_product":

        def inner_product(vector: Sequence[float]) -> float:
            return float(sum(map(mul, query, vector)))

        return inner_product
    norm = math.sqrt(sum(map(mul, query, query)))

    def cosine(vector: Sequence[float]) -> float:
        length = math.sqrt(sum(map(mul, vector, vector)))
        if norm == 0.0 or length == 0.0:
            return 0.0
        dot: float = sum(map(mul, query, vector))
        return dot / (norm * length)

    return cosine


# -- filters --------------------------------------------------------------------------------


def checked_filter(value: object) -> dict[str, Any]:
    """A search filter: field path (``a.b`` for a nested field) to a value it must
    equal, or to a dict of comparisons (``{"$gt": 3}``)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(
            f"filter must be a dict of field to value, got {type(value).__name__}", path="filter"
        )
    for field, condition in value.items():
        if not isinstance(field, str) or not field:
            raise ValidationError(
                f"filter field {field!r} must be a non-empty string", path="filter"
            )
        if isinstance(condition, Mapping) and any(
            isinstance(name, str) and name.startswith("$") for name in condition
        ):
            unknown = [name for name in condition if name not in FILTER_OPERATORS]
            if unknown:
                raise ValidationError(
                    f"filter on {field!r}: unknown operator {unknown[0]!r}; "
                    f"use one of {', '.join(FILTER_OPERATORS)}",
                    path="filter",
                )
    return dict(value)


_MISSING = object()


def _field(value: Any, path: str) -> Any:
    current = value
    for part in path.split("."):
        if not isinstance(current, dict) or part not in current:
            return _MISSING
        current = current[part]
    return current


def _compare(found: Any, operator: str, wanted: Any) -> bool:
    if operator == "$eq":
        return bool(found == wanted)
    if operator == "$ne":
        return bool(found != wanted)
    try:
        if operator == "$gt":
            return bool(found > wanted)
        if operator == "$gte":
            return bool(found >= wanted)
        if operator == "$lt":
            return bool(found < wanted)
        return bool(found <= wanted)
    except TypeError:  # a string against a number: no match, as in LangGraph's stores
        return False


def matches(value: dict[str, Any], conditions: dict[str, Any]) -> bool:
    """Whether an item's value meets every condition of a checked filter."""
    for path, condition in conditions.items():
        found = _field(value, path)
        if isinstance(condition, dict) and any(name.startswith("$") for name in condition):
            if found is _MISSING:
                if any(operator != "$ne" for operator in condition):
                    return False
                continue
            if not all(_compare(found, op, wanted) for op, wanted in condition.items()):
                return False
        elif found is _MISSING or found != condition:
            return False
    return True


def _namespace_matches(labels: Namespace, pattern: Namespace, *, at_end: bool) -> bool:
    if len(labels) < len(pattern):
        return False
    part = labels[len(labels) - len(pattern) :] if at_end else labels[: len(pattern)]
    return all(wanted in ("*", label) for label, wanted in zip(part, pattern, strict=True))


# -- reads ----------------------------------------------------------------------------------

_COLUMNS: Select[Any] = select(
    ITEMS.c.namespace,
    ITEMS.c.key,
    json_text(ITEMS.c.value).label("value"),
    ITEMS.c.text,
    ITEMS.c.created_at,
    ITEMS.c.updated_at,
    ITEMS.c.ttl_minutes,
    ITEMS.c.expires_at,
    ITEMS.c.revision,
)
_VECTORS: Select[Any] = select(
    ITEMS.c.namespace,
    ITEMS.c.key,
    json_text(ITEMS.c.embedding_paths).label("embedding_paths"),
    ITEMS.c.embeddings,
).where(ITEMS.c.embeddings.is_not(None))
"""What a search by meaning scores, of the items that have vectors (and, with a filter,
the value it checks): the page's items are read whole afterwards."""


_WRITTEN = (
    "value",
    "text",
    "words",
    "embedding_paths",
    "embeddings",
    "updated_at",
    "ttl_minutes",
    "expires_at",
)
"""The columns every put writes."""


def _live(now: datetime | ColumnElement[Any]) -> ColumnElement[bool]:
    return or_(ITEMS.c.expires_at.is_(None), ITEMS.c.expires_at > now)


def _value(row: Any) -> dict[str, Any]:
    """The item's value read from ``row``, checked to be a JSON object."""
    key = (row.namespace, row.key)
    value = decode_json(row.value, table=TABLE, key=key, column="value")
    if type(value) is not dict:
        raise CorruptRecordError(
            f"{TABLE} row {key!r}: column value is not a JSON object",
            table=TABLE,
            key=key,
            column="value",
        )
    return value


def _item(row: Any) -> MemoryItem:
    value = _value(row)
    return from_stored(
        MemoryItem,
        {
            "namespace": decode_namespace(row.namespace),
            "key": row.key,
            "value": value,
            "text": row.text,
            "created_at": row.created_at,
            "updated_at": row.updated_at,
            "ttl_minutes": row.ttl_minutes,
            "expires_at": row.expires_at,
            "revision": row.revision,
            "score": None,
        },
    )


@dataclass(frozen=True)
class _Key:
    namespace: Namespace
    stored: str
    key: str


def _key_of(namespace: object, key: object) -> _Key:
    labels = checked_namespace(namespace)
    checked = checked_text(key, "key", max_length=MAX_MEMORY_KEY_LENGTH)
    problem = padding_problem(checked)
    if problem is not None:
        raise ValidationError(f"key {problem}", path="key")
    return _Key(labels, encode_namespace(labels), checked)


def _where(key: _Key) -> ColumnElement[bool]:
    return and_(ITEMS.c.namespace == key.stored, ITEMS.c.key == key.key)


_GET = _COLUMNS.where(
    ITEMS.c.namespace == bindparam("b_namespace"),
    ITEMS.c.key == bindparam("b_key"),
    _live(bindparam("b_now", type_=ITEMS.c.expires_at.type)),
)
"""One live item (built once: a get is the store's hottest read)."""


@functools.cache
def _upsert(found: Capabilities, *, returning: bool) -> Any:
    """The plain put of one item (built once per database family): insert it, or
    replace the stored one and bump its revision. Parameters: every column, and
    ``b_now`` (the write's time)."""
    statement = found.insert(ITEMS)
    new = statement.excluded if found.upsert == "on_conflict" else statement.inserted
    now = bindparam("b_now", type_=ITEMS.c.updated_at.type)
    # An expired item replaced is a new item (created now); its revision keeps counting,
    # so a compare-and-set from a read of the old one never matches. created_at comes
    # first: MariaDB/MySQL's assignments see the ones before them.
    replaced: list[tuple[str, Any]] = [
        ("created_at", case((~_live(now), new.created_at), else_=ITEMS.c.created_at)),
        *((name, new[name]) for name in _WRITTEN),
        ("revision", ITEMS.c.revision + 1),
    ]
    if found.upsert == "on_conflict":
        upsert = statement.on_conflict_do_update(
            index_elements=[ITEMS.c.namespace, ITEMS.c.key], set_=dict(replaced)
        )
    else:
        upsert = statement.on_duplicate_key_update(replaced)
    return upsert.returning(ITEMS.c.created_at, ITEMS.c.revision) if returning else upsert


class MemoryRepository(Repository):
    """The single implementation of the long-term memory operations."""

    def _now(self) -> datetime:
        return self._work.settings.now()

    @property
    def _limits(self) -> Limits:
        return self._work.settings.limits

    @operation(writes=True)
    def refresh(self, items: Sequence[tuple[Sequence[str], str]]) -> int:
        """Start again, from now, the time to live of each of ``items`` (namespace, key
        pairs) that has one and has not expired (LangGraph's refresh on read); how many
        were refreshed.

        Raises:
            ValidationError: a bad namespace or key.
        """
        keys = {(found.stored, found.key) for found in (_key_of(*item) for item in items)}
        if not keys:
            return 0
        now = self._now()
        connection = self._connection()
        lasting = connection.execute(
            select(ITEMS.c.namespace, ITEMS.c.key, ITEMS.c.ttl_minutes).where(
                rows_in(connection.dialect, _KEY, sorted(keys)),
                ITEMS.c.ttl_minutes.is_not(None),
                _live(now),
            )
        ).all()
        if lasting:
            connection.execute(
                update(ITEMS)
                .where(ITEMS.c.namespace == bindparam("b_namespace"))
                .where(ITEMS.c.key == bindparam("b_key"))
                .values(expires_at=bindparam("b_expires_at", type_=ITEMS.c.expires_at.type)),
                [
                    {
                        "b_namespace": row.namespace,
                        "b_key": row.key,
                        "b_expires_at": now + timedelta(minutes=row.ttl_minutes),
                    }
                    for row in lasting
                ],
            )
        return len(lasting)

    @operation(writes=False)
    def get(self, namespace: Sequence[str], key: str) -> MemoryItem | None:
        """The item stored under ``namespace`` and ``key``, or None (never stored,
        deleted, or expired). Reading does not restart its time to live (``refresh``
        does).

        Raises:
            ValidationError: a namespace that is not a tuple of non-empty strings, or a
                key that is not 1 to 255 characters of text.
        """
        found = _key_of(namespace, key)
        parameters = {"b_namespace": found.stored, "b_key": found.key, "b_now": self._now()}
        row = self._connection().execute(_GET, parameters).first()
        return None if row is None else _item(row)

    @operation(writes=True)
    def put(
        self,
        namespace: Sequence[str],
        key: str,
        value: dict[str, Any],
        *,
        ttl_minutes: float | None = None,
        text: str | None = None,
        embeddings: Sequence[Embedding] | None = None,
        expected_revision: int | None = None,
    ) -> MemoryItem:
        """Store ``value`` under ``namespace`` and ``key``; the item as stored.

        Without ``expected_revision`` whatever is stored is replaced (last write wins,
        never a conflict). With it the write is a compare-and-set: 0 stores only a new
        item, ``n`` replaces only an item at revision ``n``. ``ttl_minutes`` starts
        from now; ``text`` is what keyword search reads; ``embeddings`` are the item's
        vectors for search by meaning, one (field path, vector) each.

        Raises:
            ConflictError: ``exists`` (expected 0, an item is stored) or ``stale``
                (expected ``n``, the stored revision is another, or none is stored).
            ValidationError: a bad namespace or key, a value that is not a JSON object
                within the limits, a bad time to live, text or vector.
        """
        found = _key_of(namespace, key)
        limits = self._limits
        checked = check_object(value, path="value", limits=limits, jsonb=True)
        ttl = _ttl(ttl_minutes)
        if text is not None:
            checked_text(text, "text", max_length=limits.max_value_bytes, min_length=0)
        paths, vectors = _packed(embeddings)
        if expected_revision is not None:
            bounded_int(expected_revision, "expected_revision")
        now = self._now()
        fields = {
            "value": checked,
            "text": text,
            "words": search_words(text),
            "embedding_paths": paths,
            "embeddings": vectors,
            "updated_at": now,
            "ttl_minutes": ttl,
            "expires_at": _expiry(now, ttl),
        }
        if expected_revision is None:
            created_at, revision = self._upsert(found, fields, now)
        elif expected_revision == 0:
            self._create(found, fields, now)
            created_at, revision = now, 1
        else:
            created_at = self._replace(found, fields, expected_revision)
            revision = expected_revision + 1
        return MemoryItem(
            namespace=found.namespace,
            key=found.key,
            value=checked,
            text=text,
            created_at=created_at,
            updated_at=now,
            ttl_minutes=ttl,
            expires_at=fields["expires_at"],
            revision=revision,
        )

    def _upsert(self, key: _Key, fields: dict[str, Any], now: datetime) -> tuple[datetime, int]:
        """Insert the item, or replace the stored one and bump its revision, in one
        statement concurrent writers cannot race; its creation time and revision."""
        connection = self._connection()
        found = capabilities(connection.dialect)
        row = {"namespace": key.stored, "key": key.key, "created_at": now, "revision": 1}
        parameters = {**row, **fields, "b_now": now}
        if found.upsert is None:
            self._replace_or_insert(key, row, fields, now)
        elif found.update_returning:
            stored = connection.execute(_upsert(found, returning=True), parameters).first()
            return stored.created_at, stored.revision
        else:
            connection.execute(_upsert(found, returning=False), parameters)
        stored = connection.execute(
            select(ITEMS.c.created_at, ITEMS.c.revision).where(_where(key))
        ).first()
        return stored.created_at, stored.revision

    def _replace_or_insert(
        self, key: _Key, row: dict[str, Any], fields: dict[str, Any], now: datetime
    ) -> None:
        """``_upsert`` without an upsert statement (the portable profile): replace the
        stored item, else insert it in a savepoint, else (a concurrent writer inserted
        it first) replace that one. The replacement is the upsert's: an expired item
        replaced is created anew, and the revision counts on."""
        connection = self._connection()
        replaced = (
            update(ITEMS)
            .where(_where(key))
            # created_at first: MariaDB/MySQL's assignments see the ones before them.
            .ordered_values(
                ("created_at", case((~_live(now), now), else_=ITEMS.c.created_at)),
                *fields.items(),
                ("revision", ITEMS.c.revision + 1),
            )
        )
        if connection.execute(replaced).rowcount:
            return
        if not inserted_unless_stored(connection, insert(ITEMS).values({**row, **fields})):
            connection.execute(replaced)

    def _create(self, key: _Key, fields: dict[str, Any], now: datetime) -> None:
        """Insert the item; ConflictError ``exists`` when one is stored (an expired
        one is replaced, as it no longer exists for any reader)."""
        connection = self._connection()
        connection.execute(delete(ITEMS).where(_where(key), ~_live(now)))
        statement = (
            capabilities(connection.dialect)
            .insert(ITEMS)
            .values(namespace=key.stored, key=key.key, created_at=now, revision=1, **fields)
        )

        def taken() -> ConflictError:
            return ConflictError(
                f"memory item {key.namespace!r} {key.key!r} is already stored",
                reason="exists",
                expected=0,
            )

        upsert = capabilities(connection.dialect).upsert
        if upsert is None:
            if not inserted_unless_stored(connection, statement):
                raise taken()
            return
        if upsert == "on_conflict":
            # A failed INSERT would end PostgreSQL's transaction: do nothing instead.
            # SQLAlchemy reports an INSERT's rowcount only when asked to keep it.
            result = connection.execute(
                statement.on_conflict_do_nothing(
                    index_elements=[ITEMS.c.namespace, ITEMS.c.key]
                ).execution_options(preserve_rowcount=True)
            )
            if result.rowcount == 0:
                raise taken()
            return
        with duplicate_as(taken):
            connection.execute(statement)

    def _replace(self, key: _Key, fields: dict[str, Any], expected: int) -> datetime:
        """Replace the item at revision ``expected``; its creation time."""
        connection = self._connection()
        now = fields["updated_at"]
        result = connection.execute(
            update(ITEMS)
            .where(_where(key), ITEMS.c.revision == expected, _live(now))
            .values(revision=expected + 1, **fields)
        )
        if result.rowcount != 1:
            stored = connection.execute(
                select(ITEMS.c.revision).where(_where(key), _live(now))
            ).scalar_one_or_none()
            raise ConflictError(
                f"memory item {key.namespace!r} {key.key!r} is at revision "
                f"{stored if stored is not None else 'none (not stored)'}, not {expected}",
                reason="stale",
                expected=expected,
                actual=stored,
            )
        created: datetime = connection.execute(
            select(ITEMS.c.created_at).where(_where(key))
        ).scalar_one_or_none()
        return created

    @operation(writes=True)
    def delete(
        self, namespace: Sequence[str], key: str, *, expected_revision: int | None = None
    ) -> bool:
        """Delete the item; whether one was stored (an expired one counts as none).
        With ``expected_revision``, only an item at that revision.

        Raises:
            ConflictError: ``stale``, an item is stored at another revision.
        """
        found = _key_of(namespace, key)
        connection = self._connection()
        now = self._now()
        statement = delete(ITEMS).where(_where(found))
        if expected_revision is None:
            live = connection.execute(statement.where(_live(now))).rowcount
            connection.execute(statement)  # an expired item goes too
            return bool(live)
        bounded_int(expected_revision, "expected_revision", low=1)
        if connection.execute(
            statement.where(ITEMS.c.revision == expected_revision, _live(now))
        ).rowcount:
            return True
        stored = connection.execute(
            select(ITEMS.c.revision).where(_where(found), _live(now))
        ).scalar_one_or_none()
        if stored is None:
            return False
        raise ConflictError(
            f"memory item {found.namespace!r} {found.key!r} is at revision {stored}, "
            f"not {expected_revision}",
            reason="stale",
            expected=expected_revision,
            actual=stored,
        )

    @operation(writes=True)
    def delete_all(
        self, namespace_prefix: Sequence[str], *, filter: Mapping[str, Any] | None = None
    ) -> int:
        """Delete every item under ``namespace_prefix`` (the namespace and every one
        below it) that meets ``filter`` (all of them without one): a user's memories,
        or one session's; how many.

        Raises:
            ValidationError: a bad prefix (it needs at least one label) or filter.
        """
        prefix = checked_namespace(namespace_prefix, name="namespace_prefix")
        conditions = checked_filter(filter)
        connection = self._connection()
        if not conditions:
            return int(connection.execute(delete(ITEMS).where(_under(prefix))).rowcount)
        doomed = [
            (row.namespace, row.key)
            for row in connection.execute(
                _COLUMNS.where(_under(prefix), *_in_sql(connection.dialect, conditions))
            )
            if matches(_item(row).value, conditions)
        ]
        for chunk in _chunks(doomed):
            connection.execute(delete(ITEMS).where(rows_in(connection.dialect, _KEY, chunk)))
        return len(doomed)

    @operation(writes=False)
    def search(
        self,
        namespace_prefix: Sequence[str] = (),
        *,
        filter: Mapping[str, Any] | None = None,
        query_vector: Sequence[float] | None = None,
        metric: Metric = "cosine",
        words: str | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[MemoryItem]:
        """Items under ``namespace_prefix`` (the namespace and every one below it; all
        items for ``()``) that meet ``filter``, newest write first; with
        ``query_vector``, closest first by their ``score`` under ``metric``, the best of
        each item's vectors (only items with a vector of the query's length); with
        ``words``, the items whose ``text`` holds any of its words (a whole word,
        whatever its case; a word in a script without spaces anywhere in the text),
        those holding the most first, then the newest, ``score`` the count. Keyword
        search reads through the database's own text index (SQLite FTS5, PostgreSQL
        full-text search, MariaDB/MySQL FULLTEXT) where it can, with the same answer
        everywhere. Reading does not restart times to live (``refresh`` does).

        Raises:
            ValidationError: a bad prefix, filter, vector, words, limit or offset, or
                both a vector and words.
        """
        prefix = checked_namespace(namespace_prefix, name="namespace_prefix", empty=True)
        conditions = checked_filter(filter)
        bounded_int(limit, "limit", high=MAX_PAGE)
        bounded_int(offset, "offset")
        query = None if query_vector is None else _checked_query(query_vector)
        if metric not in METRICS:
            raise ValidationError(
                f"metric must be one of {', '.join(METRICS)}, got {metric!r}", path="metric"
            )
        now = self._now()
        if words is not None:
            checked_text(words, "words", max_length=MAX_QUERY_CHARS, min_length=0)
            if query is not None:
                raise ValidationError("search by query_vector or by words, not both", path="words")
            wanted = frozenset(words_of(words))
            return self._by_words(prefix, now, conditions, wanted, limit, offset)
        if query is None:
            base = _COLUMNS
        else:
            base = (
                _VECTORS.add_columns(json_text(ITEMS.c.value).label("value"))
                if conditions
                else _VECTORS
            )
        statement = base.where(
            _under(prefix), _live(now), *_in_sql(self._connection().dialect, conditions)
        )
        if query is None:
            statement = statement.order_by(
                ITEMS.c.updated_at.desc(), ITEMS.c.namespace, ITEMS.c.key
            )
            if not conditions:
                page = self._connection().execute(statement.limit(limit).offset(offset))
                return [_item(row) for row in page]
            return _pick(self._connection().execute(statement), conditions, limit, offset)
        return self._by_meaning(statement, conditions, query, metric, limit, offset)

    def _by_words(
        self,
        prefix: Namespace,
        now: datetime,
        conditions: dict[str, Any],
        wanted: frozenset[str],
        limit: int,
        offset: int,
    ) -> list[MemoryItem]:
        """The page of items holding the most of the words ``wanted``, then newest."""
        if not wanted:
            return []
        statement = _COLUMNS.where(
            _under(prefix), _live(now), *_in_sql(self._connection().dialect, conditions)
        )
        narrowed = self._through_text_index(wanted)
        if narrowed is not None:
            statement = statement.where(narrowed)
        ordered = statement.order_by(ITEMS.c.updated_at.desc(), ITEMS.c.namespace, ITEMS.c.key)
        scored: list[tuple[int, MemoryItem]] = []
        for row in self._connection().execute(ordered):
            count = held(wanted, row.text)
            if not count:
                continue
            item = _item(row)
            if not conditions or matches(item.value, conditions):
                scored.append((count, item))
        scored.sort(key=lambda pair: -pair[0])  # stable: newest first among equals
        page = scored[offset : offset + limit]
        return [item.model_copy(update={"score": float(count)}) for count, item in page]

    def _through_text_index(self, wanted: frozenset[str]) -> ColumnElement[bool] | None:
        """The condition that narrows a keyword search to the items the database's text
        index finds for ``wanted``; None when it cannot find them all (``_keywords``)."""
        connection = self._connection()
        kind = capabilities(connection.dialect).text_index
        if kind is None:
            return None
        index = self._text_index(kind)
        if not all(index.finds(word) for word in wanted):
            return None
        if kind == "fulltext":
            # InnoDB indexes a transaction's writes only at its COMMIT: a search after a
            # write in the same unit of work would miss them.
            if self._work.wrote:
                return None
            found: ColumnElement[bool] = ITEMS.c.words.match(" ".join((*sorted(wanted), OVERFLOW)))
            return found
        if kind == "tsvector":
            query = " | ".join((*sorted(wanted), OVERFLOW))
            matched: ColumnElement[bool] = simple_tsvector(ITEMS.c.words).op("@@")(
                func.to_tsquery(TEXT_SEARCH_CONFIG, query)
            )
            return matched
        phrases = " OR ".join(f'"{word}"' for word in (*sorted(wanted), OVERFLOW))
        return literal_column("rowid").in_(
            select(literal_column("rowid"))
            .select_from(WORDS_INDEX)
            .where(literal_column(WORDS_INDEX.name).op("MATCH")(phrases))
        )

    def _text_index(self, kind: str) -> TextIndex:
        """What this database's text index holds (read once per engine)."""
        connection = self._connection()
        known = self._work.settings.text_indexes
        found = known.get(connection.dialect)
        if found is None:
            found = known[connection.dialect] = _read_text_index(connection, kind)
        return found

    def _by_meaning(
        self,
        statement: Select[Any],
        conditions: dict[str, Any],
        query: list[float],
        metric: str,
        limit: int,
        offset: int,
    ) -> list[MemoryItem]:
        """The page of items closest to ``query`` among those ``statement`` reads that
        meet ``conditions``, each with its score.

        Rows are scored as read and only the page's are made records: a value is decoded
        before then only where a filter must look at it.
        """
        score = _scorer(metric, query)
        paths_of: dict[str, Any] = {}  # most items share one list of fields
        scored: list[tuple[float, Any]] = []
        read = self._connection().execute(statement.order_by(ITEMS.c.namespace, ITEMS.c.key))
        for row in read.all():
            paths = paths_of.get(row.embedding_paths)
            if paths is None:
                paths = paths_of[row.embedding_paths] = decode_json(
                    row.embedding_paths,
                    table=TABLE,
                    key=(row.namespace, row.key),
                    column="embedding_paths",
                )
            vectors = _vectors(paths, row.embeddings, (row.namespace, row.key), len(query))
            if not vectors or (conditions and not matches(_value(row), conditions)):
                continue
            scored.append((max(map(score, vectors)), row))
        scored.sort(key=lambda pair: -pair[0])  # stable: by namespace and key among equals
        page = [(best, (row.namespace, row.key)) for best, row in scored[offset : offset + limit]]
        if not page:
            return []
        connection = self._connection()
        whole = connection.execute(
            _COLUMNS.where(rows_in(connection.dialect, _KEY, [key for _, key in page]))
        )
        read_again = {(row.namespace, row.key): row for row in whole}
        return [
            _item(read_again[key]).model_copy(update={"score": best})
            for best, key in page
            if key in read_again  # deleted since by another transaction: not found
        ]

    @operation(writes=False)
    def list_namespaces(
        self,
        *,
        prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        """The namespaces items are stored under, in order: those starting with
        ``prefix`` and ending with ``suffix`` (a ``*`` label matches any label), each
        cut to its first ``max_depth`` labels (duplicates then listed once).

        Raises:
            ValidationError: a bad prefix, suffix, depth, limit or offset.
        """
        head = () if prefix is None else _pattern(prefix, "prefix")
        tail = () if suffix is None else _pattern(suffix, "suffix")
        if max_depth is not None:
            bounded_int(max_depth, "max_depth", low=1)
        bounded_int(limit, "limit", high=MAX_PAGE)
        bounded_int(offset, "offset")
        fixed: list[str] = []
        for label in head:
            if label == "*":
                break
            fixed.append(label)
        statement = (
            select(ITEMS.c.namespace)
            .where(_under(tuple(fixed)), _live(self._now()))
            .distinct()
            .order_by(ITEMS.c.namespace)
        )
        found: list[Namespace] = []
        seen: set[Namespace] = set()
        for (stored,) in self._connection().execute(statement):
            labels = decode_namespace(stored)
            if head and not _namespace_matches(labels, head, at_end=False):
                continue
            if tail and not _namespace_matches(labels, tail, at_end=True):
                continue
            if max_depth is not None:
                labels = labels[:max_depth]
            if labels not in seen:
                seen.add(labels)
                found.append(labels)
        found.sort()
        return found[offset : offset + limit]

    @operation(writes=False)
    def expired(
        self, *, after: tuple[datetime, Sequence[str], str] | None = None, limit: int = 500
    ) -> list[MemoryItem]:
        """Items whose time to live ran out, by expiry, namespace and key, after the
        position ``after`` (the last item's ``(expires_at, namespace, key)``): what
        retention's ``expired_memories`` rule lists, a page at a time.

        Raises:
            ValidationError: a bad position or limit.
        """
        bounded_int(limit, "limit", low=1, high=MAX_PAGE)
        expired = and_(ITEMS.c.expires_at.is_not(None), ITEMS.c.expires_at <= self._now())
        statement = _COLUMNS.where(expired)
        if after is not None:
            at, namespace, key = after
            position = _key_of(namespace, key)
            statement = statement.where(
                or_(
                    ITEMS.c.expires_at > at,
                    and_(
                        ITEMS.c.expires_at == at,
                        or_(
                            ITEMS.c.namespace > position.stored,
                            and_(ITEMS.c.namespace == position.stored, ITEMS.c.key > position.key),
                        ),
                    ),
                )
            )
        ordered = statement.order_by(ITEMS.c.expires_at, ITEMS.c.namespace, ITEMS.c.key)
        return [_item(row) for row in self._connection().execute(ordered.limit(limit))]

    @operation(writes=True)
    def delete_expired(
        self, items: Sequence[tuple[Sequence[str], str]]
    ) -> list[tuple[Namespace, str]]:
        """Delete those of ``items`` (namespace, key pairs) still expired now (one
        refreshed or rewritten since it was listed stays); those deleted, in order."""
        keys = [_key_of(namespace, key) for namespace, key in items]
        now = self._now()
        expired = and_(ITEMS.c.expires_at.is_not(None), ITEMS.c.expires_at <= now)
        connection = self._connection()
        gone: set[tuple[str, str]] = set()
        for chunk in _chunks(sorted({(k.stored, k.key) for k in keys})):
            among = rows_in(connection.dialect, _KEY, chunk)
            # Those still expired, locked so no refresh slips in before the DELETE.
            still = connection.execute(
                locking(select(ITEMS.c.namespace, ITEMS.c.key).where(among, expired))
            ).all()
            if still:
                doomed = [(row.namespace, row.key) for row in still]
                connection.execute(delete(ITEMS).where(rows_in(connection.dialect, _KEY, doomed)))
                gone.update(doomed)
        deleted: list[tuple[Namespace, str]] = []
        for k in keys:  # in the order given, each once
            if (k.stored, k.key) in gone:
                gone.discard((k.stored, k.key))
                deleted.append((k.namespace, k.key))
        return deleted


def _chunks(pairs: list[tuple[str, str]]) -> Iterator[list[tuple[str, str]]]:
    """``pairs`` (stored namespace, key) in lists short enough for one IN."""
    for start in range(0, len(pairs), _KEYS_AT_ONCE):
        yield pairs[start : start + _KEYS_AT_ONCE]


WORDS_INDEX = table(WORDS_TABLE)
"""SQLite's FTS5 table over ``words`` (its rowid is the item's), where FTS5 is built in."""


_WORDS_TABLE_EXISTS = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
"""Whether SQLite has the FTS5 table ``WORDS_TABLE`` (migration 0006 makes it only where
SQLite has FTS5), in SQLite's own parameter style: a driver cursor runs it too."""


def rebuild_words_index(cursor: Any) -> None:
    """SQLite, after VACUUM: index the items' words again, where the FTS5 table is. Its
    rows are keyed by the items' rowids, which SQLite says VACUUM may renumber (none
    was renumbered here, but a missed item would go unnoticed)."""
    cursor.execute(_WORDS_TABLE_EXISTS, (WORDS_TABLE,))
    if cursor.fetchone() is not None:
        # A constant: the table's own name, no input (FTS5's commands name the table).
        cursor.execute(f"INSERT INTO {WORDS_TABLE}({WORDS_TABLE}) VALUES ('rebuild')")  # noqa: S608


def _read_text_index(connection: Any, kind: str) -> TextIndex:
    """What the text index of ``kind`` over ``words`` holds, as the database says."""
    if kind == "tsvector":
        return TextIndex(present=True)
    if kind == "fts5":
        found = connection.exec_driver_sql(_WORDS_TABLE_EXISTS, (WORDS_TABLE,)).first()
        return TextIndex(present=found is not None)
    shortest, longest, server_list, user_list = connection.execute(
        text(
            "SELECT @@innodb_ft_min_token_size, @@innodb_ft_max_token_size, "
            "@@innodb_ft_server_stopword_table, @@innodb_ft_user_stopword_table"
        )
    ).first()
    if server_list or user_list:
        return NO_INDEX  # a stopword list of the server's own: which words it drops is unknown
    stopwords = connection.execute(
        text("SELECT value FROM information_schema.INNODB_FT_DEFAULT_STOPWORD")
    ).all()
    return TextIndex(
        present=True,
        shortest=int(shortest),
        longest=min(int(longest), LONGEST_INDEXED),
        stopwords=frozenset(str(row[0]).lower() for row in stopwords),
    )


def _checked_query(vector: Sequence[float]) -> list[float]:
    try:
        numbers = [float(number) for number in vector]
    except (TypeError, ValueError):
        raise ValidationError(
            "query_vector must be a sequence of numbers", path="query_vector"
        ) from None
    if not numbers or not all(math.isfinite(number) for number in numbers):
        raise ValidationError(
            "query_vector must be a non-empty vector of finite numbers", path="query_vector"
        )
    return numbers


def _pattern(value: object, name: str) -> Namespace:
    if not isinstance(value, tuple | list):
        raise ValidationError(
            f"{name} must be a tuple of strings, got {type(value).__name__}", path=name
        )
    for index, label in enumerate(value):
        if not isinstance(label, str) or not label:
            raise ValidationError(f"{name}[{index}] must be a non-empty string", path=name)
    return tuple(value)


def _in_sql(dialect: Any, conditions: dict[str, Any]) -> list[ColumnElement[bool]]:
    """The conditions of a filter the database can test exactly as ``matches`` does, so
    it reads only the rows that may match (every condition is still checked in Python):
    a top-level field equal to a string. (A number or a boolean stays in Python, where
    ``1`` equals ``1.0`` and ``True``, as in LangGraph's stores.)"""
    found = []
    for path, condition in conditions.items():
        wanted = condition
        if isinstance(condition, dict) and set(condition) == {"$eq"}:
            wanted = condition["$eq"]
        if type(wanted) is str and "." not in path:
            exact = json_key_equals(dialect, ITEMS.c.value, path, wanted)
            if exact is not None:
                found.append(exact)
    return found


def _pick(
    rows: Iterable[Any], conditions: dict[str, Any], limit: int, offset: int
) -> list[MemoryItem]:
    """The page ``offset``, ``limit`` of the items whose value meets ``conditions``."""
    kept = (item for item in map(_item, rows) if matches(item.value, conditions))
    return list(itertools.islice(kept, offset, offset + limit))
