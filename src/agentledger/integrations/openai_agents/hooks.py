"""The SDK's run hooks on agentledger: ``LedgerRunHooks`` records a run's model and tool
calls as steps of its session, with their token usage, and the run's end (a failed one
too, where the SDK lets it be seen) as the session's last run."""

from __future__ import annotations

import weakref
from datetime import datetime
from typing import Any

from agents.exceptions import AgentsException
from agents.items import ModelResponse, TResponseInputItem
from agents.lifecycle import RunHooks
from agents.run_context import RunContextWrapper
from agents.run_error_handlers import RunErrorHandlerInput, RunErrorHandlers
from agents.tool import Tool
from agents.tool_context import ToolContext
from agents.usage import Usage

from ...clock import system_clock
from ...errors import NotFoundError, ValidationError
from ...ids import new_id
from ...records import NewStep, RunSummary, TokenUsage
from .session import MAX_ROLE_LENGTH, LedgerSession

_RUNS: weakref.WeakKeyDictionary[RunContextWrapper[Any], str] = weakref.WeakKeyDictionary()
"""The run id LedgerRunHooks gave each live run context (a RunResult's context_wrapper)."""


def run_id_of(context: RunContextWrapper[Any]) -> str | None:
    """The ``run_id`` under which ``LedgerRunHooks`` recorded the run whose context this is
    (a ``RunResult``'s ``context_wrapper``), None when no LedgerRunHooks recorded it: how
    a caller knows the run's model calls are already steps, with their tokens."""
    return _RUNS.get(context)


class LedgerRunHooks(RunHooks[Any]):
    """Run hooks that record a run's model and tool calls as steps of ``session`` (with
    input, output and cached tokens), and its end as the session's last run.

    Pass them to the run: ``Runner.run(agent, text, session=session,
    hooks=LedgerRunHooks(session))``. One object may serve many runs of the session, one
    after the other; each run gets its own ``run_id``.

    The SDK's hooks have no event for a run that raises. ``error_handlers()`` records
    the failures the SDK hands to error handlers (too many turns, a refusal, an invalid
    final output) and lets them raise as before; ``run_failed(error)`` records any other.
    """

    def __init__(self, session: LedgerSession) -> None:
        if not isinstance(session, LedgerSession):
            raise ValidationError(
                f"LedgerRunHooks takes a LedgerSession, got {type(session).__name__}",
                path="session",
            )
        self.session = session
        """The session whose steps these hooks write."""
        self.run_id: str | None = None
        """The current run's id (the steps' ``run_id``), None between runs."""
        self._step_index = 0
        self._started: dict[str, datetime] = {}

    def _run(self, context: RunContextWrapper[Any] | None = None) -> str:
        if self.run_id is None:
            self.run_id = new_id(system_clock())
            self._step_index = 0
        if context is not None and not isinstance(context, ToolContext):
            _RUNS[context] = self.run_id
        return self.run_id

    def _now(self) -> datetime:
        return self.session.ledger.settings.now()

    async def _append(self, step: NewStep) -> None:
        id = await self.session.ledger_session_id()
        try:
            await self.session.ledger.steps.append(id, step)
        except NotFoundError:  # deleted meanwhile: the session is made again for its key
            await self.session.ledger.steps.append((await self.session.record()).id, step)
        self._step_index += 1

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Any,
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        """Note when the model call began."""
        self._run(context)
        self._started["model"] = self._now()

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Any, response: ModelResponse
    ) -> None:
        """Record the model call: its output items and token usage."""
        run_id = self._run(context)
        output = [item.model_dump(mode="json", exclude_unset=True) for item in response.output]
        await self._append(
            NewStep(
                step_index=self._step_index,
                kind="model",
                run_id=run_id,
                name=getattr(agent, "name", None),
                model=_model_name(agent),
                output=output,
                usage=token_usage(response.usage),
                started_at=self._started.pop("model", None),
                ended_at=self._now(),
                external_key=response.response_id,
            )
        )

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Any, tool: Tool) -> None:
        """Note when the tool call began."""
        self._run()
        self._started[_call_id(context) or tool.name] = self._now()

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Any, tool: Tool, result: object
    ) -> None:
        """Record the tool call: its arguments and its result."""
        run_id = self._run()
        call_id = _call_id(context)
        arguments = context.tool_arguments if isinstance(context, ToolContext) else None
        await self._append(
            NewStep(
                step_index=self._step_index,
                kind="tool",
                run_id=run_id,
                name=tool.name,
                input=arguments,
                output=result if isinstance(result, str | int | float | bool) else str(result),
                started_at=self._started.pop(call_id or tool.name, None),
                ended_at=self._now(),
                external_key=call_id,
            )
        )

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        """Record the run's end (status, model, the run's total usage) with ``finalize``."""
        id = await self.session.ledger_session_id()
        summary = RunSummary(
            status="completed", model=_model_name(agent), usage=token_usage(context.usage)
        )
        await self.session.ledger.sessions.finalize(id, summary)
        self.run_id = None

    async def run_failed(self, error: BaseException) -> None:
        """Record that the run ended by ``error`` (status ``failed``, the error, and the
        tokens spent up to it where the SDK's exception carries them): call it where
        ``Runner.run`` raised, as the SDK's hooks are not told."""
        usage = TokenUsage()
        run_data = error.run_data if isinstance(error, AgentsException) else None
        if run_data is not None:
            usage = token_usage(run_data.context_wrapper.usage)
        summary = RunSummary(status="failed", usage=usage, error=_error_text(error))
        await self.session.ledger.sessions.finalize(await self.session.ledger_session_id(), summary)
        self.run_id = None

    def error_handlers(self) -> RunErrorHandlers[Any]:
        """The SDK's error handlers (``Runner.run(..., error_handlers=...)``) for too many
        turns, a refusal and an invalid final output: each records the run as failed,
        with the tokens spent, and lets the error raise as it would have."""

        async def failed(data: RunErrorHandlerInput[Any]) -> None:
            summary = RunSummary(
                status="failed",
                model=_model_name(data.run_data.last_agent),
                usage=token_usage(data.context.usage),
                error=_error_text(data.error),
            )
            await self.session.ledger.sessions.finalize(
                await self.session.ledger_session_id(), summary
            )
            self.run_id = None

        return {"max_turns": failed, "model_refusal": failed, "invalid_final_output": failed}


def token_usage(usage: Usage) -> TokenUsage:
    """agentledger's TokenUsage from the SDK's: input, output and total tokens, and in
    ``extra`` the cached input tokens and the reasoning tokens."""
    cached = getattr(usage.input_tokens_details, "cached_tokens", 0) or 0
    reasoning = getattr(usage.output_tokens_details, "reasoning_tokens", 0) or 0
    return TokenUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        extra={"cached_tokens": cached, "reasoning_tokens": reasoning},
    )


def _model_name(agent: Any) -> str | None:
    model = getattr(agent, "model", None)
    if isinstance(model, str):
        return model[:MAX_ROLE_LENGTH]
    name = getattr(model, "model", None)
    return name[:MAX_ROLE_LENGTH] if isinstance(name, str) else None


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _call_id(context: RunContextWrapper[Any]) -> str | None:
    return context.tool_call_id if isinstance(context, ToolContext) else None


__all__ = ["LedgerRunHooks", "run_id_of", "token_usage"]
