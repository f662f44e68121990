"""A list of hosts in a MariaDB/MySQL URL: each new connection goes to the first that
answers.

libpq (psycopg) and asyncpg take a multi-host URL themselves and pick the primary
(``?host=db1:5432&host=db2:5432&target_session_attrs=read-write``). MariaDB/MySQL's
drivers take one host. So a ``mysql://`` or ``mariadb://`` URL in that same form
(``mysql://app@/agents?host=node1:3306&host=node2:3306&host=node3:3306``) makes an
engine whose connections try the hosts in turn, starting at the one that answered last
(``do_connect``: the dialect's own connection arguments, such as the found-rows flag
conflict detection needs, stay). A Galera cluster written through such a URL keeps
writing when a node dies: a call its death cuts off runs once more on a fresh
connection (a disconnect empties the pool), which goes to the next node that answers.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.engine import URL, Dialect

from ..errors import ValidationError
from .urls import mask

logger = logging.getLogger("agentledger.engine")


def hosts_of(url: URL) -> list[tuple[str, int | None]]:
    """The hosts a MariaDB/MySQL URL lists in its ``host`` query values (with the
    URL's own host first, when it has one), as (host, port); empty when it lists fewer
    than two, which its driver takes as it is."""
    if url.get_backend_name() not in ("mysql", "mariadb"):
        return []
    listed = url.query.get("host")
    if listed is None or isinstance(listed, str):
        return []
    hosts = [] if url.host is None else [(url.host, url.port)]
    return hosts + [_host_and_port(url, each) for each in listed]


def _host_and_port(url: URL, text: str) -> tuple[str, int | None]:
    if text.startswith("["):  # an IPv6 address: [::1]:3306
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = text.partition(":")
    if not port:
        return host, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValidationError(
            f"host={text} in {mask(url)}: a host is name or name:port, with a port from 1 to 65535",
            path="url",
        )
    return host, int(port)


def connect_to_the_first_that_answers(engine: Engine, hosts: list[tuple[str, int | None]]) -> None:
    """Make ``engine``'s new connections try ``hosts`` in turn, from the one that
    answered last; the last host's error is raised when none answers."""
    last_good = [0]
    lock = threading.Lock()

    @event.listens_for(engine, "do_connect")
    def connect(dialect: Dialect, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        with lock:
            start = last_good[0]
        failure: Exception | None = None
        for offset in range(len(hosts)):
            index = (start + offset) % len(hosts)
            host, port = hosts[index]
            address = {**cparams, "host": host}
            if port is not None:
                address["port"] = port
            else:
                address.pop("port", None)
            try:
                connection = dialect.connect(*cargs, **address)
            except Exception as error:  # the driver's own error, translated by the caller
                logger.info("host %s:%s did not answer: %s", host, port or "", error)
                failure = error
                continue
            with lock:
                last_good[0] = index
            return connection
        assert failure is not None
        raise failure
