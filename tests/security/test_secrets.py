"""A password in a URL never appears in an error, a log line or a repr."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy.engine import URL

from agentledger import AgentLedgerError, AsyncLedger, Ledger, cli

from ..databases import scratch_database, server_url_or_skip

SECRET = "s3cr3t-Pa55w0rd"


def assert_hidden(*texts: object) -> None:
    for text in texts:
        assert SECRET not in str(text), text
        assert SECRET not in repr(text), text


def with_password(url: URL) -> str:
    return url.set(password=SECRET).render_as_string(hide_password=False)


@pytest.fixture(autouse=True)
def every_log_line(caplog: pytest.LogCaptureFixture) -> object:
    caplog.set_level(logging.DEBUG)
    yield caplog
    assert_hidden(*(record.getMessage() for record in caplog.records))


def error_chain(error: BaseException) -> list[BaseException]:
    chain = []
    current: BaseException | None = error
    while current is not None and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


@pytest.mark.parametrize("scheme", ["postgresql", "mysql"])
def test_an_unreachable_server_error_hides_the_password(scheme: str) -> None:
    url = f"{scheme}://agent:{SECRET}@127.0.0.1:1/nowhere"
    with Ledger(url) as ledger, pytest.raises(AgentLedgerError) as raised:
        ledger.sessions.exists("x")
    assert_hidden(raised.value, ledger, ledger.engine, ledger.settings)
    assert "***" in str(raised.value)


async def test_the_async_api_hides_the_password_too() -> None:
    url = f"postgresql://agent:{SECRET}@127.0.0.1:1/nowhere"
    async with AsyncLedger(url) as ledger:
        with pytest.raises(AgentLedgerError) as raised:
            await ledger.sessions.exists("x")
        assert_hidden(raised.value, ledger, ledger.engine)


@pytest.mark.mysql
def test_a_refused_login_hides_the_password() -> None:
    base = server_url_or_skip("mysql")
    with Ledger(with_password(base)) as ledger, pytest.raises(AgentLedgerError) as raised:
        ledger.sessions.exists("x")
    assert_hidden(*error_chain(raised.value))


@pytest.mark.postgresql
def test_a_schema_error_hint_hides_the_password(tmp_path: Path) -> None:
    with scratch_database("postgresql", str(tmp_path)) as url:
        with Ledger(with_password(url)) as ledger, pytest.raises(AgentLedgerError) as raised:
            ledger.sessions.exists("x")
        assert "agentledger db upgrade" in str(raised.value)
        assert_hidden(raised.value)


@pytest.mark.postgresql
def test_the_command_line_hides_the_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with scratch_database("postgresql", str(tmp_path)) as url:
        for argv in (["db", "check"], ["db", "current"], ["db", "upgrade"]):
            cli.main([*argv, "--url", with_password(url)])
        cli.main(["db", "check", "--url", f"postgresql://agent:{SECRET}@127.0.0.1:1/nowhere"])
    out, err = capsys.readouterr()
    assert_hidden(out, err)
