#!/usr/bin/env python
"""Run the official MCP conformance suite against the example site and judge the results.

Usage::

    .venv/bin/python tests/conformance/run_conformance.py [--response-mode json,sse]
        [--suite all] [--scenario NAME] [--server daphne|uvicorn|granian] [--verbose] [--keep]

    .venv/bin/python tests/conformance/run_conformance.py --suite-version alpha
        --requirements 2026-07-28 [--response-mode json,sse] [--scenario NAME] [--verbose] [--keep]

    .venv/bin/python tests/conformance/run_conformance.py --authorization [--server NAME]
        [--verbose] [--keep]

What it does, every step with a time limit:

1. installs ``@modelcontextprotocol/conformance`` (pinned) and a Node 22 binary (the ``node@22``
   npm package) into ``.conformance/`` at the repository root, unless already there (the 0.2.0
   alpha goes into its own ``.conformance/alpha/``, so the two installs never touch each other);
2. for each response mode, starts the example site with Daphne (or ``--server``: uvicorn,
   granian; tests/asgi_servers.py) on a free loopback port (fresh SQLite file, ``migrate``
   first, ``MCP_AUTH=none``);
3. runs ``conformance server --url http://127.0.0.1:PORT/mcp/ --suite all`` (stable suite) or
   ``... --requirements REVISION`` (alpha suite) into a fresh folder under ``results/`` of the
   install folder (kept only when something went wrong, or ``--keep``); after a requirement set,
   the scenarios of ALPHA_EXTRA_SCENARIOS[revision] (the skills extension's, in no set) one by one;
4. reads every ``checks.json`` and prints one row per scenario. Under a requirement set the
   scenarios the suite runs but does not score ("Not scored for REVISION": extensions, pending
   and post-release scenarios) are shown in a table of their own and never fail the run, except
   those in ALPHA_REQUIRED_PENDING[revision] (the pending ones we pass, and the tasks extension's),
   which are judged as scored ones. A scenario of ALPHA_NO_SKIPS[revision] fails the run when
   any check but those named there reports SKIPPED. Under a WSGI server (``--server gunicorn``,
   ``gunicorn-gthread``, ``runserver``: wsgi.py, with django-tasks-db's worker beside it) the
   checks of WSGI_EXPECTED_FAILURES[revision], which need a held stream, may fail, and only them.

With ``--authorization`` (alpha suite) it runs the suite's authorization-server scenarios
instead (``conformance authorization``: RFC 8414 metadata, the authorization-code grant) against
the example site's own authorization server: the site starts with ``MCP_AUTH=oauth`` and the demo
users (``load_demo_data``), the runner registers the suite's client by dynamic registration, and
plays the user the grant asks for (AUTHORIZATION_USER signs in and allows on the consent page,
tests/e2e/oauth_helpers.Browser); every check must run (a SKIPPED one fails), and only the
scenarios of AUTHORIZATION_EXPECTED_FAILURES may fail.

Exit status: 0 when every check passes except those in EXPECTED_FAILURES (stable suite) or
ALPHA_EXPECTED_FAILURES[revision] (alpha suite); 1 when a check fails unexpectedly or an
expected failure passes (so the lists stay honest); 2 when the suite could not run at all
(install, server start-up, crash, timeout).

Standard library, httpx and the tests' own helpers only, so that it runs from the project's
virtualenv as is.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository's tests package is not on the path
    sys.path.insert(0, str(REPO))

from tests import asgi_servers  # noqa: E402
from tests.e2e.oauth_helpers import Browser  # noqa: E402

INSTALL_DIR = REPO / ".conformance"
RESULTS_DIR = INSTALL_DIR / "results"
SUITE_PACKAGE = "@modelcontextprotocol/conformance"
SUITE_VERSION = "0.1.16"
NODE_PACKAGE = "node@22"
NODE_MIN_MAJOR = 22  # the suite's own requirement; the machine's node may be older
NODE = INSTALL_DIR / "node_modules" / ".bin" / "node"
SUITE_DIR = INSTALL_DIR / "node_modules" / "@modelcontextprotocol" / "conformance"
SUITE_ENTRY = SUITE_DIR / "dist" / "index.js"

# The 0.2.0 alpha (scenarios of the 2026-07-28 revision, frozen requirement sets). npm's
# `latest` tag still points at 0.1.16, so it is pinned explicitly, in a folder of its own.
ALPHA_SUITE_VERSION = "0.2.0-alpha.12"
ALPHA_INSTALL_DIR = INSTALL_DIR / "alpha"
DEFAULT_REQUIREMENTS = "2026-07-28"

INSTALL_TIMEOUT = 480
MIGRATE_TIMEOUT = 180
SERVER_START_TIMEOUT = 60
SUITE_TIMEOUT = 300
SERVER_STOP_TIMEOUT = 10

# Scenarios allowed to fail, each with the reason. The runner fails when one of them passes,
# so remove an entry as soon as its feature lands. The sampling and elicitation scenarios
# (tools-call-sampling, tools-call-elicitation, elicitation-sep1034-defaults,
# elicitation-sep1330-enums) were listed here until Context.sample()/elicit() made them pass.
# This list is for the stable suite (0.1.16); the alpha has its own, per requirement set, below.
EXPECTED_FAILURES: dict[str, str] = {}

# The same rule for the alpha suite, one list per requirement set (`--requirements REVISION`),
# for the scored scenarios only (the "Not scored" ones never fail the run). A scenario listed
# here that passes is an error: remove it. docs/conformance-2026.md describes every scenario.
ALPHA_EXPECTED_FAILURES: dict[str, dict[str, str]] = {
    "2025-11-25": {},
    "2026-07-28": {},
}

# Under WSGI (gunicorn, runserver without daphne: the endpoint's plain view, docs/howto/deploy.md
# "Under WSGI") what needs a stream held open is refused, by design: these checks, and only
# these, may fail there, each with its reason. Check by check, not scenario by scenario, so that
# any other check of the same scenario still fails the run; and one of them that passes is an
# error, as above (remove it).
_LISTEN = (
    "subscriptions/listen holds a stream open between requests; under WSGI it answers -32601 "
    "naming the ASGI deployment"
)
WSGI_EXPECTED_FAILURES: dict[str, dict[str, dict[str, str]]] = {
    "2026-07-28": {
        "server-stateless": {
            "sep-2575-server-sends-subscription-ack": _LISTEN,
            "sep-2575-server-tags-subscription-id": _LISTEN,
            "sep-2575-server-honors-notification-filter": _LISTEN,
        },
    },
}

# Scenarios the suite runs but does not score (pending ones, and extensions we implement) that
# we hold ourselves to all the same: a failure of one of these fails the run like a scored one.
# A scenario that only reports SKIPPED/INFO/WARNING checks passes, as a scored one does
# (tasks-status-notifications: 0.2.0-alpha.12 only ever reports SKIPPED for it).
# The tasks-* scenarios test the io.modelcontextprotocol/tasks extension (docs/howto/tasks.md).
TASKS_EXTENSION_SCENARIOS: tuple[str, ...] = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)
ALPHA_REQUIRED_PENDING: dict[str, tuple[str, ...]] = {
    "2026-07-28": (
        "http-header-validation",
        "http-custom-header-server-validation",
        "json-schema-2020-12",
        *TASKS_EXTENSION_SCENARIOS,
    ),
}

# The io.modelcontextprotocol/skills extension (docs/howto/skills.md). 0.2.0-alpha.12 puts its
# scenarios in no requirement set, so after the set the runner runs each on its own (--scenario,
# on the revision's wire, --force) against the same server, and judges it as a scored one.
SKILLS_EXTENSION_SCENARIOS: tuple[str, ...] = (
    "sep-2640-skills-enumeration",
    "sep-2640-skills-manifest",
    "sep-2640-skills-directory",
)
ALPHA_EXTRA_SCENARIOS: dict[str, tuple[str, ...]] = {
    "2026-07-28": SKILLS_EXTENSION_SCENARIOS,
    "2025-11-25": SKILLS_EXTENSION_SCENARIOS,
}
# Scenarios whose every check must run: a SKIPPED check fails the run, except the ones named,
# which the suite defines as not applicable on that revision. The skills scenarios SKIP every
# check of a server that does not declare the extension, or lists no skill: that would pass.
_SKILLS_2026_ONLY = frozenset(
    {"sep-2640-skills-list-cache-attributes", "sep-2640-skills-get-cache-attributes"}
)
ALPHA_NO_SKIPS: dict[str, dict[str, frozenset[str]]] = {
    "2026-07-28": {name: frozenset() for name in SKILLS_EXTENSION_SCENARIOS},
    "2025-11-25": {name: _SKILLS_2026_ONLY for name in SKILLS_EXTENSION_SCENARIOS},
}

# The alpha's `authorization` command (--authorization): its authorization-server scenarios
# (RFC 8414 metadata, the authorization-code grant with PKCE S256 and RFC 8707 resource) against
# the example site's own authorization server, django-oauth-toolkit with MCP_AUTH=oauth. The
# runner registers the client and plays the user who signs in and allows on the consent page
# (run_authorization_suite). Expected failures as above, scenario -> reason; none today.
AUTHORIZATION_USER = ("reader", "reader")  # load_demo_data's non-staff user: (name, password)
AUTHORIZATION_EXPECTED_FAILURES: dict[str, str] = {}

# Statuses that neither pass nor fail a scenario (server-sse-polling only ever emits these).
NEUTRAL = {"WARNING", "INFO", "SKIPPED"}

RESULT_DIR_RE = re.compile(
    r"^(?:authorization-)?server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$"
)


class RunnerError(Exception):
    """The suite could not be run (as opposed to: it ran and found failures)."""


def log(message: str) -> None:
    print(f"[conformance] {message}", flush=True)


@dataclass(frozen=True)
class Suite:
    """One pinned version of the conformance package and the folder it is installed into."""

    name: str  # "stable" or "alpha"
    version: str
    install_dir: Path

    @property
    def node(self) -> Path:
        return self.install_dir / "node_modules" / ".bin" / "node"

    @property
    def package_dir(self) -> Path:
        return self.install_dir / "node_modules" / "@modelcontextprotocol" / "conformance"

    @property
    def entry(self) -> Path:
        return self.package_dir / "dist" / "index.js"

    @property
    def results_dir(self) -> Path:
        return self.install_dir / "results"


STABLE = Suite("stable", SUITE_VERSION, INSTALL_DIR)
ALPHA = Suite("alpha", ALPHA_SUITE_VERSION, ALPHA_INSTALL_DIR)
SUITES = {"stable": STABLE, "alpha": ALPHA, SUITE_VERSION: STABLE, ALPHA_SUITE_VERSION: ALPHA}


# -- install --------------------------------------------------------------------------------


def _installed_version(suite: Suite = STABLE) -> str | None:
    try:
        return json.loads((suite.package_dir / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def _node_major(suite: Suite = STABLE) -> int | None:
    try:
        out = subprocess.run(
            [str(suite.node), "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"v(\d+)\.", out.strip())
    return int(match.group(1)) if match else None


def ensure_installed(suite: Suite = STABLE) -> None:
    """Install the pinned suite and Node 22 into the suite's folder unless they are already there."""
    where = suite.install_dir.relative_to(REPO)
    if _installed_version(suite) == suite.version and (_node_major(suite) or 0) >= NODE_MIN_MAJOR:
        log(f"{SUITE_PACKAGE}@{suite.version} and node {_node_major(suite)} already in {where}/")
        return
    npm = shutil.which("npm")
    if npm is None:
        raise RunnerError(
            "npm is not installed: it is needed once to install the conformance suite"
        )
    suite.install_dir.mkdir(parents=True, exist_ok=True)
    command = [
        npm,
        "install",
        "--prefix",
        str(suite.install_dir),
        "--no-audit",
        "--no-fund",
        f"{SUITE_PACKAGE}@{suite.version}",
        NODE_PACKAGE,
    ]
    log("installing: " + " ".join(command[1:]))
    try:
        done = subprocess.run(
            command, cwd=suite.install_dir, capture_output=True, text=True, timeout=INSTALL_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        raise RunnerError(f"npm install did not finish in {INSTALL_TIMEOUT} s") from None
    if done.returncode != 0:
        raise RunnerError(f"npm install failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    version, major = _installed_version(suite), _node_major(suite)
    if version != suite.version:
        raise RunnerError(f"after npm install, {SUITE_PACKAGE} is {version!r}, not {suite.version}")
    if (major or 0) < NODE_MIN_MAJOR:
        # The node@22 package fetches its binary in a preinstall script; npm may have skipped it.
        raise RunnerError(
            f"{suite.node} is not a working Node >= {NODE_MIN_MAJOR} (got {major}); was its install script skipped?"
        )
    log(f"installed {SUITE_PACKAGE}@{version} with node {major} in {where}/")


# -- the server -----------------------------------------------------------------------------


def server_env(sqlite_path: Path, response_mode: str, auth: str = "none") -> dict[str, str]:
    env = dict(os.environ)
    # Self-contained: the embedded defaults (SQLite, in-memory layer), whatever the caller's shell
    # points at; the default ALLOWED_HOSTS is what dns-rebinding-protection expects. The resource
    # URL and the issuer follow the port the server gets (running_server).
    for name in (
        "DATABASE_URL",
        "REDIS_URL",
        "DJANGO_ALLOWED_HOSTS",
        "MCP_SSE_MAX_CONNECTION_SECONDS",
        "MCP_RESOURCE_URL",
        "OAUTH_ISSUER",
    ):
        env.pop(name, None)
    env.update(
        DJANGO_SETTINGS_MODULE="example_site.settings",
        MCP_AUTH=auth,
        MCP_RESPONSE_MODE=response_mode,
        SQLITE_PATH=str(sqlite_path),
        PYTHONUNBUFFERED="1",
    )
    return env


def _stop(process: subprocess.Popen[bytes]) -> None:
    # The server runs in its own session: this reaches it and its workers (granian's), only.
    asgi_servers.stop(process, timeout=SERVER_STOP_TIMEOUT)


def _wait_ready(process: subprocess.Popen[bytes], url: str) -> bool:
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    # A session-less ping is the one request MCP allows before initialize.
    body = {"jsonrpc": "2.0", "id": "ready", "method": "ping"}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            httpx.post(url, json=body, headers=headers, timeout=2)
            return True
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RunnerError(f"the server did not answer on {url} within {SERVER_START_TIMEOUT} s")


@contextmanager
def running_server(
    workdir: Path, response_mode: str, server: str = "daphne", auth: str = "none"
) -> Iterator[tuple[str, Path]]:
    """Start the example site with ``server``; yield (endpoint URL, server log path); stop it.

    A WSGI server serves wsgi.py (the endpoint's plain view) with django-tasks-db's worker
    beside it, as ``make run-wsgi`` does: a durable task then outlives the WSGI worker that
    made it (without a worker it runs on that process's event loop, and ends with it).

    With ``auth="oauth"`` the site is its own authorization server (MCP_AUTH=oauth), at the
    URL it is started on (MCP_RESOURCE_URL, hence the issuer), with the demo users to sign in."""
    wsgi = server in asgi_servers.WSGI_SERVERS
    env = server_env(workdir / f"db-{response_mode}.sqlite3", response_mode, auth)
    if wsgi:
        env["MCP_TASKS_BACKEND"] = "database"
    commands = [["migrate", "--noinput", "-v", "0"]]
    if auth != "none":
        commands.append(["load_demo_data"])
    for command in commands:
        done = subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=MIGRATE_TIMEOUT,
        )
        if done.returncode != 0:
            raise RunnerError(f"manage.py {command[0]} failed:\n{done.stdout}\n{done.stderr}")
    log_path = workdir / f"server-{response_mode}.log"
    application = asgi_servers.WSGI_APPLICATION if wsgi else asgi_servers.APPLICATION
    with ExitStack() as worker:
        if wsgi:
            worker.enter_context(
                asgi_servers.db_worker(env, workdir / f"db_worker-{response_mode}.log", REPO)
            )
        for attempt in range(3):  # the port may be taken between free_port() and the bind
            port = asgi_servers.free_port()
            url = f"http://127.0.0.1:{port}/mcp/"
            if auth != "none":
                env["MCP_RESOURCE_URL"] = f"http://127.0.0.1:{port}/mcp"
            process = asgi_servers.start(server, port, env, log_path, REPO, application)
            try:
                if _wait_ready(process, url):
                    mode = f"MCP_RESPONSE_MODE={response_mode}"
                    log(f"{server} up at {url} ({mode}, pid {process.pid})")
                    try:
                        yield url, log_path
                    finally:
                        _stop(process)
                    return
            except BaseException:
                _stop(process)
                raise
            _stop(process)
            log(f"server exited during start-up (attempt {attempt + 1}); retrying on another port")
    raise RunnerError(f"the server would not start; its log:\n{_tail(log_path)}")


def _tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# -- the suite ------------------------------------------------------------------------------


def list_scenarios(suite: Suite = STABLE, kind: str = "server") -> list[str]:
    """Ask the suite for the names of all its scenarios of ``kind`` (server, authorization)."""
    done = subprocess.run(
        [str(suite.node), str(suite.entry), "list", f"--{kind}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    names = re.findall(r"^\s*-\s+(\S+)", done.stdout, re.MULTILINE)
    if not names:
        raise RunnerError(f"could not read the scenario list:\n{done.stdout}\n{done.stderr}")
    return names


@dataclass
class Requirements:
    """A frozen requirement set of the alpha suite: what `--requirements REVISION` runs (server leg)."""

    revision: str
    scored: list[str]
    not_scored: dict[str, str]  # scenario -> reason (extension, pending, added-after-release)

    @property
    def names(self) -> list[str]:
        return self.scored + [n for n in self.not_scored if n not in self.scored]


def load_requirements(suite: Suite, revision: str) -> Requirements:
    """Read `conformance list --requirements REVISION`: its server scenarios, scored and not."""
    done = subprocess.run(
        [str(suite.node), str(suite.entry), "list", "--requirements", revision],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        raise RunnerError(
            f"the suite does not know requirement set {revision!r}:\n{done.stdout}\n{done.stderr}"
        )
    scored: list[str] = []
    not_scored: dict[str, str] = {}
    section, reason = "", ""
    for line in done.stdout.splitlines():
        if not line.strip():
            if section == "server":
                section = ""
            continue
        if line.startswith("Server scenarios"):
            section = "server"
        elif not line.startswith(" "):
            section = "not-scored" if line.startswith("Run and reported, but never scored") else ""
        elif section == "server" and (m := re.match(r"^\s+-\s+(\S+)\s*$", line)):
            scored.append(m.group(1))
        elif section == "not-scored" and (m := re.match(r"^\s{2}(\S[^(]*?)\s*\(\d+\):\s*$", line)):
            reason = m.group(1)
        elif section == "not-scored" and (m := re.match(r"^\s+-\s+(\S+)\s+\[server\]\s*$", line)):
            not_scored[m.group(1)] = reason
    if not scored:
        raise RunnerError(
            f"could not read requirement set {revision}:\n{done.stdout}\n{done.stderr}"
        )
    return Requirements(revision, scored, not_scored)


def suite_not_scored(output: str, revision: str) -> dict[str, str]:
    """The scenarios the suite itself printed under "Not scored for REVISION: ..." (name -> reason)."""
    found: dict[str, str] = {}
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"Not scored for {revision}:"):
            for entry in lines[i + 1 :]:
                m = re.match(r"^\s+\S\s+(\S+)\s+\((.+)\)\s*$", entry)
                if not m:
                    break
                found[m.group(1)] = m.group(2)
    return found


def run_suite(
    suite: Suite, url: str, outdir: Path, args: argparse.Namespace, scenario: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the suite once: ``scenario`` (else ``--scenario``, else the whole set) into ``outdir``."""
    scenario = scenario or args.scenario
    command = [str(suite.node), str(suite.entry), "server", "--url", url, "-o", str(outdir)]
    if suite is STABLE:
        command += ["--scenario", scenario] if scenario else ["--suite", args.suite or "all"]
    elif scenario:
        # --requirements cannot be combined with --scenario; pin the wire to the revision
        # instead, and --force runs it as the requirement set would, whatever its window.
        command += ["--scenario", scenario, "--spec-version", args.requirements, "--force"]
    else:
        command += ["--requirements", args.requirements]
    log("running: conformance " + " ".join(command[2:]))
    try:
        done = subprocess.run(
            command, cwd=suite.install_dir, capture_output=True, text=True, timeout=SUITE_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        raise RunnerError(f"the suite did not finish in {SUITE_TIMEOUT} s") from None
    (outdir / f"suite-output{'-' + scenario if scenario else ''}.txt").write_text(
        done.stdout + "\n--- stderr ---\n" + done.stderr
    )
    if args.verbose:
        print(done.stdout, done.stderr, sep="\n", flush=True)
    return done


@dataclass
class ScenarioResult:
    name: str
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # "STATUS id: message" for non-passing checks
    skipped: list[str] = field(default_factory=list)  # ids of the SKIPPED checks
    statuses: dict[str, str] = field(default_factory=dict)  # check id -> its (last) status

    @property
    def failed(self) -> bool:
        return any(
            n
            for status, n in self.counts.items()
            if status not in NEUTRAL and status not in ("SUCCESS", "EXPECTED")
        )

    @property
    def passed(self) -> bool:
        return not self.failed


def read_results(outdir: Path) -> dict[str, ScenarioResult]:
    results: dict[str, ScenarioResult] = {}
    for path in sorted(outdir.rglob("checks.json")):
        match = RESULT_DIR_RE.match(path.parent.name)
        name = match.group("scenario") if match else path.parent.name
        result = results.setdefault(name, ScenarioResult(name))
        try:
            checks = json.loads(path.read_text())
        except ValueError as exc:
            result.counts["FAILURE"] = result.counts.get("FAILURE", 0) + 1
            result.notes.append(f"FAILURE {path}: unreadable checks.json ({exc})")
            continue
        for check in checks:
            status = str(check.get("status", "FAILURE"))
            result.counts[status] = result.counts.get(status, 0) + 1
            result.statuses[str(check.get("id"))] = status
            if status == "SKIPPED":
                result.skipped.append(str(check.get("id")))
            if status not in ("SUCCESS", "INFO"):
                message = check.get("errorMessage") or check.get("description") or ""
                result.notes.append(f"{status} {check.get('id')}: {message}")
    return results


def crashed_scenarios(output: str) -> dict[str, str]:
    """Scenarios that threw before writing checks.json ("Failed to run scenario NAME: message")."""
    return dict(re.findall(r"^Failed to run scenario (\S+): (.*)$", output, re.MULTILINE))


def _short(note: str, limit: int = 400) -> str:
    first = note.splitlines()[0] if note else ""
    return first if len(first) <= limit else first[: limit - 3] + "..."


def _table(rows: list[tuple[str, object, object, object, object, str]]) -> list[str]:
    width = max([len(r[0]) for r in rows] + [8])
    lines = [f"{'scenario':<{width}}  SUCCESS  FAILURE  WARNING  INFO  result", "-" * (width + 44)]
    lines += [
        f"{r[0]:<{width}}  {r[1]!s:>7}  {r[2]!s:>7}  {r[3]!s:>7}  {r[4]!s:>4}  {r[5]}" for r in rows
    ]
    return lines


def judge(
    results: dict[str, ScenarioResult],
    expected_names: list[str],
    expected_failures: dict[str, str] | None = None,
    not_scored: dict[str, str] | None = None,
    no_skips: dict[str, frozenset[str]] | None = None,
) -> tuple[list[str], list[str]]:
    """Return (problems, lines of the table).

    Scenarios in ``not_scored`` (name -> reason) go into a second table and never make a
    problem: the suite runs them for visibility only. A scenario in ``no_skips`` (name -> the
    check ids it may skip) with any other SKIPPED check is a problem.
    """
    no_skips = no_skips or {}
    expected = EXPECTED_FAILURES if expected_failures is None else expected_failures
    not_scored = not_scored or {}
    problems: list[str] = []
    rows: list[tuple[str, object, object, object, object, str]] = []
    unscored_rows: list[tuple[str, object, object, object, object, str]] = []
    for name in expected_names:
        if name in results:
            continue
        if name in not_scored:
            unscored_rows.append(
                (name, "-", "-", "-", "-", f"MISSING (not scored: {not_scored[name]})")
            )
        elif name in expected:
            rows.append((name, "-", "-", "-", "-", "expected failure (no results)"))
        else:
            problems.append(f"{name}: no results (the scenario did not run or crashed)")
            rows.append((name, "-", "-", "-", "-", "MISSING"))
    for name, result in sorted(results.items()):
        c = result.counts
        counts = (c.get("SUCCESS", 0), c.get("FAILURE", 0), c.get("WARNING", 0), c.get("INFO", 0))
        skipped = (
            [i for i in result.skipped if i not in no_skips.get(name, frozenset())]
            if name in no_skips
            else []
        )
        if skipped:
            problems.append(
                f"{name}: checks skipped where every one must run: {', '.join(skipped)}"
            )
            rows.append((name, *counts, "SKIPPED CHECKS"))
            continue
        if name in not_scored:
            verdict = "fails" if result.failed else ("ok (warnings)" if c.get("WARNING") else "ok")
            unscored_rows.append((name, *counts, f"{verdict} (not scored: {not_scored[name]})"))
            continue
        if result.failed and name in expected:
            verdict = "expected failure"
        elif result.failed:
            verdict = "FAIL"
            problems.append(f"{name}: failed")
        elif name in expected:
            verdict = "UNEXPECTED PASS"
            problems.append(
                f"{name}: passed but is listed as an expected failure; remove it from the list"
            )
        elif c.get("EXPECTED"):
            verdict = f"ok ({c['EXPECTED']} expected to fail under WSGI)"
        elif c.get("WARNING"):
            verdict = "ok (warnings)"
        elif c.get("SKIPPED") and not c.get("SUCCESS"):
            verdict = "ok (skipped by the suite)"
        else:
            verdict = "ok"
        rows.append((name, *counts, verdict))
    lines = _table(rows)
    if unscored_rows:
        lines += [
            "",
            "Not scored (run and reported by the suite, never fail the run):",
            *_table(unscored_rows),
        ]
    return problems, lines


def excuse_held_streams(
    results: dict[str, ScenarioResult], expected: dict[str, dict[str, str]]
) -> list[str]:
    """Take the expected failures of a WSGI server (scenario -> check id -> reason) out of
    ``results``' failure counts, noting each with its reason; return the problems: a listed
    check that passed, or that did not run."""
    problems: list[str] = []
    for name, checks in expected.items():
        result = results.get(name)
        for check, reason in checks.items():
            status = result.statuses.get(check) if result else None
            if status == "FAILURE":
                assert result is not None
                result.counts["FAILURE"] -= 1
                result.counts["EXPECTED"] = result.counts.get("EXPECTED", 0) + 1
                result.notes = [n for n in result.notes if not n.startswith(f"FAILURE {check}:")]
                result.notes.append(f"EXPECTED {check}: fails under WSGI: {reason}")
            elif status is None:
                problems.append(f"{name}: check {check} (expected to fail under WSGI) did not run")
            else:
                problems.append(
                    f"{name}: check {check} is {status} under WSGI but is listed as an expected "
                    "failure there; remove it from WSGI_EXPECTED_FAILURES"
                )
    return problems


def extra_scenarios(args: argparse.Namespace, requirements: Requirements | None) -> tuple[str, ...]:
    """The scenarios run after a whole requirement set (none when one scenario was asked for)."""
    if requirements is None or args.scenario:
        return ()
    return ALPHA_EXTRA_SCENARIOS.get(requirements.revision, ())


def run_mode(
    response_mode: str,
    args: argparse.Namespace,
    scenarios: list[str],
    suite: Suite = STABLE,
    requirements: Requirements | None = None,
) -> list[str]:
    label = f"{suite.version}" + (
        f" --requirements {requirements.revision}" if requirements else ""
    )
    with tempfile.TemporaryDirectory(prefix="mcp-conformance-") as tmp:
        workdir = Path(tmp)
        with running_server(workdir, response_mode, args.server) as (url, server_log):
            # A fresh folder per run, so that two runs at once (CI and a developer, say) never
            # mix results; it is removed after a clean run and kept for inspection otherwise.
            suite.results_dir.mkdir(parents=True, exist_ok=True)
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            tag = (
                f"{args.server}-{requirements.revision}-{response_mode}"
                if requirements
                else f"{args.server}-{response_mode}"
            )
            outdir = Path(tempfile.mkdtemp(prefix=f"{stamp}-{tag}-", dir=suite.results_dir))
            done = run_suite(suite, url, outdir, args)
            output = done.stdout + "\n" + done.stderr
            for extra in extra_scenarios(args, requirements):
                more = run_suite(suite, url, outdir, args, scenario=extra)
                output += "\n" + more.stdout + "\n" + more.stderr
        shutil.copy(server_log, outdir / "server.log")
    results = read_results(outdir)
    for name, message in crashed_scenarios(output).items():
        if name not in results:
            results[name] = ScenarioResult(
                name, {"FAILURE": 1}, [f"FAILURE {name}: the scenario crashed: {message}"]
            )
    if not results:
        raise RunnerError(
            f"the suite produced no checks.json (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    excused: list[str] = []
    if args.server in asgi_servers.WSGI_SERVERS:
        revision = requirements.revision if requirements else "stable"
        excused = excuse_held_streams(results, WSGI_EXPECTED_FAILURES.get(revision, {}))
    if requirements is None:
        problems, lines = judge(results, scenarios)
    else:
        not_scored = dict(requirements.not_scored)
        # Whatever the suite itself printed as "Not scored" is not scored either (it is the referee).
        for name, reason in suite_not_scored(done.stdout, requirements.revision).items():
            not_scored.setdefault(name, reason)
        for name in (*requirements.scored, *ALPHA_REQUIRED_PENDING.get(requirements.revision, ())):
            not_scored.pop(name, None)
        expected = ALPHA_EXPECTED_FAILURES.get(requirements.revision, {})
        names = [
            *scenarios,
            *(n for n in extra_scenarios(args, requirements) if n not in scenarios),
        ]
        problems, lines = judge(
            results, names, expected, not_scored, ALPHA_NO_SKIPS.get(requirements.revision, {})
        )
    title = f"{label}, {args.server}, MCP_RESPONSE_MODE={response_mode}"
    prefix = (
        f"[{args.server} {requirements.revision} {response_mode}]"
        if requirements
        else f"[{args.server} {response_mode}]"
    )
    return report(title, prefix, results, excused + problems, lines, outdir, args)


def report(
    title: str,
    prefix: str,
    results: dict[str, ScenarioResult],
    problems: list[str],
    lines: list[str],
    outdir: Path,
    args: argparse.Namespace,
) -> list[str]:
    """Print a run's table and its non-passing checks, keep its results folder when something
    went wrong (or with --keep), and return its problems, each prefixed with ``prefix``."""
    print(f"\n=== MCP conformance {title} ===")
    print("\n".join(lines))
    notes = [f"  {name}: {_short(note)}" for name, r in sorted(results.items()) for note in r.notes]
    if notes:
        print("\nNon-passing checks (WARNINGs never fail the run):")
        print("\n".join(notes))
    if problems or args.keep:
        if problems:
            print(f"\nServer log tail:\n{_tail(outdir / 'server.log', 40)}")
        print(f"Results kept in {outdir.relative_to(REPO)}/", flush=True)
    else:
        shutil.rmtree(outdir, ignore_errors=True)
    return [f"{prefix} {p}" for p in problems]


# -- the authorization server ----------------------------------------------------------------


def _play_user(issuer: str, authorization_url: str, redirect_uri: str) -> str | None:
    """Open the suite's authorization URL as AUTHORIZATION_USER would in a browser: sign in,
    allow on the consent page, and follow the redirect back to the suite's callback listener.
    Return what went wrong, if the user could not get back to the client."""

    async def authorize() -> tuple[str, Browser]:
        async with Browser(issuer, *AUTHORIZATION_USER) as browser:
            return await browser.authorize(authorization_url), browser

    try:
        location, browser = asyncio.run(authorize())
    except (AssertionError, httpx.HTTPError) as exc:
        return f"the user could not answer the authorization request: {_short(str(exc))}"
    if not location.startswith(redirect_uri + "?"):
        return f"the authorization endpoint did not send the user back to the client: {location}"
    log(
        f"signed in as {AUTHORIZATION_USER[0]} ({browser.logins} login), "
        f"{'allowed on the consent page' if browser.consent_pages else 'no consent page'}, "
        f"back to {redirect_uri}"
    )
    try:
        httpx.get(location, timeout=10)
    except httpx.HTTPError as exc:
        return f"the suite's callback listener did not answer: {exc}"
    return None


def run_authorization_suite(
    suite: Suite, issuer: str, resource: str, outdir: Path, args: argparse.Namespace
) -> tuple[str, list[str]]:
    """Run ``conformance authorization`` against ``issuer`` and play its user; return the suite's
    output and what kept the user from completing the authorization-code grant.

    The client is registered first as an MCP client registers on first contact, by dynamic
    client registration (RFC 7591): a public client (PKCE, no secret) whose redirect URI is the
    suite's callback listener on a free loopback port. The grant scenario prints the
    authorization URL for a person to open in a browser, then waits for the redirect back
    (up to 5 minutes): the runner reads that URL from the suite's output as it comes, once the
    listener is up, and plays the person (``_play_user``)."""
    callback_port = asgi_servers.free_port()
    redirect_uri = f"http://127.0.0.1:{callback_port}/callback"
    try:
        metadata = httpx.get(f"{issuer}/.well-known/oauth-authorization-server", timeout=10).json()
        registration = httpx.post(
            metadata["registration_endpoint"],
            json={
                "client_name": "MCP conformance suite",
                "redirect_uris": [redirect_uri],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            },
            timeout=10,
        )
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        raise RunnerError(f"could not register the suite's client: {exc!r}") from None
    if registration.status_code != 201:
        raise RunnerError(
            f"dynamic client registration failed: {registration.status_code} {registration.text}"
        )
    client_id = registration.json()["client_id"]
    command = [
        str(suite.node),
        str(suite.entry),
        "authorization",
        "--url",
        issuer,
        "--client-id",
        client_id,
        "--resource",
        resource,
        "--port",
        str(callback_port),
        "-o",
        str(outdir),
    ]
    log("running: conformance " + " ".join(command[2:]))
    process = subprocess.Popen(
        command,
        cwd=suite.install_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()

    def read(stream: IO[str]) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, args=(process.stdout,), daemon=True).start()
    output: list[str] = []
    problems: list[str] = []
    authorization_url: str | None = None
    listening = False  # the suite's callback listener is up (it says so once bound)
    deadline = time.monotonic() + SUITE_TIMEOUT
    try:
        while True:
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                raise RunnerError(f"the suite did not finish in {SUITE_TIMEOUT} s") from None
            if line is None:
                break
            output.append(line)
            if args.verbose:
                print(line, end="", flush=True)
            if line.startswith(metadata["authorization_endpoint"] + "?"):
                authorization_url = line.strip()
            elif line.startswith("Callback server started"):
                listening = True
            if authorization_url and listening:
                problem = _play_user(issuer, authorization_url, redirect_uri)
                authorization_url, listening = None, False
                if problem:
                    problems.append(problem)
                    process.terminate()  # it would wait 5 minutes for a redirect that never comes
        process.wait(timeout=SERVER_STOP_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        text = "".join(output)
        (outdir / "suite-output.txt").write_text(text)
    return text, problems


def run_authorization(args: argparse.Namespace, suite: Suite, scenarios: list[str]) -> list[str]:
    """The authorization-server scenarios against the example site's own authorization server."""
    with tempfile.TemporaryDirectory(prefix="mcp-conformance-") as tmp:
        workdir = Path(tmp)
        with running_server(workdir, "json", args.server, auth="oauth") as (url, server_log):
            issuer = url.removesuffix("/mcp/")
            suite.results_dir.mkdir(parents=True, exist_ok=True)
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            outdir = Path(
                tempfile.mkdtemp(
                    prefix=f"{stamp}-{args.server}-authorization-", dir=suite.results_dir
                )
            )
            output, browser_problems = run_authorization_suite(
                suite, issuer, f"{issuer}/mcp", outdir, args
            )
        shutil.copy(server_log, outdir / "server.log")
    results = read_results(outdir)
    for name, message in crashed_scenarios(output).items():
        if name not in results:
            results[name] = ScenarioResult(
                name, {"FAILURE": 1}, [f"FAILURE {name}: the scenario crashed: {message}"]
            )
    # Every check must run: the grant SKIPs when it cannot (no client id, no usable client
    # authentication method), and a skipped grant proves nothing.
    problems, lines = judge(
        results,
        scenarios,
        AUTHORIZATION_EXPECTED_FAILURES,
        no_skips={name: frozenset() for name in scenarios},
    )
    title = f"{suite.version} authorization, {args.server}, MCP_AUTH=oauth"
    return report(
        title,
        f"[{args.server} authorization]",
        results,
        browser_problems + problems,
        lines,
        outdir,
        args,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--response-mode",
        default="json,sse",
        help="comma-separated MCP_RESPONSE_MODE values to run (default: json,sse)",
    )
    parser.add_argument(
        "--suite",
        choices=("all", "active", "pending"),
        help="stable suite only: which scenarios to run (default: all)",
    )
    parser.add_argument("--scenario", help="run only this scenario")
    parser.add_argument(
        "--server",
        choices=asgi_servers.SERVERS + asgi_servers.WSGI_SERVERS,
        default="daphne",
        help="the server to serve the example site with (default: daphne, as make run); "
        "gunicorn, gunicorn-gthread and runserver serve its wsgi.py (the plain view)",
    )
    parser.add_argument("--verbose", action="store_true", help="also print the suite's own output")
    parser.add_argument(
        "--keep", action="store_true", help="keep the results folder even when everything passed"
    )
    parser.add_argument(
        "--suite-version",
        choices=sorted(SUITES),
        help=f"'stable' ({SUITE_VERSION}, the default) or 'alpha' ({ALPHA_SUITE_VERSION}, installed in "
        f"{ALPHA_INSTALL_DIR.relative_to(REPO)}/)",
    )
    parser.add_argument(
        "--requirements",
        metavar="REVISION",
        help="alpha suite only: run the scenarios this spec revision requires, e.g. 2026-07-28 (the "
        "default with --suite-version alpha) or 2025-11-25; implies --suite-version alpha",
    )
    parser.add_argument(
        "--authorization",
        action="store_true",
        help="alpha suite only: run its authorization-server scenarios (`conformance "
        "authorization`) against the example site's own authorization server (MCP_AUTH=oauth) "
        "instead of the server scenarios; implies --suite-version alpha, ignores --response-mode",
    )
    args = parser.parse_args(argv)
    suite = (
        SUITES[args.suite_version]
        if args.suite_version
        else (ALPHA if args.requirements or args.authorization else STABLE)
    )
    if args.authorization:
        if suite is STABLE:
            parser.error(
                f"--authorization needs the alpha suite: {SUITE_VERSION} has no such command"
            )
        if args.requirements or args.suite or args.scenario:
            # The grant scenario reads what the metadata scenario found: they run together.
            parser.error("--authorization runs every authorization-server scenario, alone")
    if suite is STABLE and args.requirements:
        parser.error(
            f"--requirements needs the alpha suite (--suite-version alpha), not {SUITE_VERSION}"
        )
    if suite is ALPHA and not args.authorization:
        if args.suite:
            parser.error(
                "--suite is for the stable suite; the alpha runs a requirement set (--requirements)"
            )
        args.requirements = args.requirements or DEFAULT_REQUIREMENTS

    # Stop the server on SIGTERM/SIGINT too: turn them into SystemExit so the finally blocks run.
    def terminate(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    started = time.monotonic()
    try:
        ensure_installed(suite)
        if args.authorization:
            scenarios = list_scenarios(suite, "authorization")
            return _finish(run_authorization(args, suite, scenarios), started)
        requirements = load_requirements(suite, args.requirements) if suite is ALPHA else None
        if args.scenario:
            scenarios = [args.scenario]
        elif requirements is not None:
            scenarios = requirements.names
        elif (args.suite or "all") == "all":
            scenarios = list_scenarios(suite)
        else:
            scenarios = []  # the active/pending split is the suite's business; judge what ran
        problems: list[str] = []
        for mode in [m.strip() for m in args.response_mode.split(",") if m.strip()]:
            problems += run_mode(mode, args, scenarios, suite, requirements)
    except RunnerError as exc:
        print(f"\n[conformance] ERROR: {exc}", file=sys.stderr, flush=True)
        return 2
    except subprocess.TimeoutExpired as exc:
        print(f"\n[conformance] ERROR: timed out: {exc}", file=sys.stderr, flush=True)
        return 2
    return _finish(problems, started)


def _finish(problems: list[str], started: float) -> int:
    elapsed = time.monotonic() - started
    if problems:
        print(f"\n[conformance] {len(problems)} problem(s) in {elapsed:.0f} s:")
        print("\n".join(f"  {p}" for p in problems), flush=True)
        return 1
    print(f"\n[conformance] all scenarios as expected in {elapsed:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
