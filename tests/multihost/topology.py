"""The hosts, made with network namespaces on this machine, and everything that runs on them.

::

    root namespace (the test driver)  10.231.0.1 ── bridge mh-br0 ──┬── mh-lb    10.231.0.20  HAProxy, round-robin
                                                                     ├── mh-app1  10.231.0.11  uvicorn --workers 2, db_worker
                                                                     ├── mh-app2  10.231.0.12  uvicorn --workers 2, db_worker
                                                                     ├── mh-data  10.231.0.10  PostgreSQL; 10.231.0.13 Redis
                                                                     └── mh-solo  10.231.0.30  one uvicorn process on SQLite

Nothing here leaves the bridge: it has no route out and forwarding is not touched. Every name
made here starts with ``mh-`` (links, namespaces) or ``mh-run-`` (the temporary directory),
which is what :func:`cleanup` removes after a run that could not clean up after itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "mh-"
BRIDGE = "mh-br0"
SUBNET = "10.231.0"
DRIVER_IP = f"{SUBNET}.1"
LB_IP = f"{SUBNET}.20"
#: Debian's PostgreSQL server binaries, the newest installed version.
PG_BIN = max(
    Path("/usr/lib/postgresql").glob("*/bin"),
    key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    default=Path("/usr/lib/postgresql/15/bin"),
)
PORT = 8000
PG_PORT = 5432
REDIS_PORT = 6379
TMP_PREFIX = "mh-run-"

#: Seconds a process may take to answer after it starts, and to go after SIGTERM.
READY_TIMEOUT = 90.0
STOP_TIMEOUT = 10.0


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=30)


def netns_pids(ns: str) -> list[int]:
    result = run("ip", "netns", "pids", ns, check=False)
    return [int(p) for p in result.stdout.split()] if result.returncode == 0 else []


def kill_namespace(ns: str, sig: int = signal.SIGKILL) -> list[int]:
    """Send ``sig`` to every process in ``ns``; return their pids."""
    pids = netns_pids(ns)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    return pids


def wait_namespace_empty(ns: str, timeout: float = STOP_TIMEOUT) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not netns_pids(ns):
            return True
        time.sleep(0.1)
    return not netns_pids(ns)


def cleanup(verbose: bool = True) -> list[str]:
    """Remove whatever an earlier run left: processes in mh-* namespaces, the namespaces, mh-*
    links, mh-run-* temporary directories. Idempotent."""
    removed: list[str] = []
    namespaces = [
        line.split()[0]
        for line in run("ip", "netns", "list", check=False).stdout.splitlines()
        if line.strip()
    ]
    for ns in namespaces:
        if not ns.startswith(PREFIX):
            continue
        if kill_namespace(ns):
            wait_namespace_empty(ns, 5)
        run("ip", "netns", "delete", ns, check=False)
        removed.append(f"namespace {ns}")
    for line in run("ip", "-o", "link", "show", check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(PREFIX):
            run("ip", "link", "delete", name, check=False)
            removed.append(f"link {name}")
    for path in Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}*"):
        shutil.rmtree(path, ignore_errors=True)
        removed.append(f"directory {path}")
    if verbose:
        for item in removed:
            print(f"multihost: removed {item}", flush=True)
    return removed


# -- the network ------------------------------------------------------------------------------


@dataclass
class Host:
    """One network namespace with one veth into the bridge (and perhaps a second address)."""

    name: str  # the namespace, e.g. mh-app1
    ip: str
    extra_ips: list[str] = field(default_factory=list)

    @property
    def veth(self) -> str:
        return f"{self.name}-v"  # the bridge's end; "eth0" inside

    def create(self) -> None:
        run("ip", "netns", "add", self.name)
        run("ip", "link", "add", self.veth, "type", "veth", "peer", "name", f"{self.name}-p")
        run("ip", "link", "set", f"{self.name}-p", "netns", self.name)
        run("ip", "link", "set", self.veth, "master", BRIDGE)
        run("ip", "link", "set", self.veth, "up")
        self.exec("ip", "link", "set", "lo", "up")
        self.exec("ip", "link", "set", f"{self.name}-p", "name", "eth0")
        for ip in [self.ip, *self.extra_ips]:
            self.exec("ip", "addr", "add", f"{ip}/24", "dev", "eth0")
        self.exec("ip", "link", "set", "eth0", "up")

    def exec(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run("ip", "netns", "exec", self.name, *args, check=check)

    def popen(
        self, args: list[str], log: Path, env: dict[str, str] | None = None, user: str | None = None
    ) -> subprocess.Popen[bytes]:
        prefix = ["ip", "netns", "exec", self.name]
        if user is not None:
            prefix += ["runuser", "-u", user, "--"]
        with open(log, "ab") as out:
            return subprocess.Popen(
                prefix + args,
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def pids(self) -> list[int]:
        return netns_pids(self.name)

    def kill_all(self, sig: int = signal.SIGKILL) -> list[int]:
        return kill_namespace(self.name, sig)

    def block(self, ip: str) -> None:
        """Make ``ip`` unreachable from this host as a real partition does: packets to it are
        dropped without a word, so connects and reads hang until a timeout. (A blackhole route
        fails every connect at once with EINVAL, which no partition does.)"""
        self.exec("iptables", "-A", "OUTPUT", "-d", f"{ip}/32", "-j", "DROP")

    def unblock(self, ip: str) -> None:
        self.exec("iptables", "-D", "OUTPUT", "-d", f"{ip}/32", "-j", "DROP", check=False)


def make_bridge() -> None:
    run("ip", "link", "add", BRIDGE, "type", "bridge")
    run("ip", "addr", "add", f"{DRIVER_IP}/24", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")


# -- the processes on them --------------------------------------------------------------------


def wait_http(
    url: str, timeout: float, alive: subprocess.Popen[bytes] | None = None, log: Path | None = None
) -> None:
    """Wait until ``url`` answers any HTTP status (bounded)."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if alive is not None and alive.poll() is not None:
                raise RuntimeError(
                    f"{url}: the process exited with {alive.returncode}:\n{tail(log)}"
                )
            try:
                client.get(url)
                return
            except httpx.TransportError:
                time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f}s:\n{tail(log)}")


def tail(log: Path | None, limit: int = 4000) -> str:
    if log is None or not log.exists():
        return "(no log)"
    return log.read_bytes()[-limit:].decode("utf-8", "replace")


@dataclass
class DataHost:
    host: Host
    redis_ip: str
    tmp: Path
    postgres: subprocess.Popen[bytes] | None = None
    redis: subprocess.Popen[bytes] | None = None

    @property
    def pgdata(self) -> Path:
        return self.tmp / "pgdata"

    @property
    def database_url(self) -> str:
        return f"postgres://postgres@{self.host.ip}:{PG_PORT}/mcp_multihost"

    @property
    def redis_url(self) -> str:
        return f"redis://{self.redis_ip}:{REDIS_PORT}/0"

    @property
    def log(self) -> Path:
        return self.tmp / "data.log"

    def init(self) -> None:
        self.pgdata.mkdir()
        shutil.chown(self.pgdata, "postgres", "postgres")
        # initdb refuses root; trust: the hosts are on a private bridge that only this run uses.
        result = subprocess.run(
            [
                "runuser",
                "-u",
                "postgres",
                "--",
                str(PG_BIN / "initdb"),
                "-D",
                str(self.pgdata),
                "--auth=trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{result.stdout}\n{result.stderr}")
        with open(self.pgdata / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {SUBNET}.0/24 trust\n")

    def start_postgres(self) -> None:
        self.postgres = self.host.popen(
            [
                str(PG_BIN / "postgres"),
                "-D",
                str(self.pgdata),
                "-h",
                self.host.ip,
                "-p",
                str(PG_PORT),
                "-k",
                str(self.pgdata),
                "-c",
                "max_connections=200",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
            ],
            self.log,
            user="postgres",
        )
        self.wait_postgres()

    def wait_postgres(self, timeout: float = 60.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(
                    f"postgres://postgres@{self.host.ip}:{PG_PORT}/postgres",
                    connect_timeout=2,
                    autocommit=True,
                ) as conn:
                    conn.execute("SELECT 1")
                    return
            except psycopg.Error:
                time.sleep(0.2)
        raise RuntimeError(f"PostgreSQL on {self.host.name} did not answer:\n{tail(self.log)}")

    def create_database(self) -> None:
        import psycopg

        with psycopg.connect(
            f"postgres://postgres@{self.host.ip}:{PG_PORT}/postgres",
            connect_timeout=5,
            autocommit=True,
        ) as conn:
            conn.execute("CREATE DATABASE mcp_multihost")

    def stop_postgres(self, mode: str = "fast") -> None:
        subprocess.run(
            [
                "runuser",
                "-u",
                "postgres",
                "--",
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(self.pgdata),
                "-m",
                mode,
                "-w",
                "-t",
                "30",
                "stop",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if self.postgres is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.postgres.wait(10)
            self.postgres = None

    def start_redis(self) -> None:
        self.redis = self.host.popen(
            [
                "redis-server",
                "--bind",
                self.redis_ip,
                "--port",
                str(REDIS_PORT),
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "no",
                "--dir",
                str(self.tmp),
            ],
            self.log,
        )
        import redis

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            client = redis.Redis(
                host=self.redis_ip, port=REDIS_PORT, socket_connect_timeout=1, socket_timeout=1
            )
            try:
                client.ping()
                return
            except redis.RedisError:
                time.sleep(0.1)
            finally:
                client.close()
        raise RuntimeError(f"Redis on {self.host.name} did not answer:\n{tail(self.log)}")


@dataclass
class AppHost:
    """The example site under uvicorn with two worker processes, and a db_worker beside it."""

    host: Host
    env: dict[str, str]
    tmp: Path
    workers: int = 2
    web: subprocess.Popen[bytes] | None = None
    tasks: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def name(self) -> str:
        return self.host.name.removeprefix(PREFIX)

    @property
    def url(self) -> str:
        return f"http://{self.host.ip}:{PORT}/mcp"

    @property
    def log(self) -> Path:
        return self.tmp / f"{self.name}.log"

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "uvicorn",
            "--host",
            self.host.ip,
            "--port",
            str(PORT),
            "--workers",
            str(self.workers),
            "--timeout-graceful-shutdown",
            "5",
            "--no-access-log",
            # The client's address from HAProxy's X-Forwarded-For (quotas count anonymous callers by it).
            "--proxy-headers",
            "--forwarded-allow-ips",
            LB_IP,
            "example_site.asgi:application",
        ]

    def start(self, wait: bool = True) -> None:
        self.starts += 1
        with open(self.log, "ab") as out:
            out.write(f"\n==== {self.name} start #{self.starts} ====\n".encode())
        self.web = self.host.popen(self.command(), self.log, self.env)
        if "MCP_TASKS_BACKEND" in self.env:
            self.tasks = self.host.popen(
                [sys.executable, "manage.py", "db_worker", "--no-reload", "--interval", "0.2"],
                self.log,
                self.env,
            )
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        wait_http(f"{self.url}/health/", timeout, self.web, self.log)

    def kill(self) -> list[int]:
        """kill -9 of every process on the host, as when the machine dies."""
        pids = self.host.kill_all(signal.SIGKILL)
        wait_namespace_empty(self.host.name)
        for proc in (self.web, self.tasks):
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)
        self.web = self.tasks = None
        return pids

    def stop(self) -> None:
        """SIGTERM (a deploy's restart), then SIGKILL whatever is left after STOP_TIMEOUT."""
        for proc in (self.web, self.tasks):
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for proc in (self.web, self.tasks):
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(max(0.1, deadline - time.monotonic()))
        self.host.kill_all(signal.SIGKILL)
        wait_namespace_empty(self.host.name)
        self.web = self.tasks = None

    @property
    def running(self) -> bool:
        return self.web is not None and self.web.poll() is None

    def web_pids(self) -> list[int]:
        """uvicorn's supervisor and its workers (not the db_worker)."""
        tasks = self.tasks.pid if self.tasks is not None else None
        return [pid for pid in self.host.pids() if pid != tasks and not _is_child_of(pid, tasks)]


def _is_child_of(pid: int, parent: int | None) -> bool:
    if parent is None:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return int(stat.rpartition(")")[2].split()[1]) == parent


HAPROXY_CONFIG = """\
# The balancer of tests/multihost: round-robin over the two app hosts, no affinity (no cookie,
# no source hashing), so consecutive requests of one session land on either host.
global
    maxconn 2000
    log stdout format raw local0

defaults
    mode http
    log global
    option httplog
    timeout connect 2s
    timeout client 120s
    # SSE streams stay open: a server that says nothing for this long is dropped. mcp_django
    # sends keep-alive comments every SSE_KEEPALIVE_SECONDS (15 s by default), well inside it.
    timeout server 120s
    timeout tunnel 120s
    # A connection refused by a dead host is tried again on the other one, and so is a request
    # that got no byte back (a host closing an idle keep-alive connection as it stops). Not
    # response-timeout: a tool call slower than "timeout server" would run twice.
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response
    # L7 retries replay the request from a copy: only a request read whole before it is sent has
    # one (a host that closes an idle keep-alive connection as it stops, a rolling restart).
    option http-buffer-request

frontend mcp
    bind {lb_ip}:{port}
    default_backend apps
    option forwardfor

backend apps
    balance roundrobin
    option httpchk GET /mcp/health/
    http-check expect status 200
    # Which host answered, for the harness to see where each request went.
    http-response set-header X-Served-By %s
{servers}
"""


@dataclass
class Balancer:
    host: Host
    apps: list[AppHost]
    tmp: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host.ip}:{PORT}/mcp"

    @property
    def config_path(self) -> Path:
        return self.tmp / "haproxy.cfg"

    def config(self) -> str:
        servers = "\n".join(
            f"    server {app.name} {app.host.ip}:{PORT} check inter 1s fall 2 rise 2"
            for app in self.apps
        )
        return HAPROXY_CONFIG.format(lb_ip=self.host.ip, port=PORT, servers=servers)

    def start(self) -> None:
        self.config_path.write_text(self.config())
        log = self.tmp / "haproxy.log"
        check = subprocess.run(
            ["haproxy", "-c", "-f", str(self.config_path)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if check.returncode != 0:
            raise RuntimeError(
                f"haproxy refused its configuration:\n{check.stdout}\n{check.stderr}"
            )
        self.proc = self.host.popen(["haproxy", "-db", "-f", str(self.config_path)], log)
        wait_http(f"{self.url}/health/", 30, self.proc, log)


# -- the whole deployment -----------------------------------------------------------------------

#: Settings of every app host, and of the SQLite process it is compared with.
COMMON_ENV = {
    # The driver is one anonymous caller from one address: the per-caller rate limit (600 calls a
    # minute by default) would refuse the CPU scenario's load.
    "MCP_RATE_LIMIT": "off",
    # Each call's audit row is written before it is answered: a host killed right after answering
    # keeps its rows (batched, they wait up to AUDIT_FLUSH_INTERVAL in the process that dies).
    "MCP_AUDIT_DURABLE": "1",
}


class Cluster:
    """Every host, built by :meth:`start` and removed by :meth:`stop` (which never raises)."""

    def __init__(self, *, lease_seconds: float | None = None) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX))
        os.chmod(self.tmp, 0o755)  # PostgreSQL, running as postgres, needs to reach its directory
        self.data_host = Host(f"{PREFIX}data", f"{SUBNET}.10", [f"{SUBNET}.13"])
        self.data = DataHost(self.data_host, f"{SUBNET}.13", self.tmp)
        self.lb_host = Host(f"{PREFIX}lb", LB_IP)
        self.solo_host = Host(f"{PREFIX}solo", f"{SUBNET}.30")
        hosts = ",".join([f"{SUBNET}.{n}" for n in (11, 12, 20, 30)] + ["127.0.0.1", "localhost"])
        extra = {"MCP_REQUEST_LEASE_SECONDS": str(lease_seconds)} if lease_seconds else {}
        self.env = base_env(
            DATABASE_URL=self.data.database_url,
            REDIS_URL=self.data.redis_url,
            MCP_TASKS_BACKEND="database",
            DJANGO_ALLOWED_HOSTS=hosts,
            DJANGO_DEBUG="0",
            MCP_LOG_LEVEL="WARNING",
            **COMMON_ENV,
            **extra,
        )
        self.apps = [
            AppHost(Host(f"{PREFIX}app{n}", f"{SUBNET}.1{n}"), self.env, self.tmp) for n in (1, 2)
        ]
        self.balancer = Balancer(self.lb_host, self.apps, self.tmp)
        self.solo_env = base_env(
            SQLITE_PATH=str(self.tmp / "solo.sqlite3"),
            DJANGO_ALLOWED_HOSTS=hosts,
            DJANGO_DEBUG="0",
            MCP_LOG_LEVEL="WARNING",
            **COMMON_ENV,
        )
        self.solo = AppHost(self.solo_host, self.solo_env, self.tmp, workers=1)
        self.hosts = [self.data_host, self.lb_host, *(a.host for a in self.apps), self.solo_host]

    def start(self) -> None:
        make_bridge()
        for host in self.hosts:
            host.create()
        self.data.init()
        self.data.start_postgres()
        self.data.start_redis()
        self.data.create_database()
        self.manage("migrate", "--noinput", "-v", "0")
        self.manage("migrate", "--noinput", "-v", "0", env=self.solo_env, host=self.solo_host)
        for app in self.apps:
            app.start(wait=False)
        for app in self.apps:
            app.wait_ready()
        self.balancer.start()

    def manage(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        host: Host | None = None,
        timeout: float = 180,
    ) -> str:
        """Run a management command on ``host`` (the data host by default)."""
        host = host or self.data_host
        result = subprocess.run(
            ["ip", "netns", "exec", host.name, sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"manage.py {' '.join(args)} on {host.name} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
            )
        return result.stdout

    def stop(self, keep_logs: Path | None = None) -> None:
        for host in self.hosts:
            with contextlib.suppress(Exception):
                host.kill_all(signal.SIGTERM)
        for host in self.hosts:
            with contextlib.suppress(Exception):
                if not wait_namespace_empty(host.name, 5):
                    host.kill_all(signal.SIGKILL)
                    wait_namespace_empty(host.name, 5)
        if keep_logs is not None:
            shutil.rmtree(keep_logs, ignore_errors=True)
            keep_logs.mkdir(parents=True)
            for log in self.tmp.glob("*.log"):
                shutil.copy(log, keep_logs / log.name)
        cleanup(verbose=False)

    def logs(self) -> Path:
        return self.tmp


def base_env(**extra: str) -> dict[str, str]:
    from tests.multiprocess.servers import base_env as multiprocess_env

    return multiprocess_env(**extra)
