"""A private PostgreSQL primary and hot standby for one test run, from the machine's
PostgreSQL 15 (``/usr/lib/postgresql/15/bin``; ``AGENTLEDGER_TEST_PG_BIN`` names another).

``start()`` runs a *keeper* (this file as a script) in a session of its own. The keeper
makes a primary in a new temporary folder (``initdb``, trust authentication for the role
``postgres``, streaming replication on), starts it on a free port of 127.0.0.1, copies
it with ``pg_basebackup -R`` into a standby, starts that on another free port, and
reports both URLs as one JSON line. It stops both servers and deletes the folder when
its standard input closes: ``close()``, a test run that ends however it ends (the kernel
closes the pipe of a killed pytest), or SIGTERM, SIGHUP or SIGINT sent to the keeper
itself. As root the servers run as ``nobody``, since PostgreSQL refuses to run as root.
Nothing outside the folder is touched: no shared server, no system configuration.

Run by hand, ``python tests/private_standby.py agentledger`` prints the URLs and keeps
both servers until Ctrl-D (end of input) or Ctrl-C.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The keeper runs as a script, outside the tests package: the private PostgreSQL's
# helpers are imported from beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from private_postgres import (
    SETTINGS,
    StartError,
    _as_unprivileged,
    _free_port,
    _run,
    close_keeper,
    launch_keeper,
    stop_server,
)

BINARIES = Path(os.environ.get("AGENTLEDGER_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
REPLICATION = {
    "wal_level": "replica",
    "max_wal_senders": "5",
    "hot_standby": "on",
    # The standby's reads must not wait on, nor cancel for, the primary's cleanup
    # in a test that reads right after the primary wrote.
    "hot_standby_feedback": "on",
}


@dataclass
class PrivateStandby:
    """A running primary and its hot standby, and the keeper that will stop them."""

    primary_url: str
    standby_url: str
    folder: Path
    keeper: subprocess.Popen[bytes] = field(repr=False)

    def close(self) -> None:
        """Stop both servers and delete their folder (the keeper does it on EOF)."""
        close_keeper(self.keeper)

    def fail_over(self) -> None:
        """Kill the primary (an immediate stop: no checkpoint, connections cut) and
        promote the standby, which then takes writes at its own URL."""
        assert self.keeper.stdin is not None and self.keeper.stdout is not None
        self.keeper.stdin.write(b"fail over\n")
        self.keeper.stdin.flush()
        answer = json.loads(self.keeper.stdout.readline() or b"{}")
        if answer.get("promoted") is not True:
            raise StartError(f"the fail-over did not happen: {answer}")


def available() -> str | None:
    """Why a standby cannot be started here, or None when it can."""
    for tool in ("initdb", "pg_ctl", "pg_basebackup", "postgres"):
        if not (BINARIES / tool).exists():
            return f"{BINARIES / tool} is missing (set AGENTLEDGER_TEST_PG_BIN)"
    return None


def start(database: str) -> PrivateStandby:
    """Start a primary with a standby; their URLs name ``database`` (on the primary,
    created by the caller; the standby replays it)."""
    keeper, report = launch_keeper(Path(__file__), database, what="the private primary and standby")
    return PrivateStandby(
        primary_url=report["primary"],
        standby_url=report["standby"],
        folder=Path(report["folder"]),
        keeper=keeper,
    )


# --- the keeper: everything below runs in its own process -------------------------


def _configure(data: Path, folder: Path, port: int) -> None:
    settings = {
        **SETTINGS,
        **REPLICATION,
        "port": str(port),
        "unix_socket_directories": f"'{folder}'",
    }
    with (data / "postgresql.conf").open("a") as conf:
        conf.writelines(f"{name} = {value}\n" for name, value in settings.items())


def _pg_ctl_start(data: Path, log: Path, run_as: dict[str, Any]) -> None:
    command = [str(BINARIES / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60"]
    try:
        _run([*command, "start"], run_as, timeout=90)
    except StartError as error:
        server_log = log.read_text(errors="replace") if log.exists() else ""
        raise StartError(f"{error}\n{server_log[-2000:]}") from None


def _start_primary(folder: Path, run_as: dict[str, Any]) -> int:
    data = folder / "primary"
    _run(
        [
            str(BINARIES / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
            "--no-instructions",
        ],
        run_as,
        timeout=120,
    )
    with (data / "pg_hba.conf").open("a") as hba:
        hba.write("host replication postgres 127.0.0.1/32 trust\n")
    port = _free_port()
    _configure(data, folder, port)
    _pg_ctl_start(data, folder / "primary.log", run_as)
    return port


def _start_standby(folder: Path, primary_port: int, run_as: dict[str, Any]) -> int:
    data = folder / "standby"
    _run(
        [
            str(BINARIES / "pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(primary_port),
            "-U",
            "postgres",
            "-D",
            str(data),
            "-R",  # standby.signal and primary_conninfo: a hot standby of the primary
            "-X",
            "stream",
        ],
        run_as,
        timeout=120,
    )
    port = _free_port()
    _configure(data, folder, port)  # appended last: this port wins over the primary's
    _pg_ctl_start(data, folder / "standby.log", run_as)
    return port


def _command(command: str, folder: Path, run_as: dict[str, Any]) -> dict[str, Any]:
    """``fail over``: stop the primary at once and promote the standby."""
    if command != "fail over":
        return {"error": f"unknown command {command!r}: fail over"}
    try:
        pg_ctl = str(BINARIES / "pg_ctl")
        _run([pg_ctl, "-D", str(folder / "primary"), "-m", "immediate", "stop"], run_as, 60)
        _run([pg_ctl, "-D", str(folder / "standby"), "-w", "-t", "60", "promote"], run_as, 90)
    except (StartError, subprocess.TimeoutExpired) as error:
        return {"error": f"{type(error).__name__}: {error}"}
    return {"promoted": True}


def _keep(database: str) -> None:
    """Start both servers, report them as one JSON line, stop them on stdin's EOF."""

    def leave(_signal: int, _frame: object) -> None:
        raise SystemExit(1)

    for name in ("SIGTERM", "SIGHUP", "SIGINT"):
        signal.signal(getattr(signal, name), leave)
    run_as = _as_unprivileged()
    folder = Path(tempfile.mkdtemp(prefix="agentledger-standby-"))
    try:
        if run_as:
            os.chown(folder, run_as["user"], run_as["group"])
        primary = _start_primary(folder, run_as)
        standby = _start_standby(folder, primary, run_as)
        report = {
            "primary": f"postgresql://postgres@127.0.0.1:{primary}/{database}",
            "standby": f"postgresql://postgres@127.0.0.1:{standby}/{database}",
            "folder": str(folder),
        }
        print(json.dumps(report), flush=True)
        # Commands until the test run (or whatever killed it) closes the pipe.
        for line in sys.stdin.buffer:
            print(json.dumps(_command(line.decode().strip(), folder, run_as)), flush=True)
    except (StartError, OSError, subprocess.TimeoutExpired) as error:
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
    finally:
        for name in ("SIGTERM", "SIGHUP", "SIGINT"):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
        for server in ("standby", "primary"):
            stop_server(BINARIES, folder / server, run_as)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    _keep(sys.argv[1] if len(sys.argv) > 1 else "agentledger")
