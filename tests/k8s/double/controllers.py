"""controllers.py: the control loop of the double, one thread running in
turn: the Job controller (batch/v1 v1.32 semantics), the TTL-after-finished
controller, the garbage collector (ownerReferences; foreground, background,
orphan), the namespace controller, the node lifecycle controller, the
quota usage, and the scheduler. Every pass runs under the store lock, so
the controllers never race each other or the API."""
import threading
import time
import traceback

from .scheduler import Scheduler
from .util import ApiError, deep, get_path, now_rfc3339, parse_time, rand_suffix

TRACKING = "batch.kubernetes.io/job-tracking"
TERMINAL = ("Succeeded", "Failed")
IDX = "batch.kubernetes.io/job-completion-index"


def cond(obj, type_):
    for c in get_path(obj, "status", "conditions") or []:
        if c.get("type") == type_:
            return c
    return None


def cond_true(obj, type_):
    c = cond(obj, type_)
    return c is not None and c.get("status") == "True"


def set_cond(status, type_, st, reason, message, now):
    conds = status.setdefault("conditions", [])
    for c in conds:
        if c.get("type") == type_:
            if c.get("status") != st or c.get("reason") != reason:
                c.update({"status": st, "reason": reason, "message": message, "lastProbeTime": now,
                          "lastTransitionTime": now})
            return
    conds.append({"type": type_, "status": st, "reason": reason, "message": message, "lastProbeTime": now,
                  "lastTransitionTime": now})


def parse_indexes(s):
    out = set()
    for part in (s or "").split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.update(range(int(a), int(b) + 1))
        else:
            out.add(int(part))
    return out


def format_indexes(ix):
    ix = sorted(ix)
    out, i = [], 0
    while i < len(ix):
        j = i
        while j + 1 < len(ix) and ix[j + 1] == ix[j] + 1:
            j += 1
        out.append(str(ix[i]) if i == j else "%d-%d" % (ix[i], ix[j]))
        i = j + 1
    return ",".join(out)


def pod_index(pod):
    v = (pod["metadata"].get("annotations") or {}).get(IDX)
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def match_failure_policy(policy, pod):
    """(action, message, rule index) of the first matching rule, or (None, None, None)."""
    st = pod.get("status") or {}
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    for i, rule in enumerate((policy or {}).get("rules") or []):
        act = rule.get("action")
        oec = rule.get("onExitCodes")
        if oec is not None:
            for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
                if oec.get("containerName") and oec["containerName"] != cs.get("name"):
                    continue
                t = get_path(cs, "state", "terminated")
                if not t:
                    continue
                code = t.get("exitCode", 0)
                if code == 0:
                    continue
                vals = oec.get("values") or []
                if (oec.get("operator") == "In") == (code in vals):
                    return act, "Container %s for pod %s/%s failed with exit code %d matching %s rule at index %d" % (
                        cs.get("name"), ns, name, code, act, i), i
        for pat in rule.get("onPodConditions") or []:
            for c in st.get("conditions") or []:
                if c.get("type") == pat.get("type") and c.get("status") == pat.get("status", "True"):
                    return act, "Pod %s/%s has condition %s matching %s rule at index %d" % (
                        ns, name, pat.get("type"), act, i), i
    return None, None, None


class Controllers:
    def __init__(self, app):
        self.app = app
        self.ops = app.ops
        self.store = app.store
        self.scheduler = Scheduler(app)
        self.thread = None
        self.lost = {}  # node -> time it was lost
        self.next_try = {}  # job uid -> monotonic time of the next pod creation (backoff after failures)
        self.create_failures = {}  # job uid -> pod creations refused in a row
        self.job_backoff = float(getattr(app.args, "job_backoff", 1.0))

    def res(self, group, plural):
        for r in self.app.registry.all():
            if r.group == group and r.plural == plural:
                return r
        return None

    def start(self):
        self.thread = threading.Thread(target=self.loop, name="controllers", daemon=True)
        self.thread.start()

    def loop(self):
        """Woken by every write (or every 0.2 s): reads the new events, works
        out what they touch, and reconciles only that, one object at a time
        under the store lock (so the API is served in between). A full
        resync runs at start, when the history no longer reaches back, and
        every 10 s."""
        seq = -1
        cursor = None
        self.timers = {}
        self.terminating_ns = set()
        self.pending = set()
        last_full = 0.0
        while not self.app.stopping.is_set():
            seq = self.store.wait_change(seq, 0.2)
            try:
                now = time.monotonic()
                events, rv = (None, None) if cursor is None or now - last_full > 10 else self.store.events_since(cursor)
                if events is None:
                    work, cursor = self.full_work()
                    last_full = now
                else:
                    work = self.event_work(events)
                    cursor = rv
                self.run_work(work)
            except Exception:  # noqa: BLE001 - keep the loop alive, say why
                traceback.print_exc()
                self.app.stopping.wait(0.2)

    def full_work(self):
        w = {"jobs": set(), "gc": set(), "owners": set(), "quota": set(), "sched": True}
        with self.store.lock:
            for j in self.store.list("batch/jobs"):
                w["jobs"].add((j["metadata"]["namespace"], j["metadata"]["name"]))
            for r in self.app.registry.all():
                for o in self.store.list(r.key):
                    m = o["metadata"]
                    if m.get("ownerReferences"):
                        w["gc"].add((r.key, m.get("namespace") or "", m["name"]))
                    if m.get("deletionTimestamp") and set(m.get("finalizers") or []) & {"foregroundDeletion", "orphan"}:
                        w["owners"].add(m.get("uid"))
                    if r.key == "core/namespaces" and m.get("deletionTimestamp"):
                        self.terminating_ns.add(m["name"])
            for q in self.store.list("core/resourcequotas"):
                w["quota"].add(q["metadata"]["namespace"])
            w["orphans"] = set((p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.store.list("core/pods")
                               if TRACKING in (p["metadata"].get("finalizers") or []))
            self.pending = set((p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.store.list("core/pods")
                               if _is_pending(p))
            self.scheduler.reset()
            return w, self.store.rv  # the same lock hold: no write falls between

    def event_work(self, events):
        w = {"jobs": set(), "gc": set(), "owners": set(), "quota": set(), "sched": False}
        with self.store.lock:
            for ev in events:
                o, m = ev.obj, ev.obj["metadata"]
                ns, name = m.get("namespace") or "", m["name"]
                if ev.key == "batch/jobs":
                    w["jobs"].add((ns, name))
                elif ev.key == "core/pods":
                    if ev.type != "DELETED" and TRACKING in (m.get("finalizers") or []):
                        w.setdefault("orphans", set()).add((ns, name))
                    for src in (ev.obj, ev.prev):
                        for ref in (src or {}).get("metadata", {}).get("ownerReferences") or []:
                            if ref.get("kind") == "Job":
                                w["jobs"].add((ns, ref.get("name")))
                    self.scheduler.observe(o, ev.type == "DELETED")
                    was = ev.prev is not None and _is_pending(ev.prev)
                    now_p = ev.type != "DELETED" and _is_pending(o)
                    if now_p:
                        if (ns, name) not in self.pending:
                            w["sched"] = True
                        self.pending.add((ns, name))
                    else:
                        self.pending.discard((ns, name))
                    phase_changed = ev.prev is None or ev.type == "DELETED" or \
                        get_path(ev.prev, "status", "phase") != get_path(o, "status", "phase")
                    if phase_changed or was != now_p:
                        if self.store.list("core/resourcequotas", ns):
                            w["quota"].add(ns)
                        if ev.type == "DELETED" or get_path(o, "status", "phase") in TERMINAL:
                            w["sched"] = True  # resources freed
                elif ev.key == "core/resourcequotas":
                    w["quota"].add(ns)
                elif ev.key == "core/nodes":
                    w["sched"] = True
                    if ev.type == "DELETED":
                        w.setdefault("gone_nodes", set()).add(name)
                elif ev.key == "core/namespaces" and m.get("deletionTimestamp") and ev.type != "DELETED":
                    self.terminating_ns.add(name)
                if ev.type != "DELETED" and m.get("ownerReferences"):
                    w["gc"].add((ev.key, ns, name))
                if ev.type == "DELETED":
                    for ident in list(self.store.owned.get(m.get("uid"), ())):
                        w["gc"].add(ident)
                    for ref in m.get("ownerReferences") or []:
                        w["owners"].add(ref.get("uid"))
                elif m.get("deletionTimestamp") and set(m.get("finalizers") or []) & {"foregroundDeletion", "orphan"}:
                    w["owners"].add(m.get("uid"))
        now = time.monotonic()
        for key, t in list(self.timers.items()):
            if now >= t:
                del self.timers[key]
                w["jobs"].add(key)
        if self.pending and now - getattr(self, "_last_sched", 0) > 1.0:
            w["sched"] = True
        return w

    def run_work(self, w):
        lock = self.store.lock
        with lock:
            self.node_lifecycle()
        for name in sorted(self.terminating_ns):
            with lock:
                self.namespace(name)
        for uid in w["owners"]:
            with lock:
                self.gc_owner(uid)
        for ident in sorted(w["gc"]):
            with lock:
                self.gc_dependent(ident)
        for key in sorted(w["jobs"]):
            with lock:
                job = self.store.get("batch/jobs", key[0], key[1])
                if job is None:
                    self.timers.pop(key, None)
                    continue
                try:
                    self.sync_job(job)
                except ApiError as e:
                    self.app.stats.record_invalid("INTERNAL", "job controller %s/%s" % key, e.code, e.message)
        for node in sorted(w.get("gone_nodes") or ()):
            self.app.kubelets.node_lost(node)
            with lock:
                self.pod_gc(node)
        for key in sorted(w.get("orphans") or ()):
            with lock:
                self.orphan_finalizer(key)
        if w["quota"]:
            with lock:
                self.ops.update_quota_usage(w["quota"])
        if w["sched"] and self.pending:
            self._last_sched = time.monotonic()
            with lock:
                self.scheduler.run_once(sorted(self.pending))

    def pod_gc(self, node):
        """Pods bound to a node that no longer exists: Failed with
        DisruptionTarget (DeletionByPodGC), deleted (as PodGC does)."""
        pods = self.res("", "pods")
        self.lost.pop(node, None)
        for p in self.store.list("core/pods"):
            if get_path(p, "spec", "nodeName") != node:
                continue
            ns, pn = p["metadata"]["namespace"], p["metadata"]["name"]
            if get_path(p, "status", "phase") not in TERMINAL:
                def fn(x):
                    _pod_lost(x)
                    for c in x["status"]["conditions"]:
                        if c["type"] == "DisruptionTarget":
                            c.update({"reason": "DeletionByPodGC", "message": "PodGC: node no longer exists"})
                self.ops.mutate(pods, ns, pn, fn, status_only=True)
            try:
                self.ops.delete(pods, ns, pn, {"gracePeriodSeconds": 0})
            except ApiError:
                pass

    def orphan_finalizer(self, key):
        """A pod with the job-tracking finalizer whose Job is gone (or that
        was orphaned) loses the finalizer, as the real controller does."""
        p = self.store.get("core/pods", key[0], key[1])
        if p is None or TRACKING not in (p["metadata"].get("finalizers") or []):
            return
        ctl = [r for r in p["metadata"].get("ownerReferences") or [] if r.get("controller") and r.get("kind") == "Job"]
        if ctl and self.store.by_uid(ctl[0].get("uid")) is not None:
            return
        self.remove_tracking(p)

    def due(self, job, t):
        """Sync the Job again at monotonic time t (the earliest asked for wins)."""
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        cur = self.timers.get(key)
        if cur is None or t < cur:
            self.timers[key] = t

    # ---- events ----
    def event(self, obj, type_, reason, message, component="job-controller"):
        ev_res = self.res("", "events")
        m = obj["metadata"]
        ns = m.get("namespace") or "default"
        ev = {"apiVersion": "v1", "kind": "Event",
              "metadata": {"name": "%s.%s" % (m["name"], rand_suffix(16).lower()), "namespace": ns},
              "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": m["name"],
                                 "namespace": ns, "uid": m.get("uid"), "resourceVersion": m.get("resourceVersion")},
              "reason": reason, "message": message, "type": type_, "count": 1,
              "firstTimestamp": now_rfc3339(), "lastTimestamp": now_rfc3339(),
              "source": {"component": component}, "reportingComponent": component, "reportingInstance": ""}
        try:
            self.ops.create(ev_res, ns, ev, internal=True)
        except ApiError:
            pass

    # ---- the Job controller ----
    def job_pods(self, job):
        uid = job["metadata"]["uid"]
        out = []
        for key, p in self.store.dependents(uid):
            if key != "core/pods":
                continue
            for ref in p["metadata"].get("ownerReferences") or []:
                if ref.get("uid") == uid and ref.get("controller"):
                    out.append(p)
                    break
        return out

    def remove_tracking(self, pod):
        pods = self.res("", "pods")
        self.ops.mutate(pods, pod["metadata"]["namespace"], pod["metadata"]["name"],
                        lambda p: p["metadata"].__setitem__("finalizers", [
                            f for f in p["metadata"].get("finalizers") or [] if f != TRACKING]))

    def sync_job(self, job):
        jobs = self.res("batch", "jobs")
        pods_res = self.res("", "pods")
        spec = job.get("spec") or {}
        m = job["metadata"]
        if spec.get("managedBy") not in (None, "kubernetes.io/job-controller"):
            return  # another controller's Job (spec.managedBy)
        pods = self.job_pods(job)
        finished = cond_true(job, "Complete") or cond_true(job, "Failed")
        if finished or m.get("deletionTimestamp"):
            for p in pods:
                if TRACKING in (p["metadata"].get("finalizers") or []) and (
                        get_path(p, "status", "phase") in TERMINAL or p["metadata"].get("deletionTimestamp") or finished):
                    self.remove_tracking(p)
            if finished:
                self.ttl(job)
            return
        now_s = now_rfc3339()
        now = time.time()
        status = deep(job.get("status") or {})
        indexed = spec.get("completionMode") == "Indexed"
        completions = spec.get("completions")
        only_failed = spec.get("podReplacementPolicy") == "Failed"
        suspended = bool(spec.get("suspend"))
        completed_ix = parse_indexes(status.get("completedIndexes")) if indexed else set()
        failed_ix = parse_indexes(status.get("failedIndexes")) if indexed else set()
        fail_msg = None
        # count the pods that finished since the last pass (those still holding the finalizer)
        for p in pods:
            pm = p["metadata"]
            if TRACKING not in (pm.get("finalizers") or []):
                continue
            phase = get_path(p, "status", "phase")
            is_failed = phase == "Failed" or (not only_failed and pm.get("deletionTimestamp") and phase != "Succeeded")
            if phase == "Succeeded":
                ix = pod_index(p)
                if indexed:
                    if ix is not None and completions is not None and ix < completions and ix not in completed_ix:
                        completed_ix.add(ix)
                        status["succeeded"] = status.get("succeeded", 0) + 1
                else:
                    status["succeeded"] = status.get("succeeded", 0) + 1
                self.remove_tracking(p)
            elif is_failed:
                count = True
                if spec.get("podFailurePolicy") and phase == "Failed":
                    act, msg, _ = match_failure_policy(spec["podFailurePolicy"], p)
                    if act == "Ignore":
                        count = False
                    elif act == "FailJob" and fail_msg is None:
                        fail_msg = msg
                    elif act == "FailIndex" and pod_index(p) is not None:
                        failed_ix.add(pod_index(p))
                if count:
                    status["failed"] = status.get("failed", 0) + 1
                    self.next_try[m["uid"]] = time.monotonic() + self.job_backoff
                    self.due(job, self.next_try[m["uid"]])
                    if indexed and spec.get("backoffLimitPerIndex") is not None and pod_index(p) is not None:
                        # failures per index are counted on the pods' annotation in the real one; here: failed index at once
                        failed_ix.add(pod_index(p)) if spec["backoffLimitPerIndex"] == 0 else None
                self.remove_tracking(p)
        if indexed:
            if completed_ix:
                status["completedIndexes"] = format_indexes(completed_ix)
            if spec.get("backoffLimitPerIndex") is not None:
                status["failedIndexes"] = format_indexes(failed_ix)
        pods = self.job_pods(job)
        active = [p for p in pods if get_path(p, "status", "phase") not in TERMINAL and not p["metadata"].get("deletionTimestamp")]
        terminating = [p for p in pods if get_path(p, "status", "phase") not in TERMINAL and p["metadata"].get("deletionTimestamp")]
        # the start
        if not status.get("startTime") and not suspended:
            status["startTime"] = now_s
        # finishing conditions (interim first, as v1.31+)
        target = cond(job, "FailureTarget")
        success = cond(job, "SuccessCriteriaMet")
        if target is None and success is None:
            if fail_msg:
                set_cond(status, "FailureTarget", "True", "PodFailurePolicy", fail_msg, now_s)
            elif status.get("failed", 0) > spec.get("backoffLimit", 6) or self._past_backoff_on_failure(job, pods):
                set_cond(status, "FailureTarget", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit", now_s)
            elif indexed and failed_ix and spec.get("backoffLimitPerIndex") is not None and \
                    (spec.get("maxFailedIndexes") is not None and len(failed_ix) > spec["maxFailedIndexes"]):
                set_cond(status, "FailureTarget", "True", "MaxFailedIndexesExceeded", "Job has exceeded the specified maximal number of failed indexes", now_s)
            elif spec.get("activeDeadlineSeconds") and not suspended and status.get("startTime") and \
                    now - (parse_time(status["startTime"]) or now) >= spec["activeDeadlineSeconds"]:
                set_cond(status, "FailureTarget", "True", "DeadlineExceeded", "Job was active longer than specified deadline", now_s)
            else:
                done = False
                if indexed:
                    done = completions is not None and len(completed_ix) >= completions and not active
                    if not done and failed_ix and completions is not None and len(completed_ix | failed_ix) >= completions:
                        set_cond(status, "FailureTarget", "True", "FailedIndexes", "Job has failed indexes", now_s)
                elif completions is not None:
                    done = status.get("succeeded", 0) >= completions and not active
                else:
                    done = status.get("succeeded", 0) > 0 and not active
                if done:
                    set_cond(status, "SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of succeeded pods", now_s)
            target = next((c for c in status.get("conditions") or [] if c["type"] == "FailureTarget"), None)
            success = next((c for c in status.get("conditions") or [] if c["type"] == "SuccessCriteriaMet"), None)
        if target is not None or success is not None:
            for p in active:
                self._delete_pod(pods_res, p)
            # the finalizers can go now: once the Job fails every pod not
            # succeeded counts as failed (the real trackJobStatusAndRemoveFinalizers)
            for p in self.job_pods(job):
                if TRACKING not in (p["metadata"].get("finalizers") or []):
                    continue
                if get_path(p, "status", "phase") == "Succeeded":
                    continue  # counted by the loop above already
                if target is not None:
                    act = None
                    if spec.get("podFailurePolicy"):
                        act, _, _ = match_failure_policy(spec["podFailurePolicy"], p)
                    if act != "Ignore":
                        status["failed"] = status.get("failed", 0) + 1
                self.remove_tracking(p)
            pods = self.job_pods(job)
            left = [p for p in pods if get_path(p, "status", "phase") not in TERMINAL or TRACKING in (p["metadata"].get("finalizers") or [])]
            # pods still terminating hold the final condition back
            still = [p for p in pods if get_path(p, "status", "phase") not in TERMINAL]
            if not still:
                if success is not None:
                    set_cond(status, "Complete", "True", success.get("reason", "CompletionsReached"), success.get("message", ""), now_s)
                    status["completionTime"] = now_s
                    self.event(job, "Normal", "Completed", "Job completed")
                else:
                    set_cond(status, "Failed", "True", target.get("reason"), target.get("message"), now_s)
                    self.event(job, "Warning", target.get("reason"), target.get("message"))
                for p in left:
                    if TRACKING in (p["metadata"].get("finalizers") or []):
                        self.remove_tracking(p)
            status.pop("active", None)
            status["ready"] = 0
            status["terminating"] = len(still)
            return self._write_status(jobs, job, status)
        if suspended:
            for p in active:
                # as deleteJobPods: the finalizer goes first, so a pod deleted
                # for the suspension is not counted as failed
                self.remove_tracking(p)
                self._delete_pod(pods_res, p)
            if active:
                self.event(job, "Normal", "SuccessfulDelete", "Deleted %d pods" % len(active))
            c = cond(job, "Suspended")
            if c is None or c.get("status") != "True":
                set_cond(status, "Suspended", "True", "JobSuspended", "Job suspended", now_s)
                self.event(job, "Normal", "Suspended", "Job suspended")
            active = []
        else:
            c = cond(job, "Suspended")
            if c is not None and c.get("status") == "True":
                set_cond(status, "Suspended", "False", "JobResumed", "Job resumed", now_s)
                status["startTime"] = now_s
                self.event(job, "Normal", "Resumed", "Job resumed")
            if m.get("deletionTimestamp") is None:
                wait = self.next_try.get(m["uid"], 0)
                if time.monotonic() >= wait:
                    active += self._create_pods(job, status, active, terminating, completed_ix, failed_ix, only_failed)
                else:
                    self.due(job, wait)
            ads = spec.get("activeDeadlineSeconds")
            if ads and status.get("startTime"):
                left = (parse_time(status["startTime"]) or now) + ads - time.time()
                self.due(job, time.monotonic() + max(0.0, left) + 0.05)
        pods = self.job_pods(job)
        act = [p for p in pods if get_path(p, "status", "phase") not in TERMINAL and not p["metadata"].get("deletionTimestamp")]
        term = [p for p in pods if get_path(p, "status", "phase") not in TERMINAL and p["metadata"].get("deletionTimestamp")]
        status["active"] = len(act)
        status["ready"] = sum(1 for p in act if cond_true(p, "Ready"))
        status["terminating"] = len(term)
        if not status.get("active"):
            status.pop("active", None)
        if status.get("failed", 0) == 0:
            status.pop("failed", None)
        if status.get("succeeded", 0) == 0:
            status.pop("succeeded", None)
        if indexed and "completedIndexes" not in status:
            status["completedIndexes"] = ""
        status.setdefault("uncountedTerminatedPods", {})
        self._write_status(jobs, job, status)

    @staticmethod
    def _past_backoff_on_failure(job, pods):
        """restartPolicy OnFailure: the container restarts of the running and
        pending pods count against backoffLimit (pastBackoffLimitOnFailure)."""
        if get_path(job, "spec", "template", "spec", "restartPolicy") != "OnFailure":
            return False
        total = 0
        for p in pods:
            if get_path(p, "status", "phase") in ("Running", "Pending"):
                for cs in (get_path(p, "status", "initContainerStatuses") or []) + (get_path(p, "status", "containerStatuses") or []):
                    total += cs.get("restartCount", 0)
        limit = get_path(job, "spec", "backoffLimit", default=6)
        return total > 0 if limit == 0 else total >= limit

    def _write_status(self, jobs, job, status):
        if status != job.get("status"):
            self.ops.mutate(jobs, job["metadata"]["namespace"], job["metadata"]["name"],
                            lambda j: j.__setitem__("status", status), status_only=True)

    def _delete_pod(self, pods_res, p):
        try:
            self.ops.delete(pods_res, p["metadata"]["namespace"], p["metadata"]["name"], {"propagationPolicy": "Background"})
        except ApiError:
            pass

    def _create_pods(self, job, status, active, terminating, completed_ix, failed_ix, only_failed):
        spec = job["spec"]
        completions = spec.get("completions")
        parallelism = spec.get("parallelism", 1)
        indexed = spec.get("completionMode") == "Indexed"
        blocking = len(active) + (len(terminating) if only_failed else 0)
        created = []
        # too many pods (parallelism lowered): delete some, earliest stage first
        succ = len(completed_ix) if indexed else status.get("succeeded", 0)
        if completions is None:
            want_active = len(active) if succ > 0 else parallelism
        else:
            want_active = max(0, min(parallelism, completions - succ))
        if len(active) > want_active:
            def stage(p):
                return (cond_true(p, "Ready"), bool(get_path(p, "spec", "nodeName")),
                        get_path(p, "status", "phase") == "Running")
            pods_res = self.res("", "pods")
            for p in sorted(active, key=stage)[:len(active) - want_active]:
                self.remove_tracking(p)
                self._delete_pod(pods_res, p)
            return []
        if indexed:
            busy = set(pod_index(p) for p in active) | (set(pod_index(p) for p in terminating) if only_failed else set())
            want = [i for i in range(completions or 0) if i not in completed_ix and i not in failed_ix and i not in busy]
            n = max(0, min(len(want), parallelism - blocking))
            for i in want[:n]:
                p = self._create_pod(job, i)
                if p is None:
                    break
                created.append(p)
        else:
            succ = status.get("succeeded", 0)
            if completions is None:
                if succ > 0:
                    return created
                want = parallelism
            else:
                want = min(parallelism, completions - succ)
            n = max(0, want - blocking)
            for _ in range(n):
                p = self._create_pod(job, None)
                if p is None:
                    break
                created.append(p)
        return created

    def _create_pod(self, job, index):
        pods_res = self.res("", "pods")
        m = job["metadata"]
        tmpl = deep(get_path(job, "spec", "template") or {})
        pm = tmpl.get("metadata") or {}
        labels = dict(pm.get("labels") or {})
        labels.update({"batch.kubernetes.io/controller-uid": m["uid"], "batch.kubernetes.io/job-name": m["name"],
                       "controller-uid": m["uid"], "job-name": m["name"]})
        ann = dict(pm.get("annotations") or {})
        spec = tmpl.get("spec") or {}
        gen = m["name"] + "-"
        if index is not None:
            labels[IDX] = str(index)
            ann[IDX] = str(index)
            gen = "%s-%d-" % (m["name"], index)
            spec["hostname"] = "%s-%d" % (m["name"], index)
            for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
                env = c.setdefault("env", [])
                if not any(e.get("name") == "JOB_COMPLETION_INDEX" for e in env):
                    env.insert(0, {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                        "apiVersion": "v1", "fieldPath": "metadata.annotations['%s']" % IDX}}})
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"generateName": gen, "namespace": m["namespace"], "labels": labels,
                            "finalizers": [TRACKING],
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": m["name"],
                                                 "uid": m["uid"], "controller": True, "blockOwnerDeletion": True}]},
               "spec": spec}
        if ann:
            pod["metadata"]["annotations"] = ann
        try:
            p = self.ops.create(pods_res, m["namespace"], pod, internal=True)
        except ApiError as e:
            self.app.stats.record_invalid("INTERNAL", "job controller: create pod for %s/%s" % (m["namespace"], m["name"]), e.code, e.message)
            self.event(job, "Warning", "FailedCreate", "Error creating: %s" % e.message)
            # the real controller's requeue backs off too: doubling, at most 10 s
            n = self.create_failures.get(m["uid"], 0) + 1
            self.create_failures[m["uid"]] = n
            self.next_try[m["uid"]] = time.monotonic() + min(10.0, self.job_backoff * 2 ** min(n - 1, 10))
            self.due(job, self.next_try[m["uid"]])
            return None
        self.create_failures.pop(m["uid"], None)
        self.event(job, "Normal", "SuccessfulCreate", "Created pod: %s" % p["metadata"]["name"])
        return p

    # ---- TTL after finished ----
    def ttl(self, j):
        jobs = self.res("batch", "jobs")
        ttl = get_path(j, "spec", "ttlSecondsAfterFinished")
        if ttl is None or j["metadata"].get("deletionTimestamp"):
            return
        c = cond(j, "Complete") if cond_true(j, "Complete") else cond(j, "Failed")
        now = time.time()
        t = parse_time(get_path(j, "status", "completionTime") or (c or {}).get("lastTransitionTime")) or now
        if now >= t + ttl:
            try:
                self.ops.delete(jobs, j["metadata"]["namespace"], j["metadata"]["name"], {"propagationPolicy": "Foreground"})
            except ApiError:
                pass
        else:
            self.due(j, time.monotonic() + (t + ttl - now) + 0.05)

    # ---- garbage collector ----
    def gc_owner(self, uid):
        """An owner being deleted with foregroundDeletion / orphan finalizers."""
        if not uid:
            return
        o = self.store.by_uid(uid)
        if o is None:
            return
        m = o["metadata"]
        r = self.ops.res_by_key(self.store.uids[uid][0])
        fins = m.get("finalizers") or []
        if not m.get("deletionTimestamp") or r is None:
            return
        if "orphan" in fins:
            self.ops.orphan_dependents(uid)
            self.ops.mutate(r, m.get("namespace") or "", m["name"], lambda x: x["metadata"].__setitem__(
                "finalizers", [f for f in x["metadata"].get("finalizers") or [] if f != "orphan"]))
        if "foregroundDeletion" in fins:
            deps = self.ops.dependents(uid)
            for dr, d in deps:
                if not d["metadata"].get("deletionTimestamp"):
                    try:
                        self.ops.delete(dr, d["metadata"].get("namespace") or "", d["metadata"]["name"],
                                        {"propagationPolicy": "Foreground" if dr.kind != "Pod" else "Background"})
                    except ApiError:
                        pass
            if not self.ops.dependents(uid):
                self.ops.mutate(r, m.get("namespace") or "", m["name"], lambda x: x["metadata"].__setitem__(
                    "finalizers", [f for f in x["metadata"].get("finalizers") or [] if f != "foregroundDeletion"]))

    def gc_dependent(self, ident):
        """A dependent whose owners may all be gone: deleted (in the background)."""
        key, ns, name = ident
        o = self.store.get(key, ns, name)
        if o is None:
            return
        m = o["metadata"]
        refs = m.get("ownerReferences") or []
        if not refs or m.get("deletionTimestamp"):
            return
        if all(self.store.by_uid(ref.get("uid")) is None for ref in refs):
            r = self.ops.res_by_key(key)
            if r is not None:
                try:
                    self.ops.delete(r, ns, name, {"propagationPolicy": "Background"})
                except ApiError:
                    pass

    # ---- namespaces ----
    def namespace(self, name):
        ns_res = self.res("", "namespaces")
        n = self.store.get("core/namespaces", "", name)
        if n is None or not n["metadata"].get("deletionTimestamp"):
            self.terminating_ns.discard(name)
            return
        since = parse_time(n["metadata"]["deletionTimestamp"]) or 0
        if time.time() < since + 1:
            return  # the real controller takes a moment too (kubectl delete -f of a namespace and its objects)
        left = 0
        for r in self.app.registry.all():
            if not r.namespaced:
                continue
            for o in self.store.list(r.key, name):
                left += 1
                if not o["metadata"].get("deletionTimestamp"):
                    try:
                        self.ops.delete(r, name, o["metadata"]["name"], {"propagationPolicy": "Background"})
                    except ApiError:
                        pass
        if left == 0:
            self.ops.mutate(ns_res, "", name, lambda x: x.setdefault("spec", {}).__setitem__("finalizers", []))

    # ---- nodes ----
    def set_node_ready(self, name, ready):
        nodes = self.res("", "nodes")
        pods = self.res("", "pods")
        with self.store.lock:
            self.ops.get(nodes, None, name)
            now = now_rfc3339()

            def fn(n):
                st = n.setdefault("status", {})
                for c in st.get("conditions") or []:
                    if c["type"] == "Ready":
                        if ready:
                            c.update({"status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                                      "lastTransitionTime": now, "lastHeartbeatTime": now})
                        else:
                            c.update({"status": "Unknown", "reason": "NodeStatusUnknown",
                                      "message": "Kubelet stopped posting node status.", "lastTransitionTime": now})
                    elif not ready:
                        c.update({"status": "Unknown", "reason": "NodeStatusUnknown",
                                  "message": "Kubelet stopped posting node status.", "lastTransitionTime": now})
                    else:
                        c.update({"status": "False", "lastTransitionTime": now})
                taints = [t for t in (n.get("spec") or {}).get("taints") or [] if t.get("key") != "node.kubernetes.io/unreachable"]
                if not ready:
                    taints.append({"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": now})
                    taints.append({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": now})
                sp = n.setdefault("spec", {})
                if taints:
                    sp["taints"] = taints
                else:
                    sp.pop("taints", None)
            self.ops.mutate(nodes, None, name, fn)
            if ready:
                if self.lost.pop(name, None) is not None:
                    # the pods the node lost (their processes were killed) end now
                    for p in self.store.list("core/pods"):
                        if get_path(p, "spec", "nodeName") == name and get_path(p, "status", "phase") not in TERMINAL:
                            pn, pns = p["metadata"]["name"], p["metadata"]["namespace"]
                            self.ops.mutate(pods, pns, pn, _pod_lost, status_only=True)
                            try:
                                self.ops.delete(pods, pns, pn, {"gracePeriodSeconds": 0})
                            except ApiError:
                                pass
            else:
                self.lost.setdefault(name, time.monotonic())
                for p in self.store.list("core/pods"):
                    if get_path(p, "spec", "nodeName") == name and get_path(p, "status", "phase") not in TERMINAL:
                        self.ops.mutate(pods, p["metadata"]["namespace"], p["metadata"]["name"], _pod_not_ready, status_only=True)
        if not ready:
            self.app.kubelets.node_lost(name)

    def node_lifecycle(self):
        pods = self.res("", "pods")
        for name, since in list(self.lost.items()):
            if time.monotonic() < since + self.app.node_loss_delay:
                continue
            for p in self.store.list("core/pods"):
                if get_path(p, "spec", "nodeName") != name or get_path(p, "status", "phase") in TERMINAL:
                    continue
                ns, pn = p["metadata"]["namespace"], p["metadata"]["name"]
                self.ops.mutate(pods, ns, pn, _pod_lost, status_only=True)
                try:
                    self.ops.delete(pods, ns, pn, {"gracePeriodSeconds": 0})
                except ApiError:
                    pass


def _is_pending(p):
    return (not get_path(p, "spec", "nodeName") and not p["metadata"].get("deletionTimestamp")
            and get_path(p, "status", "phase") == "Pending")


def _pod_not_ready(p):
    now = now_rfc3339()
    for c in get_path(p, "status", "conditions") or []:
        if c.get("type") in ("Ready", "ContainersReady") and c.get("status") != "False":
            c.update({"status": "False", "lastTransitionTime": now})
    for c in get_path(p, "status", "conditions") or []:
        if c.get("type") == "Ready":
            c["reason"] = "NodeNotReady" if False else c.get("reason")


def _pod_lost(p):
    now = now_rfc3339()
    st = p.setdefault("status", {})
    conds = [c for c in st.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
    conds.append({"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                  "message": "Taint manager: deleting due to NoExecute taint", "lastProbeTime": None,
                  "lastTransitionTime": now})
    st["conditions"] = conds
    st["phase"] = "Failed"
    for cs in st.get("containerStatuses") or []:
        if "running" in (cs.get("state") or {}) or "waiting" in (cs.get("state") or {}):
            started = get_path(cs, "state", "running", "startedAt")
            cs["state"] = {"terminated": {"exitCode": 137, "reason": "Error", "message": "the node was lost",
                                          "startedAt": started, "finishedAt": now}}
            cs["ready"] = False
            cs["started"] = False
