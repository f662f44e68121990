"""Steps: the append-only trace of each run, with token usage rolled up on the session.

Concurrent appenders never conflict: each append reserves its seqs from the session
row's counter under the row lock (see ``_dialects.allocate_step_seqs``), in the same
transaction that inserts the steps, so seqs are contiguous and totals exact. A
step append never bumps the session's revision, so a concurrent save still succeeds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Row, Table, func, insert, select

from .._concurrency import async_iterate, spawn
from .._dialects import allocate_step_seqs
from .._json import check_row, decode_json
from ..clock import utc
from ..errors import CorruptRecordError, NotFoundError, ValidationError
from ..ids import validate_id
from ..models import AgentSession, AgentStep
from ..models.types import json_text
from ..records import NewStep, Step, TokenUsage, from_stored
from ._base import Repository, operation
from ._seqlog import SeqLog

_STEPS = cast(Table, AgentStep.__table__)
_SESSIONS = cast(Table, AgentSession.__table__)
_JSON_FIELDS = ("input", "output", "tool_calls", "usage_extra")
_READ = select(
    *(
        json_text(column).label(column.name) if column.name in _JSON_FIELDS else column
        for column in _STEPS.c
        if column.name != "id"
    )
)
MAX_BATCH = 10_000
"""The most steps one append stores or one read returns."""
_LOG = SeqLog(_STEPS, _READ, max_read=MAX_BATCH)
_TOKEN_LIMIT = 2**63 - 1


def _as_new_steps(
    steps: NewStep | dict[str, Any] | Iterable[NewStep | dict[str, Any]],
) -> list[NewStep]:
    items: list[Any]
    if isinstance(steps, NewStep | dict):
        items = [steps]
    elif isinstance(steps, str | bytes) or not isinstance(steps, Iterable):
        raise ValidationError("steps must be a NewStep (or dict) or a list of them", path="steps")
    else:
        items = list(steps)
    if not items:
        raise ValidationError("append() needs at least one step", path="steps")
    if len(items) > MAX_BATCH:
        raise ValidationError(f"at most {MAX_BATCH} steps per append", path="steps")
    result = []
    for index, item in enumerate(items):
        try:
            result.append(item if isinstance(item, NewStep) else NewStep.model_validate(item))
        except ValueError as error:
            raise ValidationError(f"steps[{index}]: {error}", path=f"steps[{index}]") from None
    return result


def step_of(row: Row[Any]) -> Step:
    """A Step from a row of ``_READ``, decoding its JSON columns; built without
    validating again what was validated on write."""
    values = dict(row._mapping)
    key = (values["session_id"], values["seq"])
    for name in _JSON_FIELDS:
        values[name] = decode_json(values[name], table="agentledger_steps", key=key, column=name)
    extra = values["usage_extra"] or {}
    if type(extra) is not dict:
        raise CorruptRecordError(
            f"agentledger_steps row {key!r}: column usage_extra is JSON but not an object; "
            "it was written by something other than agentledger",
            table="agentledger_steps",
            key=key,
            column="usage_extra",
        )
    usage = from_stored(
        TokenUsage,
        {
            "input_tokens": values["input_tokens"],
            "output_tokens": values["output_tokens"],
            "total_tokens": values["total_tokens"],
            "extra": extra,
        },
    )
    return from_stored(
        Step,
        {
            **{name: values[name] for name in _STEP_FIELDS},
            "usage": usage,
            "started_at": values["started_at"],
            "ended_at": values["ended_at"],
            "error": values["error"],
        },
    )


_ROW_FIELDS = (
    "session_id",
    "seq",
    "step_index",
    "kind",
    "run_id",
    "name",
    "model",
    "input",
    "output",
    "tool_calls",
    "started_at",
    "ended_at",
    "error",
)
_STEP_FIELDS = (
    "session_id",
    "seq",
    "step_index",
    "kind",
    "run_id",
    "name",
    "model",
    "input",
    "output",
    "tool_calls",
)


class StepRepository(Repository):
    """The single implementation of the step operations."""

    def _validated(self, steps: Any) -> list[NewStep]:
        limits = self._work.settings.limits
        checked = _as_new_steps(steps)
        for index, step in enumerate(checked):
            check_row(
                {name: getattr(step, name) for name in ("input", "output", "tool_calls")},
                path=f"steps[{index}]",
                limits=limits,
                text_fields={"error": step.error},
            )
            for name in ("run_id",):
                if step.run_id is not None:
                    validate_id(step.run_id, what=f"steps[{index}].{name}")
            for name in ("kind", "name", "model", "error"):
                value = getattr(step, name)
                if isinstance(value, str) and "\x00" in value:
                    raise ValidationError(f"steps[{index}].{name} contains a NUL character")
            for name, value in step.usage.extra.items():
                if not 0 <= value <= _TOKEN_LIMIT:
                    raise ValidationError(f"steps[{index}].usage.extra[{name!r}] is out of range")
        return checked

    @operation(writes=True)
    def append(
        self, id: str, steps: NewStep | dict[str, Any] | Iterable[NewStep | dict[str, Any]]
    ) -> list[Step]:
        """Record one step or a batch (one INSERT for the batch); returns them with seqs.

        Raises:
            NotFoundError: no such session (it was never created, or was deleted);
                nothing is stored.
            ValidationError: a step that cannot be stored, named by its index.
        """
        validate_id(id)
        checked = self._validated(steps)
        now = self._work.settings.now()
        usage = (
            sum(step.usage.input_tokens for step in checked),
            sum(step.usage.output_tokens for step in checked),
            sum(step.usage.total_tokens for step in checked),
        )
        if max(usage) > _TOKEN_LIMIT:
            raise ValidationError(
                "the token counts of one append add up to more than 2**63 - 1", path="steps"
            )
        last = allocate_step_seqs(self._session, id, len(checked), usage, now)
        if last is None:
            raise NotFoundError(f"no session {id!r}: steps are not stored", id=id)
        first = last - len(checked) + 1
        records = [
            self._record(id, first + offset, step, now) for offset, step in enumerate(checked)
        ]
        self._session.execute(insert(_STEPS), [self._row_values(record) for record in records])
        return records

    @staticmethod
    def _record(id: str, seq: int, step: NewStep, now: datetime) -> Step:
        # Every value comes from a validated NewStep (or is ours): no second validation.
        return from_stored(
            Step,
            {
                "session_id": id,
                "seq": seq,
                "step_index": step.step_index,
                "kind": step.kind,
                "run_id": step.run_id,
                "name": step.name,
                "model": step.model,
                "input": step.input,
                "output": step.output,
                "tool_calls": step.tool_calls,
                "usage": step.usage,
                "started_at": utc(step.started_at, field="started_at") if step.started_at else now,
                "ended_at": utc(step.ended_at, field="ended_at") if step.ended_at else None,
                "error": step.error,
            },
        )

    @staticmethod
    def _row_values(step: Step) -> dict[str, Any]:
        values = {name: getattr(step, name) for name in _ROW_FIELDS}
        usage = step.usage
        values.update(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.total_tokens,
            usage_extra=usage.extra or None,
        )
        return values

    @operation(writes=False)
    def last(self, id: str, n: int) -> list[Step]:
        """The most recent ``n`` steps in chronological (seq) order.

        Raises:
            NotFoundError: no such session.
        """
        return [step_of(row) for row in _LOG.last(self._session, id, n)]

    @operation(writes=False)
    def window(self, id: str, *, after_seq: int = 0, limit: int = 1000) -> list[Step]:
        """Up to ``limit`` steps after ``after_seq``, in seq order.

        Raises:
            NotFoundError: no such session.
        """
        rows = _LOG.window(self._session, id, after_seq=after_seq, limit=limit)
        return [step_of(row) for row in rows]

    def iterate(self, id: str, *, batch: int = 1000) -> Iterator[Step]:
        """Every step in seq order, read ``batch`` at a time: on a ledger each page is a
        short read transaction of its own (memory stays constant however long the trace
        is); in a unit of work every page is read in its transaction."""
        return _paged(self.window, id, batch)

    @operation(writes=False)
    def count(self, id: str) -> int:
        """How many steps the session holds (read from its counter, not by counting).

        Raises:
            NotFoundError: no such session.
        """
        validate_id(id)
        query = select(_SESSIONS.c.step_count).where(_SESSIONS.c.id == id)
        found = self._session.execute(query).scalar()
        if found is None:
            raise NotFoundError(f"no session {id!r}", id=id)
        return int(found)

    @operation(writes=False)
    def usage(
        self,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        model: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> TokenUsage:
        """Token totals of the steps that match every filter given, summed in SQL.

        ``since`` and ``until`` bound the steps' ``started_at`` (``since <= t < until``).
        Only the three main counters are totalled; ``extra`` stays per step.
        """
        query = select(
            func.coalesce(func.sum(_STEPS.c.input_tokens), 0),
            func.coalesce(func.sum(_STEPS.c.output_tokens), 0),
            func.coalesce(func.sum(_STEPS.c.total_tokens), 0),
        )
        if session_id is not None:
            query = query.where(_STEPS.c.session_id == validate_id(session_id))
        if user_id is not None:
            query = query.join(_SESSIONS, _SESSIONS.c.id == _STEPS.c.session_id).where(
                _SESSIONS.c.user_id == validate_id(user_id, what="user_id")
            )
        if model is not None:
            query = query.where(_STEPS.c.model == model)
        if since is not None:
            query = query.where(_STEPS.c.started_at >= utc(since, field="since"))
        if until is not None:
            query = query.where(_STEPS.c.started_at < utc(until, field="until"))
        totals = self._session.execute(query).one()
        return TokenUsage(
            input_tokens=int(totals[0]), output_tokens=int(totals[1]), total_tokens=int(totals[2])
        )


def _paged(window: Callable[..., list[Step]], id: str, batch: int) -> Iterator[Step]:
    """Steps page by page, each page one ``window`` call (so one read transaction)."""
    after = 0
    while True:
        page = window(id, after_seq=after, limit=batch)
        yield from page
        if len(page) < batch:
            return
        after = page[-1].seq


class AsyncStepRepository:
    """Steps on the async API: each call is handed to the sync ``StepRepository`` in one
    greenlet hop (on a ledger, a transaction of its own; in a unit of work, its own)."""

    def __init__(self, proxied: StepRepository) -> None:
        self._proxied = proxied

    # --- async proxies of StepRepository via _proxied ---
    # (generated by tools/generate_async.py; do not edit by hand)
    async def append(
        self, id: str, steps: NewStep | dict[str, Any] | Iterable[NewStep | dict[str, Any]]
    ) -> list[Step]:
        """Record one step or a batch (one INSERT for the batch); returns them with seqs.

        Raises:
            NotFoundError: no such session (it was never created, or was deleted);
                nothing is stored.
            ValidationError: a step that cannot be stored, named by its index.
        """
        return await spawn(self._proxied.append, id, steps)

    async def last(self, id: str, n: int) -> list[Step]:
        """The most recent ``n`` steps in chronological (seq) order.

        Raises:
            NotFoundError: no such session.
        """
        return await spawn(self._proxied.last, id, n)

    async def window(self, id: str, *, after_seq: int = 0, limit: int = 1000) -> list[Step]:
        """Up to ``limit`` steps after ``after_seq``, in seq order.

        Raises:
            NotFoundError: no such session.
        """
        return await spawn(self._proxied.window, id, after_seq=after_seq, limit=limit)

    async def iterate(self, id: str, *, batch: int = 1000) -> AsyncIterator[Step]:
        """Every step in seq order, read ``batch`` at a time: on a ledger each page is a
        short read transaction of its own (memory stays constant however long the trace
        is); in a unit of work every page is read in its transaction."""
        async for item in async_iterate(self._proxied.iterate(id, batch=batch)):
            yield item

    async def count(self, id: str) -> int:
        """How many steps the session holds (read from its counter, not by counting).

        Raises:
            NotFoundError: no such session.
        """
        return await spawn(self._proxied.count, id)

    async def usage(
        self,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        model: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> TokenUsage:
        """Token totals of the steps that match every filter given, summed in SQL.

        ``since`` and ``until`` bound the steps' ``started_at`` (``since <= t < until``).
        Only the three main counters are totalled; ``extra`` stays per step.
        """
        return await spawn(
            self._proxied.usage,
            session_id=session_id,
            user_id=user_id,
            model=model,
            since=since,
            until=until,
        )

    # --- end of async proxies ---
