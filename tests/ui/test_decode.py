"""LangGraph values decoded for display (``agentledger.ui.decode``), and its safety
rules: a stored value never imports a module, calls a class or a function, or loads a
pickle; what the viewer cannot decode safely is shown as its type and size.

The canary module below records its import and every construction in a file, and
``os.system`` would create one: each rule is proved by a file that does not appear
(and, for LangGraph's own hook, by one that does).
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path

import ormsgpack
import pytest
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_METHOD_SINGLE_ARG,
    EXT_PYDANTIC_V2,
    JsonPlusSerializer,
)
from langgraph.types import Interrupt

from agentledger.ui import decode
from agentledger.ui.decode import CLASS_KEY, NOT_SHOWN, Shown, shown

CANARY = "agentledger_viewer_canary"


@pytest.fixture
def canary(tmp_path: Path) -> Iterator[Path]:
    """An importable module whose import and whose class's construction each append a
    line to ``<tmp>/canary.log``; yields the log's path (absent: nothing happened)."""
    log = tmp_path / "canary.log"
    (tmp_path / f"{CANARY}.py").write_text(
        f"LOG = {str(log)!r}\n"
        "open(LOG, 'a').write('imported\\n')\n"
        "class Boom:\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        open(LOG, 'a').write('constructed\\n')\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        yield log
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(CANARY, None)


def ext(code: int, *stored: object) -> bytes:
    """A msgpack value holding one extension as LangGraph's serializer writes it."""
    return ormsgpack.packb(ormsgpack.Ext(code, ormsgpack.packb(stored)))


def test_langgraphs_own_hook_imports_and_constructs_what_a_value_names(canary: Path) -> None:
    """The danger the viewer avoids: LangGraph's default serializer runs stored names."""
    JsonPlusSerializer(allowed_msgpack_modules=True).loads_typed(
        ("msgpack", ext(EXT_CONSTRUCTOR_KW_ARGS, CANARY, "Boom", {"x": 1}))
    )
    assert canary.read_text() == "imported\nconstructed\n"


def test_an_object_in_msgpack_is_described_not_imported_or_constructed(canary: Path) -> None:
    value = shown("msgpack", ext(EXT_CONSTRUCTOR_KW_ARGS, CANARY, "Boom", {"x": 1}))
    assert value == Shown(True, {CLASS_KEY: f"{CANARY}.Boom", "fields": {"x": 1}})
    assert not canary.exists() and CANARY not in sys.modules


@pytest.mark.parametrize(
    ("code", "shape"),
    [
        (EXT_CONSTRUCTOR_SINGLE_ARG, "value"),
        (EXT_CONSTRUCTOR_POS_ARGS, "args"),
        (EXT_PYDANTIC_V2, "fields"),
    ],
)
def test_every_constructor_extension_is_described_without_running(
    canary: Path, code: int, shape: str
) -> None:
    value = shown("msgpack", ext(code, CANARY, "Boom", [1, 2], None))
    assert value == Shown(True, {CLASS_KEY: f"{CANARY}.Boom", shape: [1, 2]})
    assert not canary.exists()


def test_a_function_named_by_a_value_is_never_called(tmp_path: Path) -> None:
    touched = tmp_path / "pwned"
    command = f"touch {touched}"
    value = shown("msgpack", ext(EXT_CONSTRUCTOR_SINGLE_ARG, "os", "system", command))
    assert value == Shown(True, {CLASS_KEY: "os.system", "value": command})
    method = shown("msgpack", ext(EXT_METHOD_SINGLE_ARG, "os", "system", command, "__call__"))
    assert method == Shown(True, {CLASS_KEY: "os.system", "value": command})
    assert not touched.exists()


def test_a_pickled_value_is_never_loaded(tmp_path: Path) -> None:
    touched = tmp_path / "pwned"

    class Payload:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {touched}",))

    assert shown("pickle", pickle.dumps(Payload())) == NOT_SHOWN
    assert not touched.exists()


def test_a_json_constructor_envelope_stays_a_dict(canary: Path) -> None:
    envelope = {"lc": 2, "type": "constructor", "id": [CANARY, "Boom"], "kwargs": {"x": 1}}
    assert shown("json", json.dumps(envelope).encode()) == Shown(True, envelope)
    assert not canary.exists()


def test_an_interrupt_is_decoded_as_its_class_and_fields() -> None:
    stored = JsonPlusSerializer().dumps_typed((Interrupt(value={"question": "ok?"}, id="i-1"),))
    ((one,),) = [shown(*stored).value]
    assert one[CLASS_KEY] == "langgraph.types.Interrupt"
    assert (one["fields"]["value"], one["fields"]["id"]) == ({"question": "ok?"}, "i-1")


def test_a_compressed_type_tag_decodes_as_its_type() -> None:
    assert shown("msgpack+zlib", ormsgpack.packb({"a": 1})) == Shown(True, {"a": 1})


def test_null_is_none_decoded_and_unread_bytes_are_not_shown() -> None:
    assert shown("null", b"") == Shown(True, None)
    assert shown("msgpack", None) == NOT_SHOWN


def test_bytes_that_do_not_decode_are_shown_as_type_and_size() -> None:
    assert shown("msgpack", b"\xc1") == NOT_SHOWN
    assert shown("json", b"{not json") == NOT_SHOWN


def test_without_langgraph_a_msgpack_value_is_shown_as_type_and_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.serde.jsonplus", None)
    decode._msgpack_loads.cache_clear()
    try:
        assert shown("msgpack", ormsgpack.packb({"a": 1})) == NOT_SHOWN
        assert shown("json", b'{"a": 1}') == Shown(True, {"a": 1})
    finally:
        decode._msgpack_loads.cache_clear()


def test_decoded_values_are_made_json_safe() -> None:
    packed = ormsgpack.packb({1: b"abc", "f": [1.5]}, option=ormsgpack.OPT_NON_STR_KEYS)
    value = shown("msgpack", packed)
    assert value.value == {"1": {CLASS_KEY: "bytes", "size": 3}, "f": [1.5]}
    assert decode.displayable({"n": float("nan"), "t": (1, 2)}) == {"n": "nan", "t": [1, 2]}


def test_deeply_nested_values_are_cut() -> None:
    nested: object = 0
    for _ in range(100):
        nested = [nested]
    value = shown("json", json.dumps(nested).encode()).value
    depth = 0
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    assert (depth, value) == (decode.MAX_DEPTH, "…")
