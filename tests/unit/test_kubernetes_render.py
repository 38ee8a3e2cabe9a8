"""The Kubernetes backend's pure parts: the objects it renders for a session (validated offline
against Kubernetes' own schemas with kubernetes-validate), the egress a NetworkPolicy can express,
what a pod's status says, leases, and the settings read from the environment. No API, no cluster."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import kubernetes_validate
import pytest

from desktop.errors import InvalidRequest
from desktop.remote.backends.base import LABEL_OWNER, LABEL_SESSION, BackendState, SessionSpec
from desktop.remote.backends.kubernetes import (
    EXPIRES_AT,
    PRIVATE_V4,
    KubeSettings,
    OwnerRef,
    egress_rules,
    expired,
    pod_verdict,
    render,
    seccomp_profile,
)
from tests.fakes.kube_api import K8S_VERSION

NOW = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)
TOKEN = "tok-3f9a-very-secret"
SPEC = SessionSpec("s1", TOKEN, 1536, 1.5)
OWNER = OwnerRef("Deployment", "glassdesk", "0b6f4c2e-1c1d-4a57-9a34-3a0b8f0d7e11")


def objects(spec: SessionSpec = SPEC, **settings) -> dict[str, dict]:
    return {o["kind"]: o for o in render("glassdesk-s1-abc123", spec, KubeSettings(owner="cp", **settings), NOW)}


@pytest.mark.parametrize("spec, settings", [
    (SPEC, {}),
    (SPEC, {"owner_ref": OWNER, "seccomp": "localhost/profiles/chromium.json", "egress_ports": ()}),
    (SessionSpec("s2", TOKEN, 1024, 0.5, ("*.example.com", "example.com:8443"), ("8.8.8.8", "10.0.0.1")), {}),
    (SessionSpec("s3", TOKEN, 2048, 2, ("93.184.216.34", "[2606:2800:220:1::]:443")), {"seccomp": "RuntimeDefault"}),
])
def test_rendered_objects_validate_against_the_pinned_kubernetes_schemas(spec, settings):
    rendered = render("glassdesk-x-abc123", spec, KubeSettings(**settings), NOW)
    assert [o["kind"] for o in rendered] == ["Secret", "NetworkPolicy", "Pod"]  # the order they are created in
    for obj in rendered:
        assert kubernetes_validate.validate(obj, K8S_VERSION, strict=True) == K8S_VERSION


def test_the_validator_refuses_what_a_cluster_would():
    """The check above has teeth: a misspelt field and a wrong type are caught offline."""
    pod = objects()["Pod"]
    misspelt = json.loads(json.dumps(pod))
    misspelt["spec"]["containers"][0]["readinesProbe"] = misspelt["spec"]["containers"][0].pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(misspelt, K8S_VERSION, strict=True)
    wrong = json.loads(json.dumps(pod))
    wrong["spec"]["containers"][0]["ports"][0]["containerPort"] = "8000"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong, K8S_VERSION, strict=True)


def test_the_token_is_only_in_the_secret_and_the_pod_reads_it_from_there():
    rendered = objects()
    secret, pod, policy = rendered["Secret"], rendered["Pod"], rendered["NetworkPolicy"]
    assert base64.b64decode(secret["data"]["GLASSDESK_TOKEN"]).decode() == TOKEN
    assert secret["immutable"] is True
    encoded = base64.b64encode(TOKEN.encode()).decode()
    for obj in (pod, policy):
        assert TOKEN not in json.dumps(obj) and encoded not in json.dumps(obj)
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["GLASSDESK_TOKEN"] == {"name": "GLASSDESK_TOKEN", "valueFrom": {
        "secretKeyRef": {"name": "glassdesk-s1-abc123", "key": "GLASSDESK_TOKEN"}}}


def test_every_object_is_labelled_annotated_and_owned():
    for obj in render("glassdesk-s1-abc123", SPEC, KubeSettings(owner="cp", owner_ref=OWNER), NOW):
        meta = obj["metadata"]
        assert meta["labels"] == {"app.kubernetes.io/name": "glassdesk", "glassdesk.dev/role": "session",
                                  LABEL_SESSION: "s1", LABEL_OWNER: "cp"}
        assert meta["annotations"] == {EXPIRES_AT: "2026-11-23T12:15:00Z"}  # the default lease: 15 min
        assert meta["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "glassdesk",
                                            "uid": OWNER.uid}]
    # Outside a cluster (no owner given) there is nothing to own them: no reference, not a dangling one.
    assert all("ownerReferences" not in o["metadata"] for o in objects().values())


def test_the_pod_runs_the_single_session_server_non_root_with_limits_and_a_probe():
    pod = objects()["Pod"]
    spec = pod["spec"]
    container = spec["containers"][0]
    assert container["command"] == ["glassdesk"]
    assert container["args"] == ["up", "--single-session", "--host", "$(GLASSDESK_POD_IP)", "--port", "8000"]
    assert "--no-sandbox" not in json.dumps(pod)
    assert container["resources"] == {"requests": {"memory": "1536Mi", "cpu": "1500m"},
                                      "limits": {"memory": "1536Mi", "cpu": "1500m"}}
    # no header: no secret in the spec
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == 1000
    assert spec["securityContext"]["seccompProfile"] == {"type": "Unconfined"}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert spec["automountServiceAccountToken"] is False  # the browser must not reach the API as anyone
    assert spec["shareProcessNamespace"] is True  # a PID 1 that reaps orphaned desktop daemons (docker run --init)
    assert spec["restartPolicy"] == "Never"  # a dead server is reported and replaced, not silently restarted
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}} in spec["volumes"]


def test_the_control_planes_fences_are_passed_to_the_session_server():
    pod = objects(extra_args=("--launch-allow", "xterm", "--allow-evaluate"))["Pod"]
    assert pod["spec"]["containers"][0]["args"][-3:] == ["--launch-allow", "xterm", "--allow-evaluate"]


def test_only_the_control_plane_may_reach_the_session():
    policy = objects(control_plane_labels={"app": "gd-cp"}, port=8123)["NetworkPolicy"]["spec"]
    assert policy["podSelector"] == {"matchLabels": objects()["Pod"]["metadata"]["labels"]}
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["ingress"] == [{"from": [{"podSelector": {"matchLabels": {"app": "gd-cp"}}}],
                                  "ports": [{"protocol": "TCP", "port": 8123}]}]


def test_egress_without_lists_is_dns_and_the_public_web_ports():
    dns, web = egress_rules((), ())
    assert dns == {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
    assert web["to"][0] == {"ipBlock": {"cidr": "0.0.0.0/0", "except": list(PRIVATE_V4)}}
    assert "169.254.0.0/16" in web["to"][0]["ipBlock"]["except"]  # the cloud metadata endpoint
    assert web["to"][1]["ipBlock"]["cidr"] == "::/0"
    assert web["ports"] == [{"protocol": "TCP", "port": 80}, {"protocol": "TCP", "port": 443}]
    assert "ports" not in egress_rules((), (), web_ports=())[1]  # any port, when so configured


def test_egress_of_an_allow_list_of_addresses_is_exactly_those():
    assert egress_rules(("93.184.216.34", "10.1.2.3:8080"), ()) == [
        {"to": [{"ipBlock": {"cidr": "93.184.216.34/32"}}]},
        {"to": [{"ipBlock": {"cidr": "10.1.2.3/32"}}], "ports": [{"protocol": "TCP", "port": 8080}]},
    ]


def test_egress_of_names_keeps_dns_narrows_ports_and_cuts_denied_addresses():
    dns, web, literal = egress_rules(("*.example.com:443", "example.com:8443", "192.168.1.9:443"),
                                     ("8.8.8.8", "10.9.9.9", "1.1.1.1:53"))
    assert web["ports"] == [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 8443}]
    cut = web["to"][0]["ipBlock"]["except"]
    assert "8.8.8.8/32" in cut  # a denied public address, every port
    assert "10.9.9.9/32" not in cut  # already inside a private range that is cut
    assert "1.1.1.1/32" not in cut  # denied on one port only: not expressible, left to the proxy
    assert literal == {"to": [{"ipBlock": {"cidr": "192.168.1.9/32"}}], "ports": [{"protocol": "TCP", "port": 443}]}
    # A pattern without a port anywhere in the allow list: the configured web ports.
    assert egress_rules(("example.com", "a.test:8443"), ())[1]["ports"] == [
        {"protocol": "TCP", "port": 80}, {"protocol": "TCP", "port": 443}]


def test_seccomp_settings():
    assert seccomp_profile("Unconfined") == {"type": "Unconfined"}
    assert seccomp_profile("RuntimeDefault") == {"type": "RuntimeDefault"}
    assert seccomp_profile("localhost/profiles/chromium.json") == {"type": "Localhost",
                                                                   "localhostProfile": "profiles/chromium.json"}
    for bad in ("unconfined", "localhost/", "Localhost"):
        with pytest.raises(InvalidRequest, match="GLASSDESK_K8S_SECCOMP"):
            seccomp_profile(bad)


def _pod(phase="Pending", conditions=(), containers=(), ip=None, deleting=False) -> dict:
    status = {"phase": phase, "conditions": list(conditions), "containerStatuses": list(containers)}
    if ip:
        status["podIP"] = ip
    meta = {"name": "p", **({"deletionTimestamp": "2026-11-23T12:00:00Z"} if deleting else {})}
    return {"metadata": meta, "status": status}


def _waiting(reason, message=""):
    return {"name": "session", "state": {"waiting": {"reason": reason, "message": message}}}


READY = {"type": "Ready", "status": "True"}


@pytest.mark.parametrize("pod, state, ready, reason", [
    (_pod(), BackendState.starting, False, "pending"),
    (_pod(containers=[_waiting("ContainerCreating")]), BackendState.starting, False, "ContainerCreating"),
    (_pod(conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                       "message": "0/3 nodes are available"}]), BackendState.starting, False,
     "Unschedulable: 0/3 nodes are available"),
    (_pod("Running", ip="10.1.2.3"), BackendState.running, False, "not ready yet"),
    (_pod("Running", [READY], ip="10.1.2.3"), BackendState.running, True, ""),
    (_pod(containers=[_waiting("ImagePullBackOff", "pull access denied")]), BackendState.dead, False,
     "ImagePullBackOff: pull access denied"),
    (_pod("Running", containers=[_waiting("CrashLoopBackOff")]), BackendState.dead, False, "CrashLoopBackOff"),
    (_pod("Failed",
          containers=[{"name": "session", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]),
     BackendState.dead, False, "the pod failed (OOMKilled, exit code 137)"),
    (_pod("Running", [READY], ip="10.1.2.3", deleting=True), BackendState.dead, False, "the pod is being deleted"),
])
def test_pod_verdict(pod, state, ready, reason):
    verdict = pod_verdict(pod)
    assert (verdict.state, verdict.ready, verdict.reason) == (state, ready, reason)


def test_leases():
    def stamped(value):
        return {"metadata": {"annotations": {EXPIRES_AT: value}}}
    assert expired(stamped("2026-11-23T11:59:59Z"), NOW)
    assert not expired(stamped("2026-11-23T12:00:01Z"), NOW)
    assert not expired(stamped("soon"), NOW)  # not ours to judge
    assert not expired({"metadata": {}}, NOW)
    assert expired(objects()["Pod"], NOW + timedelta(minutes=16))


def test_settings_from_the_environment():
    settings = KubeSettings.from_env({
        "GLASSDESK_K8S_NAMESPACE": "agents", "GLASSDESK_IMAGE": "registry.example/glassdesk:1.2",
        "GLASSDESK_OWNER_NAME": "glassdesk", "GLASSDESK_OWNER_UID": OWNER.uid,
        "GLASSDESK_K8S_CONTROL_PLANE_LABELS": "app=gd, tier=control",
        "GLASSDESK_K8S_SECCOMP": "localhost/chromium.json",
        "GLASSDESK_K8S_EGRESS_PORTS": "any", "GLASSDESK_K8S_LEASE_S": "600", "GLASSDESK_K8S_PORT": "8001"})
    assert settings.namespace == "agents" and settings.image == "registry.example/glassdesk:1.2"
    assert settings.owner == "glassdesk" and settings.owner_ref == OWNER
    assert settings.control_plane_labels == {"app": "gd", "tier": "control"}
    assert (settings.egress_ports, settings.lease_s, settings.port) == ((), 600.0, 8001)
    # An owner name without its uid: the backend looks the uid up; until then no reference is rendered.
    unresolved = KubeSettings.from_env({"GLASSDESK_OWNER_NAME": "glassdesk"})
    assert unresolved.owner_ref == OwnerRef("Deployment", "glassdesk", "")
    pod = render("glassdesk-s1-abc123", SPEC, unresolved, NOW)[2]
    assert "ownerReferences" not in pod["metadata"]
    assert KubeSettings.from_env({"GLASSDESK_OWNER_NAME": "cp-0", "GLASSDESK_OWNER_KIND": "Pod",
                                  "GLASSDESK_OWNER_API_VERSION": "v1", "GLASSDESK_OWNER_UID": "u-1"}).owner_ref == \
        OwnerRef("Pod", "cp-0", "u-1", "v1")
    for env, name in (({"GLASSDESK_K8S_PORT": "eighty"}, "GLASSDESK_K8S_PORT"),
                      ({"GLASSDESK_K8S_CONTROL_PLANE_LABELS": "app"}, "GLASSDESK_K8S_CONTROL_PLANE_LABELS"),
                      ({"GLASSDESK_K8S_EGRESS_PORTS": "80;443"}, "GLASSDESK_K8S_EGRESS_PORTS"),
                      ({"GLASSDESK_K8S_SECCOMP": "none"}, "GLASSDESK_K8S_SECCOMP"),
                      ({"GLASSDESK_INSTANCE": "team a/1"}, "GLASSDESK_INSTANCE")):
        with pytest.raises(InvalidRequest, match=name):
            KubeSettings.from_env(env)
