"""The viewer's routes on every database, through Starlette's ASGI test client: what each
page shows (as HTML and as JSON), the filters and paging, and the safety rules: escaping,
the Content-Security-Policy, the access token, read-only unless --allow-delete, CSRF."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.engine import URL
from starlette.testclient import TestClient

from agentledger import Ledger, ValidationError
from agentledger.ui import create_app
from agentledger.ui.security import CONTENT_SECURITY_POLICY, TOKEN_COOKIE
from agentledger.ui.views import axis_ticks, compact

from ._data import HOSTILE, NOW, Clock, fill


@pytest.fixture(scope="module")
def data(migrated_url: URL) -> dict[str, str]:
    with Ledger(migrated_url, clock=Clock()) as ledger:
        return fill(ledger)


@pytest.fixture(scope="module")
def url(migrated_url: URL, data: dict[str, str]) -> str:
    return migrated_url.render_as_string(hide_password=False)


@pytest.fixture(scope="module")
def client(url: str) -> Iterator[TestClient]:
    with TestClient(create_app(url, clock=lambda: NOW)) as client:
        yield client


def ids(answer: dict[str, Any]) -> list[str]:
    return [item["id"] for item in answer["sessions"]]


# --- the sessions page ----------------------------------------------------------------------


def test_sessions_are_listed_most_recently_active_first(
    client: TestClient, data: dict[str, str]
) -> None:
    answer = client.get("/sessions.json").json()
    assert set(ids(answer)) == set(data.values())
    stamps = [item["updated_at"] for item in answer["sessions"]]
    assert stamps == sorted(stamps, reverse=True)


def test_each_listed_session_carries_its_framework_key(
    client: TestClient, data: dict[str, str]
) -> None:
    answer = client.get("/sessions.json").json()
    keys = {item["id"]: item["external_key"] for item in answer["sessions"]}
    assert (keys[data["langgraph"]], keys[data["adk"]]) == ("thread-7", "adk-session-1")
    assert keys[data["plain"]] is None


def test_a_listed_session_shows_its_key_after_its_title(
    client: TestClient, data: dict[str, str]
) -> None:
    page = client.get("/sessions", params={"framework": "langgraph"}).text
    assert '<td class="title">Reset my password <code class="key">thread-7</code></td>' in page
    adk = client.get("/sessions", params={"framework": "adk"}).text
    assert '<td class="title">Hello from adk <code class="key">adk-session-1</code></td>' in adk


def test_a_session_without_a_title_is_titled_by_its_key(
    client: TestClient, data: dict[str, str]
) -> None:
    page = client.get(f"/sessions/{data['adk']}").text
    assert '<h1 class="title">adk-session-1</h1>' in page
    assert "<title>adk-session-1 · agentledger</title>" in page


def test_each_listed_session_names_its_framework(client: TestClient, data: dict[str, str]) -> None:
    answer = client.get("/sessions.json").json()
    frameworks = {item["id"]: item["framework"] for item in answer["sessions"]}
    assert frameworks[data["langgraph"]] == "langgraph"
    assert frameworks[data["adk"]] == "adk"
    assert frameworks[data["plain"]] is None


@pytest.mark.parametrize("framework", ["langgraph", "openai-agents", "adk"])
def test_the_framework_filter_keeps_that_frameworks_sessions(
    client: TestClient, data: dict[str, str], framework: str
) -> None:
    answer = client.get("/sessions.json", params={"framework": framework}).json()
    assert ids(answer) == [data[framework]]


def test_app_user_and_status_filters_combine(client: TestClient, data: dict[str, str]) -> None:
    support = client.get("/sessions.json", params={"app": "support"}).json()
    assert set(ids(support)) == {data["langgraph"], data["openai-agents"]}
    carol = client.get("/sessions.json", params={"app": "support", "user": "carol"}).json()
    assert ids(carol) == [data["openai-agents"]]
    done = client.get("/sessions.json", params={"status": "completed"}).json()
    assert ids(done) == [data["plain"]]


def test_search_finds_title_or_opening_message_ignoring_case(
    client: TestClient, data: dict[str, str]
) -> None:
    by_title = client.get("/sessions.json", params={"q": "LISBON"}).json()
    assert ids(by_title) == [data["plain"]]
    by_opening = client.get("/sessions.json", params={"q": "hello from adk"}).json()
    assert ids(by_opening) == [data["adk"]]


def test_search_finds_a_session_by_its_framework_key_ignoring_case(
    client: TestClient, data: dict[str, str]
) -> None:
    by_thread_id = client.get("/sessions.json", params={"q": "thread-7"}).json()
    assert ids(by_thread_id) == [data["langgraph"]]
    by_adk_id = client.get("/sessions.json", params={"q": "ADK-SESSION-1"}).json()
    assert ids(by_adk_id) == [data["adk"]]


def test_search_finds_a_session_by_its_agentledger_id(
    client: TestClient, data: dict[str, str]
) -> None:
    assert ids(client.get("/sessions.json", params={"q": data["langgraph"]}).json()) == [
        data["langgraph"]
    ]
    assert ids(client.get("/sessions.json", params={"q": "trip-lisbon"}).json()) == [data["plain"]]


def test_search_takes_like_wildcards_literally(client: TestClient, data: dict[str, str]) -> None:
    assert ids(client.get("/sessions.json", params={"q": "1%0"}).json()) == []
    assert ids(client.get("/sessions.json", params={"q": "r_fund"}).json()) == []
    assert ids(client.get("/sessions.json", params={"q": "100%_s"}).json()) == [
        data["openai-agents"]
    ]
    assert ids(client.get("/sessions.json", params={"q": "order 42"}).json()) == [
        data["openai-agents"]
    ]


def test_pages_follow_the_cursor_without_repeats_or_gaps(
    client: TestClient, data: dict[str, str]
) -> None:
    seen: list[str] = []
    params: dict[str, str] = {"limit": "2"}
    while True:
        answer = client.get("/sessions.json", params=params).json()
        seen += ids(answer)
        if answer["next_cursor"] is None:
            break
        params["cursor"] = answer["next_cursor"]
    assert sorted(seen) == sorted(data.values())


def test_the_html_page_links_the_next_page_only_when_there_is_one(client: TestClient) -> None:
    first = client.get("/sessions", params={"limit": "2"}).text
    assert re.search(r'rel="next" href="/sessions\?limit=2&amp;cursor=[^"]+"', first)
    assert 'rel="next"' not in client.get("/sessions", params={"limit": "100"}).text


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"cursor": "tampered"}, "cursor"),
        ({"framework": "crewai"}, "framework"),
        ({"limit": "many"}, "limit"),
        ({"limit": "5000"}, "limit"),
        ({"q": "x" * 300}, "search"),
    ],
)
def test_a_bad_query_parameter_is_a_400_naming_it(
    client: TestClient, params: dict[str, str], named: str
) -> None:
    answer = client.get("/sessions.json", params=params)
    assert answer.status_code == 400
    assert named in answer.json()["error"]


# --- one session ----------------------------------------------------------------------------


def test_the_session_page_shows_the_conversation_with_tool_calls_folded(
    client: TestClient, data: dict[str, str]
) -> None:
    answer = client.get(f"/sessions/{data['plain']}.json").json()
    assert [m["role"] for m in answer["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert answer["messages"][1]["text"] == "Let me look that up."
    assert answer["messages"][1]["tool_calls"] == [
        {"id": "call-1", "name": "museum_search", "arguments": "{}"}
    ]
    page = client.get(f"/sessions/{data['plain']}").text
    assert re.search(
        r'<details class="tool-call kind-call"><summary>tool call <code>museum_search</code>'
        r' <span class="dim">call-1</span></summary><pre>\{\}</pre>',
        page,
    )


def test_a_tool_call_kept_in_a_messages_metadata_is_shown_folded(
    client: TestClient, data: dict[str, str]
) -> None:
    messages = client.get(f"/sessions/{data['tool-in-metadata']}.json").json()["messages"]
    assert messages[1]["tools"] == [
        {"kind": "call", "name": "museum_search", "call_id": "call-1", "body": {"day": 1}}
    ]
    page = client.get(f"/sessions/{data['tool-in-metadata']}").text
    assert '<summary>tool call <code>museum_search</code> <span class="dim">call-1' in page


def test_a_tool_result_named_by_its_metadata_shows_as_the_result_of_that_call(
    client: TestClient, data: dict[str, str]
) -> None:
    messages = client.get(f"/sessions/{data['tool-in-metadata']}.json").json()["messages"]
    assert (messages[2]["text"], messages[2]["tools"]) == (
        "",
        [
            {
                "kind": "result",
                "name": "museum_search",
                "call_id": "call-1",
                "body": "Open on day 1: MAAT",
            }
        ],
    )


def test_the_session_page_shows_steps_with_model_duration_and_tokens(
    client: TestClient, data: dict[str, str]
) -> None:
    steps = client.get(f"/sessions/{data['plain']}.json").json()["steps"]["items"]
    assert [(s["kind"], s["model"], s["usage"]["total_tokens"]) for s in steps] == [
        ("model", "m-big", 1_000),
        ("tool", None, 0),
        ("model", "m-small", 400),
    ]
    assert {s["duration_seconds"] for s in steps} == {2.5}


def test_the_checkpoint_tree_shows_the_fork_and_the_latest(
    client: TestClient, data: dict[str, str]
) -> None:
    tree = client.get(f"/sessions/{data['plain']}.json").json()["checkpoints"]
    ((root,),) = tree["branches"]
    assert root["fork"] and [[n["seq"] for n in chain] for chain in root["branches"]] == [[2], [3]]
    assert [chain[0]["latest"] for chain in root["branches"]] == [False, True]
    page = client.get(f"/sessions/{data['plain']}").text
    assert "fork: 2 branches" in page and 'class="badge latest"' in page


def test_the_session_page_shows_where_the_run_paused(
    client: TestClient, data: dict[str, str]
) -> None:
    paused = client.get(f"/sessions/{data['plain']}.json").json()["paused"]
    assert paused["seq"] == 3 and paused["interrupt_requesters"] == {"call-2": "ada"}
    (call,) = paused["pending_tool_calls"]
    assert (call["id"], call["tool_call"]["name"], call["interrupt_active"]) == (
        "call-2",
        "book_tickets",
        True,
    )
    assert "held by an interrupt" in client.get(f"/sessions/{data['plain']}").text


def test_the_session_page_shows_grants_and_app_and_user_state(
    client: TestClient, data: dict[str, str]
) -> None:
    plain = client.get(f"/sessions/{data['plain']}.json").json()
    assert [g["capability"] for g in plain["grants"]] == ["tool:museum-search"]
    adk = client.get(f"/sessions/{data['adk']}.json").json()
    assert adk["app_state"]["state"] == {"units": "metric"}
    assert adk["user_state"]["state"] == {"home": "Porto"}
    assert adk["session"]["framework"] == "adk"
    assert adk["session"]["external_key"] == "adk-session-1"


def test_a_long_conversation_shows_its_last_messages_and_pages_to_the_others(
    client: TestClient, url: str
) -> None:
    with Ledger(url) as ledger:
        record = ledger.sessions.create("long-1")
        ledger.messages.append(record, [{"role": "user", "content": f"m{n}"} for n in range(150)])
    try:
        last = client.get("/sessions/long-1.json").json()
        assert [m["seq"] for m in last["messages"]] == list(range(51, 151))
        assert (last["earlier"], last["later"]) == (0, None)
        first = client.get("/sessions/long-1.json", params={"after": "0"}).json()
        assert [m["seq"] for m in first["messages"]] == list(range(1, 101))
        assert (first["earlier"], first["later"]) == (None, 100)
        assert 'href="/sessions/long-1?after=0"' in client.get("/sessions/long-1").text
    finally:
        with Ledger(url) as ledger:
            ledger.sessions.delete("long-1")


def test_a_message_window_after_something_else_than_a_seq_is_a_400(client: TestClient) -> None:
    answer = client.get("/sessions/trip-lisbon.json", params={"after": "last"})
    assert answer.status_code == 400 and "after" in answer.json()["error"]


def test_an_unknown_session_is_a_404(client: TestClient) -> None:
    assert client.get("/sessions/no-such-session").status_code == 404
    answer = client.get("/sessions/no-such-session.json")
    assert answer.status_code == 404 and "no-such-session" in answer.json()["error"]


def test_an_invalid_session_id_is_a_400(client: TestClient) -> None:
    assert client.get("/sessions/.hidden.json").status_code == 400


def test_accept_json_answers_json_and_html_is_the_default(
    client: TestClient, data: dict[str, str]
) -> None:
    as_json = client.get(f"/sessions/{data['plain']}", headers={"Accept": "application/json"})
    assert as_json.headers["content-type"] == "application/json"
    as_html = client.get(f"/sessions/{data['plain']}", headers={"Accept": "text/html,*/*"})
    assert as_html.headers["content-type"].startswith("text/html")


# --- usage ----------------------------------------------------------------------------------


def test_usage_sums_tokens_per_day_model_and_user(client: TestClient) -> None:
    answer = client.get("/usage.json", params={"days": "7"}).json()
    per_day = {g["key"]: g["usage"]["total_tokens"] for g in answer["per_day"]}
    assert len(per_day) == 7 and per_day["2026-11-26"] == 1_000
    assert per_day["2026-11-27"] == 400 and per_day["2026-11-28"] == 300
    assert per_day["2026-11-22"] == 0
    per_model = [(g["key"], g["usage"]["total_tokens"]) for g in answer["per_model"]]
    assert per_model[:2] == [("m-big", 1_000), ("m-small", 700)]
    per_user = {g["key"]: g["usage"]["total_tokens"] for g in answer["per_user"]}
    assert per_user == {"ada": 1_500, "bob": 100, "carol": 100, "eve": 0}
    assert answer["total_tokens"] == 1_700


def test_usage_of_one_user(client: TestClient) -> None:
    answer = client.get("/usage.json", params={"days": "7", "user": "bob"}).json()
    assert answer["total_tokens"] == 100
    assert [g["key"] for g in answer["per_user"]] == ["bob"]


def test_the_usage_page_draws_svg_charts_with_the_numbers_beside(client: TestClient) -> None:
    page = client.get("/usage", params={"days": "7"}).text
    assert page.count("<svg") == 3
    assert "<td>m-big</td>" in page and ">1,000</td>" in page


def test_the_per_day_chart_has_a_token_axis_of_round_numbers(client: TestClient) -> None:
    chart = client.get("/usage.json", params={"days": "7"}).json()["day_chart"]
    assert [tick["label"] for tick in chart["ticks"]] == ["0", "200", "400", "600", "800", "1,000"]
    (tallest,) = [bar for bar in chart["bars"] if bar["tokens"] == 1_000]
    assert (tallest["y"], tallest["y"] + tallest["height"]) == (chart["top"], chart["bottom"])
    page = client.get("/usage", params={"days": "7"}).text
    assert re.search(r'<text class="tick"[^>]*>1,000</text>', page)


def test_the_per_day_chart_labels_its_dates_up_to_the_last_day(client: TestClient) -> None:
    week = client.get("/usage.json", params={"days": "7"}).json()["day_chart"]["dates"]
    assert [d["label"] for d in week] == [f"Nov {day}" for day in range(22, 29)]
    month = client.get("/usage.json", params={"days": "30"}).json()["day_chart"]["dates"]
    assert len(month) <= 8 and month[-1]["label"] == "Nov 28"
    page = client.get("/usage", params={"days": "30"}).text
    assert re.search(r'<text class="date"[^>]*>Nov 28</text>', page)


@pytest.mark.parametrize(
    ("largest", "ticks"),
    [(0, [0, 1]), (3, [0, 1, 2, 3]), (7, [0, 2, 4, 6, 8]), (1_001, [0, 500, 1_000, 1_500])],
)
def test_axis_ticks_are_round_steps_up_past_the_largest(largest: int, ticks: list[int]) -> None:
    assert axis_ticks(largest) == ticks


def test_large_axis_labels_are_compact() -> None:
    assert [compact(n) for n in (950, 9_500, 95_000, 1_500_000)] == ["950", "9,500", "95k", "1.5M"]


def test_a_steps_timeline_is_left_out_when_no_step_recorded_its_end(
    client: TestClient, data: dict[str, str]
) -> None:
    assert client.get(f"/sessions/{data['plain']}.json").json()["steps"]["timed"]
    untimed = client.get(f"/sessions/{data['tool-in-metadata']}").text
    assert '<table class="steps">' in untimed
    assert "Timeline (" not in untimed and "<svg" not in untimed


def test_a_period_the_usage_page_does_not_offer_is_a_400(client: TestClient) -> None:
    assert client.get("/usage.json", params={"days": "3"}).status_code == 400


def test_usage_by_an_unknown_grouping_raises_validation_error(url: str) -> None:
    with Ledger(url) as ledger, pytest.raises(ValidationError, match="by must be one of"):
        ledger.steps.usage_by("week", since=NOW, until=NOW)  # type: ignore[arg-type]


# --- safety ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/sessions", "/sessions/hostile-1"])
def test_hostile_content_is_escaped_and_its_control_characters_shown(
    client: TestClient, path: str
) -> None:
    page = client.get(path).text
    assert "<script>alert" not in page and "<img src=x" not in page
    assert not re.search(r"<[a-z][^>]*\son[a-z]+\s*=", page)  # no event handler attribute
    assert "\x1b" not in page and "\u202e" not in page
    assert "&lt;script&gt;alert" in page and "\\u001b[31m\\u202e" in page
    assert "{{7*7}}" in page  # text, never evaluated


def test_hostile_content_comes_back_exactly_as_json(client: TestClient) -> None:
    answer = client.get("/sessions/hostile-1.json").json()
    assert answer["session"]["title"] == HOSTILE
    assert answer["grants"][0]["capability"] == f"tool:{HOSTILE}"


@pytest.mark.parametrize(
    "path", ["/sessions", "/sessions/trip-lisbon", "/usage", "/sessions/x/delete"]
)
def test_every_answer_carries_the_content_security_policy(client: TestClient, path: str) -> None:
    headers = client.get(path).headers
    assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
    assert headers["x-content-type-options"] == "nosniff"


def test_pages_load_only_the_viewers_own_script_and_no_inline_one(client: TestClient) -> None:
    page = client.get("/sessions/trip-lisbon").text
    assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/app.js" defer>']
    assert client.get("/static/app.js").headers["content-type"].startswith("text/javascript")


def test_the_viewer_is_read_only_by_default(client: TestClient) -> None:
    refused = client.post("/sessions/trip-lisbon/delete", data={"csrf": "x"})
    assert refused.status_code == 403 and "--allow-delete" in refused.text
    assert client.get("/sessions/trip-lisbon.json").status_code == 200
    assert client.post("/sessions/trip-lisbon").status_code == 405
    assert client.get("/sessions/trip-lisbon").text.count("Delete this session") == 0


def test_with_a_token_every_request_needs_it(url: str) -> None:
    with TestClient(create_app(url, token="s3cret-token")) as client:
        assert client.get("/sessions").status_code == 401
        assert client.get("/static/app.css").status_code == 401
        assert (
            client.get("/sessions.json", headers={"Authorization": "Bearer wrong"}).status_code
            == 401
        )
        bearer = {"Authorization": "Bearer s3cret-token"}
        assert client.get("/sessions.json", headers=bearer).status_code == 200


def test_opening_the_viewer_with_the_token_keeps_it_in_a_cookie_and_drops_it_from_the_url(
    url: str,
) -> None:
    with TestClient(create_app(url, token="s3cret-token")) as client:
        first = client.get("/sessions?token=s3cret-token&app=travel", follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/sessions?app=travel"
        assert "httponly" in first.headers["set-cookie"].lower()
        assert "samesite=strict" in first.headers["set-cookie"].lower()
        assert client.cookies.get(TOKEN_COOKIE) == "s3cret-token"
        assert client.get("/sessions?app=travel").status_code == 200


def test_deleting_needs_the_forms_csrf_token(url: str) -> None:
    with Ledger(url) as ledger:
        ledger.sessions.create("to-delete", title="doomed")
    with TestClient(create_app(url, allow_delete=True)) as client:
        form = client.get("/sessions/to-delete/delete").text
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', form)
        assert csrf is not None
        assert client.post("/sessions/to-delete/delete").status_code == 403
        assert client.post("/sessions/to-delete/delete", data={"csrf": "0" * 64}).status_code == 403
        assert client.get("/sessions/to-delete.json").status_code == 200
        done = client.post(
            "/sessions/to-delete/delete", data={"csrf": csrf.group(1)}, follow_redirects=False
        )
        assert done.status_code == 303 and done.headers["location"] == "/sessions?deleted=to-delete"
        assert client.get("/sessions/to-delete.json").status_code == 404


def test_a_csrf_token_of_one_session_does_not_delete_another(
    url: str, data: dict[str, str]
) -> None:
    with TestClient(create_app(url, allow_delete=True)) as client:
        form = client.get(f"/sessions/{data['hostile']}/delete").text
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', form)
        assert csrf is not None
        answer = client.post(f"/sessions/{data['plain']}/delete", data={"csrf": csrf.group(1)})
        assert answer.status_code == 403
        assert client.get(f"/sessions/{data['plain']}.json").status_code == 200


def test_requests_naming_another_host_are_refused(url: str) -> None:
    app = create_app(url, allowed_hosts={"127.0.0.1", "localhost"})
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        assert client.get("/sessions").status_code == 200
        rebound = client.get("/sessions", headers={"Host": "attacker.example:8765"})
        assert rebound.status_code == 421
