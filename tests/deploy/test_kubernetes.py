"""deploy/kubernetes: valid for the Kubernetes API (strict), and consistent with rota."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rota.cli.main import main
from tests.deploy.kit import DEPLOY, longest_executor_stop, parse_rota, run, tool

KUBERNETES = DEPLOY / "kubernetes"
# A current release that kubernetes-validate (>= 1.37, the test extra) ships schemas for.
KUBERNETES_VERSION = "1.37.0"
KUSTOMIZATION = KUBERNETES / "kustomization.yaml"
IMAGE_USER = 10001  # USER in deploy/Dockerfile

Resource = dict[str, Any]


def manifests() -> list[Path]:
    return sorted(p for p in KUBERNETES.glob("*.yaml") if p != KUSTOMIZATION)


def resources() -> list[Resource]:
    found: list[Resource] = []
    for path in manifests():
        found.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return found


def resource(kind: str, name: str) -> Resource:
    (found,) = [r for r in resources() if r["kind"] == kind and r["metadata"]["name"] == name]
    return found


def pod_specs() -> list[tuple[str, Resource]]:
    return [
        (r["metadata"]["name"], r["spec"]["template"]["spec"])
        for r in resources()
        if r["kind"] in ("Deployment", "Job")
    ]


def containers(pod: Resource) -> list[Resource]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def test_every_manifest_passes_kubernetes_validate_strict() -> None:
    validate = tool("kubernetes-validate", "pip install kubernetes-validate: the test extra")
    files = [str(p) for p in manifests()]
    result = run([validate, "--strict", "--kubernetes-version", KUBERNETES_VERSION, *files])
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # A kind it has no schema for is only a warning: every resource must have passed.
    assert "WARN" not in output, output
    passed = [line for line in output.splitlines() if " passed for resource " in line]
    assert len(passed) == len(resources()), output


def test_the_kustomization_lists_every_manifest_and_names_the_image() -> None:
    kustomization = yaml.safe_load(KUSTOMIZATION.read_text())
    assert sorted(kustomization["resources"]) == [p.name for p in manifests()]
    images = {c["image"] for _, pod in pod_specs() for c in containers(pod)}
    assert images == {i["name"] for i in kustomization["images"]} == {"rota"}


def test_every_container_runs_rota_with_flags_it_accepts() -> None:
    commands = set()
    for _, pod in pod_specs():
        for c in containers(pod):
            assert "command" not in c, f"{c['name']}: the image's entrypoint is rota"
            commands.add(parse_rota([str(a) for a in c["args"]]).command)
    assert commands == {"check", "migrate", "apply", "scheduler", "executor", "serve"}


def test_the_schedule_file_of_the_configmap_passes_rota_check(tmp_path: Path) -> None:
    schedules = tmp_path / "schedules.yaml"
    schedules.write_text(resource("ConfigMap", "rota-schedules")["data"]["schedules.yaml"])
    assert main(["check", str(schedules)]) == 0
    # The rota-migrate Job applies that file, mounted where its command names it.
    job = resource("Job", "rota-migrate")["spec"]["template"]["spec"]
    (apply,) = job["containers"]
    assert apply["args"] == ["apply", "/etc/rota/schedules.yaml"]
    (volume,) = [v for v in job["volumes"] if v.get("configMap") == {"name": "rota-schedules"}]
    assert {"name": volume["name"], "mountPath": "/etc/rota", "readOnly": True} in apply[
        "volumeMounts"
    ]


def test_pods_run_as_the_image_user_read_only_and_without_privileges() -> None:
    for name, pod in pod_specs():
        assert pod["automountServiceAccountToken"] is False, name
        context = pod["securityContext"]
        assert context["runAsNonRoot"] is True, name
        assert context["runAsUser"] == IMAGE_USER, name
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for c in containers(pod):
            own = c["securityContext"]
            assert own["allowPrivilegeEscalation"] is False, c["name"]
            assert own["readOnlyRootFilesystem"] is True, c["name"]
            assert own["capabilities"] == {"drop": ["ALL"]}, c["name"]
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), c["name"]
    assert f"USER {IMAGE_USER}:{IMAGE_USER}" in (DEPLOY / "Dockerfile").read_text()


def test_the_database_url_and_the_token_come_from_the_secret() -> None:
    for _, pod in pod_specs():
        for c in containers(pod):
            env = {e["name"]: e for e in c.get("env", [])}
            command = c["args"][0]
            wanted = {"check": set(), "serve": {"ROTA_DATABASE_URL", "ROTA_API_TOKEN"}}.get(
                command, {"ROTA_DATABASE_URL"}
            )
            assert set(env) == wanted, c["name"]
            for e in env.values():
                assert "value" not in e and set(e["valueFrom"]) == {"secretKeyRef"}, e


def test_probes_ask_the_ports_and_paths_rota_serves() -> None:
    for name, pod in pod_specs():
        for c in pod["containers"]:
            args = parse_rota([str(a) for a in c["args"]])
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            if args.command in ("scheduler", "executor"):
                paths = {"livenessProbe": "/healthz", "readinessProbe": "/healthz"}
                listening = args.health_port
            elif args.command == "serve":
                paths = {"livenessProbe": "/healthz", "readinessProbe": "/readyz"}
                listening = args.port
            else:
                assert "livenessProbe" not in c, name
                continue
            for probe, path in paths.items():
                get = c[probe]["httpGet"]
                assert get["path"] == path, (name, probe)
                assert ports[get["port"]] == listening, (name, probe)


def test_three_scheduler_replicas_and_a_disruption_budget_for_them() -> None:
    scheduler = resource("Deployment", "rota-scheduler")
    assert scheduler["spec"]["replicas"] == 3
    budget = resource("PodDisruptionBudget", "rota-scheduler")
    assert budget["spec"]["selector"] == scheduler["spec"]["selector"]
    assert budget["spec"]["maxUnavailable"] == 1


def test_the_executor_grace_period_outlasts_its_drain() -> None:
    pod = resource("Deployment", "rota-executor")["spec"]["template"]["spec"]
    (executor,) = pod["containers"]
    drain = parse_rota([str(a) for a in executor["args"]]).drain_timeout
    assert pod["terminationGracePeriodSeconds"] > longest_executor_stop(drain)


def test_the_service_selects_the_serve_pods() -> None:
    serve = resource("Deployment", "rota-serve")
    service = resource("Service", "rota-serve")
    assert service["spec"]["selector"] == serve["spec"]["selector"]["matchLabels"]
    (port,) = service["spec"]["ports"]
    (container,) = serve["spec"]["template"]["spec"]["containers"]
    assert port["targetPort"] in {p["name"] for p in container["ports"]}
