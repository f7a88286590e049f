"""app.py: the double as a whole: command line, state folder (PKI,
kubeconfigs, token, port, ready), the store and API, the controllers and
kubelets, the control endpoints (/_double/...), outages, and a clean stop
(SIGTERM, parent gone) that kills every container process."""
import argparse
import base64
import json
import os
import secrets
import signal
import ssl
import sys
import threading
import time

from .ops import Ops
from .pki import make_pki
from .resources import Registry
from .server import Auth, Discovery, Faults, Handler, Server, Stats
from .store import Store
from .util import ApiError, bad_request, get_path, now_rfc3339
from .validate import Schemas


def default_schema_dir():
    """The repository's copy of the official schemas (tests/ref/k8s-schemas)."""
    here = os.path.dirname(os.path.abspath(__file__))  # tests/k8s/double
    tests = os.path.dirname(os.path.dirname(here))
    return os.path.join(tests, "ref", "k8s-schemas", "v1.32.2-standalone-strict")


def write_atomic(path, text, mode=0o644):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def node_object(spec):
    name = spec["name"]
    gpus = int(spec.get("gpus", 0))
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}
    if gpus:
        labels["nvidia.com/gpu.count"] = str(gpus)
        if spec.get("product"):
            labels["nvidia.com/gpu.product"] = spec["product"]
        if spec.get("memoryMiB") is not None:
            labels["nvidia.com/gpu.memory"] = str(spec["memoryMiB"])
    labels.update(spec.get("labels") or {})
    cap = {"cpu": str(spec.get("cpu", "8")), "memory": str(spec.get("memory", "32Gi")), "pods": str(spec.get("pods", "110")),
           "ephemeral-storage": str(spec.get("ephemeralStorage", "100Gi"))}
    if gpus:
        cap["nvidia.com/gpu"] = str(gpus)
    t = now_rfc3339()
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels,
                                                             "annotations": dict(spec.get("annotations") or {})},
            "spec": {}, "status": {
                "capacity": cap, "allocatable": dict(spec.get("allocatable") or cap),
                "conditions": [
                    {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                     "message": "kubelet has sufficient memory available", "lastHeartbeatTime": t, "lastTransitionTime": t},
                    {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure",
                     "message": "kubelet has no disk pressure", "lastHeartbeatTime": t, "lastTransitionTime": t},
                    {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID",
                     "message": "kubelet has sufficient PID available", "lastHeartbeatTime": t, "lastTransitionTime": t},
                    {"type": "Ready", "status": "True", "reason": "KubeletReady",
                     "message": "kubelet is posting ready status", "lastHeartbeatTime": t, "lastTransitionTime": t}],
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
                "nodeInfo": {"kubeletVersion": "v1.32.2", "kubeProxyVersion": "v1.32.2", "operatingSystem": "linux",
                             "architecture": "amd64", "containerRuntimeVersion": "kube-double://1",
                             "osImage": "kube-double", "kernelVersion": os.uname().release,
                             "machineID": "", "systemUUID": "", "bootID": ""},
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}}
    if spec.get("taints"):
        node["spec"]["taints"] = list(spec["taints"])
    if spec.get("unschedulable"):
        node["spec"]["unschedulable"] = True
    return node


class App:
    def __init__(self, args):
        self.args = args
        self.state = os.path.abspath(args.state)
        self.verbose = args.verbose
        self.stopping = threading.Event()
        self.stats = Stats()
        self.faults = Faults()
        self.store = Store(args.history)
        self.registry = Registry()
        self.schemas = Schemas(args.schemas or default_schema_dir())
        self.ops = Ops(self.store, self.registry, self.schemas, self.stats)
        self.discovery = Discovery(self.registry)
        self.bookmark_interval = max(0.05, float(args.bookmark_interval))
        self.node_loss_delay = max(0.0, float(args.node_loss_delay))
        self.anonymous = False
        self.tls = None
        self.port = 0
        self.server = None
        self.server_lock = threading.Lock()
        self.open_watches = 0
        self.wlock = threading.Lock()
        self.path_env = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
        from .controllers import Controllers
        from .kubelet import Kubelets, LogServer
        self.kubelets = Kubelets(self)
        self.logs = LogServer(self)
        self.controllers = Controllers(self)

    # ---- start ----
    def start(self):
        os.makedirs(self.state, exist_ok=True)
        for stale in ("ready", "port"):  # from a run that was killed: not this one's
            try:
                os.unlink(os.path.join(self.state, stale))
            except OSError:
                pass
        for sub in ("pods", "volumes"):
            os.makedirs(os.path.join(self.state, sub), exist_ok=True)
        if not self.schemas.available():
            sys.stderr.write("kube-double: warning: no schema folder %s: schema validation is off\n" % self.schemas.dir)
        tok_path = os.path.join(self.state, "token")
        token = None
        if os.path.exists(tok_path):
            with open(tok_path) as f:
                token = f.read().strip() or None
        token = token or secrets.token_hex(24)
        self.auth = Auth(self.state, token)
        scheme = "http"
        pki = None
        if not self.args.no_tls:
            pki = make_pki(self.state)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(pki["cert"], pki["key"])
            ctx.load_verify_locations(pki["ca"])
            ctx.verify_mode = ssl.CERT_OPTIONAL
            self.tls = ctx
            scheme = "https"
        self._listen(self.args.port)
        self._bootstrap()
        self.controllers.start()
        if self.args.kubelet == "run":
            self.kubelets.start()
        else:
            self.ops.no_kubelet = True
        url = "%s://127.0.0.1:%d" % (scheme, self.port)
        self._write_files(url, token, pki)
        print("kube-double: listening on %s" % url, flush=True)

    def _listen(self, port):
        srv = None
        for attempt in range(100):
            try:
                srv = Server(("127.0.0.1", port), Handler, self)
                break
            except OSError:
                if port == 0 or attempt == 99:
                    raise
                time.sleep(0.1)  # the port of an outage: wait for it to be free (bounded)
        self.port = srv.server_address[1]
        with self.server_lock:
            self.server = srv
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, name="http", daemon=True).start()

    def _bootstrap(self):
        ns_res = self.registry.get("", "v1", "namespaces")
        for n in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.ops.create(ns_res, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}, internal=True)
        nodes = None
        if self.args.nodes:
            with open(self.args.nodes, encoding="utf-8") as f:
                nodes = json.load(f)
            if not isinstance(nodes, list):
                raise SystemExit("kube-double: --nodes %s: expected a JSON list of nodes" % self.args.nodes)
        else:
            nodes = [{"name": "double-node", "gpus": 0, "cpu": "16", "memory": "64Gi"}]
        node_res = self.registry.get("", "v1", "nodes")
        for spec in nodes:
            self.ops.create(node_res, None, node_object(spec), internal=True)
        svc = self.registry.get("", "v1", "services")
        self.ops.create(svc, "default", {"apiVersion": "v1", "kind": "Service", "metadata": {
            "name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                                                          "targetPort": self.port}]}}, internal=True)
        sa_res = self.registry.get("", "v1", "serviceaccounts")
        for n in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.ops.create(sa_res, n, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}, internal=True)

    def _write_files(self, url, token, pki):
        def kubeconfig(user):
            cluster = {"server": url}
            if pki:
                with open(pki["ca"], "rb") as f:
                    cluster["certificate-authority-data"] = base64.b64encode(f.read()).decode()
            return {"apiVersion": "v1", "kind": "Config", "current-context": "double", "preferences": {},
                    "clusters": [{"name": "double", "cluster": cluster}],
                    "contexts": [{"name": "double", "context": {"cluster": "double", "user": "admin", "namespace": "default"}}],
                    "users": [{"name": "admin", "user": user}]}
        write_atomic(os.path.join(self.state, "token"), token + "\n", 0o600)
        write_atomic(os.path.join(self.state, "kubeconfig"), json.dumps(kubeconfig({"token": token}), indent=2) + "\n", 0o600)
        if pki:
            with open(pki["client_cert"], "rb") as f:
                cd = base64.b64encode(f.read()).decode()
            with open(pki["client_key"], "rb") as f:
                kd = base64.b64encode(f.read()).decode()
            write_atomic(os.path.join(self.state, "kubeconfig-cert"), json.dumps(kubeconfig(
                {"client-certificate-data": cd, "client-key-data": kd}), indent=2) + "\n", 0o600)
        write_atomic(os.path.join(self.state, "port"), "%d\n" % self.port)
        write_atomic(os.path.join(self.state, "ready"), "%s\n" % url)

    # ---- watches (counted for stats) ----
    def watch_opened(self, w):
        with self.wlock:
            self.open_watches += 1

    def watch_closed(self, w):
        with self.wlock:
            self.open_watches -= 1

    # ---- outage ----
    def outage(self, seconds):
        def run():
            with self.server_lock:
                srv = self.server
                self.server = None
            if srv is None:
                return
            srv.shutdown()
            srv.server_close()
            self.store.cut_all_watches()
            srv.close_all()
            self.stopping.wait(max(0.0, seconds))
            if not self.stopping.is_set():
                self._listen(self.port)
        threading.Thread(target=run, name="outage", daemon=True).start()

    # ---- eviction and binding ----
    def evict_api(self, h, res, ns, name, body):
        opts = (body or {}).get("deleteOptions") or {}
        with self.store.lock:
            self.pdb_check(ns, name)
            self.evict(ns, name, "EvictionByEvictionAPI", "Eviction API: evicting", opts)
        return h._send(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})

    def pdb_check(self, ns, name):
        """PodDisruptionBudgets of the pod: 429 when the eviction would take
        the healthy pods below what one needs (the real eviction API)."""
        from .labelsel import selector_object_match
        pods = self.registry.get("", "v1", "pods")
        pod = self.ops.get(pods, ns, name)
        if get_path(pod, "status", "phase") in ("Succeeded", "Failed") or pod["metadata"].get("deletionTimestamp"):
            return
        labels = pod["metadata"].get("labels") or {}
        for pdb in self.store.list("policy/poddisruptionbudgets", ns):
            sel = get_path(pdb, "spec", "selector")
            if sel is None or not selector_object_match(sel, labels):
                continue
            matching = [p for p in self.store.list("core/pods", ns)
                        if selector_object_match(sel, p["metadata"].get("labels"))
                        and get_path(p, "status", "phase") not in ("Succeeded", "Failed")]
            healthy = [p for p in matching if not p["metadata"].get("deletionTimestamp") and any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in get_path(p, "status", "conditions") or [])]
            spec = pdb.get("spec") or {}

            def amount(v):
                if isinstance(v, str) and v.endswith("%"):
                    import math
                    return int(math.ceil(float(v[:-1]) / 100.0 * len(matching)))
                return int(v)
            if spec.get("minAvailable") is not None:
                need = amount(spec["minAvailable"])
            elif spec.get("maxUnavailable") is not None:
                need = len(matching) - amount(spec["maxUnavailable"])
            else:
                continue
            is_healthy = any(p["metadata"]["name"] == name for p in healthy)
            if is_healthy and len(healthy) - 1 < need:
                raise ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
                               {"causes": [{"reason": "DisruptionBudget", "message":
                                            "The disruption budget %s needs %d healthy pods and has %d currently" % (
                                                pdb["metadata"]["name"], need, len(healthy))}]})

    def evict(self, ns, name, reason, message, opts=None):
        pods = self.registry.get("", "v1", "pods")
        pod = self.ops.get(pods, ns, name)
        if get_path(pod, "status", "phase") not in ("Succeeded", "Failed"):
            self.add_pod_condition(ns, name, "DisruptionTarget", "True", reason, message)
        self.ops.delete(pods, ns, name, opts or {})

    def add_pod_condition(self, ns, name, type_, status, reason, message):
        pods = self.registry.get("", "v1", "pods")

        def fn(p):
            st = p.setdefault("status", {})
            conds = [c for c in st.get("conditions") or [] if c.get("type") != type_]
            conds.append({"type": type_, "status": status, "reason": reason, "message": message,
                          "lastProbeTime": None, "lastTransitionTime": now_rfc3339()})
            st["conditions"] = conds
        return self.ops.mutate(pods, ns, name, fn, status_only=True)

    def bind(self, ns, name, node):
        pods = self.registry.get("", "v1", "pods")
        pod = self.ops.get(pods, ns, name)
        if get_path(pod, "spec", "nodeName"):
            raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on pods/binding "%s": pod %s is already assigned to node "%s"' % (
                name, name, pod["spec"]["nodeName"]))
        self.controllers.scheduler.bind(pod, node)

    # ---- stop ----
    def stop(self):
        if self.stopping.is_set():
            return
        self.stopping.set()
        with self.server_lock:
            srv = self.server
            self.server = None
        if srv is not None:
            threading.Thread(target=srv.shutdown, daemon=True).start()
            srv.server_close()
            srv.close_all()
        self.kubelets.kill_all()


class Control:
    """The /_double/... endpoints."""

    def __init__(self, app):
        self.app = app

    def handle(self, h, path, q, raw):
        app = self.app
        parts = path.strip("/").split("/")[1:]
        m = h.command
        app.stats.count(None, None)
        if m == "POST":
            from .server import log
            log("control: POST %s" % h.path)
        if parts == ["stats"] and m == "GET":
            s = app.stats.snapshot()
            s["open_watches"] = app.open_watches
            s["resourceVersion"] = app.store.rv
            return h._send(200, s)
        if parts == ["stats", "reset"] and m == "POST":
            app.stats.reset()
            return h._send(200, {"ok": True})
        if parts == ["healthz"]:
            return h._send(200, b"ok", "text/plain")
        if parts == ["compact"] and m == "POST":
            mode = q.get("mode", "event")
            if mode not in ("event", "status"):
                raise bad_request("mode must be event or status")
            app.store.compact(mode)
            return h._send(200, {"compacted": app.store.compacted, "mode": mode})
        if parts == ["outage"] and m == "POST":
            secs = float(q.get("seconds", "5"))
            h._send(200, {"outage": secs})
            h.close_connection = True
            app.outage(secs)
            return None
        if parts == ["fail"] and m == "POST":
            st = int(q.get("status", "500"))
            if st not in (429, 500, 502, 503, 504):
                raise bad_request("status must be 429, 500, 502, 503 or 504")
            app.faults.add(st, int(q.get("count", "1")), q.get("path"))
            return h._send(200, {"status": st, "count": int(q.get("count", "1"))})
        if len(parts) == 3 and parts[0] == "nodes" and parts[2] == "ready" and m == "POST":
            val = q.get("value", "true") in ("true", "1", "True")
            app.controllers.set_node_ready(parts[1], val)
            return h._send(200, {"node": parts[1], "ready": val})
        if len(parts) == 4 and parts[0] == "pods" and m == "POST":
            ns, name, what = parts[1], parts[2], parts[3]
            if what == "evict":
                app.evict(ns, name, "EvictionByEvictionAPI", "Eviction API: evicting")
                return h._send(200, {"evicted": "%s/%s" % (ns, name)})
            if what == "oom":
                if not app.kubelets.oom(ns, name):
                    raise ApiError(404, "NotFound", 'no running containers of pod %s/%s' % (ns, name))
                return h._send(200, {"oom": "%s/%s" % (ns, name)})
        if parts == ["processes"] and m == "GET":
            return h._send(200, app.kubelets.processes())
        raise ApiError(404, "NotFound", "no such control endpoint: %s %s" % (m, path))


def parse_args(argv):
    p = argparse.ArgumentParser(prog="kube-double", description="A test double of the Kubernetes API server (v1.32).")
    p.add_argument("--state", required=True, help="state folder (pki, kubeconfig, token, port, ready, pods, volumes)")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--schemas", default=None)
    p.add_argument("--nodes", default=None, help="JSON list of nodes")
    p.add_argument("--no-tls", action="store_true")
    p.add_argument("--bookmark-interval", type=float, default=5.0)
    p.add_argument("--history", type=int, default=10000)
    p.add_argument("--parent-pid", type=int, default=None)
    p.add_argument("--node-loss-delay", type=float, default=0.0)
    p.add_argument("--job-backoff", type=float, default=1.0,
                   help="seconds before a Job replaces a failed pod (the real one: 10s, doubling)")
    p.add_argument("--kubelet", choices=("run", "none"), default="run",
                   help="none: pods are scheduled (bound) but never run, and deleted at once")
    p.add_argument("--verbose", action="store_true")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    app = App(args)
    app.control = Control(app)
    done = threading.Event()

    def on_signal(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    parent = args.parent_pid or os.getppid()
    try:
        app.start()
    except Exception as e:  # noqa: BLE001 - a start that fails says why and exits
        sys.stderr.write("kube-double: cannot start: %s\n" % e)
        app.stop()
        return 1
    while not done.wait(0.5):
        if args.parent_pid:
            try:
                os.kill(parent, 0)
            except ProcessLookupError:
                break
            except PermissionError:
                pass
        elif os.getppid() != parent:
            break
    app.stop()
    try:
        os.unlink(os.path.join(app.state, "ready"))
    except OSError:
        pass
    return 0
