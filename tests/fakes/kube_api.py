"""A fake Kubernetes API server on 127.0.0.1 for protocol tests of the real `kubernetes` client.

It speaks the part of the REST protocol the Kubernetes session backend uses, as the API server
does: create (POST), read, list (labelSelector, fieldSelector=metadata.name=...), watch (watch=true:
a chunked stream of JSON lines ``{"type", "object"}`` from a resourceVersion on, ended after
timeoutSeconds), merge-patch and delete, for pods, services and secrets (``/api/v1``) and
networkpolicies (``/apis/networking.k8s.io/v1``) and deployments (``/apis/apps/v1``, to be read),
with Status objects for errors (404 NotFound,
409 AlreadyExists). Every request is recorded.

What a kubelet would do to a created pod is a ``Kubelet`` callback run on its own thread:
``ready_kubelet`` flips the pod Running and Ready at a given IP, ``failing_kubelet`` makes it fail
in one of the ways a real one does (ImagePullBackOff, CrashLoopBackOff, Failed), ``Unschedulable``
keeps it pending. A test can also run something real for the pod and report it with ``set_status``.
No cluster is involved: nothing here opens a connection anywhere.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

# The Kubernetes version the rendered objects are validated against (kubernetes-validate ships
# schemas for 1.25-1.37; no manifest validation of the docker helper's was visible to align with).
K8S_VERSION = "1.33"

ROUTE = re.compile(r"^/(?:api/v1|apis/networking\.k8s\.io/v1|apis/apps/v1)/namespaces/(?P<ns>[^/]+)/"
                   r"(?P<kind>pods|services|secrets|networkpolicies|deployments)(?:/(?P<name>[^/]+))?$")
KINDS = {"pods": ("v1", "Pod"), "services": ("v1", "Service"), "secrets": ("v1", "Secret"),
         "networkpolicies": ("networking.k8s.io/v1", "NetworkPolicy"), "deployments": ("apps/v1", "Deployment")}


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, str]
    body: Any


Kubelet = Callable[["FakeKubeApi", dict], None]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def running_status(ip: str, ready: bool = True) -> dict:
    return {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "startTime": now(),
            "conditions": [{"type": "PodScheduled", "status": "True"},
                           {"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "session", "ready": ready, "restartCount": 0, "image": "glassdesk:latest",
                                   "imageID": "", "state": {"running": {"startedAt": now()}}}]}


def ready_kubelet(ip: str = "127.0.0.1", delay_s: float = 0.05, after_watch: bool = False) -> Kubelet:
    """Running (not ready), then Ready: the two steps a watcher sees from a real kubelet. With
    ``after_watch`` the pod turns Ready only once someone watches pods: proof the watch carried it."""
    def kubelet(api: FakeKubeApi, pod: dict) -> None:
        time.sleep(delay_s)
        if after_watch:
            api.wait_for_watch(pod["metadata"]["name"])
        api.set_status(pod["metadata"]["name"], running_status(ip, ready=False))
        time.sleep(delay_s)
        api.set_status(pod["metadata"]["name"], running_status(ip, ready=True))
    return kubelet


def failing_kubelet(how: str, message: str = "") -> Kubelet:
    """``ImagePullBackOff``, ``CrashLoopBackOff``, ``Failed`` or ``Unschedulable``."""
    def kubelet(api: FakeKubeApi, pod: dict) -> None:
        time.sleep(0.05)
        name = pod["metadata"]["name"]
        waiting = lambda reason: {"phase": "Pending" if reason != "CrashLoopBackOff" else "Running",  # noqa: E731
                                  "containerStatuses": [{"name": "session", "ready": False, "restartCount": 0,
                                                         "image": "glassdesk:latest", "imageID": "",
                                                         "state": {"waiting": {"reason": reason, "message": message}}}]}
        if how in ("ImagePullBackOff", "CrashLoopBackOff"):
            api.set_status(name, waiting(how))
        elif how == "Failed":
            api.set_status(name, {"phase": "Failed", "containerStatuses": [
                {"name": "session", "ready": False, "restartCount": 0, "image": "glassdesk:latest", "imageID": "",
                 "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": message}}}]})
        elif how == "Unschedulable":
            api.set_status(name, {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]})
        else:
            raise ValueError(how)
    return kubelet


def status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


def matches(obj: dict, label_selector: str | None, field_selector: str | None) -> bool:
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, (label_selector or "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    for term in filter(None, (field_selector or "").split(",")):
        key, _, value = term.partition("=")
        if key != "metadata.name":
            raise ValueError(f"fake API: field selector {key} not supported")
        if obj["metadata"]["name"] != value:
            return False
    return True


def merge(target: dict, patch: dict) -> None:
    """JSON merge patch (RFC 7386), which a strategic merge of plain maps amounts to."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class FakeKubeApi:
    def __init__(self, kubelet: Kubelet | None = None):
        self.kubelet = kubelet or ready_kubelet()
        self.calls: list[Call] = []
        self.objects: dict[tuple[str, str, str], dict] = {}  # (kind plural, namespace, name) -> object
        self.events: list[tuple[int, str, str, str, dict]] = []  # (rv, kind, namespace, type, object)
        self.version = 100
        self.changed = threading.Condition()
        self.watching: list[dict] = []  # the queries of the watches open now
        # (method, kind plural) -> (code, reason, message): refuse such requests as the API server would
        self.refuse: dict[tuple[str, str], tuple[int, str, str]] = {}
        self._threads: list[threading.Thread] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # chunked watch streams, keep-alive like the real server

            def log_message(self, *args):
                pass

            def _reply(self, code: int, body: dict) -> None:
                payload = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _handle(self):
                url = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with fake.changed:
                    fake.calls.append(Call(self.command, url.path, query, body))
                route = ROUTE.match(url.path)
                if route is None:
                    return self._reply(404, status(404, "NotFound", f"the server could not find {url.path}"))
                kind, ns, name = route["kind"], route["ns"], route["name"]
                if self.command == "GET" and name is None and query.get("watch") in ("true", "True", "1"):
                    return fake._watch(self, kind, ns, query)
                code, answer = fake.handle(self.command, kind, ns, name, query, body)
                self._reply(code, answer)

            do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = _handle

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._closed = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> FakeKubeApi:
        self._thread.start()
        return self

    def close(self) -> None:
        with self.changed:
            self._closed = True
            self.changed.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()
        for thread in self._threads:
            thread.join(5)

    # -- state

    def _record(self, kind: str, ns: str, type_: str, obj: dict) -> None:
        """Under ``changed``: a new resourceVersion on ``obj`` and an event for the watchers."""
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.events.append((self.version, kind, ns, type_, copy.deepcopy(obj)))
        self.changed.notify_all()

    def wait_for_watch(self, name: str | None = None, timeout_s: float = 30) -> None:
        """Until someone watches pods (with ``name``: that one pod, by its field selector)."""
        def watched() -> bool:
            return any(name is None or q.get("fieldSelector") == f"metadata.name={name}" for q in self.watching)
        with self.changed:
            self.changed.wait_for(lambda: watched() or self._closed, timeout_s)

    def get(self, kind: str, name: str, ns: str = "default") -> dict | None:
        with self.changed:
            obj = self.objects.get((kind, ns, name))
            return copy.deepcopy(obj) if obj else None

    def names(self, kind: str, ns: str = "default") -> list[str]:
        with self.changed:
            return sorted(n for k, s, n in self.objects if k == kind and s == ns)

    def put(self, kind: str, obj: dict, ns: str = "default") -> None:
        """Place an object as if someone else had made it (another control plane, say)."""
        with self.changed:
            obj = copy.deepcopy(obj)
            obj["metadata"].setdefault("uid", str(uuid.uuid4()))
            obj["metadata"].setdefault("creationTimestamp", now())
            self.objects[(kind, ns, obj["metadata"]["name"])] = obj
            self._record(kind, ns, "ADDED", obj)

    def set_status(self, name: str, pod_status: dict, ns: str = "default") -> None:
        """The kubelet's report on a pod (a MODIFIED event); nothing if the pod is gone."""
        with self.changed:
            pod = self.objects.get(("pods", ns, name))
            if pod is None:
                return
            pod["status"] = copy.deepcopy(pod_status)
            self._record("pods", ns, "MODIFIED", pod)

    def handle(self, method: str, kind: str, ns: str, name: str | None, query: dict, body: Any) -> tuple[int, dict]:
        api_version, kind_name = KINDS[kind]
        if (method, kind) in self.refuse:
            code, reason, message = self.refuse[(method, kind)]
            return code, status(code, reason, message)
        with self.changed:
            if method == "POST" and name is None:
                name = body["metadata"]["name"]
                if (kind, ns, name) in self.objects:
                    return 409, status(409, "AlreadyExists", f'{kind} "{name}" already exists')
                obj = copy.deepcopy(body)
                obj["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=now(), namespace=ns)
                if kind == "pods":
                    obj["status"] = {"phase": "Pending"}
                self.objects[(kind, ns, name)] = obj
                self._record(kind, ns, "ADDED", obj)
                if kind == "pods":
                    thread = threading.Thread(target=self.kubelet, args=(self, copy.deepcopy(obj)), daemon=True)
                    self._threads.append(thread)
                    thread.start()
                return 201, copy.deepcopy(obj)
            if method == "GET" and name is None:
                items = [copy.deepcopy(o) for (k, s, _), o in sorted(self.objects.items())
                         if k == kind and s == ns
                         and matches(o, query.get("labelSelector"), query.get("fieldSelector"))]
                return 200, {"kind": f"{kind_name}List", "apiVersion": api_version,
                             "metadata": {"resourceVersion": str(self.version)}, "items": items}
            obj = self.objects.get((kind, ns, name))
            if obj is None:
                return 404, status(404, "NotFound", f'{kind} "{name}" not found')
            if method == "GET":
                return 200, copy.deepcopy(obj)
            if method == "PATCH":
                merge(obj, body)
                self._record(kind, ns, "MODIFIED", obj)
                return 200, copy.deepcopy(obj)
            if method == "DELETE":
                del self.objects[(kind, ns, name)]
                self._record(kind, ns, "DELETED", obj)
                return 200, copy.deepcopy(obj)
        return 405, status(405, "MethodNotAllowed", f"{method} is not supported here")

    def _watch(self, handler: BaseHTTPRequestHandler, kind: str, ns: str, query: dict) -> None:
        """Stream the events after ``resourceVersion`` (every current object as ADDED without one)
        as chunked JSON lines until ``timeoutSeconds`` pass or the server closes."""
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 30)
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        handler.send_header("transfer-encoding", "chunked")
        handler.end_headers()

        def send(type_: str, obj: dict) -> None:
            line = json.dumps({"type": type_, "object": obj}).encode() + b"\n"
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            handler.wfile.flush()

        labels, fields = query.get("labelSelector"), query.get("fieldSelector")
        with self.changed:
            self.watching.append(query)
            self.changed.notify_all()
            if query.get("resourceVersion"):
                seen = int(query["resourceVersion"])
                pending: list[tuple[str, dict]] = []
            else:
                seen = self.version
                pending = [("ADDED", copy.deepcopy(o)) for (k, s, _), o in sorted(self.objects.items())
                           if k == kind and s == ns and matches(o, labels, fields)]
        try:
            while True:
                for type_, obj in pending:
                    send(type_, obj)
                with self.changed:
                    pending = []
                    while not pending:
                        pending = [(t, copy.deepcopy(o)) for v, k, s, t, o in self.events
                                   if v > seen and k == kind and s == ns and matches(o, labels, fields)]
                        seen = self.version
                        if pending or self._closed or time.monotonic() >= deadline:
                            break
                        self.changed.wait(min(0.5, max(0.01, deadline - time.monotonic())))
                    if not pending:
                        break
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped watching
        finally:
            with self.changed:
                self.watching.remove(query)
            handler.close_connection = True


class ProcessKubelet:
    """A kubelet that really runs a pod's container as a local process: the command line and the
    environment resolved as a kubelet does (``$(VAR)`` in args, ``fieldRef: status.podIP`` as
    127.0.0.1, ``secretKeyRef`` read from the fake's Secrets), Ready once the readiness probe's
    path answers 200, Failed (with the exit code) when the process ends, and the process group
    ended when the pod is deleted. ``glassdesk`` in the command is this interpreter's
    ``-m vision.cli``, so the code under test is what runs."""

    def __init__(self, workdir: str, probe_timeout_s: float = 120):
        self.workdir = workdir
        self.probe_timeout_s = probe_timeout_s
        self.processes: dict[str, Any] = {}

    def resolve(self, api: FakeKubeApi, pod: dict) -> tuple[list[str], dict[str, str]]:
        import sys

        container = pod["spec"]["containers"][0]
        env: dict[str, str] = {}
        for item in container.get("env", []):
            source = item.get("valueFrom") or {}
            if "value" in item:
                env[item["name"]] = item["value"]
            elif source.get("fieldRef", {}).get("fieldPath") == "status.podIP":
                env[item["name"]] = "127.0.0.1"
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                secret = api.get("secrets", ref["name"], pod["metadata"].get("namespace", "default"))
                env[item["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
            else:
                raise ValueError(f"fake kubelet: cannot resolve {item}")
        argv = [*container["command"], *container.get("args", [])]
        argv = [re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), a) for a in argv]
        if argv[0] == "glassdesk":
            argv = [sys.executable, "-m", "vision.cli", *argv[1:]]
        return argv, env

    def __call__(self, api: FakeKubeApi, pod: dict) -> None:
        import os
        import signal
        import subprocess
        import urllib.request

        name = pod["metadata"]["name"]
        argv, env = self.resolve(api, pod)
        data = os.path.join(self.workdir, name)
        os.makedirs(data, exist_ok=True)
        with open(os.path.join(data, "server.log"), "wb") as log:
            process = subprocess.Popen(argv,
                                       env={**os.environ, **env, "GLASSDESK_DATA_DIR": os.path.join(data, "data")},
                                       stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=data,
                                       start_new_session=True)
        self.processes[name] = process
        api.set_status(name, running_status("127.0.0.1", ready=False))
        probe = pod["spec"]["containers"][0]["readinessProbe"]["httpGet"]["path"]
        port = pod["spec"]["containers"][0]["ports"][0]["containerPort"]
        deadline, ready = time.monotonic() + self.probe_timeout_s, False
        while api.get("pods", name) is not None and process.poll() is None:
            if not ready and time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{probe}", timeout=2) as answer:
                        if answer.status == 200:
                            ready = True
                            api.set_status(name, running_status("127.0.0.1", ready=True))
                except OSError:
                    pass
            time.sleep(0.2)
        if process.poll() is None:  # the pod was deleted: SIGTERM, the grace period, then SIGKILL
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(pod["spec"].get("terminationGracePeriodSeconds", 30))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        else:
            api.set_status(name, {"phase": "Failed", "containerStatuses": [
                {"name": "session", "ready": False, "restartCount": 0, "image": "glassdesk:latest", "imageID": "",
                 "state": {"terminated": {"exitCode": process.returncode, "reason": "Error"}}}]})
