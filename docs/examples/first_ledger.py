import asyncio

from agentledger import AsyncLedger, NewMessage, NewStep, RunSummary, TokenUsage


async def main() -> None:
    async with AsyncLedger("sqlite:///agentledger.db") as ledger:
        await ledger.upgrade()  # run the shipped migrations

        session, _created = await ledger.sessions.get_or_create(
            "trip-planner", user_id="ada", title="Planning a trip to Lisbon"
        )
        # Appending from the record is optimistic: if another writer changed the
        # session since it was read, ConflictError is raised and nothing is stored.
        asked = await ledger.messages.append(
            session, NewMessage(role="user", content="Which museums are open on Monday?")
        )
        session = asked.session  # at its new revision; asked.messages holds the seqs
        usage = TokenUsage(input_tokens=24, output_tokens=20, total_tokens=44)
        await ledger.steps.append(session.id, NewStep(kind="model", model="m", usage=usage))
        answered = await ledger.messages.append(
            session, NewMessage(role="assistant", content="The Gulbenkian is closed on Tuesdays...")
        )
        session = answered.session
        await ledger.grants.grant(session.id, "tool:museum-search", granted_by="ada")
        await ledger.sessions.finalize(session.id, RunSummary(status="completed", usage=usage))
        session = await ledger.sessions.save(
            session.model_copy(update={"state": {**session.state, "turns": 1}})
        )
        for item in (await ledger.sessions.list(user_id="ada")).items:
            print(item.id, item.title, item.status, item.message_count, item.total_tokens)


asyncio.run(main())
