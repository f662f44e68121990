"""The OpenAI Agents SDK's ``AdvancedSQLiteSession`` on every database (extra
``openai-agents``): branches of a conversation, its turns, and usage per turn.

``LedgerAdvancedSession`` is a ``LedgerSession`` with the SDK's method names and return
shapes. Its ``main`` branch is the ``LedgerSession`` of the same session id; every other
branch is an agentledger session of its own, in the same scope, with the id
``<main's id>.<ULID>``, the external key ``<main's id>#<branch id>`` and, in its state
under ``BRANCH_STATE``, what it was made from. A branch made from turn n holds copies of
the turns before n, so each branch keeps every ``LedgerSession`` guarantee (order, keys,
concurrent writers) on its own.

Turn n of a branch is its n-th user message and what follows it up to the next one.
``store_run_usage`` records a run's usage as a step of kind ``turn`` on the branch,
naming the turn by its user message's seq (never issued again, so a removed turn's usage
is never shown for another): the step's output is the usage as the SDK reports it, and
its token columns hold the tokens unless ``LedgerRunHooks`` recorded the run's model
calls, whose steps already hold them, so ``ledger.steps.usage`` counts each token once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from agents.items import TResponseInputItem
from agents.result import RunResultBase
from agents.run_context import RunContextWrapper

from ..._checks import text_problem
from ...clock import system_clock
from ...errors import ConflictError, NotFoundError, ValidationError
from ...ids import new_id
from ...ledger import AsyncLedger
from ...records import (
    Message,
    NewMessage,
    NewStep,
    SessionRecord,
    SessionSummary,
    Step,
    TokenUsage,
)
from ...uow import AsyncUnitOfWork
from .hooks import run_id_of, token_usage
from .session import LedgerSession

MAIN: Final = "main"
"""The branch every session starts on: the ``LedgerSession`` of the same session id."""
BRANCH_STATE: Final = "openai_agents.branch"
"""The key, in a branch's session state, of what the branch is (``branch_id``, the
``from_turn`` and ``from_branch`` it was made from)."""
TURN_STEP: Final = "turn"
"""The kind of the step ``store_run_usage`` records."""
MAX_BRANCH_ID_LENGTH: Final = 255
_PREVIEW = 100
_PAGE = 1000
_TOOL_CALLS: Final = frozenset(
    {
        "tool_call",
        "function_call",
        "computer_call",
        "file_search_call",
        "web_search_call",
        "code_interpreter_call",
        "tool_search_call",
        "custom_tool_call",
        "mcp_call",
        "mcp_approval_request",
        "shell_call",
        "apply_patch_call",
    }
)
_NAMED_BY_TYPE: Final = frozenset(
    {
        "computer_call",
        "file_search_call",
        "web_search_call",
        "code_interpreter_call",
        "shell_call",
        "apply_patch_call",
    }
)
_logger = logging.getLogger(__name__)


class BranchNotFoundError(NotFoundError, ValueError):
    """No branch of this session has that id (a ``ValueError`` too, as the SDK raises)."""

    def __init__(self, branch_id: str) -> None:
        super().__init__(f"branch {branch_id!r} does not exist", entity="branch", id=branch_id)


class BranchExistsError(ConflictError, ValueError):
    """A branch of this session already has that id (a ``ValueError`` too, as the SDK
    raises)."""

    def __init__(self, branch_id: str) -> None:
        super().__init__(f"branch {branch_id!r} already exists: choose another id", reason="exists")


@dataclass(frozen=True)
class _Turn:
    number: int
    message: Message


class _Branch(LedgerSession):
    """A branch other than main: bound to its agentledger session for good, so a deleted
    branch is never made again by a late writer (it raises ``BranchNotFoundError``)."""

    def __init__(self, owner: LedgerAdvancedSession, branch_id: str, record_id: str) -> None:
        super().__init__(
            owner.session_id,
            owner.ledger,
            session_settings=owner.session_settings,
            app_name=owner.app_name,
            user_id=owner.user_id,
            unseen_items=owner.unseen_items,
        )
        self.branch_id = branch_id
        self._id = record_id

    async def _stored_id(self, ledger: AsyncLedger) -> str | None:
        return self._id  # None once a read found the session gone

    async def _session_in(self, uow: AsyncUnitOfWork) -> SessionRecord:
        if self._id is not None:
            found = await uow.sessions.get_or_none(self._id)
            if found is not None:
                return found
        raise BranchNotFoundError(self.branch_id)


class LedgerAdvancedSession(LedgerSession):
    """``LedgerSession`` with the SDK's ``AdvancedSQLiteSession`` methods: branches made
    from a turn (``create_branch_from_turn``, ``switch_to_branch``, ``list_branches``,
    ``delete_branch``), the turns of a branch, and usage per turn and per session.

    ``get_items``, ``add_items`` and ``pop_item`` work on the current branch (``main`` at
    first; each instance has its own, as in the SDK); ``clear_session`` removes every
    branch and the items of ``main``, and makes ``main`` current. ``LedgerRunHooks`` on
    it record steps on the current branch.
    """

    def __init__(self, session_id: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(session_id, *args, **kwargs)
        self._current = MAIN
        self._bound: _Branch | None = None  # the current branch's session, if not main

    @property
    def current_branch_id(self) -> str:
        """The branch ``get_items``, ``add_items`` and ``pop_item`` work on."""
        return self._current

    # -- the Session protocol, on the current branch --------------------------------

    async def get_items(
        self,
        limit: int | None = None,
        branch_id: str | None = None,
        *,
        wrapper: RunContextWrapper[Any] | None = None,
    ) -> list[TResponseInputItem]:
        """The latest ``limit`` items of ``branch_id`` (the current branch if None), as
        ``LedgerSession.get_items``; an unknown branch has none."""
        try:
            on = await self._on(branch_id)
        except BranchNotFoundError:
            return []
        return await LedgerSession.get_items(on, limit, wrapper=wrapper)

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Store ``items`` on the current branch, as ``LedgerSession.add_items``.

        Raises:
            BranchNotFoundError: the current branch was deleted (by another instance);
                nothing is stored, and the branch is not made again.
        """
        await LedgerSession.add_items(await self._on(None), items, wrapper=wrapper)

    async def pop_item(
        self, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Remove and return the newest item of the current branch, None when it has none."""
        return await LedgerSession.pop_item(await self._on(None), wrapper=wrapper)

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Delete every branch but ``main`` (with its steps) and remove the items of
        ``main`` (its steps stay, as ``LedgerSession.clear_session`` keeps them); ``main``
        becomes current, as the SDK does."""
        ledger = await self._ready()
        main_id = await self._stored_id(ledger)
        if main_id is not None:
            ids = [branch.id for branch in await self._listed(main_id)]

            async def delete(uow: AsyncUnitOfWork) -> None:
                for id in ids:
                    if await uow.sessions.exists(id):
                        await uow.sessions.delete(id)

            await ledger.run(delete)
        self._leave_branch()
        await LedgerSession.clear_session(self, wrapper=wrapper)

    async def record(self) -> SessionRecord:
        """The agentledger session of the current branch (main's is created if need be)."""
        on = await self._on(None)
        return await (super().record() if on is self else on.record())

    async def ledger_session_id(self) -> str:
        """The id of the current branch's agentledger session (where ``LedgerRunHooks``
        record the run's steps)."""
        on = await self._on(None)
        return await (super().ledger_session_id() if on is self else on.ledger_session_id())

    async def _atomic_replace_items(self, items: list[TResponseInputItem]) -> bool:
        """The SDK's compaction hook, on the current branch."""
        return await LedgerSession._atomic_replace_items(await self._on(None), items)

    async def _get_compaction_snapshot(self, limit: int, **kwargs: Any) -> Any:
        """The SDK's compaction hook, on the current branch."""
        on = await self._on(None)
        return await LedgerSession._get_compaction_snapshot(on, limit, **kwargs)

    # -- branches -------------------------------------------------------------------

    async def create_branch_from_turn(
        self, turn_number: int, branch_name: str | None = None
    ) -> str:
        """Make a branch holding copies of the current branch's items before turn
        ``turn_number``, switch to it, and return its id (``branch_name``, or one made as
        the SDK makes it: ``branch_from_turn_<n>_<unix time>``).

        Raises:
            ValidationError: a turn that is not an int, or that the current branch does
                not have; a branch name that is blank, longer than 255 characters or not
                storable text.
            BranchExistsError: a branch of this session already has that name (``main``
                included).
        Nothing is stored when it raises.
        """
        if type(turn_number) is not int:
            raise ValidationError(
                f"turn_number must be an int, got {type(turn_number).__name__}",
                path="turn_number",
            )
        name = None if branch_name is None else _branch_id(branch_name, path="branch_name")
        ledger = await self._ready()
        source, source_name = await self._on(None), self._current
        source_id = await source._stored_id(ledger)
        messages = [] if source_id is None else await ledger.messages.all(source_id)
        turns = _turns(messages)
        if not 1 <= turn_number <= len(turns):
            raise ValidationError(
                f"turn {turn_number} does not exist in branch {source_name!r} "
                f"(it has {len(turns)} turns)",
                path="turn_number",
            )
        main_id = await self._stored_id(ledger)
        assert main_id is not None  # the source has a turn, so main exists
        cut = turns[turn_number - 1].message.seq
        copies = [
            NewMessage(
                role=m.role, content=m.content, created_at=m.created_at, external_key=m.external_key
            )
            for m in messages
            if m.seq < cut
        ]
        made = new_id(system_clock())
        if name is None:
            name = await self._unused_name(
                main_id, f"branch_from_turn_{turn_number}_{int(time.time())}"
            )
        if name == MAIN:
            raise BranchExistsError(name)
        about = {"branch_id": name, "from_turn": turn_number, "from_branch": source_name}

        async def create(uow: AsyncUnitOfWork) -> SessionRecord:
            branch, _ = await uow.sessions.get_or_create_by_key(
                _key(main_id, name),
                app_name=self.app_name,
                user_id=self.user_id,
                id=f"{main_id}.{made}",
                state={BRANCH_STATE: {**about, "made": made}},
            )
            if (branch.state.get(BRANCH_STATE) or {}).get("made") != made:
                raise BranchExistsError(name)  # another's, not an earlier try of this call
            if copies and not branch.message_count:
                await uow.messages.append(branch, copies)
            return branch

        branch = await ledger.run(create)
        self._current, self._bound = name, _Branch(self, name, branch.id)
        return name

    async def create_branch_from_content(
        self, search_term: str, branch_name: str | None = None
    ) -> str:
        """Make a branch from the first user turn of the current branch containing
        ``search_term`` (as ``find_turns_by_content``), switch to it, return its id.

        Raises:
            ValidationError: no user turn contains it, or a bad branch name.
            BranchExistsError: a branch already has that name.
        """
        found = await self.find_turns_by_content(search_term)
        if not found:
            raise ValidationError(f"no user turn contains {search_term!r}", path="search_term")
        return await self.create_branch_from_turn(found[0]["turn"], branch_name)

    async def switch_to_branch(self, branch_id: str) -> None:
        """Make ``branch_id`` the current branch.

        Raises:
            BranchNotFoundError: no branch of this session has that id.
            ValidationError: an id that is not a branch id at all (blank, not text).
        """
        branch_id = _branch_id(branch_id, path="branch_id")
        found = await self._on(branch_id)
        self._current = branch_id
        self._bound = found if isinstance(found, _Branch) else None

    async def delete_branch(self, branch_id: str, force: bool = False) -> None:
        """Delete a branch with its items and steps (its usage with them). The current
        branch only with ``force=True``, which makes ``main`` current first; ``main``
        never. An instance still on a deleted branch gets ``BranchNotFoundError`` when it
        writes; the id may be given to a new branch.

        Raises:
            ValidationError: ``main``, the current branch without ``force``, a blank id.
            BranchNotFoundError: no branch of this session has that id.
        """
        branch_id = _branch_id(branch_id, path="branch_id")
        if branch_id == MAIN:
            raise ValidationError("the 'main' branch cannot be deleted", path="branch_id")
        if branch_id == self._current and not force:
            raise ValidationError(
                f"branch {branch_id!r} is the current branch: switch to another first, "
                "or pass force=True",
                path="branch_id",
            )
        branch = await self._on(branch_id)
        assert isinstance(branch, _Branch)
        id = branch._id
        if branch_id == self._current:
            self._leave_branch()
        ledger = await self._ready()
        if id is not None:
            with contextlib.suppress(NotFoundError):  # gone meanwhile: the same outcome
                await ledger.sessions.delete(id)
        branch._id = None

    async def list_branches(self) -> list[dict[str, Any]]:
        """Every branch, oldest first: ``branch_id``, ``message_count``, ``user_turns``,
        ``is_current`` and ``created_at`` (ISO 8601), as the SDK lists them; none before
        the session's first item."""
        ledger = await self._ready()
        main_id = await self._stored_id(ledger)
        if main_id is None:
            return []
        try:
            main = await ledger.sessions.get(main_id)
        except NotFoundError:
            return []
        found: list[tuple[str, str, int, Any]] = [
            (MAIN, main.id, main.message_count, main.created_at)
        ]
        for summary in await self._listed(main_id):
            about = (summary.state or {}).get(BRANCH_STATE) or {}
            found.append(
                (about["branch_id"], summary.id, summary.message_count, summary.created_at)
            )
        found.sort(key=lambda row: (row[3], row[1]))
        result = []
        for name, id, count, created_at in found:
            try:
                turns = len(_turns(await ledger.messages.all(id))) if count else 0
            except NotFoundError:
                continue  # deleted while listing
            result.append(
                {
                    "branch_id": name,
                    "message_count": count,
                    "user_turns": turns,
                    "is_current": name == self._current,
                    "created_at": created_at.isoformat(),
                }
            )
        return result

    # -- turns ----------------------------------------------------------------------

    async def get_conversation_turns(self, branch_id: str | None = None) -> list[dict[str, Any]]:
        """The user turns of a branch (the current one if None): ``turn``, ``content``
        (the first 100 characters), ``full_content``, ``timestamp`` (ISO 8601) and
        ``can_branch``, as the SDK gives them."""
        return [_turn_info(turn, _PREVIEW) for turn in _turns(await self._messages(branch_id))]

    async def find_turns_by_content(
        self, search_term: str, branch_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The user turns of a branch whose text contains ``search_term``, ignoring
        ASCII case as the SDK does; shaped as ``get_conversation_turns``' with the whole
        content as ``content``."""
        if not isinstance(search_term, str):
            raise ValidationError(
                f"search_term must be text, got {type(search_term).__name__}", path="search_term"
            )
        pattern = re.compile(re.escape(search_term), re.IGNORECASE | re.ASCII)
        return [
            _turn_info(turn, None)
            for turn in _turns(await self._messages(branch_id))
            if any(pattern.search(text) for text in _texts(turn.message.content))
        ]

    async def get_conversation_by_turns(
        self, branch_id: str | None = None
    ) -> dict[int, list[dict[str, str | None]]]:
        """The items of a branch by turn: each its ``type`` (``user``, ``assistant`` or
        the item's type) and ``tool_name``; items before the first user message are turn
        0."""
        result: dict[int, list[dict[str, str | None]]] = {}
        for number, message in _numbered(await self._messages(branch_id)):
            item = message.content if isinstance(message.content, dict) else {}
            result.setdefault(number, []).append(
                {"type": _type_of(item), "tool_name": _tool_name(item)}
            )
        return result

    async def get_tool_usage(self, branch_id: str | None = None) -> list[tuple[str, int, int]]:
        """How often each tool was called in each turn of a branch: ``(tool_name, count,
        turn)``, by turn, from the stored tool-call items."""
        counts: dict[tuple[int, str], int] = {}
        calls: set[tuple[int, str]] = set()
        outputs: list[tuple[int, str]] = []
        for number, message in _numbered(await self._messages(branch_id)):
            item = message.content if isinstance(message.content, dict) else {}
            kind, name = item.get("type"), _tool_name(item)
            if kind in _TOOL_CALLS and name is not None:
                counts[number, name] = counts.get((number, name), 0) + 1
                if kind == "tool_search_call":
                    calls.add((number, name))
            elif kind == "tool_search_output" and name is not None:
                outputs.append((number, name))
        for where in outputs:  # a search output without its call counts as the call
            if where not in calls:
                counts[where] = counts.get(where, 0) + 1
        return [(name, count, number) for (number, name), count in sorted(counts.items())]

    # -- usage ----------------------------------------------------------------------

    async def store_run_usage(self, result: RunResultBase) -> None:
        """Record the usage of a finished run (``Runner.run``'s result) as that of the
        current branch's newest turn; a later call for the same turn takes its place, as
        in the SDK. Like the SDK's, it logs a failure rather than raising it, and records
        nothing for a branch without a turn."""
        try:
            await self._store_run_usage(result)
        except Exception as error:
            _logger.warning("could not store the run's usage for %r: %s", self.session_id, error)

    async def _store_run_usage(self, result: RunResultBase) -> None:
        usage = result.context_wrapper.usage
        ledger = await self._ready()
        on = await self._on(None)
        id = await on._stored_id(ledger)
        turns = [] if id is None else _turns(await ledger.messages.all(id))
        if id is None or not turns:
            return
        turn = turns[-1]
        run_id = run_id_of(result.context_wrapper)
        tokens = TokenUsage()
        if run_id is None:  # else the run's model steps hold the tokens
            spent = token_usage(usage)
            tokens = spent.model_copy(update={"extra": {**spent.extra, "requests": usage.requests}})
        step = NewStep(
            kind=TURN_STEP,
            name=f"turn {turn.number}",
            run_id=run_id,
            input={"user_seq": turn.message.seq, "turn": turn.number},
            output=_usage_of(usage),
            usage=tokens,
            external_key=f"turn.{turn.message.seq}.{new_id(system_clock())}",
        )
        try:
            await ledger.steps.append(id, step)
        except NotFoundError:
            return  # the branch went meanwhile, and its turn with it

    async def get_session_usage(self, branch_id: str | None = None) -> dict[str, int] | None:
        """Usage summed over the turns of one branch, or of every branch if None:
        ``requests``, ``input_tokens``, ``output_tokens``, ``total_tokens`` and
        ``total_turns``; None when no usage was stored."""
        ledger = await self._ready()
        if branch_id is not None:
            names = [_branch_id(branch_id, path="branch_id")]
        else:
            names = [branch["branch_id"] for branch in await self.list_branches()]
        turns: list[dict[str, Any]] = []
        for name in names:
            try:
                turns.extend((await self._turn_usage(ledger, name)).values())
            except BranchNotFoundError:
                if branch_id is not None:
                    return None
        if not turns:
            return None
        fields = ("requests", "input_tokens", "output_tokens", "total_tokens")
        summed = {field: sum(turn[field] or 0 for turn in turns) for field in fields}
        return {**summed, "total_turns": len(turns)}

    async def get_turn_usage(
        self, user_turn_number: int | None = None, branch_id: str | None = None
    ) -> list[dict[str, Any]] | dict[str, Any]:
        """The usage of one turn of a branch (the current one if None), ``{}`` if it has
        none; or, without a turn number, of each turn that has usage, in order, with its
        ``user_turn_number``. Each has ``requests``, the token counts and the SDK's
        ``input_tokens_details`` and ``output_tokens_details``."""
        ledger = await self._ready()
        try:
            by_turn = await self._turn_usage(ledger, branch_id)
        except BranchNotFoundError:
            by_turn = {}
        if user_turn_number is not None:
            return dict(by_turn.get(user_turn_number, {}))
        return [{"user_turn_number": n, **usage} for n, usage in sorted(by_turn.items())]

    async def _turn_usage(
        self, ledger: AsyncLedger, branch_id: str | None
    ) -> dict[int, dict[str, Any]]:
        """The latest usage stored for each turn of the branch that still has it."""
        on = await self._on(branch_id)
        id = await on._stored_id(ledger)
        if id is None:
            return {}
        try:
            numbers = {t.message.seq: t.number for t in _turns(await ledger.messages.all(id))}
            steps = await _all_turn_steps(ledger, id)
        except NotFoundError:
            return {}
        found: dict[int, dict[str, Any]] = {}
        for step in steps:
            seq = step.input.get("user_seq") if isinstance(step.input, dict) else None
            if seq in numbers and isinstance(step.output, dict):
                found[numbers[seq]] = step.output  # seq order: the latest wins
        return found

    # -- helpers --------------------------------------------------------------------

    async def _on(self, branch_id: str | None) -> LedgerSession:
        """The session of ``branch_id`` (the current branch if None): this one for main."""
        name = self._current if branch_id is None else branch_id
        if name == MAIN:
            return self
        if name == self._current and self._bound is not None:
            return self._bound  # bound for good: never another session under its name
        ledger = await self._ready()
        main_id = await self._stored_id(ledger)
        found = None
        if main_id is not None and _usable(name):
            found = await ledger.sessions.get_by_key_or_none(
                _key(main_id, name), app_name=self.app_name, user_id=self.user_id
            )
        if found is None or (found.state.get(BRANCH_STATE) or {}).get("branch_id") != name:
            raise BranchNotFoundError(name)
        return _Branch(self, name, found.id)

    def _leave_branch(self) -> None:
        """Make main current; the branch left is not written through this instance again."""
        if self._bound is not None:
            self._bound._id = None
        self._current, self._bound = MAIN, None

    async def _messages(self, branch_id: str | None) -> list[Message]:
        ledger = await self._ready()
        try:
            on = await self._on(branch_id)
        except BranchNotFoundError:
            return []
        id = await on._stored_id(ledger)
        if id is None:
            return []
        try:
            return await ledger.messages.all(id)
        except NotFoundError:
            return []

    async def _listed(self, main_id: str) -> list[SessionSummary]:
        """The sessions of main's branches (their ids start with main's and a dot)."""
        found: list[SessionSummary] = []
        cursor: str | None = None
        while True:
            page = await self.ledger.sessions.list(
                app_name=self.app_name,
                user_id=self.user_id,
                id_prefix=f"{main_id}.",
                include=["external_key", "state"],
                limit=_PAGE,
                cursor=cursor,
            )
            found.extend(s for s in page.items if (s.state or {}).get(BRANCH_STATE))
            cursor = page.next_cursor
            if cursor is None:
                return found

    async def _unused_name(self, main_id: str, base: str) -> str:
        name, suffix = base, 1
        while await self.ledger.sessions.get_by_key_or_none(
            _key(main_id, name), app_name=self.app_name, user_id=self.user_id
        ):
            suffix += 1
            name = f"{base}_{suffix}"
        return name


async def _all_turn_steps(ledger: AsyncLedger, id: str) -> list[Step]:
    steps: list[Step] = []
    while True:
        after = steps[-1].seq if steps else 0
        page = await ledger.steps.by_kind(id, TURN_STEP, after_seq=after, limit=_PAGE)
        steps.extend(page)
        if len(page) < _PAGE:
            return steps


def _key(main_id: str, branch_id: str) -> str:
    return f"{main_id}#{branch_id}"


def _usable(name: str) -> bool:
    return bool(name.strip()) and len(name) <= MAX_BRANCH_ID_LENGTH and text_problem(name) is None


def _branch_id(value: object, *, path: str) -> str:
    """``value`` if it can name a branch: text, not blank, at most 255 characters that
    every database stores."""
    if not isinstance(value, str):
        raise ValidationError(f"{path} must be text, got {type(value).__name__}", path=path)
    if not value.strip():
        raise ValidationError(f"{path} cannot be blank", path=path)
    if len(value) > MAX_BRANCH_ID_LENGTH:
        raise ValidationError(
            f"{path} is {len(value)} characters, more than {MAX_BRANCH_ID_LENGTH}", path=path
        )
    problem = text_problem(value)
    if problem is not None:
        raise ValidationError(f"{path} {problem}", path=path)
    return value


def _is_user(message: Message) -> bool:
    content = message.content
    return isinstance(content, dict) and content.get("role") == "user"


def _turns(messages: Sequence[Message]) -> list[_Turn]:
    """The user turns: the n-th user message is turn n."""
    users = [m for m in messages if _is_user(m)]
    return [_Turn(number, message) for number, message in enumerate(users, start=1)]


def _numbered(messages: Sequence[Message]) -> list[tuple[int, Message]]:
    """Each message with its turn: the number of user messages up to and with it."""
    number, result = 0, []
    for message in messages:
        number += _is_user(message)
        result.append((number, message))
    return result


def _turn_info(turn: _Turn, preview: int | None) -> dict[str, Any]:
    content = turn.message.content.get("content", "")
    return {
        "turn": turn.number,
        "content": _preview(content, preview),
        "full_content": content,
        "timestamp": turn.message.created_at.isoformat(),
        "can_branch": True,
    }


def _preview(content: object, length: int | None) -> str:
    text = content if isinstance(content, str) else _json(content)
    return text[:length] + "..." if length is not None and len(text) > length else text


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _texts(content: object) -> list[str]:
    """The texts of a user message's content: the text, or each part's ``text``."""
    inner = content.get("content") if isinstance(content, dict) else None
    if isinstance(inner, str):
        return [inner]
    if isinstance(inner, list):
        return [p["text"] for p in inner if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return []


def _type_of(item: dict[str, Any]) -> str:
    role, kind = item.get("role"), item.get("type")
    if role in ("user", "assistant"):
        return str(role)
    return str(kind) if kind else "other"


def _tool_name(item: dict[str, Any]) -> str | None:
    """The tool an item calls, named as the SDK names it."""
    kind = item.get("type")
    name, namespace = item.get("name"), item.get("namespace")
    if kind in ("mcp_call", "mcp_approval_request") and "server_label" in item:
        label = item.get("server_label")
        if name and label:
            return f"{label}.{name}"
        return str(label or name) if (label or name) else None
    if kind in ("tool_search_call", "tool_search_output"):
        return "tool_search"
    if kind in _NAMED_BY_TYPE:
        return str(kind)
    if "name" in item and name is not None:
        if isinstance(namespace, str) and namespace and namespace != name:
            return f"{namespace}.{name}"
        return str(name)
    return None


def _usage_of(usage: Any) -> dict[str, Any]:
    """The SDK's usage of a run, as ``get_turn_usage`` gives it."""

    def details(value: Any) -> dict[str, Any] | None:
        return value.model_dump(mode="json") if hasattr(value, "model_dump") else None

    return {
        "requests": usage.requests or 0,
        "input_tokens": usage.input_tokens or 0,
        "output_tokens": usage.output_tokens or 0,
        "total_tokens": usage.total_tokens or 0,
        "input_tokens_details": details(usage.input_tokens_details),
        "output_tokens_details": details(usage.output_tokens_details),
    }


__all__ = [
    "BRANCH_STATE",
    "MAIN",
    "TURN_STEP",
    "BranchExistsError",
    "BranchNotFoundError",
    "LedgerAdvancedSession",
]
