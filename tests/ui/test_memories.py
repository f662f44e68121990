"""The viewer's memories page: a namespace and those under it, or the namespaces
holding a user's id, newest writes first, as HTML and JSON, escaped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.engine import URL
from starlette.testclient import TestClient

from agentledger import Ledger
from agentledger.ui import create_app

from ._data import HOSTILE, NOW, Clock


@pytest.fixture(scope="module")
def client(migrated_url: URL) -> Iterator[TestClient]:
    with Ledger(migrated_url, clock=Clock()) as ledger:
        ledger.sessions.create("ada-session", app_name="cooking", user_id="ada")
        ledger.memory.put(
            ("memories", "ada"), "food", {"likes": "soup"}, ttl_minutes=60 * 24 * 3650
        )
        ledger.memory.put(("memories", "ada", "trips"), "porto", {"by": "train"})
        ledger.memory.put(("cooking", "ada"), "oven", {"model": "x"}, text="gas oven")
        ledger.memory.put(("memories", "bob"), "hostile", {"note": HOSTILE})
    url = migrated_url.render_as_string(hide_password=False)
    with TestClient(create_app(url, clock=lambda: NOW)) as client:
        yield client


def _keys(answer: dict[str, object]) -> list[object]:
    return [item["key"] for item in answer["memories"]]  # type: ignore[attr-defined, index]


def test_every_memory_is_listed_newest_write_first(client: TestClient) -> None:
    answer = client.get("/memories.json").json()
    assert _keys(answer) == ["hostile", "oven", "porto", "food"]
    assert answer["namespaces"] == [
        "cooking/ada",
        "memories/ada",
        "memories/ada/trips",
        "memories/bob",
    ]


def test_a_namespace_shows_its_memories_and_those_under_it(client: TestClient) -> None:
    answer = client.get("/memories.json", params={"namespace": "memories/ada"}).json()
    assert _keys(answer) == ["porto", "food"]
    assert answer["memories"][1]["expires_at"] is not None


def test_a_label_shows_a_users_memories_in_every_namespace(client: TestClient) -> None:
    answer = client.get("/memories.json", params={"label": "ada"}).json()
    assert _keys(answer) == ["oven", "porto", "food"]


def test_the_page_escapes_what_memories_hold(client: TestClient) -> None:
    page = client.get("/memories", params={"label": "bob"}).text
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert "\\u202e" in page  # a bidi override is shown escaped, never applied


def test_a_namespace_with_an_empty_label_is_a_bad_request(client: TestClient) -> None:
    answer = client.get("/memories.json", params={"namespace": "memories//ada"})
    assert answer.status_code == 400
    assert "none of them empty" in answer.json()["error"]


def test_a_session_page_links_to_its_users_memories(client: TestClient) -> None:
    page = client.get("/sessions/ada-session").text
    assert 'href="/memories?label=ada"' in page
