"""scheduler.py: binds pending pods to a Ready, schedulable node that fits
(requests of nvidia.com/gpu, cpu, memory, pods against allocatable minus
the non-terminal pods already bound; nodeSelector; required node affinity;
taints and tolerations), else marks them Unschedulable with the real
scheduler's message. No preemption."""
from .util import get_path, now_rfc3339, parse_quantity

TERMINAL = ("Succeeded", "Failed")


def _tolerates(tols, taint):
    for t in tols or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if not t.get("key"):
            if op == "Exists":
                return True
            continue
        if t["key"] != taint.get("key"):
            continue
        if op == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _expr_match(e, labels, name=None, field=False):
    key, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
    if field:
        v, has = (name, True) if key == "metadata.name" else (None, False)
    else:
        has = key in labels
        v = labels.get(key)
    if op == "In":
        return has and v in vals
    if op == "NotIn":
        return not has or v not in vals
    if op == "Exists":
        return has
    if op == "DoesNotExist":
        return not has
    if op in ("Gt", "Lt"):
        try:
            iv, lim = int(v), int(vals[0])
        except (TypeError, ValueError, IndexError):
            return False
        return iv > lim if op == "Gt" else iv < lim
    return False


def node_affinity_match(pod, node):
    labels = node["metadata"].get("labels") or {}
    for k, v in (get_path(pod, "spec", "nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    req = get_path(pod, "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    if req:
        terms = req.get("nodeSelectorTerms") or []
        ok = False
        for t in terms:
            exprs, fields = t.get("matchExpressions") or [], t.get("matchFields") or []
            if not exprs and not fields:
                continue  # an empty term matches nothing
            if all(_expr_match(e, labels) for e in exprs) and \
                    all(_expr_match(f, labels, node["metadata"]["name"], True) for f in fields):
                ok = True
                break
        if not ok:
            return False
    return True


_REQ_CACHE = {}  # pod uid -> its requests (a pod's resources never change)


def pod_request(pod):
    from .ops import pod_requests
    uid = pod["metadata"].get("uid")
    r = _REQ_CACHE.get(uid)
    if r is None:
        r = {k: v for k, v in pod_requests(pod).items() if not k.startswith("limits:")}
        if uid:
            if len(_REQ_CACHE) > 200000:
                _REQ_CACHE.clear()
            _REQ_CACHE[uid] = r
    return r


def node_ready(node):
    for c in get_path(node, "status", "conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


class Scheduler:
    """Keeps the requests bound to each node up to date from the pod events
    (observe), and places the pending pods the control loop hands it."""

    def __init__(self, app):
        self.app = app
        self.ops = app.ops
        self.used = {}  # node -> {resource: amount} of its non-terminal pods
        self.accounted = {}  # pod uid -> (node, requests)

    def reset(self):
        self.used, self.accounted = {}, {}
        for p in self.app.store.list("core/pods"):
            self.observe(p)

    def observe(self, pod, deleted=False):
        uid = pod["metadata"].get("uid")
        node = get_path(pod, "spec", "nodeName")
        live = node and not deleted and get_path(pod, "status", "phase") not in TERMINAL
        had = self.accounted.get(uid)
        if live and had is None:
            req = pod_request(pod)
            self.accounted[uid] = (node, req)
            u = self.used.setdefault(node, {})
            for k, v in req.items():
                u[k] = u.get(k, 0) + v
        elif not live and had is not None:
            del self.accounted[uid]
            u = self.used.setdefault(had[0], {})
            for k, v in had[1].items():
                u[k] = u.get(k, 0) - v

    def bind(self, pod, node_name):
        pods = self.app.registry.get("", "v1", "pods")

        def fn(p):
            p["spec"]["nodeName"] = node_name
            st = p.setdefault("status", {})
            conds = [c for c in st.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                          "lastTransitionTime": now_rfc3339()})
            st["conditions"] = conds
        self.ops.mutate(pods, pod["metadata"]["namespace"], pod["metadata"]["name"], fn)
        self.app.controllers.event(pod, "Normal", "Scheduled", "Successfully assigned %s/%s to %s" % (
            pod["metadata"]["namespace"], pod["metadata"]["name"], node_name), "default-scheduler")

    def run_once(self, pending_keys=None):
        store = self.app.store
        pods_res = self.app.registry.get("", "v1", "pods")
        with store.lock:
            if pending_keys is None:
                cand = store.list("core/pods")
            else:
                cand = [p for p in (store.get("core/pods", ns, n) for ns, n in pending_keys) if p is not None]
            pending = [p for p in cand
                       if not get_path(p, "spec", "nodeName") and not p["metadata"].get("deletionTimestamp")
                       and get_path(p, "status", "phase") == "Pending"
                       and get_path(p, "spec", "schedulerName", default="default-scheduler") == "default-scheduler"
                       and not get_path(p, "spec", "schedulingGates")]
            if not pending:
                return
            nodes = sorted(store.list("core/nodes"), key=lambda n: n["metadata"]["name"])
            used = self.used
            pending.sort(key=lambda p: (-(get_path(p, "spec", "priority") or 0), p["metadata"].get("creationTimestamp", ""),
                                        p["metadata"]["name"]))
            for pod in pending:
                req = pod_request(pod)
                reasons = {}
                chosen = None
                for n in nodes:
                    why = self._misfit(pod, req, n, used.get(n["metadata"]["name"]) or {})
                    if not why:
                        chosen = n
                        break
                    for w in why:
                        reasons[w] = reasons.get(w, 0) + 1
                if chosen is not None:
                    self.bind(pod, chosen["metadata"]["name"])
                    bound = store.get("core/pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
                    if bound is not None:
                        self.observe(bound)
                    continue
                if not nodes:
                    msg = "no nodes available to schedule pods"
                else:
                    parts = sorted("%d %s" % (c, r) for r, c in reasons.items())
                    msg = "0/%d nodes are available: %s. preemption: 0/%d nodes are available: %d Preemption is not helpful for scheduling." % (
                        len(nodes), ", ".join(parts), len(nodes), len(nodes))
                self._unschedulable(pods_res, pod, msg)

    def _misfit(self, pod, req, node, used):
        why = []
        spec = node.get("spec") or {}
        tols = get_path(pod, "spec", "tolerations") or []
        if spec.get("unschedulable") and not _tolerates(tols, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}):
            return ["node(s) were unschedulable"]
        for t in spec.get("taints") or []:
            if t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tols, t):
                return ["node(s) had untolerated taint {%s: %s}" % (t.get("key"), t.get("value") or "")]
        if not node_ready(node):
            return ["node(s) had untolerated taint {node.kubernetes.io/not-ready: }"]
        if not node_affinity_match(pod, node):
            return ["node(s) didn't match Pod's node affinity/selector"]
        alloc = get_path(node, "status", "allocatable") or {}
        for k, v in sorted(req.items()):
            if v <= 0:
                continue
            cap = parse_quantity(alloc.get(k, 0)) or 0
            if used.get(k, 0) + v > cap + 1e-9:
                why.append("Too many pods" if k == "pods" else "Insufficient %s" % k)
        return why

    def _unschedulable(self, pods_res, pod, msg):
        for c in get_path(pod, "status", "conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" and c.get("message") == msg:
                return

        def fn(p):
            st = p.setdefault("status", {})
            conds = [c for c in st.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg,
                          "lastProbeTime": None, "lastTransitionTime": now_rfc3339()})
            st["conditions"] = conds
        self.ops.mutate(pods_res, pod["metadata"]["namespace"], pod["metadata"]["name"], fn, status_only=True)
        self.app.controllers.event(pod, "Warning", "FailedScheduling", msg, "default-scheduler")
