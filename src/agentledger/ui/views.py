"""What each page shows, read from an ``AsyncLedger`` and shaped as plain data: the
templates render it as HTML, the JSON answers are the same data (no web framework here).

Each page is a bounded number of indexed queries:

- sessions: one query, a keyset page of the ``updated_at`` index (per app, user or
  status when filtered) with ``limit + 1`` rows; the framework filter (an id prefix)
  and the search (title, opening message, id or external key) are conditions on that walk, so a rare
  one reads much of the index, or PostgreSQL scans the table and sorts the matches;
  when the page lists LangGraph threads, one more query finds those paused at an
  interrupt (``LangGraphRepository.paused``: primary-key look-ups per thread);
- one session: one read-only transaction of eight queries: the session row by primary
  key, its last messages, last steps, newest checkpoints (each on ``(session_id, seq)``),
  the latest checkpoint's payload (by the same index), its active grants, and its app
  and user state by primary key; ``?after=`` reads a
  window of messages instead of the last ones (the same index); a LangGraph thread's
  checkpoints, in LangGraph's own tables, are one more read-only read of three queries
  (``LangGraphRepository.session_rows``: the ``(session_id, checkpoint_id)`` index, the
  writes' and the channel values' primary keys);
- usage: three grouped range scans of the steps' ``(started_at, model)`` index (per
  day, per model, per user, the last joined to the sessions by primary key).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ..clock import system_clock
from ..ids import FRAMEWORKS, Framework, framework_id_prefix, framework_of
from ..langgraph_records import (
    CheckpointRow,
    SessionRows,
    ValueRow,
    WriteRow,
)
from ..ledger import AsyncLedger
from ..records import (
    Checkpoint,
    CheckpointInfo,
    MemoryItem,
    Message,
    Step,
    TokenUsage,
    UsageGroup,
)
from . import decode

PAGE_SIZES = (25, 50, 100, 200)
"""The page sizes the sessions page offers (the first is the default)."""
MESSAGES_SHOWN = 100
"""Messages of a conversation shown at once (the last ones, or a window)."""
STEPS_SHOWN = 50
CHECKPOINTS_SHOWN = 200
USAGE_PERIODS = (1, 7, 30, 90, 365)
"""The periods (in days, ending now) the usage page offers."""
_ZERO = TokenUsage()
_INDENT_BELOW = 200
"""JSON text shorter than this is shown indented (see ``as_json``)."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class BadRequest(ValueError):
    """A query parameter the page cannot use; its message names the parameter."""


def visible(text: str) -> str:
    """``text`` with control characters (terminal escape sequences, bidirectional
    overrides) shown as ``\\xNN`` / ``\\uNNNN`` escapes, never interpreted; newlines and
    tabs stay. HTML escaping is the templates' job, on top of this."""
    return _CONTROL.sub(lambda m: json.dumps(m.group())[1:-1], text)


def as_json(value: Any) -> str:
    """A stored JSON value as text, for display: indented when small; one line
    (wrapped by the page) when larger, as json's C encoder writes only that, and a
    page shows hundreds of these."""
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    if len(text) <= _INDENT_BELOW:
        return json.dumps(value, ensure_ascii=False, indent=2)
    return text


# --- sessions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionFilters:
    """The sessions page's query: filters, search text, page size and cursor."""

    app: str | None = None
    user: str | None = None
    status: str | None = None
    framework: Framework | None = None
    q: str | None = None
    limit: int = PAGE_SIZES[0]
    cursor: str | None = None

    @classmethod
    def parse(cls, params: dict[str, str]) -> SessionFilters:
        """The filters in query parameters (empty ones ignored); BadRequest for a
        framework or limit the page does not know."""
        given = {name: value for name, value in params.items() if value != ""}
        framework = given.get("framework")
        if framework is not None and framework not in FRAMEWORKS:
            raise BadRequest(f"framework: choose one of {', '.join(FRAMEWORKS)}")
        try:
            limit = int(given.get("limit", PAGE_SIZES[0]))
        except ValueError:
            raise BadRequest("limit: a number of sessions, 1 to 1000") from None
        return cls(
            app=given.get("app"),
            user=given.get("user"),
            status=given.get("status"),
            framework=framework,
            q=given.get("q"),
            limit=limit,
            cursor=given.get("cursor"),
        )

    def query(self, **changes: Any) -> dict[str, str]:
        """These filters as query parameters (without empty ones), with ``changes``."""
        values = {
            "app": self.app,
            "user": self.user,
            "status": self.status,
            "framework": self.framework,
            "q": self.q,
            "limit": None if self.limit == PAGE_SIZES[0] else str(self.limit),
            "cursor": self.cursor,
        }
        values.update(changes)
        return {name: value for name, value in values.items() if value is not None}


MEMORY_PAGE = 200
"""The most memory items the memories page shows."""


@dataclass(frozen=True)
class MemoryFilters:
    """The memories page's query: a namespace (labels joined by ``/``) and everything
    under it, or the namespaces holding a label (a user's id, say)."""

    namespace: tuple[str, ...] = ()
    label: str | None = None

    @classmethod
    def parse(cls, params: dict[str, str]) -> MemoryFilters:
        """The filters in query parameters; BadRequest for a namespace with an empty
        label (``a//b``)."""
        namespace = params.get("namespace", "").strip("/")
        labels = tuple(namespace.split("/")) if namespace else ()
        if any(not label for label in labels):
            raise BadRequest("namespace: labels joined by '/', none of them empty")
        return cls(namespace=labels, label=params.get("label") or None)

    def query(self) -> dict[str, str]:
        """These filters as query parameters (without empty ones)."""
        values = {"namespace": "/".join(self.namespace), "label": self.label or ""}
        return {name: value for name, value in values.items() if value}


async def memories_page(ledger: AsyncLedger, filters: MemoryFilters) -> dict[str, Any]:
    """The namespaces under the filters' namespace (those holding its label, if it
    has one), and their newest items, at most ``MEMORY_PAGE``."""
    namespaces = await ledger.memory.list_namespaces(prefix=filters.namespace or None, limit=10_000)
    if filters.label is not None:
        namespaces = [found for found in namespaces if filters.label in found]
    items: dict[tuple[tuple[str, ...], str], MemoryItem] = {}
    for namespace in namespaces:
        if len(items) >= MEMORY_PAGE:
            break
        for item in await ledger.memory.search(namespace, limit=MEMORY_PAGE):
            items.setdefault((item.namespace, item.key), item)
    newest = sorted(items.values(), key=lambda item: item.updated_at, reverse=True)
    return {
        "filters": filters.query(),
        "namespaces": [visible("/".join(namespace)) for namespace in namespaces],
        "memories": [memory_view(item) for item in newest[:MEMORY_PAGE]],
    }


def memory_view(item: MemoryItem) -> dict[str, Any]:
    """One memory item as the page shows it."""
    return {
        "namespace": visible("/".join(item.namespace)),
        "key": visible(item.key),
        "value": visible(as_json(item.value)),
        "text": None if item.text is None else visible(item.text),
        "revision": item.revision,
        "updated_at": item.updated_at.isoformat(),
        "expires_at": None if item.expires_at is None else item.expires_at.isoformat(),
    }


async def sessions_page(ledger: AsyncLedger, filters: SessionFilters) -> dict[str, Any]:
    """One keyset page of sessions, most recent activity first."""
    page = await ledger.sessions.list(
        include=["external_key"],
        app_name=filters.app,
        user_id=filters.user,
        status=filters.status,
        id_prefix=framework_id_prefix(filters.framework) if filters.framework else None,
        search=filters.q,
        limit=filters.limit,
        cursor=filters.cursor,
    )
    items = [
        {**item.model_dump(mode="json"), "framework": framework_of(item.id)} for item in page.items
    ]
    threads = [item["id"] for item in items if item["framework"] == "langgraph"]
    # A thread's session stays "active"; paused at an interrupt, the list says so.
    paused = set(await ledger.langgraph().paused(threads)) if threads else set()
    for item in items:
        item["shown_status"] = "paused" if item["id"] in paused else item["status"]
    return {
        "filters": filters.query(cursor=None),
        "sessions": items,
        "next_cursor": page.next_cursor,
    }


# --- one session ------------------------------------------------------------------------


async def session_page(ledger: AsyncLedger, id: str, *, after: int | None = None) -> dict[str, Any]:
    """Session ``id``: the conversation (its last messages, or the window after seq
    ``after``), steps, grants, the checkpoint tree, app and user state, read in one
    read-only transaction."""
    async with ledger.unit_of_work(readonly=True) as uow:
        view = await uow.sessions.overview(
            id,
            messages=MESSAGES_SHOWN if after is None else 0,
            steps=STEPS_SHOWN,
            checkpoints=CHECKPOINTS_SHOWN,
        )
        messages = (
            view.messages
            if after is None
            else await uow.messages.window(id, after_seq=after, limit=MESSAGES_SHOWN)
        )
        record = view.session
        latest = await uow.checkpoints.latest(id) if record.latest_checkpoint_ref else None
        app_state = await uow.app_state.get(record.app_name) if record.app_name else None
        user_state = (
            await uow.user_state.get(record.app_name, record.user_id)
            if record.app_name and record.user_id
            else None
        )
    session = record.model_dump(mode="json")
    session["framework"] = framework_of(record.id)
    threads = None
    if session["framework"] == "langgraph":
        # LangGraph keeps its checkpoints in tables of its own: one more read-only read.
        threads = langgraph_threads(
            await ledger.langgraph().session_rows(record.id, checkpoints=CHECKPOINTS_SHOWN)
        )
    # A LangGraph thread's session stays "active" (LangGraph has no notion of a run's
    # end); paused at an interrupt, it says so.
    session["shown_status"] = "paused" if threads and threads["paused"] else record.status
    return {
        "session": session,
        "messages": named_results([message_view(message) for message in messages]),
        "earlier": _earlier(messages),
        "later": messages[-1].seq if messages and messages[-1].seq < record.message_seq else None,
        "steps": timeline(view.steps),
        "grants": [grant.model_dump(mode="json") for grant in view.grants],
        "checkpoints": checkpoint_tree(view.checkpoints, latest=record.latest_checkpoint_ref),
        "paused": paused_at(latest) if latest else None,
        "langgraph": threads,
        "app_state": app_state.model_dump(mode="json") if app_state else None,
        "user_state": user_state.model_dump(mode="json") if user_state else None,
    }


def paused_at(checkpoint: Checkpoint) -> dict[str, Any]:
    """Where the run of the latest checkpoint stands: the tool calls it waits on (and
    whether an interrupt holds each), who raised each interrupt, the pending interrupts
    and the size of the context window it resumes with."""
    payload = checkpoint.payload
    return {
        "ref": checkpoint.ref,
        "seq": checkpoint.seq,
        "created_at": checkpoint.created_at.isoformat(),
        "pending_tool_calls": [
            {"id": call_id, **pending.model_dump(mode="json")}
            for call_id, pending in payload.pending_tool_calls.items()
        ],
        "interrupt_requesters": payload.interrupt_requesters,
        "pending_interrupts": payload.pending_interrupts,
        "context_messages": len(payload.context_window),
    }


def _earlier(messages: list[Message]) -> int | None:
    """The ``after`` of the window before ``messages``, None at the start."""
    if not messages or messages[0].seq <= 1:
        return None
    return max(0, messages[0].seq - 1 - MESSAGES_SHOWN)


_CALL_TYPES = {"function_call", "tool_call", "tool_use", "computer_call", "custom_tool_call"}
_RESULT_TYPES = {
    "function_call_output",
    "tool_result",
    "computer_call_output",
    "custom_tool_call_output",
}
_TEXT_KEYS = ("text", "content", "output_text", "refusal")


def message_view(message: Message) -> dict[str, Any]:
    """A message as the page shows it: the record, its text, the tool calls in it as
    found (``tool_calls``) and as the page folds them (``tools``: each a call or a
    result, with its name, call id and body). Frameworks shape content differently (a
    string; ``{"text": ...}``; OpenAI Agents items with a ``type``: messages with
    ``output_text`` parts, ``function_call`` / ``function_call_output``; ADK contents
    with ``parts``: ``text``, ``function_call``, ``function_response``), so text and
    tool calls are looked for, and the whole content is always there too."""
    text, calls = _text_and_calls(message.content)
    tools = [tool_view(call) for call in calls]
    if not calls:
        text, tools = _tools_in_metadata(message, text)
    return {
        **message.model_dump(mode="json"),
        "text": text,
        "tool_calls": calls,
        "tools": tools,
    }


def _tools_in_metadata(message: Message, text: str) -> tuple[str, list[dict[str, Any]]]:
    """The text and tools of a message whose content has no tool call, from its
    metadata as agentledger's own examples store them: the calls a model asked for in
    ``tool_call`` / ``tool_calls``; a tool's result, its content, named by
    ``tool_call_id`` (the result then is the message: no separate text)."""
    metadata = message.metadata
    calls: list[Any] = []
    for key in ("tool_call", "tool_calls"):
        found = metadata.get(key)
        if found:
            calls.extend(found if isinstance(found, list) else [found])
    tools = [tool_view(call) for call in calls]
    call_id = metadata.get("tool_call_id")
    if isinstance(call_id, str):
        result = tool_view({"type": "tool_result", "call_id": call_id, "output": message.content})
        return "", [*tools, result]
    return text, tools


def named_results(views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``views`` with each nameless tool result named after the call of its call id
    among them (an OpenAI ``function_call_output`` has only the call id)."""
    names = {
        tool["call_id"]: tool["name"]
        for view in views
        for tool in view["tools"]
        if tool["kind"] == "call" and tool["call_id"] and tool["name"]
    }
    for view in views:
        for tool in view["tools"]:
            if tool["kind"] == "result" and tool["name"] is None:
                tool["name"] = names.get(tool["call_id"])
    return views


def tool_view(call: Any) -> dict[str, Any]:
    """One tool call or result as the page folds it: ``kind`` (``call`` or
    ``result``), ``name`` and ``call_id`` when it has them, and ``body``: the arguments
    of a call (decoded when a JSON string), the output of a result, else all of it."""
    if not isinstance(call, dict):
        return {"kind": "call", "name": None, "call_id": None, "body": call}
    kind = "result" if call.get("type") in _RESULT_TYPES else "call"
    body: Any = call
    inner = call.get("function")
    name = call.get("name")
    if isinstance(inner, dict):  # chat completions: {"function": {"name", "arguments"}}
        name, body = inner.get("name"), inner.get("arguments", inner)
    elif "arguments" in call:
        body = call["arguments"]
    elif "args" in call:  # ADK function_call
        body = call["args"]
    elif "response" in call:  # ADK function_response
        kind, body = "result", call["response"]
    elif "output" in call:
        body = call["output"]
    elif "input" in call:
        body = call["input"]
    if isinstance(body, str):
        with contextlib.suppress(ValueError):
            body = json.loads(body)
    call_id = call.get("call_id") or call.get("id") or call.get("tool_use_id")
    return {
        "kind": kind,
        "name": name if isinstance(name, str) else None,
        "call_id": call_id if isinstance(call_id, str) else None,
        "body": body,
    }


def _text_and_calls(content: Any) -> tuple[str, list[Any]]:
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    calls: list[Any] = []
    _collect(content, texts, calls, depth=0)
    return "\n".join(texts), calls


def _collect(value: Any, texts: list[str], calls: list[Any], *, depth: int) -> None:
    """Texts and tool calls found in ``value``, outermost first (a few levels deep)."""
    if depth > 4:
        return
    if isinstance(value, list):
        for item in value:
            _collect(item, texts, calls, depth=depth + 1)
        return
    if not isinstance(value, dict):
        return
    if value.get("type") in _CALL_TYPES | _RESULT_TYPES:
        calls.append(value)
        return
    for key in _TEXT_KEYS:
        if isinstance(value.get(key), str):
            texts.append(value[key])
    for key in ("tool_calls", "function_call", "functionCall"):
        found = value.get(key)
        if found:
            calls.extend(found if isinstance(found, list) else [found])
    for key in ("function_response", "functionResponse"):
        found = value.get(key)
        if isinstance(found, dict):
            calls.append({"response": None, **found})
    for key in ("content", "parts"):
        if isinstance(value.get(key), list | dict):
            _collect(value[key], texts, calls, depth=depth + 1)


def timeline(steps: list[Step]) -> dict[str, Any]:
    """The steps as a timeline: each with its offset and duration as fractions of the
    span from the first start to the last end (for the bars), model and tokens;
    ``timed``: whether any step recorded when it ended (else bars would say nothing)."""
    if not steps:
        return {"span_seconds": 0.0, "items": [], "timed": False}
    start = min(step.started_at for step in steps)
    end = max(step.ended_at or step.started_at for step in steps)
    span = max((end - start).total_seconds(), 1e-6)
    items = []
    for step in steps:
        took = (step.ended_at - step.started_at).total_seconds() if step.ended_at else None
        items.append(
            {
                **step.model_dump(mode="json"),
                "duration_seconds": took,
                "offset": (step.started_at - start).total_seconds() / span,
                "width": (took or 0.0) / span,
            }
        )
    timed = any(item["duration_seconds"] is not None for item in items)
    return {"span_seconds": span, "items": items, "timed": timed}


def checkpoint_tree(checkpoints: list[CheckpointInfo], *, latest: str | None) -> dict[str, Any]:
    """The checkpoints as a tree by ``parent_ref``, oldest first, in branches (see
    ``branches``)."""
    ordered = sorted(checkpoints, key=lambda item: item.seq)

    def node(info: CheckpointInfo) -> dict[str, Any]:
        return {**info.model_dump(mode="json"), "latest": info.ref == latest}

    return {
        "latest": latest,
        "count": len(checkpoints),
        "branches": branches(
            ordered, ref=lambda info: info.ref, parent=lambda info: info.parent_ref, node=node
        ),
    }


def branches(
    items: list[Any],
    *,
    ref: Callable[[Any], str],
    parent: Callable[[Any], str | None],
    node: Callable[[Any], dict[str, Any]],
) -> list[list[dict[str, Any]]]:
    """``items`` (oldest first) as a tree by parent, in branches: a branch is a chain of
    nodes each the parent of the next, down to one with no child or with several (a
    fork, whose ``branches`` follow). Chains stay flat, so a run saved 200 times is one
    list, not 200 levels. An item whose parent is not among them (older, expired,
    pruned) starts a branch of the top level, ``parent_missing``."""
    known = {ref(item) for item in items}
    children: dict[str | None, list[Any]] = {}
    for item in items:
        above = parent(item)
        children.setdefault(above if above in known else None, []).append(item)

    def branch(start: Any) -> list[dict[str, Any]]:
        chain, item = [], start
        while True:
            below = children.get(ref(item), [])
            above = parent(item)
            chain.append(
                {
                    **node(item),
                    "fork": len(below) > 1,
                    "parent_missing": above is not None and above not in known,
                    "branches": [branch(child) for child in below] if len(below) > 1 else [],
                }
            )
            if len(below) != 1:
                return chain
            item = below[0]

    return [branch(item) for item in children.get(None, [])]


INTERRUPT_CHANNEL = "__interrupt__"
"""The channel of LangGraph's pending writes that hold an interrupt."""


START_CHANNEL = "__start__"
"""The channel holding a run's input (shown on the checkpoint the input made)."""


def is_state_channel(channel: str) -> bool:
    """Whether a LangGraph channel is the graph's state (``order``, ``messages``...)
    rather than one of LangGraph's own (``__start__``, ``branch:to:pay``...)."""
    return not channel.startswith("__") and ":" not in channel


def langgraph_threads(rows: SessionRows) -> dict[str, Any]:
    """A LangGraph thread's checkpoints (from its own tables) as a tree per namespace:
    parent ids, forks, the latest of each namespace, metadata (step, source, writes),
    the graph's state at each checkpoint and the pending writes on each (interrupts
    apart, with what each asks). Values are decoded for display (``decode``): JSON and
    msgpack ones as JSON, any other as its type and size; ``paused``: the interrupts the
    thread waits on (those on the root namespace's latest checkpoint), else None."""
    writes: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for write in rows.writes:
        writes.setdefault((write.checkpoint_ns, write.checkpoint_id), []).append(_write_view(write))
    values = {(value.checkpoint_ns, value.channel, value.version): value for value in rows.values}
    by_namespace: dict[str, list[CheckpointRow]] = {}
    for row in reversed(rows.checkpoints):  # oldest first
        by_namespace.setdefault(row.checkpoint_ns, []).append(row)
    namespaces = []
    paused = None
    for ns in sorted(by_namespace):
        items = by_namespace[ns]
        latest = items[-1].checkpoint_id

        def node(row: CheckpointRow, ns: str = ns, latest: str = latest) -> dict[str, Any]:
            pending = writes.get((ns, row.checkpoint_id), [])
            return {
                "checkpoint_id": row.checkpoint_id,
                "parent_checkpoint_id": row.parent_checkpoint_id,
                "created_at": row.created_at.isoformat(),
                "type": row.type,
                "size": row.size,
                "step": row.metadata.get("step"),
                "source": row.metadata.get("source"),
                "metadata_writes": row.metadata.get("writes"),
                "metadata": row.metadata,
                "latest": row.checkpoint_id == latest,
                "state": checkpoint_state(row, values),
                "writes": [w for w in pending if w["channel"] != INTERRUPT_CHANNEL],
                "interrupts": [w for w in pending if w["channel"] == INTERRUPT_CHANNEL],
            }

        tree = branches(
            items,
            ref=lambda row: row.checkpoint_id,
            parent=lambda row: row.parent_checkpoint_id,
            node=node,
        )
        namespaces.append({"checkpoint_ns": ns, "latest": latest, "count": len(items)})
        namespaces[-1]["branches"] = tree
        if ns == "":
            held = [w for w in writes.get((ns, latest), []) if w["channel"] == INTERRUPT_CHANNEL]
            if held:
                paused = {
                    "checkpoint_id": latest,
                    "interrupts": [ask for write in held for ask in write["asks"]],
                    "state": checkpoint_state(items[-1], values),
                }
    return {
        "count": len(rows.checkpoints),
        "more": rows.more,
        "paused": paused,
        "namespaces": namespaces,
    }


def checkpoint_state(
    row: CheckpointRow, values: dict[tuple[str, str, str], ValueRow]
) -> list[dict[str, Any]]:
    """The graph's state at checkpoint ``row``, channel by channel (LangGraph's own
    channels left out, but for an input checkpoint its ``__start__``: the input): the
    small values kept inside the checkpoint, the others at the version it names; each
    decoded for display, or its type and size (``type`` None: its value was not read)."""
    inline: dict[str, Any] = {}
    if row.checkpoint is not None:
        checkpoint = decode.shown(row.type, row.checkpoint)
        stored = checkpoint.value.get("channel_values") if checkpoint.decoded else None
        inline = stored if isinstance(stored, dict) else {}
    state = []
    given = row.metadata.get("source") == "input"
    for channel in sorted(set(row.channel_versions) | set(inline)):
        if not (is_state_channel(channel) or (given and channel == START_CHANNEL)):
            continue
        if channel in inline:
            state.append({"channel": channel, "decoded": True, "value": inline[channel]})
            continue
        found = values.get((row.checkpoint_ns, channel, row.channel_versions[channel]))
        if found is None:  # kept inside a checkpoint too large to read, or past the limit
            state.append({"channel": channel, "decoded": False, "value": None, "type": None})
            continue
        if found.type == "empty":
            continue
        value = decode.shown(found.type, found.value)
        state.append(
            {
                "channel": channel,
                "decoded": value.decoded,
                "value": value.value,
                "type": found.type,
                "size": found.size,
            }
        )
    return state


def interrupt_asks(value: Any) -> list[dict[str, Any]]:
    """What an ``__interrupt__`` write's decoded value asks: one entry per interrupt,
    ``value`` (what the graph passed to ``interrupt()``) and ``question``, its text
    when it is text or has a text ``question``, else None."""
    items = value if isinstance(value, list) else [value]
    asks = []
    for item in items:
        asked = item
        if isinstance(item, dict) and str(item.get(decode.CLASS_KEY, "")).endswith(".Interrupt"):
            fields = item.get("fields")
            asked = fields.get("value") if isinstance(fields, dict) else None
        question = asked.get("question") if isinstance(asked, dict) else asked
        asks.append(
            {
                "question": question if isinstance(question, str) else None,
                "value": asked,
                # Shown apart from the question when it holds more than the question.
                "more": asked != question and asked != {"question": question},
            }
        )
    return asks


def _write_view(write: WriteRow) -> dict[str, Any]:
    value = decode.shown(write.type, write.value)
    return {
        "task_id": write.task_id,
        "idx": write.idx,
        "channel": write.channel,
        "type": write.type,
        "size": write.size,
        "decoded": value.decoded,
        "value": value.value,
        "asks": interrupt_asks(value.value)
        if value.decoded and write.channel == INTERRUPT_CHANNEL
        else [],
    }


# --- usage --------------------------------------------------------------------------------


@dataclass(frozen=True)
class UsagePeriod:
    """The usage page's period: the last ``days`` days up to now, of one user if given."""

    days: int = 30
    user: str | None = None
    until: datetime = field(default_factory=system_clock)

    @classmethod
    def parse(cls, params: dict[str, str], now: datetime) -> UsagePeriod:
        """The period in query parameters; BadRequest for one the page does not offer."""
        try:
            days = int(params.get("days") or 30)
        except ValueError:
            days = 0
        if days not in USAGE_PERIODS:
            raise BadRequest(f"days: choose one of {', '.join(map(str, USAGE_PERIODS))}")
        return cls(days=days, user=params.get("user") or None, until=now)

    @property
    def since(self) -> datetime:
        """The start of the period: midnight UTC, ``days - 1`` days before today."""
        today = self.until.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return today - timedelta(days=self.days - 1)


async def usage_page(ledger: AsyncLedger, period: UsagePeriod) -> dict[str, Any]:
    """Tokens per day (every day of the period, empty ones included), per model and per
    user, with the bars' lengths as fractions of the largest."""
    since, until, user = period.since, period.until, period.user
    # Three scans of the same range, each its own read: run side by side.
    days, models, users = await asyncio.gather(
        ledger.steps.usage_by("day", since=since, until=until, user_id=user),
        ledger.steps.usage_by("model", since=since, until=until, user_id=user, limit=20),
        ledger.steps.usage_by("user", since=since, until=until, user_id=user, limit=20),
    )
    by_day = {group.key: group for group in days}
    every_day = [(period.since + timedelta(days=n)).date().isoformat() for n in range(period.days)]
    filled = [by_day.get(day) or UsageGroup(key=day, steps=0, usage=_ZERO) for day in every_day]
    return {
        "period": {
            "days": period.days,
            "user": period.user,
            "since": period.since.isoformat(),
            "until": period.until.isoformat(),
        },
        "total_tokens": sum(group.usage.total_tokens for group in days),
        "per_day": _bars(filled),
        "day_chart": day_chart(filled),
        "per_model": _bars(models),
        "per_user": _bars(users),
    }


CHART_WIDTH, CHART_HEIGHT = 720, 200
"""The per-day chart's size in SVG units (drawn at that size: text keeps its shape)."""
_PLOT_LEFT, _PLOT_RIGHT, _PLOT_TOP, _PLOT_BOTTOM = 64, 712, 12, 172
"""The plot area inside the chart: room on the left for the token axis, below for dates."""
_MOST_DATE_LABELS = 8


def day_chart(days: list[UsageGroup]) -> dict[str, Any]:
    """Tokens per day as an SVG bar chart's geometry: the plot area, a bar per day
    (``x``, ``y``, ``width``, ``height``, its day and tokens), the token axis's ticks
    (round numbers from 0 up past the largest day, each with its ``y`` and label) and
    the date labels under the bars (at most eight, evenly spaced, the last day always
    one)."""
    ticks = axis_ticks(max((day.usage.total_tokens for day in days), default=0))
    top, height = ticks[-1], _PLOT_BOTTOM - _PLOT_TOP
    slot = (_PLOT_RIGHT - _PLOT_LEFT) / max(len(days), 1)

    def y(tokens: int) -> float:
        return round(_PLOT_BOTTOM - tokens / top * height, 1)

    bars = [
        {
            "day": day.key,
            "tokens": day.usage.total_tokens,
            "x": round(_PLOT_LEFT + n * slot + slot * 0.15, 1),
            "width": round(slot * 0.7, 1),
            "y": y(day.usage.total_tokens),
            "height": round(_PLOT_BOTTOM - y(day.usage.total_tokens), 1),
        }
        for n, day in enumerate(days)
    ]
    every = -(-len(days) // _MOST_DATE_LABELS)  # ceil
    labelled = range(len(days) - 1, -1, -every)  # counted back from the last day
    return {
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "left": _PLOT_LEFT,
        "right": _PLOT_RIGHT,
        "top": _PLOT_TOP,
        "bottom": _PLOT_BOTTOM,
        "bars": bars,
        "ticks": [{"y": y(tick), "label": compact(tick)} for tick in ticks],
        "dates": [
            {
                "x": round(_PLOT_LEFT + (n + 0.5) * slot, 1),
                "label": datetime.fromisoformat(str(days[n].key)).strftime("%b %-d"),
            }
            for n in sorted(labelled)
        ],
    }


def compact(number: int) -> str:
    """A token count as an axis label: ``950``, ``9,500``, ``95k``, ``1.5M``."""
    if number >= 1_000_000:
        return f"{number / 1_000_000:.4g}M"
    if number >= 10_000:
        return f"{number / 1_000:.4g}k"
    return f"{number:,}"


def axis_ticks(largest: int) -> list[int]:
    """Round tick values from 0 to the first at or above ``largest``: a step of 1, 2 or
    5 times a power of ten, at most five steps (``[0, 1]`` when all is zero)."""
    if largest <= 0:
        return [0, 1]
    step = 1
    while -(-largest // step) > 5:
        for factor in (2, 5 / 2, 2):  # 1 -> 2 -> 5 -> 10
            step = int(step * factor)
            if -(-largest // step) <= 5:
                break
    return list(range(0, -(-largest // step) * step + 1, step))


def _bars(groups: list[UsageGroup]) -> list[dict[str, Any]]:
    top = max((group.usage.total_tokens for group in groups), default=0) or 1
    return [
        {**group.model_dump(mode="json"), "fraction": group.usage.total_tokens / top}
        for group in groups
    ]
