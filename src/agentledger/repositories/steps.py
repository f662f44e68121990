"""Steps: the append-only trace of each run, with token usage rolled up on the session.

Concurrent appenders never conflict: each append reserves its seqs from the session
row's counter under the row lock (see ``allocate_step_seqs``), in the same
transaction that inserts the steps, so seqs are contiguous and totals exact. A
step append never bumps the session's revision, so a concurrent save still succeeds.

A step may carry the caller's key (``external_key``), unique per session. An append
with keys first locks the session row (FOR UPDATE, the lock its seq allocation takes
anyway), then looks the keys up: a step stored with the same content is returned and
not appended again, so a retried append stores one row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, Literal, cast, get_args

from sqlalchemy import Integer, Row, Table, Update, bindparam, func, insert, literal, select, update
from sqlalchemy.orm import Session

from .._checks import bounded_int, checked_text, scope_value
from .._dialects import capabilities, locking
from .._json import canonical, check_row, decode_json
from .._limits import MAX_ROW_KEY_LENGTH, TOKEN_LIMIT
from .._translate import duplicate_as
from ..clock import utc
from ..errors import ConflictError, CorruptRecordError, NotFoundError, ValidationError
from ..ids import validate_id
from ..models import AgentSession, AgentStep
from ..models.types import json_text, utc_day
from ..records import NewStep, Step, TokenUsage, UsageGroup, collector_paused, from_stored
from ._base import Repository, operation
from ._seqlog import SeqLog
from ._session_row import session_exists
from ._statements import CounterForm, counter_after_update, counter_form

UsageKey = Literal["day", "model", "user"]
"""What ``steps.usage_by`` groups by."""
_USAGE_KEYS: tuple[UsageKey, ...] = ("day", "model", "user")
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
# Totals over many sessions pass 2**63 - 1, which SQLite's sum() refuses ("integer
# overflow") and PostgreSQL and MariaDB hand back as numbers TokenUsage must take: each
# counter is summed as its high and low 32 bits, which no sum of under 2**31 rows
# overflows, and put back together exactly in Python, the same on every dialect.
_SPLIT_SUMS = [
    func.coalesce(func.sum(part), 0)
    for name in ("input_tokens", "output_tokens", "total_tokens")
    for part in (_STEPS.c[name].op(">>")(literal(32, Integer)), _STEPS.c[name].op("&")(0xFFFFFFFF))
]
_OF_SESSION = _STEPS.c.session_id == bindparam("id")
_AFTER = _STEPS.c.seq > bindparam("after", type_=Integer())
_PAGE = bindparam("n", type_=Integer())
# One query each on the (session_id, run_id, seq) and (session_id, kind, seq) indexes.
_BY_RUN = (
    _READ.where(_OF_SESSION, _STEPS.c.run_id == bindparam("value"), _AFTER)
    .order_by(_STEPS.c.seq)
    .limit(_PAGE)
)
_BY_KIND = (
    _READ.where(_OF_SESSION, _STEPS.c.kind == bindparam("value"), _AFTER)
    .order_by(_STEPS.c.seq)
    .limit(_PAGE)
)
_INSERT = insert(_STEPS)
_BY_KEYS = locking(
    _READ.where(_OF_SESSION, _STEPS.c.external_key.in_(bindparam("keys", expanding=True))),
    read=True,
)

TOKEN_COLUMNS = ("input_tokens", "output_tokens", "total_tokens")


def _step_seqs_statement(form: CounterForm) -> Update:
    """The UPDATE of ``allocate_step_seqs``, with its new counter returned, put through
    ``LAST_INSERT_ID(expr)``, or left to be read back (``counter_form``). Every total
    is bounded, whether or not the call adds to it (a total at most ``TOKEN_LIMIT``
    minus nothing holds for every row)."""
    table = cast(Table, AgentSession.__table__)
    count = table.c.step_count + bindparam("b_count", type_=Integer())
    values: dict[str, Any] = {
        "step_count": func.last_insert_id(count) if form == "last_insert_id" else count,
        **{name: table.c[name] + bindparam(f"b_{name}") for name in TOKEN_COLUMNS},
        "updated_at": bindparam("b_now", type_=table.c.updated_at.type),
    }
    statement = (
        update(table)
        .where(
            table.c.id == bindparam("b_id"),
            *(table.c[name] <= bindparam(f"b_{name}_limit") for name in TOKEN_COLUMNS),
        )
        .values(values)
    )
    return statement.returning(table.c.step_count) if form == "returning" else statement


# Built once: building and cache-keying a statement per call cost more than running it.
_STEP_SEQS = {form: _step_seqs_statement(form) for form in get_args(CounterForm)}
_SESSION_TABLE = cast(Table, AgentSession.__table__)
_STEP_COUNT = select(_SESSION_TABLE.c.step_count).where(_SESSION_TABLE.c.id == bindparam("b_id"))


def allocate_step_seqs(
    session: Session, id: str, count: int, usage: tuple[int, int, int], now: datetime
) -> int | None:
    """Reserve ``count`` step seqs on session ``id`` and add ``usage`` to its totals.

    One UPDATE under the session row's lock, so concurrent appenders get contiguous
    seqs and exact totals; the revision is left alone (steps never conflict with a
    save). Returns the last seq reserved, or None when no row matched: the session does
    not exist, or a total would pass ``TOKEN_LIMIT`` (the row is then left as it was).

    PostgreSQL and SQLite read the new counter back with ``UPDATE ... RETURNING``.
    MariaDB/MySQL have no UPDATE RETURNING: the counter goes through
    ``LAST_INSERT_ID(expr)``, which the next ``SELECT LAST_INSERT_ID()`` on the same
    connection returns, still inside the transaction. Elsewhere (the portable profile)
    it is read from the row the UPDATE locked.
    """
    connection = session.connection()
    params: dict[str, Any] = {"b_id": id, "b_count": count, "b_now": now}
    for name, added in zip(TOKEN_COLUMNS, usage, strict=True):
        params[f"b_{name}"] = added
        params[f"b_{name}_limit"] = TOKEN_LIMIT - added
    form = counter_form(capabilities(connection.dialect))
    result = connection.execute(_STEP_SEQS[form], params)
    return counter_after_update(connection, result, form, _STEP_COUNT, params)


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


def steps_of(rows: Iterable[Row[Any]]) -> list[Step]:
    """Steps from rows of ``_READ`` (see ``step_of``), built with the collector paused."""
    with collector_paused():
        return [step_of(row) for row in rows]


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
            "external_key": values["external_key"],
        },
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
_ROW_FIELDS = (*_STEP_FIELDS, "started_at", "ended_at", "error", "external_key")


class StepRepository(Repository):
    """The single implementation of the step operations."""

    def _validated(self, steps: Any) -> list[NewStep]:
        limits = self._work.settings.limits
        checked = _as_new_steps(steps)
        keys: set[str] = set()
        for index, step in enumerate(checked):
            if step.external_key is not None:
                where = f"steps[{index}].external_key"
                key = checked_text(step.external_key, where, max_length=MAX_ROW_KEY_LENGTH)
                if key in keys:
                    raise ValidationError(f"{where} {key!r} appears twice in the batch", path=where)
                keys.add(key)
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
                if not 0 <= value <= TOKEN_LIMIT:
                    raise ValidationError(f"steps[{index}].usage.extra[{name!r}] is out of range")
        return checked

    @operation(writes=True)
    def append(
        self, id: str, steps: NewStep | dict[str, Any] | Iterable[NewStep | dict[str, Any]]
    ) -> list[Step]:
        """Record one step or a batch (one INSERT for the batch); returns them with seqs.

        A step whose ``external_key`` is already stored with the same content is
        returned as stored and not recorded again (a retried append stores one row).

        Raises:
            ConflictError: reason ``duplicate`` when a key is stored with other content;
                nothing is stored.
            NotFoundError: no such session (it was never created, or was deleted);
                nothing is stored.
            ValidationError: a step that cannot be stored, named by its index.
        """
        validate_id(id)
        checked = self._validated(steps)
        self._work.replay_safe = bool(checked) and all(s.external_key for s in checked)
        now = self._work.settings.now()
        _usage(checked)  # the whole batch must fit, before any SQL
        found: list[Step | None] = [None] * len(checked)
        if any(step.external_key is not None for step in checked):
            found = self._stored_by_key(id, checked)
            checked = [step for step, old in zip(checked, found, strict=True) if old is None]
            if not checked:
                return [old for old in found if old is not None]
        usage = _usage(checked)
        last = allocate_step_seqs(self._session, id, len(checked), usage, now)
        if last is None:
            if session_exists(self._session, id):
                raise ValidationError(
                    f"session {id!r}: the steps would take its token totals past "
                    f"2**63 - 1 (the most a BIGINT holds); nothing is stored",
                    path="steps",
                )
            raise NotFoundError(f"no session {id!r}: steps are not stored", id=id)
        first = last - len(checked) + 1
        records = [
            self._record(id, first + offset, step, now) for offset, step in enumerate(checked)
        ]
        rows = [self._row_values(record) for record in records]
        with duplicate_as(lambda: _duplicate(id)):
            self._session.connection().execute(_INSERT, rows)
        fresh = iter(records)
        return [old if old is not None else next(fresh) for old in found]

    def _stored_by_key(self, id: str, steps: list[NewStep]) -> list[Step | None]:
        """For each step, the one stored under its key (None: not stored), read under the
        session row's lock taken first, so keyed appenders of one session take turns;
        ConflictError ``duplicate`` for a key stored with other content."""
        if not session_exists(self._session, id, lock="update"):
            raise NotFoundError(f"no session {id!r}: steps are not stored", id=id)
        keys = [step.external_key for step in steps if step.external_key is not None]
        rows = self._session.connection().execute(_BY_KEYS, {"id": id, "keys": keys}).all()
        stored = {row.external_key: step_of(row) for row in rows}
        found = [stored.get(step.external_key) if step.external_key else None for step in steps]
        for step, old in zip(steps, found, strict=True):
            if old is not None and not _same_step(step, old):
                raise ConflictError(
                    f"session {id!r} already holds a step with key {step.external_key!r} "
                    "and other content",
                    reason="duplicate",
                    id=id,
                )
        return found

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
                "external_key": step.external_key,
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
        return steps_of(_LOG.last(self._work, self._one_statement_session_connection(), id, n))

    @operation(writes=False)
    def window(self, id: str, *, after_seq: int = 0, limit: int = 1000) -> list[Step]:
        """Up to ``limit`` steps after ``after_seq``, in seq order.

        Raises:
            NotFoundError: no such session.
        """
        rows = _LOG.window(
            self._work,
            self._one_statement_session_connection(),
            id,
            after_seq=after_seq,
            limit=limit,
        )
        return steps_of(rows)

    @operation(writes=False)
    def by_run(self, id: str, run_id: str, *, after_seq: int = 0, limit: int = 1000) -> list[Step]:
        """Up to ``limit`` steps of run ``run_id`` after ``after_seq``, in seq order (one
        indexed query; page by passing the last seq seen).

        Raises:
            NotFoundError: no such session.
        """
        validate_id(run_id, what="run_id")
        return self._filtered(_BY_RUN, id, run_id, after_seq, limit)

    @operation(writes=False)
    def by_kind(self, id: str, kind: str, *, after_seq: int = 0, limit: int = 1000) -> list[Step]:
        """Up to ``limit`` steps of kind ``kind`` (``model``, ``tool``...) after
        ``after_seq``, in seq order (one indexed query).

        Raises:
            NotFoundError: no such session.
        """
        checked_text(kind, "kind", max_length=32)
        return self._filtered(_BY_KIND, id, kind, after_seq, limit)

    def _filtered(
        self, query: Any, id: str, value: str, after_seq: object, limit: object
    ) -> list[Step]:
        validate_id(id)
        params = {
            "value": value,
            "after": bounded_int(after_seq, "after_seq"),
            "n": bounded_int(limit, "limit", low=1, high=MAX_BATCH),
        }
        return steps_of(
            _LOG.rows(self._work, self._one_statement_session_connection(), id, query, **params)
        )

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
        query = select(*_SPLIT_SUMS)
        if session_id is not None:
            query = query.where(_STEPS.c.session_id == validate_id(session_id))
        if user_id is not None:
            query = query.join(_SESSIONS, _SESSIONS.c.id == _STEPS.c.session_id).where(
                _SESSIONS.c.user_id == scope_value(user_id, field="user_id")
            )
        if model is not None:
            query = query.where(_STEPS.c.model == checked_text(model, "model", max_length=255))
        if since is not None:
            query = query.where(_STEPS.c.started_at >= utc(since, field="since"))
        if until is not None:
            query = query.where(_STEPS.c.started_at < utc(until, field="until"))
        sums = [int(value) for value in self._session.execute(query).one()]
        totals = [(high << 32) + low for high, low in zip(sums[::2], sums[1::2], strict=True)]
        return TokenUsage(input_tokens=totals[0], output_tokens=totals[1], total_tokens=totals[2])

    @operation(writes=False)
    def usage_by(
        self,
        by: UsageKey,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        user_id: str | None = None,
        limit: int = 1000,
    ) -> list[UsageGroup]:
        """Token totals of the steps started in ``since <= t < until`` (of ``user_id``'s
        sessions, if given), grouped ``by`` ``"day"`` (UTC; in day order), ``"model"`` or
        ``"user"`` (the session's user_id; both largest total first), at most ``limit``
        groups. As in ``usage``, a bound left out leaves that side open: no bounds, every
        step. One query: a range scan of the ``(started_at, model)`` index (all of it
        without bounds), joined to the sessions only for ``"user"`` or ``user_id``.

        Raises:
            ValidationError: an unknown ``by``, naive times or a bad limit.
        """
        if by not in _USAGE_KEYS:
            raise ValidationError(
                f"usage_by: by must be one of {', '.join(_USAGE_KEYS)}, got {by!r}", path="by"
            )
        bounded_int(limit, "limit", low=1, high=10_000)
        key = {"day": utc_day(_STEPS.c.started_at), "model": _STEPS.c.model}.get(
            by, _SESSIONS.c.user_id
        )
        total = func.coalesce(func.sum(_STEPS.c.total_tokens), 0)
        query = select(
            key,
            func.count(),
            func.coalesce(func.sum(_STEPS.c.input_tokens), 0),
            func.coalesce(func.sum(_STEPS.c.output_tokens), 0),
            total,
        )
        if since is not None:
            query = query.where(_STEPS.c.started_at >= utc(since, field="since"))
        if until is not None:
            query = query.where(_STEPS.c.started_at < utc(until, field="until"))
        if by == "user" or user_id is not None:
            query = query.join(_SESSIONS, _SESSIONS.c.id == _STEPS.c.session_id)
        if user_id is not None:
            query = query.where(_SESSIONS.c.user_id == scope_value(user_id, field="user_id"))
        order = key if by == "day" else total.desc()
        rows = self._session.execute(query.group_by(key).order_by(order).limit(limit)).all()
        return [
            UsageGroup(
                key=None if row[0] is None else str(row[0]),
                steps=int(row[1]),
                usage=TokenUsage(
                    input_tokens=int(row[2]), output_tokens=int(row[3]), total_tokens=int(row[4])
                ),
            )
            for row in rows
        ]


def _usage(steps: list[NewStep]) -> tuple[int, int, int]:
    """The token totals of ``steps``; ValidationError when they exceed a BIGINT."""
    usage = (
        sum(step.usage.input_tokens for step in steps),
        sum(step.usage.output_tokens for step in steps),
        sum(step.usage.total_tokens for step in steps),
    )
    if max(usage) > TOKEN_LIMIT:
        raise ValidationError(
            "the token counts of one append add up to more than 2**63 - 1", path="steps"
        )
    return usage


def _same_step(new: NewStep, stored: Step) -> bool:
    """Whether a retried step is the one stored under its key: every field the same
    (JSON as JSON, times as instants), the start time only when the caller gave one."""
    fields = ("step_index", "kind", "run_id", "name", "model", "input", "output", "tool_calls")
    return (
        all(canonical(getattr(new, name)) == canonical(getattr(stored, name)) for name in fields)
        and canonical(new.usage.model_dump()) == canonical(stored.usage.model_dump())
        and new.error == stored.error
        and new.ended_at == stored.ended_at
        and (new.started_at is None or new.started_at == stored.started_at)
    )


def _duplicate(id: str) -> ConflictError:
    return ConflictError(
        f"a step key of this append was stored in session {id!r} meanwhile",
        reason="duplicate",
        id=id,
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
