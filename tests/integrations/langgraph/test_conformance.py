"""LangGraph's own conformance suite (langgraph-checkpoint-conformance), every base and
extended capability, on every backend, through the sync and the async saver."""

from __future__ import annotations

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from agentledger.testing import tier

from .conftest import Saved


@tier("driver")
async def test_the_saver_passes_every_capability_of_the_conformance_suite(saved: Saved) -> None:
    @checkpointer_test(name=saved.name)
    async def factory():  # type: ignore[no-untyped-def]
        yield saved.saver

    report = await validate(factory)

    results = {name: (r.detected, r.passed, r.failures) for name, r in report.results.items()}
    assert set(results) == {capability.value for capability in ALL_CAPABILITIES}
    assert all(detected and passed for detected, passed, _ in results.values()), results
    for result in report.results.values():
        assert result.tests_passed > 0 and result.tests_failed == 0 == result.tests_skipped
