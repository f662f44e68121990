"""JSON validation owned by the library: what is stored is exactly what comes back.

Drivers and databases disagree about JSON (SQLite stores NaN and lone surrogates,
PostgreSQL rejects them, MariaDB rejects them through a CHECK, Python's encoder
turns ``{1: 2}`` into ``{"1": 2}`` and tuples into lists). So values are checked
here, before any SQL, and the error names the path of the offending value.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from ._checks import bounded_int, text_problem
from .errors import CorruptRecordError, ValidationError

MiB = 1024 * 1024
MAX_DEPTH = 31
"""The deepest nesting of lists and objects every supported database stores: MariaDB's
``json_valid`` CHECK refuses 32 levels or more (errno 4025), SQLite and PostgreSQL take
more. One limit on every dialect, so a value stored on one can be copied to any other."""


@dataclass(frozen=True)
class Limits:
    """Size and depth limits, enforced before any write.

    The defaults stay below MariaDB's 16 MiB ``max_allowed_packet`` even when every
    byte needs escaping on the way to the server (at most twice the size).

    Attributes:
        max_value_bytes: largest JSON value (session state, a message's content or
            metadata, a step field), in bytes of UTF-8 JSON text.
        max_checkpoint_bytes: largest checkpoint payload, in bytes of UTF-8 JSON text.
        max_depth: deepest nesting of lists and objects in one stored value (a column:
            a message's content, a checkpoint's whole payload), at most ``MAX_DEPTH``
            (31), what every supported database stores.
    """

    max_value_bytes: int = 4 * MiB
    max_checkpoint_bytes: int = 6 * MiB
    max_depth: int = MAX_DEPTH

    def __post_init__(self) -> None:
        for name in ("max_value_bytes", "max_checkpoint_bytes"):
            bounded_int(getattr(self, name), f"Limits.{name}", low=1)
        bounded_int(self.max_depth, "Limits.max_depth", low=1, high=MAX_DEPTH)


_SCALARS = (str, int, float, bool, type(None))


def _describe(path: str, problem: str) -> ValidationError:
    return ValidationError(f"{path}: {problem}", path=path)


def _too_deep(where: str, limits: Limits) -> ValidationError:
    return _describe(
        where,
        f"nesting deeper than {limits.max_depth} levels (Limits.max_depth; {MAX_DEPTH} is the "
        "most every supported database stores)",
    )


def _check_string(text: str, path: str) -> None:
    problem = text_problem(text)
    if problem is not None:
        raise _describe(path, problem)


JSONB_EXACT_FLOAT_LIMIT = 1e16
"""Floats this large (Python writes them with an exponent) come back from PostgreSQL's
JSONB as integers of the decimal written, not as the float: refused in session state."""


def _check_scalar(value: object, path: str, jsonb: bool = False) -> None:
    kind = type(value)
    if kind is str:
        _check_string(value, path)  # type: ignore[arg-type]
    elif kind is float and not math.isfinite(value):  # type: ignore[arg-type]
        raise _describe(path, f"{value!r} is not a JSON number (NaN and infinities are not JSON)")
    elif kind is float and jsonb and abs(value) >= JSONB_EXACT_FLOAT_LIMIT:  # type: ignore[arg-type]
        raise _describe(
            path,
            f"the float {value!r} is 1e16 or more: session state is JSONB on PostgreSQL, which "
            "would hand it back as an integer; store an int, or the number as a string",
        )
    elif kind not in _SCALARS:
        hint = ""
        if kind is tuple:
            hint = "; use a list"
        elif hasattr(value, "model_dump"):
            hint = "; pass .model_dump(mode='json')"
        raise _describe(path, f"a {kind.__name__} is not a JSON value{hint}")


def check_json(
    value: Any,
    *,
    path: str,
    limits: Limits,
    max_bytes: int | None = None,
    jsonb: bool = False,
) -> str:
    """Check that ``value`` is plain JSON within ``limits`` and return its JSON text.

    Plain JSON means dicts with str keys, lists, str, int, finite float, bool and None,
    of those exact types (subclasses could serialise differently from how they compare).
    ``jsonb`` applies the extra rule of values stored as JSONB on PostgreSQL (session
    state), on every dialect alike so a value means the same everywhere.
    """
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        kind = type(item)
        if kind is dict:
            if depth >= limits.max_depth:
                raise _too_deep(where, limits)
            for key, child in item.items():
                if type(key) is not str:
                    raise _describe(where, f"key {key!r} is a {type(key).__name__}, not a str")
                _check_string(key, f"{where} key {key[:40]!r}")
                stack.append((child, f"{where}[{key!r}]", depth + 1))
        elif kind is list:
            if depth >= limits.max_depth:
                raise _too_deep(where, limits)
            stack.extend(
                (child, f"{where}[{index}]", depth + 1) for index, child in enumerate(item)
            )
        else:
            _check_scalar(item, where, jsonb)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (ValueError, TypeError, RecursionError) as exc:  # huge ints beyond str() limits
        raise _describe(path, f"cannot be written as JSON ({exc})") from None
    limit = limits.max_value_bytes if max_bytes is None else max_bytes
    size = len(text.encode("utf-8"))
    if size > limit:
        raise _describe(path, f"is {size:,} bytes of JSON, over the limit of {limit:,} bytes")
    return text


def check_row(
    json_fields: dict[str, Any],
    *,
    path: str,
    limits: Limits,
    text_fields: dict[str, str | None] | None = None,
) -> None:
    """Check the JSON and free-text fields of one row, and their size together.

    Each value is also limited alone, but a row is one packet on the way to the server:
    three fields at the limit each would make a row MariaDB refuses by dropping the
    connection. Together they must stay within ``max_value_bytes``.
    """
    total = 0
    for name, value in json_fields.items():
        total += len(check_json(value, path=f"{path}.{name}", limits=limits).encode("utf-8"))
    for name, text in (text_fields or {}).items():
        if text is not None:
            _check_string(text, f"{path}.{name}")
            total += len(text.encode("utf-8"))
    if total > limits.max_value_bytes:
        fields = ", ".join([*json_fields, *(text_fields or {})])
        raise _describe(
            path,
            f"{fields} together are {total:,} bytes, over the limit of "
            f"{limits.max_value_bytes:,} bytes for one row",
        )


def check_object(value: Any, *, path: str, limits: Limits, jsonb: bool = False) -> dict[str, Any]:
    """Check a JSON object (session state, metadata) and return it; with ``jsonb``, in
    the form JSONB keeps (``jsonb_form``), which is then what every dialect stores."""
    if type(value) is not dict:
        raise _describe(path, f"must be a dict of JSON values, got {type(value).__name__}")
    check_json(value, path=path, limits=limits, jsonb=jsonb)
    return jsonb_form(value) if jsonb else value


def _jsonb_key_order(key: str) -> tuple[int, bytes]:
    encoded = key.encode("utf-8")
    return len(encoded), encoded


def jsonb_form(value: Any) -> Any:
    """A checked JSON value as PostgreSQL's JSONB hands it back: ``-0.0`` as ``0.0``
    (JSONB numbers are ``numeric``, which has no negative zero) and every object's
    keys in JSONB's order (shorter keys first, then by their UTF-8 bytes).

    Session, app and user state are JSONB on PostgreSQL; they are stored in this form
    on every dialect, so the same state reads back the same everywhere, and a record
    returned by a write equals the one read back. ``==`` is unchanged by it."""
    kind = type(value)
    if kind is dict:
        return {key: jsonb_form(value[key]) for key in sorted(value, key=_jsonb_key_order)}
    if kind is list:
        return [jsonb_form(item) for item in value]
    if kind is float and value == 0.0:
        return 0.0
    return value


def canonical(value: Any) -> str:
    """The JSON text of a checked value with sorted keys: two values are the same JSON
    (``1`` is not ``1.0``, ``True`` is not ``1``) exactly when their texts are equal."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


_SCAN = json.JSONDecoder().raw_decode
"""``json.loads``'s own decoder, called without ``loads``'s per-call checks."""


def loads(text: str) -> Any:
    """``json.loads(text)``, the same value or error, at about a quarter of its cost on
    short texts (a stored message, a state value) where the per-call checks
    (the type, a byte-order mark, two regular-expression scans for surrounding
    whitespace) cost more than the decoding itself. What agentledger stores has no
    surrounding whitespace; anything else goes through ``json.loads``."""
    try:
        value, end = _SCAN(text)
    except (ValueError, TypeError):
        return json.loads(text)  # its error, or whitespace before the value
    if end != len(text):
        return json.loads(text)  # its error, or whitespace after the value
    return value


def decode_json(text: str | None, *, table: str, key: object, column: str) -> Any:
    """Decode a stored JSON text; a value that is not JSON raises CorruptRecordError."""
    if text is None:
        return None
    try:
        return loads(text)
    except (ValueError, TypeError) as error:
        raise CorruptRecordError(
            f"{table} row {key!r}: column {column} does not hold valid JSON ({error}); "
            "it was written by something other than agentledger",
            table=table,
            key=key,
            column=column,
        ) from None
