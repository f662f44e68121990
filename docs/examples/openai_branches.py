import asyncio

from agentledger.integrations.openai_agents import LedgerAdvancedSession


async def main() -> None:
    session = LedgerAdvancedSession.from_url("chat-7", url="sqlite:///branches.db")
    await session.ledger.upgrade()
    for n in (1, 2, 3):
        await session.add_items(
            [{"role": "user", "content": f"question {n}"}, {"role": "assistant", "content": "..."}]
        )
    # after each Runner.run(agent, text, session=session): await session.store_run_usage(result)
    await session.create_branch_from_turn(2, "try-again")  # turn 1 copied; now current
    await session.add_items([{"role": "user", "content": "question 2, put differently"}])
    print([b["branch_id"] for b in await session.list_branches()])
    print([t["turn"] for t in await session.find_turns_by_content("question 2")])
    await session.switch_to_branch("main")
    await session.delete_branch("try-again")
    print(len(await session.get_items()), await session.get_session_usage())
    await session.close()


asyncio.run(main())
