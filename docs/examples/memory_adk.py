import asyncio

from google.adk.events.event import Event
from google.adk.sessions.session import Session
from google.genai import types

from agentledger import AsyncLedger
from agentledger.integrations.adk import LedgerMemoryService


def said(id: str, author: str, text: str) -> Event:
    content = types.Content(role="user", parts=[types.Part(text=text)])
    return Event(id=id, author=author, content=content)


async def main() -> None:
    async with AsyncLedger.in_memory() as ledger:
        memory = LedgerMemoryService(ledger)  # or adk web --memory_service_uri agentledger+...
        session = Session(
            id="trip-1",
            app_name="trips",
            user_id="ada",
            events=[
                said("e1", "user", "I always take the train"),
                said("e2", "user", "Book Porto"),
            ],
        )
        await memory.add_session_to_memory(session)
        found = await memory.search_memory(app_name="trips", user_id="ada", query="train?")
        print([entry.content.parts[0].text for entry in found.memories])
        # The user asks to forget that conversation: its memories go, and only them.
        await memory.delete_session_memories(app_name="trips", user_id="ada", session_id="trip-1")
        found = await memory.search_memory(app_name="trips", user_id="ada", query="train")
        print(found.memories)


asyncio.run(main())
