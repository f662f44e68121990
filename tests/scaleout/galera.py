"""A private three-node MariaDB Galera cluster on loopback, for one test run.

``start()`` starts a *keeper* (this file run as a script), which creates three data
folders in a temporary folder, starts the first node as a new cluster and the other two
joining it (a full state transfer by rsync), all on free ports of 127.0.0.1 and with
sockets, pid files and logs of their own (``--defaults-file``: /etc/mysql is never
read, the machine's MariaDB is never touched). Beside the nodes the keeper runs a
*relay*: a TCP port that hands each new connection to the next live node in turn, as
HAProxy or MaxScale would spread clients over a multi-primary cluster.

The keeper stops the nodes and deletes the folder when its standard input closes, that
is when the test run ends, however it ends (as ``tests/private_postgres.py`` does).
While it runs it takes one command per line on standard input and answers each with a
JSON line: ``kill N`` (SIGKILL node N, 1-based), ``start N`` (restart it after
``--wsrep-recover``, so it rejoins by an incremental state transfer) and ``status``.

As a script for a person: ``python tests/scaleout/galera.py`` prints the nodes' URLs and
keeps the cluster until Ctrl-C. Needs ``galera-4`` and ``rsync`` (Debian's packages)
and root or the ``mysql`` user. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROVIDER = Path("/usr/lib/galera/libgalera_smm.so")
SERVER = "mariadbd"
INSTALL_DB = "mariadb-install-db"
CLIENT = "mariadb"
NODES = 3
START_TIMEOUT_S = 240
NODE_TIMEOUT_S = 90
STOP_TIMEOUT_S = 60
SERVER_USER = "mysql"


class StartError(RuntimeError):
    """The cluster could not be started (the message says why)."""


def missing() -> str | None:
    """Why a cluster cannot run on this machine, or None when it can."""
    if not PROVIDER.exists():
        return f"Galera is not installed ({PROVIDER}): apt-get install galera-4"
    for program in (SERVER, INSTALL_DB, CLIENT, "rsync"):
        if shutil.which(program) is None and not Path("/usr/sbin", program).exists():
            return f"{program} is not installed: apt-get install mariadb-server galera-4 rsync"
    if os.name != "posix" or (os.geteuid() != 0 and _user_name() != SERVER_USER):
        return f"a Galera node runs as root (dropping to {SERVER_USER}) or as {SERVER_USER}"
    return None


def _user_name() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name


@dataclass
class Galera:
    """A running cluster: each node's URL, the relay's, and the keeper that owns them."""

    urls: list[str]
    relay_url: str
    folder: Path
    keeper: subprocess.Popen[str] = field(repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def command(self, line: str) -> dict[str, Any]:
        """Send the keeper one command (``kill N``, ``start N``, ``status``); its answer."""
        assert self.keeper.stdin is not None and self.keeper.stdout is not None
        with self._lock:
            self.keeper.stdin.write(line + "\n")
            self.keeper.stdin.flush()
            answer: dict[str, Any] = json.loads(self.keeper.stdout.readline() or "{}")
        if "error" in answer:
            raise StartError(answer["error"])
        return answer

    def close(self) -> None:
        """Stop the nodes and the relay and delete the folder (the keeper does, on EOF)."""
        if self.keeper.stdin is not None and not self.keeper.stdin.closed:
            self.keeper.stdin.close()
        try:
            self.keeper.wait(timeout=STOP_TIMEOUT_S * NODES)
        except subprocess.TimeoutExpired:
            self.keeper.kill()
            self.keeper.wait()


def start() -> Galera:
    """Start a private cluster and its relay (takes about 10 to 20 s)."""
    reason = missing()
    if reason:
        raise StartError(reason)
    keeper = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    stdout = keeper.stdout
    assert stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    report: dict[str, Any] = json.loads(lines[0]) if lines and lines[0] else {}
    if "urls" not in report:
        # The keeper cleans up after reporting its error; a silent one is killed.
        with contextlib.suppress(OSError):
            keeper.stdin.close()  # type: ignore[union-attr]
        try:
            keeper.wait(timeout=STOP_TIMEOUT_S * NODES if lines else 1)
        except subprocess.TimeoutExpired:
            keeper.kill()
            keeper.wait()
        reason = report.get("error") or f"no answer within {START_TIMEOUT_S} s"
        raise StartError(f"the Galera cluster did not start: {reason}")
    return Galera(
        urls=report["urls"],
        relay_url=report["relay_url"],
        folder=Path(report["folder"]),
        keeper=keeper,
    )


# --- the keeper: everything below runs in its own process -------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class _Node:
    """One node's folder and ports, and its server process once started."""

    number: int
    folder: Path
    port: int
    gcomm_port: int
    ist_port: int
    sst_port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def config(self) -> Path:
        return self.folder / "my.cnf"

    @property
    def socket(self) -> Path:
        return self.folder / "mysqld.sock"

    @property
    def log(self) -> Path:
        return self.folder / "error.log"

    def write_config(self, cluster: list[_Node]) -> None:
        members = ",".join(f"127.0.0.1:{node.gcomm_port}" for node in cluster)
        provider_options = ";".join(
            [
                "base_host=127.0.0.1",
                f"base_port={self.gcomm_port}",
                f"gmcast.listen_addr=tcp://127.0.0.1:{self.gcomm_port}",
                f"ist.recv_addr=127.0.0.1:{self.ist_port}",
                "gcache.size=64M",
            ]
        )
        settings = {
            "datadir": self.data,
            "socket": self.socket,
            "pid_file": self.folder / "mysqld.pid",
            "port": self.port,
            "bind_address": "127.0.0.1",
            "skip_name_resolve": "ON",
            "log_error": self.log,
            "character_set_server": "utf8mb4",
            "collation_server": "utf8mb4_general_ci",
            "max_connections": 300,
            "wsrep_on": "ON",
            "wsrep_provider": PROVIDER,
            "wsrep_cluster_name": "agentledger_test",
            "wsrep_cluster_address": f"gcomm://{members}",
            "wsrep_node_name": f"node{self.number}",
            "wsrep_node_address": f"127.0.0.1:{self.gcomm_port}",
            "wsrep_node_incoming_address": f"127.0.0.1:{self.port}",
            "wsrep_provider_options": f'"{provider_options}"',
            "wsrep_sst_method": "rsync",
            "wsrep_sst_receive_address": f"127.0.0.1:{self.sst_port}",
            "binlog_format": "ROW",
            "default_storage_engine": "InnoDB",
            "innodb_autoinc_lock_mode": 2,
            # A throwaway cluster: durability on each node buys nothing here.
            "innodb_flush_log_at_trx_commit": 2,
            "innodb_buffer_pool_size": "64M",
        }
        lines = ["[mysqld]", *(f"{name} = {value}" for name, value in settings.items())]
        self.config.write_text("\n".join(lines) + "\n")

    def server_command(self, *extra: str) -> list[str]:
        return [_program(SERVER), f"--defaults-file={self.config}", *_as_server_user(), *extra]

    def client(self, sql: str, timeout: float = 30) -> str:
        """Run ``sql`` on the node through its socket as root; its tab-separated output."""
        done = subprocess.run(
            [
                _program(CLIENT),
                "--no-defaults",
                f"--socket={self.socket}",
                "-uroot",
                "-N",
                "-e",
                sql,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise StartError(f"node {self.number}: {done.stderr.strip()}")
        return done.stdout.strip()

    def state(self) -> str:
        try:
            row = self.client("SHOW STATUS LIKE 'wsrep_local_state_comment'", timeout=5)
        except (StartError, subprocess.TimeoutExpired):
            return "down"
        return row.split("\t")[-1] if row else "down"

    def wait_synced(self) -> None:
        deadline = time.monotonic() + NODE_TIMEOUT_S
        while self.state() != "Synced":
            if self.process is not None and self.process.poll() is not None:
                raise StartError(f"node {self.number} exited:\n{self._log_tail()}")
            if time.monotonic() > deadline:
                raise StartError(f"node {self.number} not Synced in {NODE_TIMEOUT_S} s")
            time.sleep(0.25)

    def _log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def launch(self, *extra: str) -> None:
        self.process = subprocess.Popen(
            self.server_command(*extra),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.wait_synced()

    def recovered_position(self) -> str:
        """The position a killed node recovers to (``--wsrep-recover``), for an IST."""
        subprocess.run(self.server_command("--wsrep-recover"), capture_output=True, timeout=120)
        for line in reversed(self.log.read_text(errors="replace").splitlines()):
            if "Recovered position:" in line:
                return line.split("Recovered position:")[1].strip()
        raise StartError(f"node {self.number}: --wsrep-recover found no position")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()


def _program(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _as_server_user() -> list[str]:
    return [f"--user={SERVER_USER}"] if os.geteuid() == 0 else []


def _install(node: _Node) -> None:
    node.data.mkdir(parents=True)
    if os.geteuid() == 0:
        shutil.chown(node.folder, SERVER_USER, SERVER_USER)
        shutil.chown(node.data, SERVER_USER, SERVER_USER)
    done = subprocess.run(
        [
            _program(INSTALL_DB),
            f"--defaults-file={node.config}",
            *_as_server_user(),
            "--skip-test-db",
            "--auth-root-authentication-method=normal",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise StartError(f"{INSTALL_DB} failed: {(done.stderr or done.stdout)[-2000:]}")


class _Relay:
    """A TCP port whose each new connection goes to the next live node, round-robin."""

    def __init__(self, nodes: list[_Node]) -> None:
        self.nodes = nodes
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.turn = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _connect(self) -> socket.socket | None:
        for _ in self.nodes:
            node = self.nodes[self.turn % len(self.nodes)]
            self.turn += 1
            with contextlib.suppress(OSError):
                return socket.create_connection(("127.0.0.1", node.port), timeout=5)
        return None

    def _pipe(self, client: socket.socket) -> None:
        server = self._connect()
        if server is None:
            client.close()
            return
        server.settimeout(None)
        peers = {client: server, server: client}
        with selectors.DefaultSelector() as selector, client, server:
            for end in peers:
                selector.register(end, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    end: socket.socket = key.fileobj  # type: ignore[assignment]
                    try:
                        data = end.recv(65536)
                        if not data:
                            return
                        peers[end].sendall(data)
                    except OSError:
                        return

    def close(self) -> None:
        self.listener.close()


def _keep() -> None:
    """Start the cluster, report it as one JSON line, serve commands until stdin's EOF."""

    def leave(_signal: int, _frame: object) -> None:
        raise SystemExit(1)

    for name in ("SIGTERM", "SIGHUP", "SIGINT"):
        signal.signal(getattr(signal, name), leave)
    folder = Path(tempfile.mkdtemp(prefix="agentledger-galera-"))
    folder.chmod(0o755)
    nodes: list[_Node] = []
    relay: _Relay | None = None
    try:
        ports = iter(_free_ports(4 * NODES))
        for number in range(1, NODES + 1):
            node_folder = folder / f"node{number}"
            node_folder.mkdir()
            node = _Node(number, node_folder, *(next(ports) for _ in range(4)))
            nodes.append(node)
        for node in nodes:
            node.write_config(nodes)
            _install(node)
        nodes[0].launch("--wsrep-new-cluster")
        # root over TCP from loopback, no password, as on the machine's server; Galera
        # replicates the account to the joiners with their state transfer.
        nodes[0].client(
            "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; "
            "GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION"
        )
        for node in nodes[1:]:
            node.launch()
        relay = _Relay(nodes)
        urls = [f"mysql://root@127.0.0.1:{node.port}" for node in nodes]
        report = {
            "urls": urls,
            "relay_url": f"mysql://root@127.0.0.1:{relay.port}",
            "folder": str(folder),
        }
        print(json.dumps(report), flush=True)
        for line in sys.stdin:
            print(json.dumps(_answer(line.split(), nodes)), flush=True)
    except (StartError, OSError, subprocess.TimeoutExpired) as error:
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
    finally:
        for name in ("SIGTERM", "SIGHUP", "SIGINT"):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
        if relay is not None:
            relay.close()
        for node in reversed(nodes):
            node.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free ports (taken at once, so none repeats)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def _answer(words: list[str], nodes: list[_Node]) -> dict[str, Any]:
    try:
        if words == ["status"]:
            return {"states": [node.state() for node in nodes]}
        if len(words) == 2 and words[0] in ("kill", "start") and words[1].isdigit():
            node = nodes[int(words[1]) - 1]
            if words[0] == "kill":
                node.kill()
            else:
                node.launch(f"--wsrep_start_position={node.recovered_position()}")
            return {"states": [each.state() for each in nodes]}
        return {"error": f"unknown command {' '.join(words)!r}: kill N, start N or status"}
    except (StartError, OSError, IndexError, subprocess.TimeoutExpired) as error:
        return {"error": f"{type(error).__name__}: {error}"}


def _main() -> None:
    """For a person: start the cluster, print it, keep it until Ctrl-C."""
    cluster = start()
    print("nodes:", *cluster.urls, sep="\n  ")
    print(f"relay (round-robin over the nodes): {cluster.relay_url}")
    print("Ctrl-C stops the cluster and deletes its folder")
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.close()


if __name__ == "__main__":
    if sys.stdin.isatty():
        _main()
    else:
        _keep()
