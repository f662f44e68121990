"""A MariaDB/MySQL URL that lists several hosts (``?host=a:3306&host=b:3306``, libpq's
form): which hosts it names, and what it refuses (``engine.hosts``)."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url

from agentledger import Ledger, ValidationError
from agentledger.engine.hosts import hosts_of


def test_each_listed_host_is_tried_with_its_port() -> None:
    url = make_url("mysql+pymysql://app@/agents?host=db1:3306&host=db2:3307&host=db3")
    assert hosts_of(url) == [("db1", 3306), ("db2", 3307), ("db3", None)]


def test_the_url_s_own_host_comes_first() -> None:
    url = make_url("mariadb+pymysql://app@db0:3310/agents?host=db1:3306&host=db2:3306")
    assert hosts_of(url)[0] == ("db0", 3310)


def test_an_ipv6_address_is_written_in_brackets() -> None:
    url = make_url("mysql+pymysql://app@/agents?host=[::1]:3306&host=[fe80::2]")
    assert hosts_of(url) == [("::1", 3306), ("fe80::2", None)]


def test_one_host_in_the_query_is_left_to_the_driver() -> None:
    assert hosts_of(make_url("mysql+pymysql://app@/agents?host=db1")) == []


def test_a_postgresql_host_list_is_libpq_s_own() -> None:
    url = make_url("postgresql+psycopg://app@/agents?host=db1:5432&host=db2:5432")
    assert hosts_of(url) == []


@pytest.mark.parametrize("port", ["port", "0", "70000"])
def test_a_host_with_a_bad_port_is_refused_when_the_ledger_is_built(port: str) -> None:
    with pytest.raises(ValidationError, match=f"host=db2:{port} in .*a port from 1 to 65535"):
        Ledger(f"mysql://app@/agents?host=db1:3306&host=db2:{port}")
