"""The capability probe refuses a backend agentledger cannot trust, and leaves nothing."""

from __future__ import annotations

import pymysql
import pytest
from pymysql.constants import CLIENT
from sqlalchemy import create_engine, func, select
from sqlalchemy.engine import URL

from agentledger import DatabaseError, Ledger
from agentledger._probe import cluster_of
from agentledger.models import AgentSession

from ..databases import dialect_params, scratch_database


@pytest.mark.parametrize("dialect", dialect_params())
def test_the_probe_passes_and_leaves_no_row(dialect: str, tmp_path: object) -> None:
    with scratch_database(dialect, str(tmp_path)) as url, Ledger(url) as ledger:
        ledger.upgrade()
        assert ledger.sessions.exists("anything") is False
        with ledger.engine.connect() as connection:
            count = connection.execute(select(func.count()).select_from(AgentSession)).scalar()
        assert count == 0


@pytest.mark.mysql
def test_a_mysql_engine_without_found_rows_is_refused(tmp_path: object) -> None:
    with scratch_database("mysql", str(tmp_path)) as url:
        Ledger(url).upgrade()

        def connect() -> pymysql.Connection:  # a host's creator=, without CLIENT.FOUND_ROWS
            assert isinstance(url, URL)
            return pymysql.connect(
                host=url.host,
                port=url.port or 3306,
                user=url.username,
                password=url.password or "",
                database=url.database,
                client_flag=CLIENT.MULTI_STATEMENTS,
            )

        engine = create_engine("mysql+pymysql://", creator=connect)
        with Ledger(engine=engine) as ledger, pytest.raises(DatabaseError) as raised:
            ledger.sessions.exists("x")
        assert "FOUND_ROWS" in str(raised.value)
        engine.dispose()


@pytest.mark.postgresql
def test_a_read_only_user_can_read_and_is_refused_writes_clearly(tmp_path: object) -> None:
    from agentledger import PermissionDeniedError

    with scratch_database("postgresql", str(tmp_path)) as url:
        with Ledger(url) as owner:
            owner.upgrade()
            owner.sessions.create("readable")
        admin = create_engine(url, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            for statement in (
                "DROP ROLE IF EXISTS agentledger_reader",
                "CREATE ROLE agentledger_reader LOGIN",
                f'REVOKE TEMPORARY ON DATABASE "{url.database}" FROM PUBLIC',
                "GRANT SELECT ON ALL TABLES IN SCHEMA public TO agentledger_reader",
            ):
                connection.exec_driver_sql(statement)
        try:
            with Ledger(url.set(username="agentledger_reader")) as reader:
                assert reader.sessions.get("readable").id == "readable"
                with pytest.raises(PermissionDeniedError):
                    reader.sessions.create("not-allowed")
        finally:
            with admin.connect() as connection:
                connection.exec_driver_sql("DROP OWNED BY agentledger_reader")
            admin.dispose()


@pytest.mark.parametrize("dialect", dialect_params())
def test_one_server_is_no_cluster(dialect: str, tmp_path: object) -> None:
    with scratch_database(dialect, str(tmp_path)) as url:
        engine = create_engine(url)
        try:
            with engine.connect() as connection:
                assert cluster_of(connection) is None
                assert not connection.in_transaction()
        finally:
            engine.dispose()
