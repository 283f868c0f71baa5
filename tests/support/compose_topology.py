"""The services of docker-compose.yml as processes on this machine, without Docker.

``ComposeFile`` reads the compose file as compose does (variables interpolated,
anchors merged) and gives each service's command, environment and health check.
``Topology`` runs them inside the private network, PID and mount namespace of
``ray_cluster.run_scenarios``: every service name resolves to 127.0.0.1 (an
/etc/hosts of the namespace's own), the secrets are files in /run/secrets, /run and
/tmp are file systems of the namespace (tmpfs), PostgreSQL runs as the official
image's entry point would set it up (user, database and password from the secret),
and every other service runs its compose command, the program ``tensortune`` or
``ray`` taken from this interpreter.
A service with a restart policy is started again when its process ends, as Docker
would. Nothing here is reachable from outside the namespace, and nothing outlives it.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pg_server import AS_NOBODY, bin_dir

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
SECRETS = Path("/run/secrets")
# ${NAME}, ${NAME:-default} and ${NAME-default}, as compose interpolates them.
VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?-)(?P<default>[^}]*))?\}")
PROGRAMS = {
    "tensortune": [sys.executable, "-m", "tuner.cli.main"],
    "ray": [sys.executable, "-m", "ray.scripts.scripts"],
}
# The user and database the compose file gives the postgres service.
PG_USER = "tensortune"


def interpolate(text: str, variables: Mapping[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        given = variables.get(match["name"])
        if match["op"] == ":-" and not given:
            return match["default"]
        if match["op"] == "-" and given is None:
            return match["default"]
        return given or ""

    return VARIABLE.sub(value, text)


class ComposeFile:
    def __init__(self, variables: Mapping[str, str], path: Path = COMPOSE_FILE) -> None:
        self.document = yaml.safe_load(interpolate(path.read_text(), variables))
        self.services: dict[str, Any] = self.document["services"]

    def command(self, service: str) -> list[str]:
        """The service's command, run by this machine's programs."""
        return local(self.services[service]["command"])

    def environment(self, service: str) -> dict[str, str]:
        given = self.services[service].get("environment") or {}
        return {name: str(value) for name, value in given.items()}

    def healthcheck(self, service: str) -> list[str]:
        test = self.services[service]["healthcheck"]["test"]
        assert test[0] == "CMD", f"{service}: a health check of form {test[0]} is not run here"
        return local(test[1:])

    def restarts(self, service: str) -> bool:
        return self.services[service].get("restart", "no") in ("always", "unless-stopped")

    def secrets_of(self, service: str) -> list[str]:
        return list(self.services[service].get("secrets", []))


def _private_tmp() -> None:
    """A /tmp of the namespace's own: Ray's session files (and the address of the last
    cluster, which a later ``ray.init()`` would join) end with the namespace."""
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/tmp"], check=True)


def local(argv: list[str]) -> list[str]:
    return [*PROGRAMS.get(argv[0], [argv[0]]), *argv[1:]]


class Service:
    """One service's process; with ``restart``, started again whenever it ends, until
    ``stop``. ``starts`` counts the processes it ran."""

    def __init__(self, name: str, argv: list[str], env: Mapping[str, str], log: Path) -> None:
        self.name, self.argv, self.env, self.log = name, argv, dict(env), log
        self.starts = 0
        self.process = self._start()
        self._stopped = threading.Event()

    def _start(self) -> subprocess.Popen[bytes]:
        self.starts += 1
        with open(self.log, "ab") as out:
            return subprocess.Popen(self.argv, env=self.env, stdout=out, stderr=subprocess.STDOUT)

    def keep_running(self) -> None:
        """Start it again each time it ends (a restart policy), from a thread."""

        def watch() -> None:
            while not self._stopped.is_set():
                if self.process.poll() is not None:
                    time.sleep(1.0)  # Docker's first restart waits about as long
                    if not self._stopped.is_set():
                        self.process = self._start()
                time.sleep(0.2)

        threading.Thread(target=watch, name=f"restart {self.name}", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()


class Topology:
    """The compose services run as processes of this namespace."""

    def __init__(self, variables: Mapping[str, str]) -> None:
        self.variables = dict(variables)
        self.compose = ComposeFile(variables)
        _private_tmp()
        self.logs = Path(tempfile.mkdtemp(prefix="tt-compose-"))
        self.secret = {"db_password": secrets.token_urlsafe(16)}
        self.secret["admin_token"] = "tt_" + secrets.token_urlsafe(32)
        self.running: dict[str, Service] = {}
        self._names_resolve_here()
        self._write_secrets()

    def _names_resolve_here(self) -> None:
        hosts = self.logs / "hosts"
        hosts.write_text(f"127.0.0.1 localhost {' '.join(self.compose.services)}\n")
        subprocess.run(["mount", "--bind", str(hosts), "/etc/hosts"], check=True)

    def _write_secrets(self) -> None:
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/run"], check=True)
        SECRETS.mkdir()
        for name, value in self.secret.items():
            (SECRETS / name).write_text(value + "\n")

    def env(self, service: str) -> dict[str, str]:
        return {**os.environ, **self.compose.environment(service)}

    def start_postgres(self) -> None:
        """PostgreSQL as the official image sets it up: the user and database of its
        environment, the password of its secret, password authentication on TCP, and
        its socket where pg_isready looks by default (/run/postgresql)."""
        binaries = bin_dir()
        assert binaries is not None, "PostgreSQL's binaries are missing"
        environment = self.compose.environment("postgres")
        assert environment["POSTGRES_USER"] == environment["POSTGRES_DB"] == PG_USER
        data, socket_dir = self.logs / "pgdata", Path("/run/postgresql")
        socket_dir.mkdir()
        password = self.logs / "pgpass"
        password.write_text(self.secret["db_password"] + "\n")
        for path in (self.logs, socket_dir, password):
            os.chown(path, 65534, 65534)
        as_nobody = [*AS_NOBODY]
        initdb = [str(binaries / "initdb"), "-D", str(data), "-U", PG_USER, "--no-sync"]
        initdb += [f"--pwfile={password}", "--auth-local=trust", "--auth-host=scram-sha-256"]
        subprocess.run([*as_nobody, *initdb], check=True, capture_output=True)
        settings = f"-c listen_addresses=127.0.0.1 -c fsync=off -p 5432 -k {socket_dir}"
        start = [str(binaries / "pg_ctl"), "start", "-D", str(data), "-w", "-o", settings]
        start += ["-l", str(self.logs / "postgres.log")]
        subprocess.run([*as_nobody, *start], check=True, capture_output=True)
        create = [str(binaries / "createdb"), "-h", str(socket_dir), "-U", PG_USER, PG_USER]
        subprocess.run([*as_nobody, *create], check=True, capture_output=True)

    def run_once(self, service: str) -> subprocess.CompletedProcess[str]:
        """A one-shot service (compose's ``restart: "no"``) to its end."""
        return subprocess.run(
            self.compose.command(service),
            env=self.env(service),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def start(self, service: str, *, name: str | None = None, **variables: str) -> Service:
        """Start ``service`` (as ``name``, for a second replica), its compose file read
        again with ``variables`` on top when given (a replica of another host kind)."""
        compose = self.compose
        if variables:
            compose = ComposeFile({**self.variables, **variables})
        name = name or service
        log = self.logs / f"{name}.log"
        running = Service(name, compose.command(service), self.env(service), log)
        if compose.restarts(service):
            running.keep_running()
        self.running[name] = running
        return running

    def wait_healthy(self, service: str, timeout_s: float = 120.0) -> None:
        """Run the service's health check until it passes, as compose's
        ``condition: service_healthy`` waits."""
        deadline = time.monotonic() + timeout_s
        check = self.compose.healthcheck(service)
        while True:
            done = subprocess.run(
                check, env=self.env(service), capture_output=True, text=True, check=False
            )
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{service} not healthy in {timeout_s:g} s: {done.stdout}{done.stderr}\n"
                    f"{self.log_tail(service)}"
                )
            time.sleep(1.0)

    def log_tail(self, name: str, chars: int = 3000) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop(self) -> None:
        for service in self.running.values():
            service.stop()
