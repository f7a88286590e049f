"""kubelet.py: the stand-in kubelets (one per node, in threads) and the log
endpoint. A pod bound to a Ready node gets a worker thread that prepares
its volumes and environment, runs each container's command + args as a
local process (through launch.py: own session, private mount namespace as
root), captures stdout/stderr line by line with times into
STATE/pods/NS/POD/CONTAINER.log, reports the container states and the pod
phase, and carries out graceful deletion (SIGTERM, SIGKILL after the
grace period), eviction and OOM kills."""
import base64
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

from .util import ApiError, bad_request, get_path, now_rfc3339, parse_quantity, parse_time, rfc3339nano

TERMINAL = ("Succeeded", "Failed")
LAUNCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch.py")
OOM_ANNOTATION = "kube-double.lathe.dev/oom-after-seconds"
PASS_ENV = ("HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "LD_LIBRARY_PATH", "ASAN_OPTIONS", "UBSAN_OPTIONS",
            "LSAN_OPTIONS", "MSAN_OPTIONS", "TSAN_OPTIONS", "LLVM_PROFILE_FILE")


class ConfigError(Exception):
    def __init__(self, reason, message):
        super().__init__(message)
        self.reason = reason
        self.message = message


def expand(s, env):
    """$(VAR) references as the kubelet expands them ($$ escapes)."""
    if not isinstance(s, str):
        return s
    out, i = [], 0
    while i < len(s):
        if s.startswith("$$", i):
            out.append("$")
            i += 2
        elif s.startswith("$(", i):
            j = s.find(")", i + 2)
            if j < 0:
                out.append(s[i:])
                break
            name = s[i + 2:j]
            out.append(env[name] if name in env else s[i:j + 1])
            i = j + 1
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


_FIELD = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")


def field_value(pod, path):
    m = _FIELD.match(path)
    if m:
        return (pod["metadata"].get(m.group(1)) or {}).get(m.group(2), "")
    simple = {"metadata.name": ("metadata", "name"), "metadata.namespace": ("metadata", "namespace"),
              "metadata.uid": ("metadata", "uid"), "spec.nodeName": ("spec", "nodeName"),
              "spec.serviceAccountName": ("spec", "serviceAccountName"), "status.hostIP": None,
              "status.podIP": None, "status.podIPs": None, "status.hostIPs": None}
    if path in ("status.hostIP", "status.podIP", "status.podIPs", "status.hostIPs"):
        return "127.0.0.1"
    if path in simple:
        return str(get_path(pod, *simple[path], default="") or "")
    if path == "metadata.labels":
        return "\n".join('%s="%s"' % (k, v) for k, v in sorted((pod["metadata"].get("labels") or {}).items()))
    if path == "metadata.annotations":
        return "\n".join('%s="%s"' % (k, v) for k, v in sorted((pod["metadata"].get("annotations") or {}).items()))
    raise ConfigError("CreateContainerConfigError", "unsupported fieldPath: %s" % path)


def resource_value(pod, container, ref, node):
    cname = ref.get("containerName") or (container or {}).get("name")
    c = next((x for x in get_path(pod, "spec", "containers") or [] if x.get("name") == cname), container or {})
    res = ref.get("resource", "")
    kind, _, rname = res.partition(".")
    val = get_path(c, "resources", kind, rname)
    if val is None:
        val = get_path(node or {}, "status", "allocatable", rname, default="0") if kind == "limits" else "0"
    q = parse_quantity(val) or 0
    div = parse_quantity(ref.get("divisor") or "1") or 1
    import math
    return str(int(math.ceil(q / div)))


class ContainerRun:
    """One running instance of a container."""

    def __init__(self, name, log_path):
        self.name = name
        self.log_path = log_path
        self.proc = None
        self.started = None
        self.killed_by_us = False
        self.oom = False
        self.done = threading.Event()  # the process ended and its output is in the log
        self.readers = []
        self.lock = threading.Lock()
        self.result = None  # (exitCode, signal, reason, message)


class Kubelets:
    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        self.workers = {}  # pod uid -> PodWorker
        self.gpus = {}  # node -> set of used GPU indices
        self.runs = {}  # (ns, pod, container) -> latest ContainerRun
        self.thread = None

    def start(self):
        self.thread = threading.Thread(target=self.loop, name="kubelets", daemon=True)
        self.thread.start()

    def loop(self):
        """Starts a worker for each pod newly bound to a live node: from the
        new events, with a full scan at start, on a history overflow and
        every 5 s."""
        seq = -1
        store = self.app.store
        cursor, last_full = None, 0.0
        while not self.app.stopping.is_set():
            seq = store.wait_change(seq, 0.3)
            now = time.monotonic()
            events, rv = (None, None) if cursor is None or now - last_full > 5 else store.events_since(cursor)
            with store.lock:
                lost = set(self.app.controllers.lost)
                if events is None:
                    cand = store.list("core/pods")
                    cursor, last_full = store.rv, now
                else:
                    # the current state of the pods the events name (an event may be old news)
                    keys = {(ev.obj["metadata"]["namespace"], ev.obj["metadata"]["name"]) for ev in events
                            if ev.key == "core/pods" and ev.type != "DELETED"}
                    cand = [p for p in (store.get("core/pods", ns, n) for ns, n in sorted(keys)) if p is not None]
                    cursor = rv
                pods = [p for p in cand if get_path(p, "spec", "nodeName") and get_path(p, "status", "phase") not in TERMINAL]
            for p in pods:
                uid = p["metadata"]["uid"]
                node = p["spec"]["nodeName"]
                with self.lock:
                    if uid in self.workers or node in lost or self.app.stopping.is_set():
                        continue
                    if store.get("core/nodes", "", node) is None:
                        continue
                    cur = store.get("core/pods", p["metadata"]["namespace"], p["metadata"]["name"])
                    if cur is None or cur["metadata"].get("uid") != uid or get_path(cur, "status", "phase") in TERMINAL:
                        continue  # it ended meanwhile (its worker is gone)
                    w = PodWorker(self, p)
                    self.workers[uid] = w
                w.start()

    def worker_done(self, w):
        with self.lock:
            self.workers.pop(w.uid, None)
            used = self.gpus.get(w.node)
            if used is not None:
                for g in w.gpu_ids:
                    used.discard(g)

    def alloc_gpus(self, node, n):
        with self.lock:
            used = self.gpus.setdefault(node, set())
            nobj = self.app.store.get("core/nodes", "", node)
            total = int(parse_quantity(get_path(nobj or {}, "status", "allocatable", "nvidia.com/gpu", default="0")) or 0)
            free = [i for i in range(max(total, n)) if i not in used]
            got = free[:n]
            used.update(got)
            return got

    def node_lost(self, node):
        with self.lock:
            ws = [w for w in self.workers.values() if w.node == node]
        for w in ws:
            w.lose()

    def oom(self, ns, name):
        with self.lock:
            ws = [w for w in self.workers.values() if w.ns == ns and w.name == name]
        return any(w.oom_kill() for w in ws)

    def processes(self):
        out = []
        with self.lock:
            ws = list(self.workers.values())
        for w in ws:
            for r in list(w.runs.values()):
                if r.proc is not None and r.proc.poll() is None:
                    out.append({"namespace": w.ns, "pod": w.name, "container": r.name, "pid": r.proc.pid,
                                "node": w.node, "gpus": w.gpu_ids})
        return out

    def kill_all(self):
        with self.lock:
            ws = list(self.workers.values())
        for w in ws:
            w.stop_all(signal.SIGTERM)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and any(w.alive() for w in ws):
            time.sleep(0.05)
        for w in ws:
            w.stop_all(signal.SIGKILL)


def _killpg(proc, sig):
    if proc is None:
        return
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class PodWorker:
    def __init__(self, kubelets, pod):
        self.k = kubelets
        self.app = kubelets.app
        self.ops = self.app.ops
        self.pods = self.app.registry.get("", "v1", "pods")
        m = pod["metadata"]
        self.uid, self.ns, self.name = m["uid"], m["namespace"], m["name"]
        self.node = pod["spec"]["nodeName"]
        self.runs = {}
        self.gpu_ids = []
        self.lost = threading.Event()
        self.thread = None
        self.dir = os.path.join(self.app.state, "pods", self.ns, self.name)

    def start(self):
        self.thread = threading.Thread(target=self.run, name="pod-%s/%s" % (self.ns, self.name), daemon=True)
        self.thread.start()

    def alive(self):
        return any(r.proc is not None and r.proc.poll() is None for r in self.runs.values())

    def stop_all(self, sig):
        for r in list(self.runs.values()):
            if r.proc is not None and r.proc.poll() is None:
                r.killed_by_us = True
                _killpg(r.proc, sig)

    def lose(self):
        self.lost.set()
        self.stop_all(signal.SIGKILL)

    def oom_kill(self):
        hit = False
        for r in list(self.runs.values()):
            if r.proc is not None and r.proc.poll() is None:
                r.oom = True
                _killpg(r.proc, signal.SIGKILL)
                hit = True
        return hit

    # ---- status ----
    def pod(self):
        p = self.app.store.get("core/pods", self.ns, self.name)
        if p is None or p["metadata"].get("uid") != self.uid:
            return None
        return p

    def update(self, fn):
        if self.lost.is_set() or self.app.stopping.is_set():
            return None
        try:
            return self.ops.mutate(self.pods, self.ns, self.name,
                                   lambda p: fn(p) if p["metadata"].get("uid") == self.uid else False, status_only=True)
        except ApiError:
            return None

    def set_conditions(self, st, **kv):
        now = now_rfc3339()
        conds = {c["type"]: c for c in st.get("conditions") or []}
        order = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled", "DisruptionTarget"]
        for t, v in kv.items():
            status, reason = v if isinstance(v, tuple) else (v, None)
            c = conds.get(t)
            if c is None or c.get("status") != status:
                c = {"type": t, "status": status, "lastProbeTime": None, "lastTransitionTime": now}
                if reason:
                    c["reason"] = reason
                conds[t] = c
        st["conditions"] = sorted(conds.values(), key=lambda c: order.index(c["type"]) if c["type"] in order else 99)

    # ---- the pod's life ----
    def run(self):
        try:
            self._run()
        except Exception:  # noqa: BLE001
            import traceback
            traceback.print_exc()
        finally:
            self.stop_all(signal.SIGKILL)
            self.k.worker_done(self)

    def _run(self):
        pod = self.pod()
        if pod is None:
            return
        os.makedirs(self.dir, exist_ok=True)
        spec = pod["spec"]
        init = spec.get("initContainers") or []
        conts = spec.get("containers") or []
        now = now_rfc3339()

        def starting(p):
            st = p.setdefault("status", {})
            st.update({"hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}], "podIP": "127.0.0.1",
                       "podIPs": [{"ip": "127.0.0.1"}]})
            st.setdefault("startTime", now)
            self.set_conditions(st, PodReadyToStartContainers="True", Initialized="False" if init else "True",
                                Ready=("False", "ContainersNotReady"), ContainersReady=("False", "ContainersNotReady"))
            if init:
                st["initContainerStatuses"] = [self._waiting(c, "PodInitializing") for c in init]
            st["containerStatuses"] = [self._waiting(c, "PodInitializing" if init else "ContainerCreating") for c in conts]
        self.update(starting)
        gpus = 0
        for c in conts:
            gpus += int(parse_quantity(get_path(c, "resources", "limits", "nvidia.com/gpu")
                                       or get_path(c, "resources", "requests", "nvidia.com/gpu") or 0) or 0)
        self.gpu_ids = self.k.alloc_gpus(self.node, gpus) if gpus else []
        # volumes, images and configuration: retried until they work or the pod goes
        pulls = 0
        while True:
            if self._gone_or_deleting():
                return self._finish_deleted()
            err = None
            try:
                mounts_of = self._volumes(self.pod() or pod)
                for c in init + conts:
                    img = c.get("image") or ""
                    if "does-not-exist" in img:
                        raise ConfigError("ErrImagePull", 'failed to pull and unpack image "%s": failed to resolve reference "%s": not found' % (img, img))
                    self._env(self.pod() or pod, c)
                break
            except ConfigError as e:
                err = e
            self._report_waiting(init + conts, err, bool(init))
            if err.reason == "ErrImagePull":
                pulls += 1
                if not self._sleep(1.0):
                    continue
                self._report_waiting(init + conts, ConfigError("ImagePullBackOff", 'Back-off pulling image "%s"' % next(
                    (c.get("image") for c in init + conts if "does-not-exist" in (c.get("image") or "")), "")), bool(init))
                self._sleep(min(10.0, 2.0 ** pulls))
                continue
            self._sleep(1.0)
        # init containers, one after the other
        for i, c in enumerate(init):
            while True:
                res = self._run_container(c, mounts_of, init=True, index=i)
                if res is None:
                    return self._finish_deleted()
                if res[0] == 0:
                    break
                if spec.get("restartPolicy", "Always") == "Never":
                    return self._finish(failed=True)
                if not self._sleep(1.0):
                    return self._finish_deleted()

        def inited(p):
            self.set_conditions(p.setdefault("status", {}), Initialized="True")
        if init:
            self.update(inited)
        self._run_main(conts, mounts_of, spec.get("restartPolicy", "Always"))

    def _sleep(self, secs):
        """Sleeps (bounded) unless the pod is deleted; True = keep going."""
        end = time.monotonic() + secs
        while time.monotonic() < end:
            if self.lost.is_set() or self.app.stopping.is_set() or self._gone_or_deleting():
                return False
            time.sleep(0.1)
        return True

    def _gone_or_deleting(self):
        p = self.pod()
        return p is None or bool(p["metadata"].get("deletionTimestamp"))

    def _waiting(self, c, reason, message=None):
        w = {"reason": reason}
        if message:
            w["message"] = message
        return {"name": c["name"], "state": {"waiting": w}, "lastState": {}, "ready": False, "restartCount": 0,
                "image": c.get("image", ""), "imageID": "", "started": False}

    def event(self, type_, reason, message):
        p = self.pod()
        if p is not None and not self.lost.is_set():
            self.app.controllers.event(p, type_, reason, message, "kubelet")

    def _report_waiting(self, conts, err, has_init):
        if err.reason in ("ErrImagePull", "CreateContainerConfigError"):
            self.event("Warning", "Failed", "Error: %s" % err.message if err.reason == "CreateContainerConfigError"
                       else "Failed to pull image: %s" % err.message)
        elif err.reason == "ImagePullBackOff":
            self.event("Normal", "BackOff", err.message)
        def fn(p):
            st = p.setdefault("status", {})
            names = {c["name"] for c in get_path(p, "spec", "initContainers") or []}
            init_s, main_s = [], []
            for c in conts:
                s = self._waiting(c, err.reason, err.message)
                (init_s if c["name"] in names else main_s).append(s)
            if init_s:
                st["initContainerStatuses"] = init_s
            st["containerStatuses"] = main_s
        self.update(fn)

    # ---- environment and volumes ----
    def _env(self, pod, c):
        store = self.app.store
        ns = self.ns
        node = store.get("core/nodes", "", self.node)
        env = {"PATH": self.app.path_env}
        for k in PASS_ENV:
            if k in os.environ:
                env[k] = os.environ[k]
        env.setdefault("HOME", "/root")
        port = str(self.app.port)
        env.update({"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": port,
                    "KUBERNETES_SERVICE_PORT_HTTPS": port, "KUBERNETES_PORT": "tcp://127.0.0.1:" + port,
                    "KUBERNETES_PORT_443_TCP": "tcp://127.0.0.1:" + port, "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
                    "KUBERNETES_PORT_443_TCP_PORT": port, "KUBERNETES_PORT_443_TCP_ADDR": "127.0.0.1",
                    "HOSTNAME": get_path(pod, "spec", "hostname") or self.name})
        if self.gpu_ids:
            ids = ",".join(str(g) for g in self.gpu_ids)
            env["NVIDIA_VISIBLE_DEVICES"] = ids
            env["CUDA_VISIBLE_DEVICES"] = ids
        own = {}
        for ef in c.get("envFrom") or []:
            prefix = ef.get("prefix") or ""
            if "configMapRef" in ef:
                ref = ef["configMapRef"]
                cm = store.get("core/configmaps", ns, ref.get("name"))
                if cm is None:
                    if ref.get("optional"):
                        continue
                    raise ConfigError("CreateContainerConfigError", 'configmap "%s" not found' % ref.get("name"))
                for k, v in (cm.get("data") or {}).items():
                    own[prefix + k] = v
            if "secretRef" in ef:
                ref = ef["secretRef"]
                s = store.get("core/secrets", ns, ref.get("name"))
                if s is None:
                    if ref.get("optional"):
                        continue
                    raise ConfigError("CreateContainerConfigError", 'secret "%s" not found' % ref.get("name"))
                for k, v in (s.get("data") or {}).items():
                    own[prefix + k] = base64.b64decode(v).decode("utf-8", "replace")
        merged = dict(env)
        merged.update(own)
        for e in c.get("env") or []:
            n = e.get("name")
            if "valueFrom" not in e or e.get("valueFrom") is None:
                own[n] = expand(e.get("value") or "", merged)
            else:
                vf = e["valueFrom"]
                if "fieldRef" in vf:
                    own[n] = field_value(pod, vf["fieldRef"].get("fieldPath", ""))
                elif "resourceFieldRef" in vf:
                    own[n] = resource_value(pod, c, vf["resourceFieldRef"], node)
                elif "secretKeyRef" in vf:
                    ref = vf["secretKeyRef"]
                    s = store.get("core/secrets", ns, ref.get("name"))
                    if s is None:
                        if ref.get("optional"):
                            continue
                        raise ConfigError("CreateContainerConfigError", 'secret "%s" not found' % ref.get("name"))
                    data = s.get("data") or {}
                    if ref.get("key") not in data:
                        if ref.get("optional"):
                            continue
                        raise ConfigError("CreateContainerConfigError", "couldn't find key %s in Secret %s/%s" % (ref.get("key"), ns, ref.get("name")))
                    own[n] = base64.b64decode(data[ref["key"]]).decode("utf-8", "replace")
                elif "configMapKeyRef" in vf:
                    ref = vf["configMapKeyRef"]
                    cm = store.get("core/configmaps", ns, ref.get("name"))
                    if cm is None:
                        if ref.get("optional"):
                            continue
                        raise ConfigError("CreateContainerConfigError", 'configmap "%s" not found' % ref.get("name"))
                    data = cm.get("data") or {}
                    if ref.get("key") not in data:
                        if ref.get("optional"):
                            continue
                        raise ConfigError("CreateContainerConfigError", "couldn't find key %s in ConfigMap %s/%s" % (ref.get("key"), ns, ref.get("name")))
                    own[n] = data[ref["key"]]
            merged[n] = own[n]
        env.update(own)
        return env

    def _write_files(self, d, files):
        os.makedirs(d, exist_ok=True)
        for rel, data, mode in files:
            path = os.path.join(d, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.chmod(tmp, mode)
            os.replace(tmp, path)

    def _kv_files(self, data, items, default_mode, what, optional):
        files = []
        if items:
            for it in items:
                if it.get("key") not in data:
                    if optional:
                        continue
                    raise ConfigError("ContainerCreating", "MountVolume.SetUp failed: configmap references non-existent config key: %s" % it.get("key"))
                files.append((it.get("path") or it["key"], data[it["key"]], it.get("mode", default_mode)))
        else:
            for k, v in data.items():
                files.append((k, v, default_mode))
        return files

    def _volume_source(self, pod, v, d):
        """The host folder (or file) of volume v."""
        store = self.app.store
        name = v.get("name")
        if "persistentVolumeClaim" in v:
            claim = v["persistentVolumeClaim"].get("claimName")
            path = os.path.join(self.app.state, "volumes", self.ns, claim)
            os.makedirs(path, exist_ok=True)
            return path, bool(v["persistentVolumeClaim"].get("readOnly")), False
        if "emptyDir" in v:
            path = os.path.join(d, "volumes", name)
            os.makedirs(path, exist_ok=True)
            return path, False, (v.get("emptyDir") or {}).get("medium") == "Memory"
        if "ephemeral" in v:
            path = os.path.join(d, "volumes", name)
            os.makedirs(path, exist_ok=True)
            return path, False, False
        if "hostPath" in v:
            hp = v["hostPath"]
            if hp.get("type") in ("DirectoryOrCreate",):
                os.makedirs(hp["path"], exist_ok=True)
            elif hp.get("type") == "FileOrCreate" and not os.path.exists(hp["path"]):
                os.makedirs(os.path.dirname(hp["path"]), exist_ok=True)
                open(hp["path"], "a").close()
            elif hp.get("type") in ("Directory", "File") and not os.path.exists(hp["path"]):
                raise ConfigError("ContainerCreating", 'MountVolume.SetUp failed for volume "%s" : hostPath type check failed: %s is not a %s' % (
                    name, hp["path"], hp["type"].lower()))
            return hp["path"], False, False
        path = os.path.join(d, "volumes", name)
        files = []
        sources = []
        if "configMap" in v:
            sources.append(("configMap", v["configMap"]))
        if "secret" in v:
            sources.append(("secret", v["secret"]))
        if "downwardAPI" in v:
            sources.append(("downwardAPI", v["downwardAPI"]))
        if "projected" in v:
            for s in v["projected"].get("sources") or []:
                for k in ("configMap", "secret", "downwardAPI", "serviceAccountToken"):
                    if k in s:
                        sources.append((k, dict(s[k], defaultMode=v["projected"].get("defaultMode", 420))))
        if not sources:
            raise ConfigError("ContainerCreating", 'MountVolume.SetUp failed for volume "%s" : volume type not supported by kube-double' % name)
        for kind, src in sources:
            mode = src.get("defaultMode", 420)
            if kind == "configMap":
                cm = store.get("core/configmaps", self.ns, src.get("name"))
                if cm is None:
                    if src.get("optional"):
                        continue
                    raise ConfigError("ContainerCreating", 'MountVolume.SetUp failed for volume "%s" : configmap "%s" not found' % (name, src.get("name")))
                data = {k: x.encode() for k, x in (cm.get("data") or {}).items()}
                data.update({k: base64.b64decode(x) for k, x in (cm.get("binaryData") or {}).items()})
                files += self._kv_files(data, src.get("items"), mode, "configmap", src.get("optional"))
            elif kind == "secret":
                sname = src.get("secretName") or src.get("name")
                s = store.get("core/secrets", self.ns, sname)
                if s is None:
                    if src.get("optional"):
                        continue
                    raise ConfigError("ContainerCreating", 'MountVolume.SetUp failed for volume "%s" : secret "%s" not found' % (name, sname))
                data = {k: base64.b64decode(x) for k, x in (s.get("data") or {}).items()}
                files += self._kv_files(data, src.get("items"), mode, "secret", src.get("optional"))
            elif kind == "downwardAPI":
                for it in src.get("items") or []:
                    if "fieldRef" in it:
                        val = field_value(pod, it["fieldRef"].get("fieldPath", ""))
                    else:
                        val = resource_value(pod, None, it.get("resourceFieldRef") or {}, None)
                    files.append((it["path"], val.encode(), it.get("mode", mode)))
            elif kind == "serviceAccountToken":
                files.append((src.get("path", "token"), self.app.auth.admin.encode(), mode))
        self._write_files(path, files)
        return path, True, False

    def _volumes(self, pod):
        """{container name: [mount dicts for launch.py]}."""
        d = self.dir
        spec = pod["spec"]
        vols = {}
        for v in spec.get("volumes") or []:
            vols[v["name"]] = self._volume_source(pod, v, d) + (v,)
        out = {}
        sa_dir = None
        if spec.get("automountServiceAccountToken", True) and os.geteuid() == 0:
            sa_dir = os.path.join(d, "serviceaccount")
            ca = os.path.join(self.app.state, "pki", "ca.crt")
            files = [("token", self.app.auth.admin.encode(), 0o644), ("namespace", self.ns.encode(), 0o644)]
            if os.path.exists(ca):
                with open(ca, "rb") as f:
                    files.append(("ca.crt", f.read(), 0o644))
            self._write_files(sa_dir, files)
        hosts = self._hosts_file(pod) if os.geteuid() == 0 else None
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            ms = []
            for vm in c.get("volumeMounts") or []:
                src, ro, memory, v = vols[vm["name"]]
                sub = vm.get("subPath") or ""
                if sub:
                    sub = expand(sub, {})
                    src = os.path.join(src, sub)
                    if not os.path.exists(src):
                        os.makedirs(src, exist_ok=True)
                dst = vm["mountPath"]
                tmpfs = memory and not sub
                if dst.rstrip("/") == "/dev/shm" and "emptyDir" in v:
                    tmpfs = True
                ms.append({"src": src, "dst": dst, "ro": bool(vm.get("readOnly")) or ro, "tmpfs": tmpfs})
            if sa_dir and not any(m["dst"].startswith("/var/run/secrets/kubernetes.io/serviceaccount") for m in ms):
                ms.append({"src": sa_dir, "dst": "/var/run/secrets/kubernetes.io/serviceaccount", "ro": True, "tmpfs": False})
            if hosts and not any(m["dst"] == "/etc/hosts" for m in ms):
                ms.append({"src": hosts, "dst": "/etc/hosts", "ro": False, "tmpfs": False, "root_only": True})
            out[c["name"]] = ms
        return out

    def _hosts_file(self, pod):
        """The pod's /etc/hosts (as the kubelet manages it), with the names a
        headless Service would give the pods of its Indexed Job (everything
        is 127.0.0.1 here): HOST, HOST.SUB, HOST.SUB.NS, HOST.SUB.NS.svc,
        HOST.SUB.NS.svc.cluster.local, and the Service's own names."""
        spec = pod["spec"]
        ns = self.ns
        host = spec.get("hostname") or self.name
        sub = spec.get("subdomain")
        names = [host]
        hosts = [host]
        ann = pod["metadata"].get("annotations") or {}
        job = next((r.get("name") for r in pod["metadata"].get("ownerReferences") or [] if r.get("kind") == "Job"), None)
        if sub and job and "batch.kubernetes.io/job-completion-index" in ann:
            j = self.app.store.get("batch/jobs", ns, job)
            n = get_path(j or {}, "spec", "completions") or 0
            hosts = ["%s-%d" % (job, i) for i in range(min(int(n), 1000))] or [host]
        lines = []
        try:
            with open("/etc/hosts") as f:
                lines = [l.rstrip("\n") for l in f if l.strip() and not l.lstrip().startswith("#")]
        except OSError:
            lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        out = ["# Kubernetes-managed hosts file (kube-double)."] + lines
        for h in hosts:
            names = [h]
            if sub:
                names = ["%s.%s.%s.svc.cluster.local" % (h, sub, ns), "%s.%s.%s.svc" % (h, sub, ns),
                         "%s.%s.%s" % (h, sub, ns), "%s.%s" % (h, sub), h]
            out.append("127.0.0.1\t" + " ".join(names))
        if sub:
            out.append("127.0.0.1\t%s.%s.svc.cluster.local %s.%s.svc %s.%s %s" % (sub, ns, sub, ns, sub, ns, sub))
        path = os.path.join(self.dir, "etc-hosts")
        with open(path + ".tmp", "w") as f:
            f.write("\n".join(out) + "\n")
        os.replace(path + ".tmp", path)
        return path

    # ---- containers ----
    def _launch(self, c, mounts, run):
        pod = self.pod()
        if pod is None:
            return False
        env = self._env(pod, c)
        argv = [expand(a, env) for a in (c.get("command") or []) + (c.get("args") or [])]
        if not argv:
            argv = ["sleep", "infinity"]  # no entrypoint known (images are not run): idle until stopped
        cwd = c.get("workingDir") or self.dir
        spec_path = os.path.join(self.dir, ".%s.launch.json" % c["name"])
        errfile = os.path.join(self.dir, ".%s.error" % c["name"])
        try:
            os.unlink(errfile)
        except OSError:
            pass
        with open(spec_path, "w") as f:
            json.dump({"argv": argv, "env": env, "cwd": cwd, "mounts": mounts, "errfile": errfile,
                       "parent": os.getpid(), "hostname": (pod["spec"].get("hostname") or self.name)[:63]}, f)
        run.errfile = errfile
        logf = open(run.log_path, "ab")
        run.logf = logf
        run.proc = subprocess.Popen([sys.executable, "-S", LAUNCH, spec_path], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                    close_fds=True, env={"PATH": self.app.path_env})
        run.started = now_rfc3339()
        self.event("Normal", "Started", "Started container %s" % c["name"])
        for stream, pipe in (("stdout", run.proc.stdout), ("stderr", run.proc.stderr)):
            t = threading.Thread(target=self._reader, args=(run, stream, pipe), daemon=True)
            t.start()
            run.readers.append(t)
        return True

    def _reader(self, run, stream, pipe):
        try:
            while True:
                line = pipe.readline(16384)
                if not line:
                    break
                tag = b"F"
                if not line.endswith(b"\n"):
                    tag = b"P"
                else:
                    line = line[:-1]
                rec = b"%s %s %s %s\n" % (rfc3339nano(time.time()).encode(), stream.encode(), tag, line)
                with run.lock:
                    run.logf.write(rec)
                    run.logf.flush()
        except (OSError, ValueError):
            pass
        finally:
            try:
                pipe.close()
            except OSError:
                pass

    def _collect(self, run):
        """After the process ended: the rest of its output, then the result."""
        rc = run.proc.returncode
        _killpg(run.proc, signal.SIGKILL)  # the container's other processes end with it
        for t in run.readers:
            t.join(5)
        with run.lock:
            try:
                run.logf.close()
            except OSError:
                pass
        msg = None
        if rc == 128 and os.path.exists(run.errfile):
            with open(run.errfile, errors="replace") as f:
                msg = f.read().strip()
            res = (128, None, "StartError", msg)
        elif rc < 0:
            sig = -rc
            if sig == signal.SIGKILL and (run.oom or not run.killed_by_us):
                res = (137, None, "OOMKilled", None)
            else:
                res = (128 + sig, None, "Error", None)
        else:
            res = (rc, None, "Completed" if rc == 0 else "Error", None)
        run.result = res
        run.done.set()
        return res

    def _new_run(self, c, restart):
        log = os.path.join(self.dir, c["name"] + ".log")
        if restart and os.path.exists(log):
            os.replace(log, os.path.join(self.dir, c["name"] + ".previous.log"))
        run = ContainerRun(c["name"], log)
        self.runs[c["name"]] = run
        with self.k.lock:
            self.k.runs[(self.ns, self.name, c["name"])] = run
        return run

    def _terminated_state(self, run, res, c):
        code, sig, reason, msg = res
        t = {"exitCode": code, "reason": reason, "startedAt": run.started, "finishedAt": now_rfc3339(),
             "containerID": "double://%d" % run.proc.pid}
        if msg:
            t["message"] = msg
        elif code != 0 and c.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            t["message"] = _log_tail(run.log_path, 80, 2048)
        return {"terminated": t}

    def _run_container(self, c, mounts_of, init, index):
        """Runs an init container to its end; (exitCode, ...) or None if the pod went."""
        run = self._new_run(c, False)
        try:
            self._launch(c, mounts_of.get(c["name"], []), run)
        except ConfigError as e:
            self._report_waiting([c], e, True)
            return None

        def running(p):
            st = p.setdefault("status", {})
            for s in st.get("initContainerStatuses") or []:
                if s["name"] == c["name"]:
                    s.update({"state": {"running": {"startedAt": run.started}}, "started": True,
                              "containerID": "double://%d" % run.proc.pid})
        self.update(running)
        while run.proc.poll() is None:
            if self.lost.is_set() or self.app.stopping.is_set():
                return None
            if self._gone_or_deleting():
                self._terminate([run], c_list=[c])
                return None
            time.sleep(0.1)
        res = self._collect(run)

        def done(p):
            st = p.setdefault("status", {})
            for s in st.get("initContainerStatuses") or []:
                if s["name"] == c["name"]:
                    s.update({"state": self._terminated_state(run, res, c), "ready": res[0] == 0, "started": False})
        self.update(done)
        return res

    def _run_main(self, conts, mounts_of, restart_policy):
        restarts = {c["name"]: 0 for c in conts}
        last_state = {c["name"]: {} for c in conts}
        oom_after = None
        pod = self.pod()
        if pod is None:
            return self._finish_deleted()
        ann = pod["metadata"].get("annotations") or {}
        if ann.get(OOM_ANNOTATION):
            try:
                oom_after = time.monotonic() + float(ann[OOM_ANNOTATION])
            except ValueError:
                oom_after = None
        ads = get_path(pod, "spec", "activeDeadlineSeconds")
        start_t = parse_time(get_path(pod, "status", "startTime")) or time.time()
        running = {}
        finished = {}
        for c in conts:
            run = self._new_run(c, False)
            try:
                self._launch(c, mounts_of.get(c["name"], []), run)
            except ConfigError as e:
                self._report_waiting(conts, e, False)
                self.stop_all(signal.SIGKILL)
                return self._sleep(3600 * 24) or self._finish_deleted()
            running[c["name"]] = run
        self._report_main(conts, running, finished, restarts, last_state)
        while True:
            if self.lost.is_set() or self.app.stopping.is_set():
                return
            if self._gone_or_deleting():
                self._terminate(list(running.values()), c_list=conts)
                for name, run in running.items():
                    finished[name] = run
                running = {}
                self._report_main(conts, running, finished, restarts, last_state)
                return self._finish(failed=any(r.result and r.result[0] != 0 for r in finished.values()), deleting=True)
            if oom_after is not None and time.monotonic() >= oom_after:
                oom_after = None
                self.oom_kill()
            if ads and time.time() - start_t >= ads:
                self._terminate(list(running.values()), c_list=conts, grace=get_path(pod, "spec", "terminationGracePeriodSeconds", default=30))
                finished.update(running)
                running = {}
                self._report_main(conts, running, finished, restarts, last_state)
                return self._finish(failed=True, reason="DeadlineExceeded", message="Pod was active on the node longer than the specified deadline")
            changed = False
            for name, run in list(running.items()):
                if run.proc.poll() is None:
                    continue
                res = self._collect(run)
                del running[name]
                changed = True
                c = next(x for x in conts if x["name"] == name)
                again = restart_policy == "Always" or (restart_policy == "OnFailure" and res[0] != 0)
                if again:
                    last_state[name] = self._terminated_state(run, res, c)
                    restarts[name] += 1
                    if not self._sleep(min(10.0, 0.5 * restarts[name])):
                        finished[name] = run
                        continue
                    nr = self._new_run(c, True)
                    try:
                        self._launch(c, mounts_of.get(name, []), nr)
                    except ConfigError:
                        finished[name] = run
                        continue
                    running[name] = nr
                else:
                    finished[name] = run
            if changed:
                self._report_main(conts, running, finished, restarts, last_state)
            if not running:
                failed = any(r.result[0] != 0 for r in finished.values())
                return self._finish(failed=failed)
            time.sleep(0.1)

    def _report_main(self, conts, running, finished, restarts, last_state):
        def fn(p):
            st = p.setdefault("status", {})
            out = []
            for c in conts:
                n = c["name"]
                s = {"name": n, "image": c.get("image", ""), "imageID": "docker.io/library/%s@sha256:%s" % (
                    (c.get("image") or "").split(":")[0], "0" * 64), "restartCount": restarts[n],
                    "lastState": last_state[n]}
                if n in running:
                    r = running[n]
                    s.update({"state": {"running": {"startedAt": r.started}}, "ready": True, "started": True,
                              "containerID": "double://%d" % r.proc.pid})
                elif n in finished:
                    r = finished[n]
                    s.update({"state": self._terminated_state(r, r.result, c), "ready": False, "started": False,
                              "containerID": "double://%d" % r.proc.pid})
                else:
                    s.update({"state": {"waiting": {"reason": "ContainerCreating"}}, "ready": False, "started": False})
                if self.gpu_ids:
                    s["allocatedResources"] = {"nvidia.com/gpu": str(len(self.gpu_ids))} if False else s.get("allocatedResources")
                    s.pop("allocatedResources", None)
                out.append(s)
            st["containerStatuses"] = out
            all_ready = bool(conts) and all(n["name"] in running for n in conts)
            st["phase"] = "Running" if running else st.get("phase", "Pending")
            if all_ready:
                self.set_conditions(st, Ready="True", ContainersReady="True")
                for c in st["conditions"]:
                    if c["type"] in ("Ready", "ContainersReady"):
                        c.pop("reason", None)
            else:
                self.set_conditions(st, Ready=("False", "ContainersNotReady"), ContainersReady=("False", "ContainersNotReady"))
        self.update(fn)

    def _terminate(self, runs, c_list, grace=None):
        """SIGTERM, then SIGKILL when the grace period is over (deletionTimestamp)."""
        for r in runs:
            if r.proc.poll() is None:
                self.event("Normal", "Killing", "Stopping container %s" % r.name)
        for r in runs:
            if r.proc.poll() is None:
                r.killed_by_us = True
                _killpg(r.proc, signal.SIGTERM)
        while any(r.proc.poll() is None for r in runs):
            if self.lost.is_set() or self.app.stopping.is_set():
                return
            p = self.pod()
            if grace is not None:
                deadline_passed = grace <= 0
                grace_end = getattr(self, "_grace_end", None)
                if grace_end is None:
                    self._grace_end = time.monotonic() + grace
                deadline_passed = time.monotonic() >= self._grace_end
            elif p is None:
                deadline_passed = True
            else:
                dt = parse_time(p["metadata"].get("deletionTimestamp"))
                deadline_passed = dt is None or time.time() >= dt or p["metadata"].get("deletionGracePeriodSeconds", 0) == 0
            if deadline_passed:
                for r in runs:
                    if r.proc.poll() is None:
                        r.killed_by_us = True
                        _killpg(r.proc, signal.SIGKILL)
                break
            time.sleep(0.05)
        for r in runs:
            try:
                r.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
            if r.result is None and r.proc.returncode is not None:
                self._collect(r)

    def _finish_deleted(self):
        return self._finish(failed=True, deleting=True)

    def _finish(self, failed, deleting=False, reason=None, message=None):
        def fn(p):
            st = p.setdefault("status", {})
            if st.get("phase") in TERMINAL:
                return False
            st["phase"] = "Failed" if failed else "Succeeded"
            if reason:
                st["reason"] = reason
                st["message"] = message
            for s in (st.get("containerStatuses") or []) + (st.get("initContainerStatuses") or []):
                if "waiting" in (s.get("state") or {}) or "running" in (s.get("state") or {}):
                    s["state"] = {"terminated": {"exitCode": 137 if "running" in s["state"] else 0,
                                                 "reason": "ContainerStatusUnknown" if "waiting" in s["state"] else "Error",
                                                 "message": "The container could not be located when the pod was terminated" if "waiting" in s["state"] else None,
                                                 "startedAt": get_path(s, "state", "running", "startedAt"),
                                                 "finishedAt": now_rfc3339()}}
                    if s["state"]["terminated"]["message"] is None:
                        del s["state"]["terminated"]["message"]
                    s["ready"] = False
                    s["started"] = False
            self.set_conditions(st, Ready=("False", "PodCompleted"), ContainersReady=("False", "PodCompleted"),
                                PodReadyToStartContainers="False")
        self.update(fn)
        if deleting and not self.lost.is_set() and not self.app.stopping.is_set():
            try:
                self.ops.delete(self.pods, self.ns, self.name, {"gracePeriodSeconds": 0,
                                                                "preconditions": {"uid": self.uid}})
            except ApiError:
                pass


def _log_tail(path, lines, limit):
    try:
        with open(path, "rb") as f:
            data = f.read()[-(limit * 4):]
    except OSError:
        return ""
    out = []
    for rec in data.split(b"\n")[-lines - 1:]:
        parts = rec.split(b" ", 3)
        if len(parts) == 4:
            out.append(parts[3].decode("utf-8", "replace"))
    return "\n".join(out)[-limit:]


class LogServer:
    """GET .../pods/NAME/log."""

    def __init__(self, app):
        self.app = app

    def _records(self, data):
        """(time, line bytes) records joined from partial P pieces."""
        out, pend = [], []
        for rec in data.split(b"\n"):
            parts = rec.split(b" ", 3)
            if len(parts) < 3:
                continue
            ts, tag = parts[0], parts[2]
            text = parts[3] if len(parts) == 4 else b""
            pend.append(text)
            if tag == b"F":
                out.append((ts.decode(), b"".join(pend)))
                pend = []
        return out, pend

    def serve(self, h, ns, name, q):
        app = self.app
        pods = app.registry.get("", "v1", "pods")
        pod = app.ops.get(pods, ns, name)
        conts = [c["name"] for c in get_path(pod, "spec", "containers") or []]
        inits = [c["name"] for c in get_path(pod, "spec", "initContainers") or []]
        cname = q.get("container")
        if not cname:
            if len(conts) != 1:
                raise bad_request("a container name must be specified for pod %s, choose one of: [%s]" % (name, " ".join(conts))
                                  + (" or one of the init containers: [%s]" % " ".join(inits) if inits else ""))
            cname = conts[0]
        if cname not in conts + inits:
            raise bad_request("container %s is not valid for pod %s" % (cname, name))
        statuses = (get_path(pod, "status", "containerStatuses") or []) + (get_path(pod, "status", "initContainerStatuses") or [])
        cs = next((s for s in statuses if s.get("name") == cname), None)
        d = os.path.join(app.state, "pods", ns, name)
        previous = q.get("previous") in ("true", "1")
        path = os.path.join(d, cname + (".previous.log" if previous else ".log"))
        if previous and not os.path.exists(path):
            raise bad_request('previous terminated container "%s" in pod "%s" not found' % (cname, name))
        if not os.path.exists(path):
            w = get_path(cs or {}, "state", "waiting", "reason") or "ContainerCreating"
            if cs and "terminated" in (cs.get("state") or {}):
                path = None
            else:
                raise bad_request('container "%s" in pod "%s" is waiting to start: %s' % (cname, name, w))
        since = None
        if q.get("sinceTime"):
            since = parse_time(q["sinceTime"])
            if since is None:
                raise bad_request('parsing time "%s" as "2006-01-02T15:04:05Z07:00": cannot parse' % q["sinceTime"])
            # the API server passes sinceTime on to the kubelet in RFC 3339 with
            # whole seconds: the lines earlier in that second come too
            import math
            since = math.floor(since)
        elif q.get("sinceSeconds"):
            try:
                since = time.time() - int(q["sinceSeconds"])
            except ValueError:
                raise bad_request("invalid sinceSeconds")
        tail = None
        if q.get("tailLines"):
            try:
                tail = int(q["tailLines"])
            except ValueError:
                raise bad_request("invalid tailLines")
        limit = None
        if q.get("limitBytes"):
            try:
                limit = int(q["limitBytes"])
            except ValueError:
                raise bad_request("invalid limitBytes")
        stamps = q.get("timestamps") in ("true", "1")
        follow = q.get("follow") in ("true", "1") and not previous

        def fmt(recs):
            out = []
            for ts, line in recs:
                if since is not None and (parse_time(ts) or 0) < since:
                    continue
                out.append(((ts + " ").encode() if stamps else b"") + line + b"\n")
            return out

        data = b""
        f = None
        if path:
            f = open(path, "rb")
        try:
            if f:
                data = f.read()
            cut = data.rfind(b"\n") + 1
            recs, _ = self._records(data[:cut])
            rest = data[cut:]
            lines = fmt(recs)
            if tail is not None:
                lines = lines[-tail:] if tail > 0 else []
            body = b"".join(lines)
            if not follow:
                if limit is not None:
                    body = body[:limit]
                return h._send(200, body, "text/plain")
            run = None
            with app.kubelets.lock:
                run = app.kubelets.runs.get((ns, name, cname))
            h._start_chunked("text/plain")
            sent = 0
            if limit is not None:
                body = body[:limit]
            h._chunk(body)
            sent += len(body)
            while f is not None and run is not None and not app.stopping.is_set():
                if limit is not None and sent >= limit:
                    break
                more = f.read()
                if more:
                    rest += more
                    cut = rest.rfind(b"\n") + 1
                    recs, _ = self._records(rest[:cut])
                    rest = rest[cut:]
                    chunk = b"".join(fmt(recs))
                    if limit is not None:
                        chunk = chunk[:limit - sent]
                    h._chunk(chunk)
                    sent += len(chunk)
                    continue
                if run.done.is_set():
                    more = f.read()
                    if not more:
                        break
                    rest += more
                    continue
                p = app.store.get("core/pods", ns, name)
                if p is None or p["metadata"].get("uid") != pod["metadata"].get("uid"):
                    break
                # the container was restarted: this instance's log is over
                with app.kubelets.lock:
                    if app.kubelets.runs.get((ns, name, cname)) is not run:
                        break
                if h._peer_gone():
                    break
                time.sleep(0.1)
            h._end_chunked()
        finally:
            if f:
                f.close()
