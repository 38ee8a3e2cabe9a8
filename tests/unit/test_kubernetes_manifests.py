"""docker/kubernetes/ (the control plane's kustomize base, and with-ingress/) rendered as kustomize
would, then every object validated offline, strictly, against the schemas of a pinned Kubernetes
(kubernetes-validate); and the properties the deployment promises checked on the rendered objects.

There is no kustomize or cluster here, so ``render`` implements the few kustomize features the
files use, and refuses any other: a file that starts using a new one fails here, not in a cluster."""

from __future__ import annotations

import base64
import copy
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

KUBERNETES_VERSION = "1.33.0"  # the oldest release still supported upstream when this was written
BASE = Path(__file__).resolve().parents[2] / "docker" / "kubernetes"
KNOWN_KEYS = {"apiVersion", "kind", "namespace", "labels", "resources", "secretGenerator", "images", "patches"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
TOKEN = "t" * 48


def _load(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _json_pointer_replace(obj: dict, path: str, value) -> None:
    *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in path.lstrip("/").split("/")]
    for part in parents:
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    if isinstance(obj, list):
        obj[int(last)] = value
    else:
        assert last in obj, f"patch path {path} does not exist"
        obj[last] = value


def render(directory: Path, env_files: dict[str, str]) -> list[dict]:
    """The objects `kubectl apply -k directory` would create (``env_files``: the contents of the
    generators' env files, which are not committed)."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kustomization) - KNOWN_KEYS
    assert not unknown, f"{directory}: kustomize features this test does not render: {unknown}"
    assert kustomization["kind"] == "Kustomization"
    objects: list[dict] = []
    for resource in kustomization.get("resources", []):
        path = (directory / resource).resolve()
        objects += render(path, env_files) if path.is_dir() else _load(path)
    for generator in kustomization.get("secretGenerator", []):
        data = {}
        for env in generator["envs"]:
            for line in env_files[env].splitlines():
                key, _, value = line.partition("=")
                data[key] = base64.b64encode(value.encode()).decode()
        objects.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                        "metadata": {"name": generator["name"]}, "data": data})
    for patch in kustomization.get("patches", []):
        target = patch["target"]
        matched = [o for o in objects if o["kind"] == target["kind"] and o["metadata"]["name"] == target["name"]]
        assert len(matched) == 1, f"patch target {target} matches {len(matched)} objects"
        for op in yaml.safe_load(patch["patch"]):
            assert op["op"] == "replace", f"only replace patches are rendered here: {op}"
            _json_pointer_replace(matched[0], op["path"], op["value"])
    for obj in objects:
        meta = obj["metadata"]
        if "namespace" in kustomization and obj["kind"] not in CLUSTER_SCOPED:
            meta["namespace"] = kustomization["namespace"]
            for subject in obj.get("subjects", []):
                if subject["kind"] == "ServiceAccount":
                    subject["namespace"] = kustomization["namespace"]
        for entry in kustomization.get("labels", []):
            assert entry.get("includeSelectors") is False and not entry.get("includeTemplates")
            meta.setdefault("labels", {}).update(entry["pairs"])
        for container in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            for image in kustomization.get("images", []):
                if container["image"] == image["name"]:
                    container["image"] = f"{image['newName']}:{image['newTag']}"
    return objects


@pytest.fixture(params=["base", "with-ingress"])
def rendered(request) -> list[dict]:
    directory = BASE if request.param == "base" else BASE / request.param
    return render(directory, {"token.env": f"GLASSDESK_TOKEN={TOKEN}"})


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def test_every_object_is_valid_for_the_pinned_kubernetes(rendered):
    for obj in rendered:
        # Raises kubernetes_validate.ValidationError naming the bad field.
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    assert {o["kind"] for o in rendered} >= {"Namespace", "ServiceAccount", "Role", "RoleBinding", "Deployment",
                                             "Service", "Secret"}


def test_the_validator_refuses_what_a_cluster_would():
    deployment = copy.deepcopy(_load(BASE / "deployment.yaml")[0])
    deployment["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)
    deployment = copy.deepcopy(_load(BASE / "deployment.yaml")[0])
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsUsr"] = 1000
    with pytest.raises(kubernetes_validate.ValidationError):  # strict: unknown fields are errors
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_rbac_is_limited_to_what_the_session_backend_calls_in_its_namespace(rendered):
    assert not by_kind(rendered, "ClusterRole") and not by_kind(rendered, "ClusterRoleBinding")
    [role] = by_kind(rendered, "Role")
    granted = {(group, resource) for rule in role["rules"]
               for group in rule["apiGroups"] for resource in rule["resources"]}
    assert granted == {("", "pods"), ("", "secrets"), ("networking.k8s.io", "networkpolicies"), ("apps", "deployments")}
    [deployments] = [rule for rule in role["rules"] if rule["resources"] == ["deployments"]]
    assert deployments["verbs"] == ["get"] and deployments["resourceNames"] == ["glassdesk"]
    assert all("*" not in rule["verbs"] for rule in role["rules"])
    [binding] = by_kind(rendered, "RoleBinding")
    [account] = by_kind(rendered, "ServiceAccount")
    [deployment] = by_kind(rendered, "Deployment")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": "glassdesk"}]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]
    assert {o["metadata"].get("namespace") for o in rendered if o["kind"] != "Namespace"} == {"glassdesk"}


def test_the_deployment_runs_the_image_non_root_with_the_token_from_the_secret(rendered):
    [deployment] = by_kind(rendered, "Deployment")
    [secret] = by_kind(rendered, "Secret")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == "glassdesk:latest"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 1000
    assert pod["securityContext"]["seccompProfile"] == {"type": "Unconfined"}  # Chromium's sandbox: see the file
    assert pod["shareProcessNamespace"] is True  # a PID 1 that reaps, as --init in Docker
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    env = {e["name"]: e for e in container["env"]}
    assert env["GLASSDESK_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": secret["metadata"]["name"],
                                                                   "key": "GLASSDESK_TOKEN"}
    assert base64.b64decode(secret["data"]["GLASSDESK_TOKEN"]).decode() == TOKEN
    assert "GLASSDESK_CHROMIUM_NO_SANDBOX" not in env
    # The probes name a Host the server answers to (it refuses others: DNS rebinding).
    for probe in (container["readinessProbe"], container["livenessProbe"]):
        assert probe["httpGet"]["path"] == "/healthz"
        assert probe["httpGet"]["httpHeaders"] == [{"name": "Host", "value": "localhost"}]


def test_the_service_selects_the_deployments_pods(rendered):
    [deployment] = by_kind(rendered, "Deployment")
    [service] = by_kind(rendered, "Service")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    [port] = service["spec"]["ports"]
    assert port["targetPort"] in {p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]}


def test_the_ingress_variant_routes_its_host_to_the_service_and_names_it_public():
    objects = render(BASE / "with-ingress", {"token.env": f"GLASSDESK_TOKEN={TOKEN}"})
    [ingress] = by_kind(objects, "Ingress")
    [deployment] = by_kind(objects, "Deployment")
    [service] = by_kind(objects, "Service")
    [rule] = ingress["spec"]["rules"]
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": service["metadata"]["name"], "port": {"name": "http"}}
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["GLASSDESK_PUBLIC_HOST"] == rule["host"]
    assert not by_kind(render(BASE, {"token.env": "GLASSDESK_TOKEN=x"}), "Ingress")  # optional: not in the base
