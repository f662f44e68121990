"""The viewer in a real browser: Debian's chromium driven by Playwright for Python opens
the session list, follows a session, checks that the checkpoint tree, the folded tool
calls and the usage chart render, that hostile content runs no script and that the
Content-Security-Policy is never violated; and saves a screenshot of each page.

The screenshots go to $AGENTLEDGER_UI_SCREENSHOTS (docs/viewer.md's are made with
``AGENTLEDGER_UI_SCREENSHOTS=docs/images``), else to a folder of the run; the end of the
run says where. Without chromium (``apt-get install chromium``) or Playwright the test
skips saying so; under CI=true it fails instead.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from sqlalchemy.engine import make_url

from agentledger import Ledger
from agentledger.ui import create_app

from ..databases import IN_CI
from ..docs.test_examples import run_example
from . import conftest
from ._data import NOW, Clock, fill
from .test_cli import free_port
from .test_frameworks import _adk_session, _langgraph_thread, _openai_session

CHROMIUM = os.environ.get("AGENTLEDGER_TEST_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS_ENV = "AGENTLEDGER_UI_SCREENSHOTS"
pytestmark = [pytest.mark.sqlite, pytest.mark.slow]


def _unavailable(message: str) -> None:
    if IN_CI:
        pytest.fail(f"CI=true, but {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The viewer on a SQLite file of the test data, served by uvicorn in a thread."""
    url = f"sqlite:///{tmp_path_factory.mktemp('browser') / 'ledger.db'}"
    with Ledger(url, clock=Clock()) as ledger:
        ledger.upgrade()
        fill(ledger)
    # Sessions made through the real integrations, newer than fill's (the real clock).
    _langgraph_thread(make_url(url))
    asyncio.run(_openai_session(url))
    asyncio.run(_adk_session(url))
    # The README's LangGraph example, run once: its thread paused at the interrupt.
    assert "paused: refund 120 EUR for order 1042?" in run_example(
        "langgraph_approval.py", make_url(url)
    )
    port = free_port()
    config = uvicorn.Config(
        create_app(url, clock=lambda: NOW), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise AssertionError("the viewer did not start")
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        _unavailable(f"the browser test needs chromium at {CHROMIUM}: apt-get install chromium")
    if importlib.util.find_spec("playwright") is None:
        _unavailable("the browser test needs Playwright: pip install playwright (the test extra)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where chromium's sandbox cannot start.
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get(SCREENSHOTS_ENV)
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("ui-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    conftest.SCREENSHOTS.append(str(folder.resolve()))
    return folder


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page that records CSP violations, console errors and any dialog (a
    script that ran: alert())."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.problems = []
    page.on(
        "console",
        lambda message: page.problems.append(message.text) if message.type == "error" else None,
    )
    page.on(
        "dialog",
        lambda dialog: (page.problems.append(f"dialog {dialog.message}"), dialog.dismiss()),
    )
    yield page
    context.close()


def test_the_session_list_follows_to_a_session_with_its_checkpoint_tree(
    base_url: str, page: Any, screenshots: Path
) -> None:
    page.goto(f"{base_url}/sessions")
    rows = page.locator("table.sessions tbody tr")
    assert rows.count() == 10
    page.screenshot(path=str(screenshots / "ui-sessions.png"), full_page=True)

    page.get_by_role("link", name="trip-lisbon").click()
    page.wait_for_url(f"{base_url}/sessions/trip-lisbon")
    assert page.locator("h1").inner_text() == "Plan a trip to Lisbon"
    tree = page.locator("#checkpoints ol.tree li")
    assert tree.count() == 3
    assert page.locator("#checkpoints .badge.latest").is_visible()
    assert page.locator("#checkpoints .badge.fork").inner_text() == "fork: 2 branches"
    assert page.locator(".timeline rect").count() == 3
    assert page.problems == []


def test_tool_calls_are_folded_and_the_viewers_script_unfolds_them(
    base_url: str, page: Any, screenshots: Path
) -> None:
    page.goto(f"{base_url}/sessions/trip-lisbon")
    fold = page.locator("details.tool-call").first
    assert fold.get_attribute("open") is None
    assert not page.get_by_text('"museum_search"').first.is_visible()
    page.get_by_role("button", name="Unfold all").click()
    assert fold.get_attribute("open") is not None
    assert page.get_by_text('"museum_search"').first.is_visible()
    page.screenshot(path=str(screenshots / "ui-session.png"), full_page=True)
    assert page.problems == []


def test_the_usage_chart_renders_bars_with_the_numbers_beside(
    base_url: str, page: Any, screenshots: Path
) -> None:
    page.goto(f"{base_url}/usage?days=7")
    bars = page.locator("#per-day svg rect.bar")
    assert bars.count() == 7
    heights = [bars.nth(n).bounding_box()["height"] for n in range(7)]
    assert max(heights) > 50 and min(heights) == 0
    assert page.locator("#per-model table.numbers").inner_text().count("m-big") == 1
    page.screenshot(path=str(screenshots / "ui-usage.png"), full_page=True)
    assert page.problems == []


def test_hostile_content_runs_no_script(base_url: str, page: Any) -> None:
    page.goto(f"{base_url}/sessions/hostile-1")
    page.get_by_role("button", name="Unfold all").click()
    assert page.locator("img").count() == 0
    assert '<script>alert("x")</script>' in page.locator("h1").inner_text()
    assert page.problems == []


def test_a_langgraph_thread_shows_its_namespaces_fork_and_interrupt(
    base_url: str, page: Any, screenshots: Path
) -> None:
    page.goto(f"{base_url}/sessions?q=essay-1")
    page.locator("table.sessions tbody tr a").first.click()
    page.wait_for_url(f"{base_url}/sessions/langgraph.*")
    section = page.locator("#langgraph")
    assert section.locator("h3.namespace").count() == 3  # the root namespace and two subgraph runs
    assert section.locator(".badge.fork").first.inner_text() == "fork: 2 branches"
    assert section.locator(".badge.held").count() == 2
    page.locator("#langgraph li.latest details.lg-meta").first.evaluate("f => f.open = true")
    section.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "ui-langgraph.png"), full_page=True)
    assert page.problems == []


def test_an_openai_agents_session_shows_its_function_call_folded(
    base_url: str, page: Any, screenshots: Path
) -> None:
    page.goto(f"{base_url}/sessions?framework=openai-agents")
    page.locator("table.sessions tbody tr a").first.click()
    page.wait_for_url(f"{base_url}/sessions/openai-agents.*")
    fold = page.locator("details.tool-call.kind-call").first
    assert fold.get_attribute("open") is None
    assert "get_weather" in fold.locator("summary").inner_text()
    assert page.locator("img").count() == 0
    page.get_by_role("button", name="Unfold all").click()
    assert fold.get_attribute("open") is not None
    page.screenshot(path=str(screenshots / "ui-openai-agents.png"), full_page=True)
    assert page.problems == []


def test_a_real_langgraph_thread_paused_at_an_interrupt_shows_its_question_and_state(
    base_url: str, page: Any, screenshots: Path
) -> None:
    page.goto(f"{base_url}/sessions")
    page.get_by_placeholder("Search title, message, id or framework key").fill("refund-order-1042")
    page.get_by_role("button", name="Filter").click()
    page.get_by_role("link", name="langgraph.").click()
    page.wait_for_url(f"{base_url}/sessions/langgraph.*")
    assert page.locator("h1").inner_text() == "refund-order-1042"
    assert page.locator("dl.facts .status").inner_text() == "paused at an interrupt"
    paused = page.locator("#paused")
    assert paused.locator("q.question").inner_text() == "refund 120 EUR for order 1042?"
    state = paused.locator("dl.lg-state").inner_text()
    assert "order" in state and '"1042"' in state and "amount" in state and "120" in state
    assert page.locator("#langgraph ol.tree > li").count() == 3
    undecoded = page.locator(
        "#paused .size, #langgraph dl.lg-state .size, #langgraph .writes .size"
    )
    assert undecoded.count() == 0  # every value and write decoded, none as type and size
    page.locator("#langgraph li.latest details.lg-state-fold").evaluate("f => f.open = true")
    page.screenshot(path=str(screenshots / "viewer-langgraph-interrupt.png"), full_page=True)
    assert page.problems == []
