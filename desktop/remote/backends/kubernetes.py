"""Sessions as Kubernetes pods: one pod of the glassdesk image per session, running
`glassdesk up --single-session`, driven over HTTP by the control plane (desktop.remote.desktop).

Each session is three objects, all named after the session's handle and carrying
desktop.remote.backends.base's labels (``render`` builds them; a pure function, tested offline):

- a **Secret** holding the session server's token. The pod reads it through ``secretKeyRef``, so
  the token is never in the pod spec (which anyone who may `get pods` reads) nor in a log.
- a **NetworkPolicy**: ingress only from the control plane's pods (podSelector on their labels) on
  the server's port; egress as far as the session's network policy can be said in CIDRs and ports
  (see ``egress_rules``). The in-pod policy proxy (desktop.network.proxy) still enforces the host patterns.
- the **Pod**: non-root (uid 1000), no service-account token (the browser must not talk to the
  API), ``restartPolicy: Never`` (a dead session server is reported and replaced by the control
  plane, not silently restarted with a fresh desktop), requests = limits from the SessionSpec,
  a readiness probe on /healthz, a memory-backed /dev/shm, and an expiry annotation (a lease the
  control plane renews while it supervises the session, so any control plane starting later can
  remove the pods of one that died).

The control plane reaches a session at its pod IP: only it talks to the session, it learns the IP
from the watch, and a replaced session gets a new pod anyway, so a Service per session would add an
object and a proxy rule per session for nothing.

The kubernetes client is imported when a backend is built, never at import, so the local backend
needs none of it. Configuration is by environment (``KubeSettings.from_env``; docs/scaling.md).
"""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, cast

from desktop.errors import InvalidRequest, SessionUnavailable
from desktop.network.policy import NetworkPolicy, PatternError
from desktop.remote.backends.base import (
    LABEL_NAME,
    LABEL_OWNER,
    LABEL_ROLE,
    BackendState,
    Endpoint,
    SessionSpec,
    labels,
)

if TYPE_CHECKING:  # the client is imported when a backend is built (see the end of the docstring)
    from kubernetes.client import V1NetworkPolicy, V1Pod, V1PodList, V1Secret
    from kubernetes.watch import Watch

log = logging.getLogger("glassdesk.backends.kubernetes")

DEFAULT_IMAGE = "glassdesk:latest"
SESSION_PORT = 8000  # the session server's port in its pod (BACKEND-CONTRACT.md)
TOKEN_KEY = "GLASSDESK_TOKEN"
EXPIRES_AT = "glassdesk.dev/expires-at"  # RFC 3339 UTC: past it, no control plane supervises the pod
DEFAULT_LEASE_S = 900.0
# Chromium's shared memory; the Docker backend gives the same (memory-backed, so it counts against the limit)
SHM_LIMIT = "1Gi"
STOP_GRACE_S = 10  # SIGTERM first: the session server closes its desktop
DEFAULT_CONTROL_PLANE_LABELS = {LABEL_NAME: "glassdesk", "app.kubernetes.io/component": "control-plane"}

LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")  # what Kubernetes takes as a label value

# Waiting reasons after which a pod will not become ready by waiting: said at once, not after the timeout.
# (ErrImagePull is not among them: the kubelet retries, and a registry's hiccup should not fail a start.)
FATAL_WAITING = frozenset({"ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
                           "CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError",
                           "RunContainerError"})

# Where a session's browser may never go, whatever its allow list says by name: the cluster's own
# pods and services (private ranges on every common CNI), carrier-grade NAT (some pod CIDRs), link-local
# (the cloud metadata endpoint, 169.254.169.254). An allowed IP literal is let through explicitly.
PRIVATE_V4 = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8")
PRIVATE_V6 = ("fc00::/7", "fe80::/10", "::1/128")


# ----------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class OwnerRef:
    """The object whose deletion takes every session pod with it (the cluster's garbage collector)."""

    kind: str
    name: str
    uid: str
    api_version: str = "apps/v1"

    def manifest(self) -> dict:
        # blockOwnerDeletion stays off: setting it needs `update` on the owner's finalizers, which the
        # control plane's Role does not (and need not) grant.
        return {"apiVersion": self.api_version, "kind": self.kind, "name": self.name, "uid": self.uid}


@dataclass(frozen=True)
class KubeSettings:
    namespace: str = "default"
    image: str = DEFAULT_IMAGE
    image_pull_policy: str = "IfNotPresent"
    owner: str = "glassdesk"  # the control plane's instance id: the glassdesk.dev/owner label
    owner_ref: OwnerRef | None = None
    control_plane_labels: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_CONTROL_PLANE_LABELS))
    # Chromium's sandbox: see ``seccomp_profile``. "Unconfined", "RuntimeDefault" or "localhost/<path>".
    seccomp: str = "Unconfined"
    port: int = SESSION_PORT
    egress_ports: tuple[int, ...] = (80, 443)  # () = any port
    lease_s: float = DEFAULT_LEASE_S
    extra_args: tuple[str, ...] = ()  # the control plane's fences, passed on (--launch-allow, ...)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides) -> KubeSettings:
        """The settings from GLASSDESK_* variables (docs/scaling.md lists them); a bad value is an
        InvalidRequest naming the variable."""
        env = os.environ if env is None else env
        values: dict = {}
        if env.get("GLASSDESK_K8S_NAMESPACE"):
            values["namespace"] = env["GLASSDESK_K8S_NAMESPACE"]
        else:
            try:  # in a pod, its own namespace
                with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
                    values["namespace"] = f.read().strip() or "default"
            except OSError:
                pass
        for key, name in (("image", "GLASSDESK_IMAGE"), ("image_pull_policy", "GLASSDESK_K8S_IMAGE_PULL_POLICY"),
                          ("seccomp", "GLASSDESK_K8S_SECCOMP")):
            if env.get(name):
                values[key] = env[name]
        owner_name = env.get("GLASSDESK_OWNER_NAME", "")
        # The owner label: a control plane that starts removes what one of the same owner left. In a
        # cluster, the Deployment's name (stable across its pod being replaced; run one replica).
        values["owner"] = env.get("GLASSDESK_INSTANCE") or owner_name or socket.gethostname()
        if owner_name:  # without GLASSDESK_OWNER_UID the backend looks the owner's uid up
            values["owner_ref"] = OwnerRef(env.get("GLASSDESK_OWNER_KIND") or "Deployment", owner_name,
                                           env.get("GLASSDESK_OWNER_UID", ""),
                                           env.get("GLASSDESK_OWNER_API_VERSION") or "apps/v1")
        if env.get("GLASSDESK_K8S_CONTROL_PLANE_LABELS"):
            values["control_plane_labels"] = parse_labels(env["GLASSDESK_K8S_CONTROL_PLANE_LABELS"],
                                                          "GLASSDESK_K8S_CONTROL_PLANE_LABELS")
        for key, name in (("port", "GLASSDESK_K8S_PORT"), ("lease_s", "GLASSDESK_K8S_LEASE_S")):
            if env.get(name):
                try:
                    values[key] = type(getattr(cls, key))(env[name])
                except ValueError:
                    raise InvalidRequest(f"{name}: {env[name]!r} is not a number") from None
        if "GLASSDESK_K8S_EGRESS_PORTS" in env:
            text = env["GLASSDESK_K8S_EGRESS_PORTS"].strip()
            try:
                values["egress_ports"] = () if text in ("", "any") else tuple(int(p) for p in text.split(","))
            except ValueError:
                raise InvalidRequest(f"GLASSDESK_K8S_EGRESS_PORTS: {text!r}: write ports like 80,443, or any") from None
        settings = replace(cls(**values), **overrides)
        seccomp_profile(settings.seccomp)  # refused now, not at the first session
        if not LABEL_VALUE.match(settings.owner):
            raise InvalidRequest(f"GLASSDESK_INSTANCE: {settings.owner!r} is the owner label of the session pods: use "
                                 "up to 63 letters, digits, '-', '_' or '.', "
                                 "starting and ending with a letter or digit")
        return settings


def parse_labels(text: str, where: str) -> dict[str, str]:
    """``k=v,k2=v2`` -> a dict; InvalidRequest naming ``where`` when malformed."""
    result = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidRequest(f"{where}: {item!r}: write labels as key=value,key=value")
        result[key.strip()] = value.strip()
    if not result:
        raise InvalidRequest(f"{where}: no labels given")
    return result


def seccomp_profile(setting: str) -> dict:
    """The pod's seccompProfile.

    Chromium's sandbox (kept on: no ``--no-sandbox``) puts each renderer in new user, PID and
    network namespaces and under its own seccomp-bpf filter. Container runtimes' default profile
    (``RuntimeDefault``, the same as Docker's default) refuses ``clone``/``unshare`` with namespace
    flags to a process without CAP_SYS_ADMIN, so under it Chromium cannot build its sandbox and the
    browser does not start. Docker on these machines needed ``seccomp=unconfined`` for this reason,
    and ``Unconfined`` is the default here for the same one.

    The trade-off: ``Unconfined`` drops the container-wide syscall filter (a smaller wall between a
    compromised process and the node's kernel), while the renderers, where web content runs, keep
    Chromium's own stricter filter and namespaces; the alternative, ``--no-sandbox`` with the
    runtime's filter, would leave web content with neither. Better than both: a ``Localhost``
    profile, the runtime's default plus the namespace syscalls Chromium needs, installed on each
    node under the kubelet's seccomp directory and named here as ``localhost/<path>``.
    ``RuntimeDefault`` is accepted for nodes whose runtime profile allows user namespaces.
    The node must allow unprivileged user namespaces too (``user.max_user_namespaces`` > 0, and on
    Ubuntu 24.04 AppArmor's ``apparmor_restrict_unprivileged_userns`` off or a profile permitting it).
    """
    if setting in ("Unconfined", "RuntimeDefault"):
        return {"type": setting}
    if setting.startswith("localhost/") and len(setting) > len("localhost/"):
        return {"type": "Localhost", "localhostProfile": setting[len("localhost/"):]}
    raise InvalidRequest(f"GLASSDESK_K8S_SECCOMP: {setting!r}: use Unconfined, RuntimeDefault or "
                         "localhost/<profile path relative to the kubelet's seccomp directory>")


# ----------------------------------------------------------------------------- rendering (pure)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def egress_rules(allow: tuple[str, ...], deny: tuple[str, ...], web_ports: tuple[int, ...] = (80, 443)) -> list[dict]:
    """The session's egress, as far as a NetworkPolicy can say it.

    A NetworkPolicy speaks of CIDRs and ports, never of names: ``*.example.com`` has no CIDR, and a
    name's addresses change. So this is the outer fence, and the in-pod policy proxy, through which
    every request of the browser goes, still judges each request by its host patterns.
    - An allow list of IP literals only: exactly those addresses (and their ports, when given).
    - Otherwise: DNS (the proxy resolves names itself), and the public internet (never the cluster's
      private ranges or the metadata endpoint) on the ports the allow list names when every pattern
      names one, else on ``web_ports`` (empty: any port); allowed IP literals also by their own rule,
      private or not; denied IP literals without a port cut out of the public range.
    """
    policy = NetworkPolicy.parse(allow, deny)
    def ports(numbers) -> list[dict]:
        return [{"protocol": "TCP", "port": p} for p in sorted(set(numbers))]

    def by_ip(pattern) -> dict:
        rule: dict = {"to": [{"ipBlock": {"cidr": str(ipaddress.ip_network(pattern.ip))}}]}
        if pattern.port:
            rule["ports"] = ports([pattern.port])
        return rule

    allowed_ips = [p for p in policy.allow if p.ip is not None]
    if policy.allow and len(allowed_ips) == len(policy.allow):
        return [by_ip(p) for p in allowed_ips]
    dns = {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
    cut = {4: list(PRIVATE_V4), 6: list(PRIVATE_V6)}
    for pattern in policy.deny:
        if pattern.ip is not None and pattern.port is None:  # a port-wise deny has no CIDR form
            network = ipaddress.ip_network(pattern.ip)
            if not is_private(network):
                cut[network.version].append(str(network))
    web: dict = {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": cut[4]}},
                        {"ipBlock": {"cidr": "::/0", "except": cut[6]}}]}
    named_ports = [p.port for p in policy.allow]
    if policy.allow and all(named_ports):
        web["ports"] = ports(named_ports)
    elif web_ports:
        web["ports"] = ports(web_ports)
    return [dns, web, *(by_ip(p) for p in allowed_ips)]


def is_private(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    """Is the network inside one of the ranges a session never reaches anyway (PRIVATE_V4, PRIVATE_V6)?"""
    if isinstance(network, ipaddress.IPv4Network):  # subnet_of compares networks of one version only
        return any(network.subnet_of(ipaddress.IPv4Network(p)) for p in PRIVATE_V4)
    return any(network.subnet_of(ipaddress.IPv6Network(p)) for p in PRIVATE_V6)


def render(handle: str, spec: SessionSpec, settings: KubeSettings, now: datetime) -> list[dict]:
    """The objects of one session, in creation order: Secret, NetworkPolicy, Pod. Pure."""
    meta_labels = labels(spec.session_id, settings.owner)
    expires = {EXPIRES_AT: rfc3339(now + timedelta(seconds=settings.lease_s))}

    def metadata() -> dict:
        meta: dict = {"name": handle, "namespace": settings.namespace, "labels": dict(meta_labels),
                      "annotations": dict(expires)}
        if settings.owner_ref is not None and settings.owner_ref.uid:
            meta["ownerReferences"] = [settings.owner_ref.manifest()]
        return meta

    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": metadata(), "type": "Opaque", "immutable": True,
              "data": {TOKEN_KEY: base64.b64encode(spec.token.encode()).decode()}}
    network_policy = {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata(),
        "spec": {
            "podSelector": {"matchLabels": dict(meta_labels)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": dict(settings.control_plane_labels)}}],
                         "ports": [{"protocol": "TCP", "port": settings.port}]}],
            "egress": egress_rules(spec.allow, spec.deny, settings.egress_ports),
        },
    }
    quantities = {"memory": f"{spec.memory_mb}Mi", "cpu": f"{max(1, round(spec.cpus * 1000))}m"}
    container = {
        "name": "session",
        "image": settings.image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": ["glassdesk"],
        # Bound to the pod's IP: the server's Host check then admits the address the control plane
        # dials, and binding beyond loopback is allowed because the token is set.
        "args": ["up", "--single-session", "--host", "$(GLASSDESK_POD_IP)", "--port", str(settings.port),
                 *settings.extra_args],
        "env": [
            {"name": "GLASSDESK_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": TOKEN_KEY, "valueFrom": {"secretKeyRef": {"name": handle, "key": TOKEN_KEY}}},
            {"name": "GLASSDESK_PORT", "value": str(settings.port)},
        ],
        "ports": [{"name": "http", "containerPort": settings.port, "protocol": "TCP"}],
        "resources": {"requests": dict(quantities), "limits": dict(quantities)},  # Guaranteed QoS: evicted last
        # /healthz is served without the token, so the probe carries no secret.
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 2,
                           "timeoutSeconds": 2, "failureThreshold": 3},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": metadata(),
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,  # no environment naming the namespace's services
            # The pod's pause process as PID 1 reaps the desktop daemons that outlive their parent, which
            # the session server (PID 1 of its container otherwise) would leave as zombies: Docker's --init.
            "shareProcessNamespace": True,
            "terminationGracePeriodSeconds": STOP_GRACE_S + 5,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
                                "seccompProfile": seccomp_profile(settings.seccomp)},
            "containers": [container],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_LIMIT}}],
        },
    }
    return [secret, network_policy, pod]


@dataclass(frozen=True)
class PodVerdict:
    state: BackendState
    ready: bool = False
    reason: str = ""  # why it is dead, or why it is still waiting
    ip: str | None = None


def pod_verdict(pod: dict) -> PodVerdict:
    """What a pod (as the API serialises it) says about its session server. Pure."""
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    containers = status.get("containerStatuses") or []
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return PodVerdict(BackendState.dead, reason="the pod is being deleted")
    if phase in ("Failed", "Succeeded"):
        terminated: dict = next((c["state"]["terminated"] for c in containers
                                 if (c.get("state") or {}).get("terminated")), {})
        detail = ", ".join(str(x) for x in (terminated.get("reason"), terminated.get("exitCode") is not None
                                            and f"exit code {terminated['exitCode']}", terminated.get("message"),
                                            status.get("reason"), status.get("message")) if x)
        return PodVerdict(BackendState.dead, reason=f"the pod {phase.lower()}" + (f" ({detail})" if detail else ""))
    for container in containers:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in FATAL_WAITING:
            message = waiting.get("message")
            return PodVerdict(BackendState.dead, reason=waiting["reason"] + (f": {message}" if message else ""))
        if (container.get("state") or {}).get("terminated"):
            return PodVerdict(BackendState.dead, reason="its container exited")
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    ip = status.get("podIP")
    if phase == "Running":
        ready = (conditions.get("Ready") or {}).get("status") == "True" and bool(ip)
        return PodVerdict(BackendState.running, ready=ready, reason="" if ready else "not ready yet", ip=ip)
    scheduled = conditions.get("PodScheduled") or {}
    if scheduled.get("status") == "False":  # waiting for a node (the autoscaler may add one): not fatal
        return PodVerdict(BackendState.starting, reason=f"{scheduled.get('reason', 'unscheduled')}: "
                                                          f"{scheduled.get('message', '')}".rstrip(": "))
    waiting = next(((c.get("state") or {}).get("waiting") for c in containers
                    if (c.get("state") or {}).get("waiting")), None)
    return PodVerdict(BackendState.starting, reason=(waiting or {}).get("reason") or phase.lower())


def expired(obj: dict, now: datetime) -> bool:
    """Has this object's lease passed? (No annotation, or a bad one: not ours to judge: False.)"""
    stamp = ((obj.get("metadata") or {}).get("annotations") or {}).get(EXPIRES_AT)
    if not stamp:
        return False
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) < now
    except ValueError:
        return False


# ----------------------------------------------------------------------------- the backend


def list_version(listed: V1PodList) -> str | None:
    """The resourceVersion a list was read at, to watch from. The API always gives one; None would
    watch from now, every object first as ADDED."""
    return listed.metadata.resource_version if listed.metadata is not None else None


class PodCache:
    """This control plane's session pods as one watch shows them, so that supervising N sessions
    (a look at each every second) costs one watch stream, not N requests a second. A pod the cache
    has not seen (not yet, or the watch is down) is asked for directly."""

    WATCH_S = 60  # each watch request's length; the next one goes on from the last version seen

    def __init__(self, backend: KubernetesBackend, selector: str):
        self.backend, self.selector = backend, selector
        self.pods: dict[str, dict] = {}
        # Pods a watch of wait_ready's saw deleted before this cache's own watch did: never answered
        # from the cache again (a handle is never reused), so state() asks the API and hears 404.
        self.deleted: set[str] = set()
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._watch: Watch | None = None
        self._failing = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="glassdesk-k8s-pods", daemon=True)
        self._thread.start()

    def get(self, name: str) -> dict | None:
        if not self.synced.is_set():
            return None
        with self._lock:
            return None if name in self.deleted else self.pods.get(name)

    def seen(self, pod: dict) -> None:
        """A picture of a pod read elsewhere (wait_ready's own watch): kept when it is newer than
        the cache's, so that state() never says less than wait_ready has just answered."""
        name, version = pod["metadata"]["name"], pod["metadata"].get("resourceVersion") or ""
        with self._lock:
            known = (self.pods.get(name) or {}).get("metadata", {}).get("resourceVersion") or ""
            if not known or not (version.isdigit() and known.isdigit()) or int(version) > int(known):
                self.pods[name] = pod

    def seen_deleted(self, name: str) -> None:
        with self._lock:
            self.deleted.add(name)
            self.pods.pop(name, None)

    def _run(self) -> None:
        backend = self.backend
        version = None
        while not self._stop.is_set():
            try:
                if version is None:  # (re)start from a full list
                    listed = backend.core.list_namespaced_pod(backend.namespace, label_selector=self.selector)
                    with self._lock:
                        self.pods = {p["metadata"]["name"]: p for p in map(backend._as_dict, listed.items)}
                        self.deleted &= self.pods.keys()  # those not listed are gone for good
                    version = list_version(listed)
                    self.synced.set()
                    self._failing = False
                self._watch = watch = backend._watch()
                for event in watch.stream(backend.core.list_namespaced_pod, backend.namespace,
                                          label_selector=self.selector, resource_version=version,
                                          timeout_seconds=self.WATCH_S, _request_timeout=self.WATCH_S + 10):
                    pod = backend._as_dict(event["object"])
                    with self._lock:
                        if event["type"] == "DELETED":
                            self.pods.pop(pod["metadata"]["name"], None)
                            self.deleted.discard(pod["metadata"]["name"])
                        elif event["type"] in ("ADDED", "MODIFIED") and pod["metadata"]["name"] not in self.deleted:
                            self.pods[pod["metadata"]["name"]] = pod
                    version = watch.resource_version or version
                    if self._stop.is_set():
                        break
            except Exception as exc:  # 410 Gone, the API away, a closed client: list again shortly
                if self._stop.is_set():
                    return
                # Said once per spell of failures (a 410 is routine); state() asks the API meanwhile.
                (log.debug if self._failing or getattr(exc, "status", None) == 410 else log.warning)(
                    "the watch of the session pods stopped (%s); listing them again", exc)
                self._failing = True
                self.synced.clear()
                version = None
                self._stop.wait(1.0)

    def close(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()


class KubernetesBackend:
    name = "kubernetes"

    def __init__(self, *, settings: KubeSettings | None = None, api_client=None, extra_args: tuple[str, ...] = (),
                 protected_ports: set[int] | None = None, clock=lambda: datetime.now(UTC)):
        # Imported here: the local backend, and a control plane on another backend, need none of it.
        import kubernetes.client
        import kubernetes.config
        import kubernetes.watch

        settings = settings or KubeSettings.from_env()
        if extra_args and not settings.extra_args:
            settings = replace(settings, extra_args=tuple(extra_args))
        self.settings = settings
        # protected_ports (the control plane's own ports on its machine) mean nothing across pods:
        # the NetworkPolicy keeps a session's browser off every private address, the control plane's included.
        del protected_ports
        if api_client is None:
            try:
                if os.environ.get("KUBERNETES_SERVICE_HOST"):  # in a pod: its service account
                    kubernetes.config.load_incluster_config()
                else:  # outside: the kubeconfig's context (the pod IPs must then be routable from here)
                    kubernetes.config.load_kube_config()
            except (kubernetes.config.ConfigException, OSError) as exc:
                raise InvalidRequest(f"backend kubernetes: no cluster to talk to ({exc}); run the control plane "
                                     "in the cluster or point KUBECONFIG at one") from None
            api_client = kubernetes.client.ApiClient()
        self.api_client = api_client
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.net = kubernetes.client.NetworkingV1Api(api_client)
        self._watch = kubernetes.watch.Watch
        self._api_exception = kubernetes.client.ApiException
        self._clock = clock
        self._renewed: dict[str, float] = {}
        self._tokens: dict[str, str] = {}
        self._lock = threading.Lock()
        if settings.owner_ref is not None and not settings.owner_ref.uid:
            self.settings = replace(settings, owner_ref=self._look_up_owner(settings.owner_ref, kubernetes.client))
        if self.settings.owner_ref is None:
            log.info("no owner for the session objects (GLASSDESK_OWNER_NAME): they get no ownerReference, so "
                     "only this control plane (or the next one's sweep of expired leases) removes them")
        self.pods = PodCache(self, f"{LABEL_ROLE}=session,{LABEL_OWNER}={self.settings.owner}")

    def _look_up_owner(self, ref: OwnerRef, client) -> OwnerRef | None:
        """The owner's uid, read from the API (a Deployment's uid is not in the downward API; a Pod's
        is: GLASSDESK_OWNER_UID from metadata.uid needs no look-up). None, said, when it cannot be read."""
        readers = {"Deployment": client.AppsV1Api(self.api_client).read_namespaced_deployment,
                   "Pod": self.core.read_namespaced_pod}
        if ref.kind not in readers:
            raise InvalidRequest(f"GLASSDESK_OWNER_KIND: {ref.kind!r}: "
                                 "give GLASSDESK_OWNER_UID, or use Deployment or Pod")
        try:
            return replace(ref, uid=readers[ref.kind](ref.name, self.namespace).metadata.uid)
        except self._api_exception as exc:
            log.warning("the owner %s %s could not be read (%s): session objects get no ownerReference",
                        ref.kind, ref.name, self._status_message(exc))
            return None

    @property
    def namespace(self) -> str:
        return self.settings.namespace

    # -- helpers

    def _status_message(self, exc) -> str:
        """The API's own sentence for a refusal (a Status object never echoes a Secret's data)."""
        try:
            return json.loads(exc.body).get("message") or f"{exc.status} {exc.reason}"
        except (TypeError, ValueError, AttributeError):
            return f"{exc.status} {exc.reason}"

    def _ignore_missing(self, call, *args) -> None:
        try:
            call(*args)
        except self._api_exception as exc:
            if exc.status != 404:
                raise

    def _as_dict(self, obj) -> dict:
        return obj if isinstance(obj, dict) else self.api_client.sanitize_for_serialization(obj)

    # -- the protocol

    def start(self, spec: SessionSpec) -> str:
        if not LABEL_VALUE.match(spec.session_id):
            raise InvalidRequest(f"session id {spec.session_id!r}: on the kubernetes backend an id is a label value, "
                                 "so it must end with a letter or digit")
        # An object's name is a DNS name: no '_', and no '.' (a pooled server's id has one) in a pod's hostname.
        handle = f"glassdesk-{re.sub(r'[_.]', '-', spec.session_id)}-{secrets.token_hex(3)}"
        try:
            secret, network_policy, pod = render(handle, spec, self.settings, self._clock())
        except PatternError as exc:  # the manager parsed the lists already; kept as a typed error all the same
            raise InvalidRequest(f"network policy: {exc}") from None
        try:  # the Secret and the fence exist before the pod can run
            # The manifests go as dicts: each body is typed as the API's model, and the API's call
            # (pydantic's validate_call) builds that model from a dict in the API's own field names.
            self.core.create_namespaced_secret(self.namespace, cast("V1Secret", secret))
            self.net.create_namespaced_network_policy(self.namespace, cast("V1NetworkPolicy", network_policy))
            self.core.create_namespaced_pod(self.namespace, cast("V1Pod", pod))
        except self._api_exception as exc:
            self.stop(handle)
            raise SessionUnavailable(f"Kubernetes refused the session's objects in namespace {self.namespace}: "
                                     f"{self._status_message(exc)}") from None
        with self._lock:
            self._renewed[handle] = time.monotonic()
            self._tokens[handle] = spec.token  # kept here, so reading Secrets back needs no permission
        return handle

    def wait_ready(self, handle: str, timeout_s: float) -> Endpoint:
        """Watch the pod until it is Ready (its readiness probe on /healthz passed), dead, or late."""
        deadline = time.monotonic() + timeout_s
        token = self._token(handle)
        last = "no news of the pod"
        pods, version = self._list_pod(handle)
        while True:
            for pod in pods:
                verdict = pod_verdict(pod)
                if verdict.ready:
                    assert verdict.ip is not None  # pod_verdict says ready only with an IP
                    host = f"[{verdict.ip}]" if ":" in verdict.ip else verdict.ip
                    return Endpoint(f"http://{host}:{self.settings.port}", token)
                if verdict.state is BackendState.dead:
                    self.pods.seen(pod)  # state() says dead from now on, whatever the cache's watch has reached
                    raise SessionUnavailable(f"pod {handle} did not start: {verdict.reason}")
                last = verdict.reason
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SessionUnavailable(f"pod {handle} was not ready within {timeout_s:.0f} s ({last})")
            changed = self._next_change(handle, version, remaining)
            if changed is None:  # the watch ended without news (its timeout, or 410 Gone): list afresh
                pods, version = self._list_pod(handle)
            else:
                pods = changed
                if pods:
                    version = pods[0]["metadata"]["resourceVersion"]

    def _list_pod(self, handle: str) -> tuple[list[dict], str | None]:
        """The pod (a list of it or of nothing) and the resourceVersion to watch from."""
        try:
            listed = self.core.list_namespaced_pod(self.namespace, field_selector=f"metadata.name={handle}")
        except self._api_exception as exc:
            raise SessionUnavailable(f"pod {handle}: {self._status_message(exc)}") from None
        pods = [self._as_dict(p) for p in listed.items]
        if not pods:
            raise SessionUnavailable(f"pod {handle} is gone")
        return pods, list_version(listed)

    def _next_change(self, handle: str, version: str | None, remaining: float) -> list[dict] | None:
        """The pod as the next watch event after ``version`` shows it; None when the watch ended
        without one. A deletion is SessionUnavailable."""
        watch = self._watch()
        stream = watch.stream(self.core.list_namespaced_pod, self.namespace, field_selector=f"metadata.name={handle}",
                              resource_version=version, timeout_seconds=max(1, int(remaining)),
                              _request_timeout=remaining + 5)
        try:
            for event in stream:
                if event["type"] == "DELETED":
                    self.pods.seen_deleted(handle)  # state() says gone from now on, as this answer does
                    raise SessionUnavailable(f"pod {handle} was deleted while it started")
                if event["type"] in ("ADDED", "MODIFIED"):
                    return [self._as_dict(event["object"])]
        except self._api_exception as exc:
            if exc.status != 410:  # 410 Gone: the version is too old to watch from
                raise SessionUnavailable(f"pod {handle}: {self._status_message(exc)}") from None
        finally:
            watch.stop()
            stream.close()  # ends the streaming response now, not when the generator is collected
        return None

    def _token(self, handle: str) -> str:
        with self._lock:
            token = self._tokens.get(handle)
        if token is None:
            raise SessionUnavailable(f"{handle}: no session pod started by this control plane")
        return token

    def state(self, handle: str) -> BackendState:
        pod = self.pods.get(handle)
        if pod is None:  # not (yet) in the watch's picture: ask
            try:
                pod = self._as_dict(self.core.read_namespaced_pod(handle, self.namespace))
            except self._api_exception as exc:
                if exc.status == 404:
                    return BackendState.gone
                raise  # the API is unreachable or refuses: not a verdict on the session (the supervisor logs it)
        verdict = pod_verdict(pod)
        if verdict.state is not BackendState.dead:
            self._renew(handle)
        return verdict.state

    def _renew(self, handle: str) -> None:
        """Push the pod's expiry forward, a third of a lease after the last push: while this control
        plane supervises it, no other one's sweep takes it for an orphan."""
        now = time.monotonic()
        with self._lock:
            if now - self._renewed.get(handle, 0.0) < self.settings.lease_s / 3:
                return
            self._renewed[handle] = now
        expires = rfc3339(self._clock() + timedelta(seconds=self.settings.lease_s))
        try:
            self.core.patch_namespaced_pod(handle, self.namespace, {"metadata": {"annotations": {EXPIRES_AT: expires}}})
        except self._api_exception as exc:
            log.warning("could not renew the lease of %s: %s", handle, self._status_message(exc))

    def apply_network_policy(self, handle: str, spec: SessionSpec) -> None:
        """The session's NetworkPolicy's egress, rendered from ``spec`` at start, re-rendered from
        ``spec`` and patched in place (a warm pool's pod claimed with a policy of its own). The CNI
        enforces a changed NetworkPolicy on the pods it selects as they run, so the pod need not
        restart; its podSelector (the pod's labels) stays as it is. The in-pod proxy is set too,
        by the control plane."""
        patch = {"spec": {"egress": egress_rules(spec.allow, spec.deny, self.settings.egress_ports)}}
        try:
            self.net.patch_namespaced_network_policy(handle, self.namespace, patch)
        except PatternError as exc:
            raise InvalidRequest(f"network policy: {exc}") from None
        except self._api_exception as exc:
            raise SessionUnavailable(f"Kubernetes refused the new egress of {handle}'s NetworkPolicy: "
                                     f"{self._status_message(exc)}") from None

    def stop(self, handle: str) -> None:
        with self._lock:
            self._renewed.pop(handle, None)
            self._tokens.pop(handle, None)
        self._ignore_missing(self.core.delete_namespaced_pod, handle, self.namespace)
        self._ignore_missing(self.net.delete_namespaced_network_policy, handle, self.namespace)
        self._ignore_missing(self.core.delete_namespaced_secret, handle, self.namespace)

    def owned(self) -> list[str]:
        """This control plane's session objects (its owner label), and any glassdesk session objects
        whose lease has passed, whoever started them: no living control plane supervises those."""
        selector = f"{LABEL_NAME}=glassdesk,{LABEL_ROLE}=session"
        now = self._clock()
        handles: set[str] = set()
        pods: dict[str, dict] = {}
        for item in self.core.list_namespaced_pod(self.namespace, label_selector=selector).items:
            pod = self._as_dict(item)
            pods[pod["metadata"]["name"]] = pod
        others = [self._as_dict(o)
                  for lister in (self.core.list_namespaced_secret, self.net.list_namespaced_network_policy)
                  for o in lister(self.namespace, label_selector=selector).items]
        for obj in [*pods.values(), *others]:
            name = obj["metadata"]["name"]
            mine = (obj["metadata"].get("labels") or {}).get(LABEL_OWNER) == self.settings.owner
            # A Secret or NetworkPolicy judged by its pod's lease when the pod exists (only the pod's is renewed).
            if mine or expired(pods.get(name, obj), now):
                handles.add(name)
        return sorted(handles)

    def close(self) -> None:
        self.pods.close()
        self.api_client.close()
