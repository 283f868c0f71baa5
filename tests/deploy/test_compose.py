"""The cluster's deployment files: docker-compose.yml against the compose spec and
against itself, deploy/.env.example, the Dockerfile, the Kubernetes manifests, and
every ``tensortune`` command line they run, parsed by the real argument parser. No
Docker engine is needed: nothing here starts a container."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tuner.cli.commands import build_parser
from workers.hosts import host_resource

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_PATH = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / "deploy" / ".env.example"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
KUBERNETES = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))

COMPOSE = yaml.safe_load(COMPOSE_PATH.read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
IMAGE = "tensortune:${TENSORTUNE_VERSION:-latest}"
CUDA_IMAGE = "tensortune-cuda:${TENSORTUNE_VERSION:-latest}"
TENSORTUNE_SERVICES = sorted(
    name for name, s in SERVICES.items() if s.get("image") in (IMAGE, CUDA_IMAGE)
)
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
LOCK = tomllib.loads((ROOT / "uv.lock").read_text())
ONE_SHOT = {"migrate"}
SECRETS_DIR = "/run/secrets/"
MANIFESTS = {
    path.name: [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    for path in KUBERNETES
}
# What compose interpolates here: ${NAME}, ${NAME:-default}, ${NAME-default}.
VARIABLE = re.compile(r"\$\{(?P<name>\w+)(?::?-(?P<default>[^}]*))?\}")


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)
    elif isinstance(node, str):
        yield node


def _tensortune_argvs(node: Any) -> Iterator[tuple[str, ...]]:
    """Every exec-form command in ``node`` that runs tensortune (a ``CMD`` healthcheck
    too), with compose's ``${NAME:-default}`` replaced by its default."""
    if isinstance(node, dict):
        for value in node.values():
            yield from _tensortune_argvs(value)
    elif isinstance(node, list):
        words = node[1:] if node[:1] == ["CMD"] else node
        if words[:1] == ["tensortune"]:
            yield tuple(VARIABLE.sub(lambda m: m["default"] or "", word) for word in words)
            return
        for item in node:
            yield from _tensortune_argvs(item)


def _all_argvs() -> list[tuple[str, ...]]:
    sources = [COMPOSE, *MANIFESTS.values()]
    return list(dict.fromkeys(argv for source in sources for argv in _tensortune_argvs(source)))


def _env_example() -> dict[str, str]:
    lines = [line for line in ENV_EXAMPLE.read_text().splitlines() if line.strip()]
    pairs = [line.split("=", 1) for line in lines if not line.startswith("#")]
    return {name.strip(): value.strip().strip('"') for name, value in pairs}


def _interpolated() -> dict[str, str | None]:
    return {
        match["name"]: match["default"]
        for text in _strings(COMPOSE)
        for match in VARIABLE.finditer(text)
    }


def _dockerfile_final_stage() -> list[str]:
    """The final stage's instructions, one a line (continuations joined)."""
    lines = [line for line in DOCKERFILE.read_text().splitlines() if not line.startswith("#")]
    instructions = [i.strip() for i in "\n".join(lines).replace("\\\n", " ").splitlines()]
    last_from = max(n for n, i in enumerate(instructions) if i.upper().startswith("FROM "))
    return [i for i in instructions[last_from:] if i]


def _runs(stage: list[str]) -> list[str]:
    return [i for i in stage if i.upper().startswith("RUN ")]


def _check_compose_spec(path: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("check_jsonschema", reason="check-jsonschema is not installed")
    command = [sys.executable, "-m", "check_jsonschema"]
    command += ["--builtin-schema", "vendor.compose-spec", str(path)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_compose_file_follows_the_compose_spec():
    done = _check_compose_spec(COMPOSE_PATH)
    assert done.returncode == 0, done.stdout + done.stderr


def test_compose_spec_check_refuses_a_misspelled_key(tmp_path):
    broken = tmp_path / "docker-compose.yml"
    broken.write_text("services:\n  api:\n    image: x\n    restrat: always\n")
    assert _check_compose_spec(broken).returncode != 0


def test_depends_on_names_services_with_a_condition():
    for name, service in SERVICES.items():
        for needed, how in service.get("depends_on", {}).items():
            assert needed in SERVICES, f"{name} depends on {needed}, which is no service"
            assert how["condition"] in {
                "service_started",
                "service_healthy",
                "service_completed_successfully",
            }, f"{name} -> {needed}"


def test_api_and_coordinator_start_after_the_migration_succeeded():
    for name in ("api", "coordinator"):
        assert SERVICES[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }
        assert SERVICES[name]["depends_on"]["postgres"] == {"condition": "service_healthy"}
    assert SERVICES["coordinator"]["depends_on"]["ray-head"] == {"condition": "service_healthy"}


def test_named_volumes_are_declared():
    declared = set(COMPOSE.get("volumes") or {})
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source = volume["source"] if isinstance(volume, dict) else volume.split(":")[0]
            if not source.startswith(("/", ".", "~")):
                assert source in declared, f"{name} mounts undeclared volume {source}"


def test_secrets_are_declared_and_come_from_the_secrets_folder():
    declared = COMPOSE["secrets"]
    for name, service in SERVICES.items():
        for secret in service.get("secrets", []):
            source = secret["source"] if isinstance(secret, dict) else secret
            assert source in declared, f"{name} uses undeclared secret {source}"
    for secret in declared.values():
        assert (ROOT / secret["file"]).parent == ROOT / "deploy" / "secrets"


def test_services_are_given_every_secret_file_they_name():
    """tensortune reads a password file it is told of at every start, even in a
    command that opens no database: naming one a service lacks stops the service."""
    for name, service in SERVICES.items():
        given = {s if isinstance(s, str) else s["source"] for s in service.get("secrets", [])}
        for text in _strings(service):
            if text.startswith(SECRETS_DIR):
                assert text.removeprefix(SECRETS_DIR) in given, f"{name}: {text}"


def test_every_interpolated_variable_is_in_env_example_with_its_default():
    interpolated = _interpolated()
    listed = _env_example()
    assert sorted(interpolated) == sorted(listed), "docker-compose.yml vs deploy/.env.example"
    for name, default in interpolated.items():
        assert listed[name] == default, f"{name}: default {default!r}, example {listed[name]!r}"


def test_every_dollar_in_the_compose_file_is_braced_interpolation():
    for text in _strings(COMPOSE):
        assert not re.search(r"\$(?!\{)", text.replace("$$", "")), text


def test_every_service_has_a_healthcheck():
    for name, service in SERVICES.items():
        check = service.get("healthcheck", {})
        assert check.get("test"), f"{name} has no healthcheck"
        assert {"interval", "timeout", "retries", "start_period"} <= set(check), name


def test_long_running_services_restart_and_the_migration_does_not():
    for name, service in SERVICES.items():
        expected = "no" if name in ONE_SHOT else "unless-stopped"
        assert service.get("restart") == expected, name


def test_tensortune_services_share_the_image_and_its_environment():
    assert set(TENSORTUNE_SERVICES) == set(SERVICES) - {"postgres"}
    cuda = {name for name, service in SERVICES.items() if service["image"] == CUDA_IMAGE}
    assert cuda == {"ray-worker-gpu"}
    shared = COMPOSE["x-tensortune-env"]
    for name in TENSORTUNE_SERVICES:
        environment = SERVICES[name]["environment"]
        assert shared.items() <= environment.items(), name


def test_each_image_is_built_once_from_deploy_dockerfile_with_its_extras():
    builds = {s["image"]: s["build"] for s in SERVICES.values() if "build" in s}
    assert set(builds) == {IMAGE, CUDA_IMAGE}
    for build in builds.values():
        assert (ROOT / build["context"]).resolve() == ROOT
        assert (ROOT / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE
    assert "args" not in builds[IMAGE]
    assert builds[CUDA_IMAGE]["args"] == {"EXTRAS": "cuda"}


def test_image_extras_are_extras_of_the_distribution():
    """What compose and the Kubernetes README pass as EXTRAS, which ``uv export``
    would refuse at build time if it named no extra."""
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    given = [build.get("args", {}).get("EXTRAS", "") for build in _builds()]
    readme = (ROOT / "deploy" / "kubernetes" / "README.md").read_text()
    given += re.findall(r'--build-arg EXTRAS="?([\w ]+)"?', readme)
    assert len(given) == 4
    for words in given:
        assert set(words.split()) <= extras, words


def _builds() -> list[dict[str, Any]]:
    return [service["build"] for service in SERVICES.values() if "build" in service]


def test_image_installs_the_locked_versions_with_their_hashes():
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    assert "COPY pyproject.toml uv.lock ./" in text
    assert "uv export --frozen --format requirements-txt --no-emit-project" in text
    pip = [r for r in _runs(_dockerfile_final_stage()) if "pip install" in r]
    assert "--require-hashes -r /wheels/requirements.txt" in pip[0]
    assert "--no-deps /wheels/*.whl" in pip[0]


def test_ray_worker_can_be_scaled():
    worker = SERVICES["ray-worker"]
    assert "container_name" not in worker
    assert "ports" not in worker


def test_gpu_worker_is_only_in_the_gpu_profile_and_reserves_an_nvidia_gpu():
    profiled = {name: s["profiles"] for name, s in SERVICES.items() if "profiles" in s}
    assert profiled == {"ray-worker-gpu": ["gpu"]}
    devices = SERVICES["ray-worker-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert [(d["driver"], d["count"], d["capabilities"]) for d in devices] == [
        ("nvidia", 1, ["gpu"])
    ]


def test_worker_targets_name_host_kinds():
    defaults = _interpolated()
    assert host_resource(defaults["WORKER_TARGET"]).startswith("target:llvm -mcpu=")
    assert host_resource(defaults["GPU_TARGET"]) == "target:cuda -arch=sm_80"


@pytest.mark.parametrize("argv", _all_argvs(), ids=" ".join)
def test_command_line_is_accepted_by_tensortune(argv):
    try:
        build_parser().parse_args(list(argv[1:]))
    except SystemExit as exit_:
        pytest.fail(f"tensortune refuses {list(argv)} (exit {exit_.code})")


def test_image_is_python_slim_and_runs_as_a_user():
    stage = _dockerfile_final_stage()
    assert stage[0].split()[1] == "python:3.11-slim"
    users = [i.split()[1] for i in stage if i.upper().startswith("USER ")]
    assert users, "the final stage has no USER"
    assert users[-1].split(":")[0] not in {"root", "0"}


def test_image_installs_libgomp_without_leaving_caches():
    runs = _runs(_dockerfile_final_stage())
    apt = [r for r in runs if "apt-get install" in r]
    assert apt and all("--no-install-recommends" in r for r in apt)
    assert any("libgomp1" in r.split() for r in apt)
    assert all("rm -rf /var/lib/apt/lists/*" in r for r in apt)
    pip = [r for r in runs if "pip install" in r]
    assert pip and all("--no-cache-dir" in r for r in pip)


def test_image_can_link_candidates_and_has_no_compiler():
    """A builder links a candidate with ``ld -shared`` (compiler/runtime/export.py)."""
    installed = {
        word
        for run in _runs(_dockerfile_final_stage())
        if "apt-get install" in run
        for word in run.split()
    }
    assert {"binutils", "libgomp1"} <= installed
    assert not installed & {"gcc", "g++", "clang", "build-essential"}


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_kubernetes_documents_are_named_objects(name):
    assert MANIFESTS[name], f"{name} has no document"
    for document in MANIFESTS[name]:
        assert document["apiVersion"] and document["kind"], name
        assert document["metadata"]["name"], name


def _kubernetes_objects() -> dict[tuple[str, str], dict[str, Any]]:
    documents = [doc for docs in MANIFESTS.values() for doc in docs]
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in documents}


def _references(node: Any) -> Iterator[tuple[str, str, str | None]]:
    """(kind, name, key) of every Secret and ConfigMap a pod template reads."""
    if isinstance(node, list):
        for item in node:
            yield from _references(item)
        return
    if not isinstance(node, dict):
        return
    if "secretKeyRef" in node:
        yield "Secret", node["secretKeyRef"]["name"], node["secretKeyRef"]["key"]
    if "configMapRef" in node:
        yield "ConfigMap", node["configMapRef"]["name"], None
    volume = node.get("secret")
    if isinstance(volume, dict):
        name = volume.get("secretName") or volume["name"]
        for item in volume.get("items", []):
            yield "Secret", name, item["key"]
    for value in node.values():
        yield from _references(value)


def test_kubernetes_secrets_and_config_maps_read_are_defined():
    objects = _kubernetes_objects()
    for kind, name, key in _references(list(MANIFESTS.values())):
        assert (kind, name) in objects, f"no {kind} {name}"
        if key is not None:
            assert key in objects[kind, name]["stringData"], f"{kind} {name} has no {key}"


def _pod_specs(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, list):
        for item in node:
            yield from _pod_specs(item)
    elif isinstance(node, dict):
        if "containers" in node:
            yield node
        for value in node.values():
            yield from _pod_specs(value)


def _secret_files(volume: dict[str, Any]) -> set[str]:
    """The file names a secret volume (plain or projected) holds."""
    if "secret" in volume:
        sources = [volume["secret"]]
    else:
        sources = [source["secret"] for source in volume["projected"]["sources"]]
    return {item["path"] for source in sources for item in source["items"]}


def test_kubernetes_pods_mount_every_secret_file_they_name():
    for spec in _pod_specs(list(MANIFESTS.values())):
        volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
        for container in spec["containers"]:
            mounts = container.get("volumeMounts", [])
            names = [m["name"] for m in mounts if m["mountPath"] == SECRETS_DIR.rstrip("/")]
            mounted = {file for name in names for file in _secret_files(volumes[name])}
            texts = _strings(container)
            named = {t.removeprefix(SECRETS_DIR) for t in texts if t.startswith(SECRETS_DIR)}
            assert named <= mounted, f"{container['name']} names {named - mounted}"


def test_ray_worker_groups_carry_host_kind_resources():
    cluster = _kubernetes_objects()["RayCluster", "tensortune-ray"]
    assert "resources" not in cluster["spec"]["headGroupSpec"]["rayStartParams"]
    for group in cluster["spec"]["workerGroupSpecs"]:
        # KubeRay's quoting: a JSON string literal holding the JSON object.
        resources = json.loads(json.loads(group["rayStartParams"]["resources"]))
        assert resources, group["groupName"]
        for resource in resources:
            assert host_resource(resource.removeprefix("target:")) == resource


def test_kuberay_runs_the_locked_ray_and_gpu_workers_the_cuda_image():
    cluster = _kubernetes_objects()["RayCluster", "tensortune-ray"]
    (ray,) = [package["version"] for package in LOCK["package"] if package["name"] == "ray"]
    assert cluster["spec"]["rayVersion"] == ray
    for group in cluster["spec"]["workerGroupSpecs"]:
        (container,) = group["template"]["spec"]["containers"]
        gpu = "num-gpus" in group["rayStartParams"]
        assert container["image"].endswith("/tensortune-cuda:0.1.0" if gpu else "/tensortune:0.1.0")


def test_drivers_reach_the_ray_head_service_kuberay_makes():
    objects = _kubernetes_objects()
    address = objects["ConfigMap", "tensortune-env"]["data"]["TENSORTUNE_RAY_ADDRESS"]
    assert address == "ray://tensortune-ray-head-svc:10001"
    assert ("RayCluster", "tensortune-ray") in objects
