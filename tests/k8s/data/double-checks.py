"""double-checks.py STATE_DIR TMP_DIR: the checks of tests/k8s/double.sh
against a running double: the API (CRUD, errors, selectors, pagination,
watches, compaction, auth, injected failures) first, then the controllers
and the kubelet (Jobs, suspension, Indexed Jobs, pod failure policy,
eviction, OOM, image pull errors, graceful deletion, foreground deletion,
logs, node loss), those in parallel threads, each in its own namespace.
Prints ok:/FAIL: lines; exits 1 when anything failed."""
import importlib.util
import json
import os
import sys
import threading
import time
import traceback

spec = importlib.util.spec_from_file_location("dclient", os.path.join(os.path.dirname(os.path.abspath(__file__)), "double-client.py"))
dclient = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dclient)
Client, q = dclient.Client, dclient.q

STATE, TMP = sys.argv[1], sys.argv[2]
k = Client(STATE)
results = []
rlock = threading.Lock()


def check(name, fn):
    t0 = time.monotonic()
    try:
        fn()
        line = "ok: %s (%.1fs)" % (name, time.monotonic() - t0)
        good = True
    except Exception as e:  # noqa: BLE001
        line = "FAIL: %s: %s" % (name, e)
        if not isinstance(e, AssertionError):
            line += "\n" + traceback.format_exc()
        good = False
    with rlock:
        results.append(good)
        print(line, flush=True)


def eq(a, b, what=""):
    if a != b:
        raise AssertionError("%s: %r != %r" % (what, a, b))


def ns(name):
    st, obj, _ = k.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    if st not in (201, 409):
        raise AssertionError("namespace %s: %s %s" % (name, st, obj))


def job(name, namespace, argv, **spec):
    tmpl_spec = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox", "command": argv}]}
    tmpl_spec.update(spec.pop("pod", {}))
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
            "spec": dict({"template": {"spec": tmpl_spec}}, **spec)}
    return k.ok("POST", "/apis/batch/v1/namespaces/%s/jobs" % namespace, body)


def get_job(namespace, name):
    return k.ok("GET", "/apis/batch/v1/namespaces/%s/jobs/%s" % (namespace, name))


def cond(obj, t):
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == t and c["status"] == "True":
            return c
    return None


def wait_cond(namespace, name, t, timeout=40):
    return k.wait(lambda: cond(get_job(namespace, name), t), timeout, "job %s/%s %s" % (namespace, name, t))


def pods_of(namespace, jobname):
    return k.ok("GET", "/api/v1/namespaces/%s/pods%s" % (namespace, q(labelSelector="batch.kubernetes.io/job-name=" + jobname)))["items"]


def one_pod(namespace, jobname, pred=lambda p: True, timeout=30):
    return k.wait(lambda: next((p for p in pods_of(namespace, jobname) if pred(p)), None), timeout, "a pod of %s" % jobname)


def running(p):
    return (p.get("status") or {}).get("phase") == "Running"


# ---------------- the API ----------------
def t_crud():
    ns("api")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1", "labels": {"app": "x", "tier": "a"}}, "data": {"a": "1"}}
    o = k.ok("POST", "/api/v1/namespaces/api/configmaps", cm)
    m = o["metadata"]
    assert m["uid"] and m["resourceVersion"] and m["creationTimestamp"] and m["namespace"] == "api", m
    rv1 = int(m["resourceVersion"])
    st, e, _ = k.post("/api/v1/namespaces/api/configmaps", cm)
    eq(st, 409, "create twice")
    eq(e["reason"], "AlreadyExists", "reason")
    eq(e["message"], 'configmaps "c1" already exists', "message")
    o["data"]["a"] = "2"
    o2 = k.ok("PUT", "/api/v1/namespaces/api/configmaps/c1", o)
    assert int(o2["metadata"]["resourceVersion"]) > rv1
    st, e, _ = k.req("PUT", "/api/v1/namespaces/api/configmaps/c1", o)  # stale resourceVersion
    eq(st, 409, "stale update")
    eq(e["reason"], "Conflict", "reason")
    st, e, _ = k.get("/apis/batch/v1/namespaces/api/jobs/nope")
    eq(st, 404, "get absent")
    eq(e["message"], 'jobs.batch "nope" not found', "404 message")
    eq(e["details"], {"name": "nope", "group": "batch", "kind": "jobs"}, "404 details")
    st, e, _ = k.post("/api/v1/namespaces/nowhere/configmaps", cm)
    eq((st, e["message"]), (404, 'namespaces "nowhere" not found'), "create in an absent namespace")
    # generation of a Job follows spec changes only
    j = job("gen", "api", ["true"], suspend=True)
    eq(j["metadata"]["generation"], 1, "generation")
    j2 = k.ok("PATCH", "/apis/batch/v1/namespaces/api/jobs/gen", {"metadata": {"labels": {"x": "y"}}}, ctype="application/merge-patch+json")
    eq(j2["metadata"]["generation"], 1, "generation after a label change")
    j3 = k.ok("PATCH", "/apis/batch/v1/namespaces/api/jobs/gen", {"spec": {"activeDeadlineSeconds": 100}}, ctype="application/merge-patch+json")
    eq(j3["metadata"]["generation"], 2, "generation after a spec change")
    # JSON patch and strategic merge
    k.ok("PATCH", "/api/v1/namespaces/api/configmaps/c1", [{"op": "add", "path": "/data/b", "value": "3"}], ctype="application/json-patch+json")
    o = k.ok("PATCH", "/api/v1/namespaces/api/configmaps/c1", {"data": {"a": None}}, ctype="application/strategic-merge-patch+json")
    eq(o["data"], {"b": "3"}, "patched data")
    # generateName
    g = k.ok("POST", "/api/v1/namespaces/api/configmaps", {"metadata": {"generateName": "gen-"}})
    assert g["metadata"]["name"].startswith("gen-") and len(g["metadata"]["name"]) == 9, g["metadata"]["name"]
    # delete
    st, d, _ = k.req("DELETE", "/api/v1/namespaces/api/configmaps/" + g["metadata"]["name"])
    eq((st, d.get("status")), (200, "Success"), "delete")
    eq(k.get("/api/v1/namespaces/api/configmaps/" + g["metadata"]["name"])[0], 404, "get after delete")
    # dry run
    k.ok("POST", "/api/v1/namespaces/api/configmaps?dryRun=All", {"metadata": {"name": "dry"}})
    eq(k.get("/api/v1/namespaces/api/configmaps/dry")[0], 404, "dry-run object stored")
    # server-side apply: creates, then merges
    ap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  k: v\n"
    st, o, _ = k.req("PATCH", "/api/v1/namespaces/api/configmaps/applied?fieldManager=t", ap, ctype="application/apply-patch+yaml")
    eq(st, 201, "apply creates")
    st, o, _ = k.req("PATCH", "/api/v1/namespaces/api/configmaps/applied?fieldManager=t", ap.replace("k: v", "k2: v2"), ctype="application/apply-patch+yaml")
    eq((st, o["data"]), (200, {"k2": "v2"}), "apply: the manager's fields")
    eq((st, o["data"]), (200, {"k2": "v2"}), "apply removes what the manager no longer applies")
    k.ok("PATCH", "/api/v1/namespaces/api/configmaps/applied", {"data": {"other": "x"}}, ctype="application/merge-patch+json")
    st, o, _ = k.req("PATCH", "/api/v1/namespaces/api/configmaps/applied?fieldManager=t", ap, ctype="application/apply-patch+yaml")
    eq((st, o["data"]), (200, {"k": "v", "other": "x"}), "apply keeps what others set")
    st, o, _ = k.req("PATCH", "/api/v1/namespaces/api/configmaps/applied", ap, ctype="application/apply-patch+yaml")
    eq(st, 400, "apply without fieldManager")


def t_invalid():
    ns("inv")
    bad = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bad"},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "bogus": 1,
                                          "containers": [{"name": "c", "image": "i"}]}}}}
    k.ok("POST", "/api/v1/namespaces/api/configmaps/../../../../_double/stats/reset", {}, want=(200, 404))
    st, e, _ = k.post("/apis/batch/v1/namespaces/inv/jobs", bad)
    eq(st, 422, "unknown field")
    eq(e["reason"], "Invalid", "reason")
    fields = [c["field"] for c in e["details"]["causes"]]
    assert "spec.template.spec.bogus" in fields, e
    st, e, _ = k.post("/apis/batch/v1/namespaces/inv/jobs?fieldValidation=Strict", bad)
    eq(st, 400, "unknown field, Strict")
    assert 'unknown field "spec.template.spec.bogus"' in e["message"], e["message"]
    del bad["spec"]["template"]["spec"]["bogus"]
    bad["spec"]["parallelism"] = "two"
    st, e, _ = k.post("/apis/batch/v1/namespaces/inv/jobs", bad)
    eq((st, e["details"]["causes"][0]["field"]), (422, "spec.parallelism"), "wrong type")
    bad["spec"]["parallelism"] = 1
    bad["metadata"]["name"] = "Bad_Name"
    st, e, _ = k.post("/apis/batch/v1/namespaces/inv/jobs", bad)
    eq((st, e["details"]["causes"][0]["field"]), (422, "metadata.name"), "bad name")
    bad["metadata"]["name"] = "always"
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    st, e, _ = k.post("/apis/batch/v1/namespaces/inv/jobs", bad)
    eq((st, e["details"]["causes"][0]["reason"]), (422, "FieldValueNotSupported"), "restartPolicy Always")
    # immutable template of a started Job
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    k.ok("POST", "/apis/batch/v1/namespaces/inv/jobs", dict(bad, spec=dict(bad["spec"], suspend=True)))
    k.ok("PATCH", "/apis/batch/v1/namespaces/inv/jobs/always", {"spec": {"template": {"spec": {"nodeSelector": {"a": "b"}}}}},
         ctype="application/merge-patch+json")
    st, e, _ = k.req("PATCH", "/apis/batch/v1/namespaces/inv/jobs/always",
                     {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "other"}]}}}}, ctype="application/merge-patch+json")
    eq(st, 422, "template change")
    assert "field is immutable" in e["message"], e["message"]
    s = k.ok("GET", "/_double/stats")
    assert any(x["status"] == 422 for x in s["invalid"]), s["invalid"]


def t_select_page():
    ns("sel")
    for i in range(7):
        k.ok("POST", "/api/v1/namespaces/sel/configmaps", {"metadata": {"name": "m%d" % i, "labels": {
            "i": str(i), "even": "yes" if i % 2 == 0 else "no"}}})
    def names(sel):
        return [o["metadata"]["name"] for o in k.ok("GET", "/api/v1/namespaces/sel/configmaps" + q(labelSelector=sel))["items"]]
    eq(names("even=yes"), ["m0", "m2", "m4", "m6"], "=")
    eq(names("even!=yes"), ["m1", "m3", "m5"], "!=")
    eq(names("i in (1,2),even"), ["m1", "m2"], "in + exists")
    eq(names("i notin (0,1,2,3,4,5)"), ["m6"], "notin")
    eq(names("!even"), [], "!key")
    eq([o["metadata"]["name"] for o in k.ok("GET", "/api/v1/namespaces/sel/configmaps" + q(fieldSelector="metadata.name=m3"))["items"]], ["m3"], "field selector")
    got, cont, rvs = [], None, set()
    for _ in range(10):
        args = {"limit": 3}
        if cont:
            args["continue"] = cont
        page = k.ok("GET", "/api/v1/namespaces/sel/configmaps" + q(**args))
        got += [o["metadata"]["name"] for o in page["items"]]
        rvs.add(page["metadata"]["resourceVersion"])
        cont = page["metadata"].get("continue")
        if cont and len(got) == 3:
            k.ok("POST", "/api/v1/namespaces/sel/configmaps", {"metadata": {"name": "m99"}})  # not in this list
        if not cont:
            break
    eq(got, ["m%d" % i for i in range(7)], "pages")
    eq(len(rvs), 1, "one resourceVersion for all pages")
    ns("sel-b")
    for n in ("sel-b",):
        k.ok("POST", "/api/v1/namespaces/%s/configmaps" % n, {"metadata": {"name": "x"}})
    full = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in k.ok("GET", "/api/v1/configmaps")["items"]]
    paged, cont = [], None
    for _ in range(100):
        page = k.ok("GET", "/api/v1/configmaps" + q(limit=2, **({"continue": cont} if cont else {})))
        paged += [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in page["items"]]
        cont = page["metadata"].get("continue")
        if not cont:
            break
    eq(paged, full, "pages across namespaces")
    page = k.ok("GET", "/api/v1/namespaces/sel/configmaps" + q(limit=2))
    k.ok("POST", "/_double/compact")
    st, e, _ = k.get("/api/v1/namespaces/sel/configmaps" + q(limit=2, **{"continue": page["metadata"]["continue"]}))
    eq((st, e["reason"]), (410, "Expired"), "continue after compaction")


def t_watch():
    ns("w")
    lst = k.ok("GET", "/api/v1/namespaces/w/configmaps")
    rv = lst["metadata"]["resourceVersion"]
    seen = []
    done = threading.Event()

    def reader():
        for t, o in k.watch("/api/v1/namespaces/w/configmaps" + q(watch="1", resourceVersion=rv, allowWatchBookmarks="true",
                                                                 labelSelector="app=w", timeoutSeconds=20)):
            seen.append((t, o))
            if t == "BOOKMARK" and any(x[0] == "DELETED" for x in seen):
                break
        done.set()
    th = threading.Thread(target=reader, daemon=True)
    th.start()
    k.ok("POST", "/api/v1/namespaces/w/configmaps", {"metadata": {"name": "a", "labels": {"app": "w"}}})
    k.ok("PATCH", "/api/v1/namespaces/w/configmaps/a", {"data": {"x": "1"}}, ctype="application/merge-patch+json")
    k.ok("POST", "/api/v1/namespaces/w/configmaps", {"metadata": {"name": "other"}})
    k.ok("PATCH", "/api/v1/namespaces/w/configmaps/a", {"metadata": {"labels": {"app": "gone"}}}, ctype="application/merge-patch+json")
    done.wait(25)
    types = [t for t, _ in seen]
    eq([t for t in types if t != "BOOKMARK"][:3], ["ADDED", "MODIFIED", "DELETED"], "watch events")
    assert "BOOKMARK" in types, types
    bm = next(o for t, o in seen if t == "BOOKMARK")
    eq(sorted(bm.keys()), ["apiVersion", "kind", "metadata"], "bookmark object")
    assert all(o["metadata"]["name"] == "a" for t, o in seen if t != "BOOKMARK"), seen
    # synthetic ADDED from resourceVersion 0
    evs = []
    for t, o in k.watch("/api/v1/namespaces/w/configmaps" + q(watch="true", resourceVersion="0", timeoutSeconds=1)):
        evs.append((t, o["metadata"]["name"]))
    eq(sorted(evs), [("ADDED", "a"), ("ADDED", "other")], "initial events")
    # compaction: an open watch gets a 410 ERROR event; a new start too (mode event) or HTTP 410 (mode status)
    lst = k.ok("GET", "/api/v1/namespaces/w/configmaps")
    old = lst["metadata"]["resourceVersion"]
    k.ok("POST", "/api/v1/namespaces/w/configmaps", {"metadata": {"name": "b"}})
    got = []
    def reader2():
        for t, o in k.watch("/api/v1/namespaces/w/configmaps" + q(watch="1", resourceVersion=old, timeoutSeconds=20)):
            got.append((t, o))
            if t == "ERROR":
                break
    th2 = threading.Thread(target=reader2, daemon=True)
    th2.start()
    k.wait(lambda: got, 10, "the watch's first event")
    k.ok("POST", "/_double/compact?mode=event")
    th2.join(15)
    assert got and got[-1][0] == "ERROR", got
    eq((got[-1][1]["code"], got[-1][1]["reason"]), (410, "Expired"), "ERROR event")
    assert got[-1][1]["message"].startswith("too old resource version"), got[-1][1]
    evs = list(k.watch("/api/v1/namespaces/w/configmaps" + q(watch="1", resourceVersion=old, timeoutSeconds=5)))
    eq((evs[0][0], evs[0][1].get("code")), ("ERROR", 410), "a watch from before the compaction (mode event)")
    k.ok("POST", "/_double/compact?mode=status")
    evs = list(k.watch("/api/v1/namespaces/w/configmaps" + q(watch="1", resourceVersion=old, timeoutSeconds=5)))
    eq((evs[0][0], evs[0][1]["code"]), ("HTTP", 410), "a watch from before the compaction (mode status)")
    k.ok("POST", "/_double/compact?mode=event")


def t_auth():
    eq(k.get("/api/v1/namespaces", token=False)[0], 401, "no token")
    eq(k.get("/api/v1/namespaces", token="wrong")[0], 401, "a wrong token")
    ns("team-x")
    with open(os.path.join(STATE, "tokens.json.tmp"), "w") as f:
        json.dump({"tok-x": {"user": "team-x", "namespaces": ["team-x"]}}, f)
    os.replace(os.path.join(STATE, "tokens.json.tmp"), os.path.join(STATE, "tokens.json"))
    eq(k.get("/api/v1/namespaces/team-x/configmaps", token="tok-x")[0], 200, "own namespace")
    st, e, _ = k.get("/apis/batch/v1/namespaces/api/jobs", token="tok-x")
    eq((st, e["reason"]), (403, "Forbidden"), "another namespace")
    eq(e["message"], 'jobs.batch is forbidden: User "team-x" cannot list resource "jobs" in API group "batch" in the namespace "api"', "403 message")
    eq(k.get("/api/v1/nodes", token="tok-x")[0], 403, "cluster scope")
    eq(k.get("/_double/stats", token="tok-x")[0], 403, "control endpoints")


def t_faults():
    k.ok("POST", "/_double/fail?status=429&count=2&path=/api/v1/namespaces/api/configmaps")
    st, e, h = k.get("/api/v1/namespaces/api/configmaps")
    eq((st, e["reason"], h.get("Retry-After")), (429, "TooManyRequests", "1"), "429")
    eq(k.get("/api/v1/namespaces/api/configmaps")[0], 429, "second 429")
    eq(k.get("/api/v1/namespaces/api/configmaps")[0], 200, "then fine")
    k.ok("POST", "/_double/fail?status=503&count=1")
    eq(k.get("/version")[0], 503, "503")
    s = k.ok("GET", "/_double/stats")
    assert s["requests"] > 0 and s["by_verb"].get("list", 0) > 0, s
    assert s["by_resource"]["configmaps"]["create"] > 0, s["by_resource"]
    assert s["creates"].get("v1/configmaps", 0) > 0, s["creates"]


def t_discovery():
    v = k.ok("GET", "/version")
    eq(v["gitVersion"][:5], "v1.32", "version")
    r = k.ok("GET", "/api/v1")
    pods = next(x for x in r["resources"] if x["name"] == "pods")
    eq((pods["kind"], pods["shortNames"], pods["namespaced"]), ("Pod", ["po"], True), "pods")
    assert any(x["name"] == "pods/log" for x in r["resources"])
    g = k.ok("GET", "/apis")
    assert "batch" in [x["name"] for x in g["groups"]]
    b = k.ok("GET", "/apis/scheduling.k8s.io/v1")
    eq(b["resources"][0]["shortNames"], ["pc"], "priorityclasses")


# ---------------- controllers and kubelet ----------------
def t_job_complete():
    ns("j1")
    job("hello", "j1", ["/bin/sh", "-c", "echo hi; echo err >&2; exit 0"])
    wait_cond("j1", "hello", "Complete")
    j = get_job("j1", "hello")
    eq(j["status"].get("succeeded"), 1, "succeeded")
    assert cond(j, "SuccessCriteriaMet") and j["status"].get("completionTime"), j["status"]
    p = pods_of("j1", "hello")[0]
    eq(p["status"]["phase"], "Succeeded", "pod phase")
    t = p["status"]["containerStatuses"][0]["state"]["terminated"]
    eq((t["exitCode"], t["reason"]), (0, "Completed"), "terminated")
    refs = p["metadata"]["ownerReferences"][0]
    eq((refs["kind"], refs["controller"]), ("Job", True), "owner")
    for key in ("batch.kubernetes.io/job-name", "job-name", "controller-uid", "batch.kubernetes.io/controller-uid"):
        assert key in p["metadata"]["labels"], p["metadata"]["labels"]
    st, log, _ = k.get("/api/v1/namespaces/j1/pods/%s/log" % p["metadata"]["name"])
    eq(sorted(log.splitlines()), [b"err", b"hi"], "log (stdout and stderr)")


def t_suspend_resume():
    ns("j2")
    job("sus", "j2", ["/bin/sh", "-c", "exec sleep 30"], suspend=True, backoffLimit=3,
        pod={"terminationGracePeriodSeconds": 2})
    wait_cond("j2", "sus", "Suspended")
    time.sleep(0.5)
    eq(pods_of("j2", "sus"), [], "no pods while suspended")
    assert "startTime" not in get_job("j2", "sus")["status"], "startTime of a suspended Job"
    k.ok("PATCH", "/apis/batch/v1/namespaces/j2/jobs/sus", {"spec": {"suspend": False}}, ctype="application/merge-patch+json")
    one_pod("j2", "sus", running)
    j = get_job("j2", "sus")
    c = next(c for c in j["status"]["conditions"] if c["type"] == "Suspended")
    eq((c["status"], c["reason"]), ("False", "JobResumed"), "resumed")
    assert j["status"].get("startTime")
    # parallelism 2 then back to 1: one pod goes (not a failure)
    k.ok("PATCH", "/apis/batch/v1/namespaces/j2/jobs/sus", {"spec": {"parallelism": 2}}, ctype="application/merge-patch+json")
    eq(get_job("j2", "sus")["spec"]["parallelism"], 2, "parallelism")
    k.ok("PATCH", "/apis/batch/v1/namespaces/j2/jobs/sus", {"spec": {"suspend": True}}, ctype="application/merge-patch+json")
    k.wait(lambda: not pods_of("j2", "sus"), 20, "the pods to go")
    j = wait_cond("j2", "sus", "Suspended")
    eq(get_job("j2", "sus")["status"].get("active", 0), 0, "active")
    eq(get_job("j2", "sus")["status"].get("failed", 0), 0, "a pod deleted for the suspension is not a failure")


def t_indexed():
    ns("j3")
    job("idx", "j3", ["/bin/sh", "-c", "echo index=$JOB_COMPLETION_INDEX host=$HOSTNAME"],
        completions=2, parallelism=2, completionMode="Indexed", pod={"subdomain": "idx"})
    wait_cond("j3", "idx", "Complete")
    j = get_job("j3", "idx")
    eq(j["status"].get("completedIndexes"), "0-1", "completedIndexes")
    logs = set()
    for p in pods_of("j3", "idx"):
        ix = p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        eq(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"], ix, "index label")
        assert p["metadata"]["name"].startswith("idx-%s-" % ix), p["metadata"]["name"]
        eq(p["spec"]["hostname"], "idx-" + ix, "hostname")
        logs.add(k.get("/api/v1/namespaces/j3/pods/%s/log" % p["metadata"]["name"])[1])
    eq(logs, {b"index=0 host=idx-0\n", b"index=1 host=idx-1\n"}, "env")
    if os.geteuid() != 0:
        print("note: not root: the pods' hostnames and /etc/hosts are not checked (they need namespaces)", flush=True)
    else:  # as root: the pod's hostname and its peers' names in /etc/hosts
        job("idx2", "j3", ["/bin/sh", "-c", "hostname; grep -c idx2-1.idx2 /etc/hosts"],
            completions=2, parallelism=2, completionMode="Indexed", pod={"subdomain": "idx2"})
        wait_cond("j3", "idx2", "Complete")
        p0 = next(p for p in pods_of("j3", "idx2") if p["spec"]["hostname"] == "idx2-0")
        eq(k.get("/api/v1/namespaces/j3/pods/%s/log" % p0["metadata"]["name"])[1], b"idx2-0\n1\n", "hostname and /etc/hosts")


def t_failure_policy():
    ns("j4")
    job("pfp", "j4", ["/bin/sh", "-c", "exit 2"], backoffLimit=5,
        podFailurePolicy={"rules": [{"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [2]}}]})
    c = wait_cond("j4", "pfp", "Failed")
    eq(c["reason"], "PodFailurePolicy", "reason")
    p = pods_of("j4", "pfp")[0]
    eq(c["message"], "Container main for pod j4/%s failed with exit code 2 matching FailJob rule at index 0" % p["metadata"]["name"], "message")
    assert cond(get_job("j4", "pfp"), "FailureTarget"), "FailureTarget first"
    eq(len(pods_of("j4", "pfp")), 1, "no replacement")
    job("bo", "j4", ["/bin/sh", "-c", "exit 1"], backoffLimit=1)
    c = wait_cond("j4", "bo", "Failed")
    eq((c["reason"], get_job("j4", "bo")["status"]["failed"]), ("BackoffLimitExceeded", 2), "backoff limit")
    # restartPolicy OnFailure: the restarts count against the limit
    job("bof", "j4", ["/bin/sh", "-c", "exit 1"], backoffLimit=1, pod={"restartPolicy": "OnFailure"})
    c = wait_cond("j4", "bof", "Failed")
    eq(c["reason"], "BackoffLimitExceeded", "backoff limit (OnFailure restarts)")


def t_evict():
    ns("j5")
    job("ev", "j5", ["/bin/sh", "-c", "exec sleep 30"], backoffLimit=0,
        podFailurePolicy={"rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
        pod={"terminationGracePeriodSeconds": 1})
    p = one_pod("j5", "ev", running)
    name = p["metadata"]["name"]
    k.wait(lambda: cond(k.ok("GET", "/api/v1/namespaces/j5/pods/" + name), "Ready"), 10, "the pod ready")
    k.ok("POST", "/apis/policy/v1/namespaces/j5/poddisruptionbudgets", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
         "metadata": {"name": "keep"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"job-name": "ev"}}}})
    st, e, _ = k.post("/api/v1/namespaces/j5/pods/%s/eviction" % name,
                      {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "j5"}})
    eq((st, e["reason"]), (429, "TooManyRequests"), "the disruption budget holds the eviction")
    k.ok("DELETE", "/apis/policy/v1/namespaces/j5/poddisruptionbudgets/keep")
    k.ok("POST", "/api/v1/namespaces/j5/pods/%s/eviction" % name,
         {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "j5"}})
    c = wait_cond("j5", "ev", "Failed")
    eq(c["reason"], "PodFailurePolicy", "evicted Job")
    pc = next(x for x in pods_of("j5", "ev")[0]["status"]["conditions"] if x["type"] == "DisruptionTarget") if pods_of("j5", "ev") else None
    if pc is not None:
        eq((pc["status"], pc["reason"], pc["message"]), ("True", "EvictionByEvictionAPI", "Eviction API: evicting"), "the pod's condition")
    assert "has condition DisruptionTarget matching FailJob rule at index 0" in c["message"], c["message"]


def t_oom():
    ns("j6")
    job("oom", "j6", ["/bin/sh", "-c", "exec sleep 30"], backoffLimit=0)
    p = one_pod("j6", "oom", running)
    k.ok("POST", "/_double/pods/j6/%s/oom" % p["metadata"]["name"])
    wait_cond("j6", "oom", "Failed")
    p = k.ok("GET", "/api/v1/namespaces/j6/pods/" + p["metadata"]["name"])
    t = p["status"]["containerStatuses"][0]["state"]["terminated"]
    eq((t["reason"], t["exitCode"]), ("OOMKilled", 137), "OOMKilled")
    # a SIGKILL the kubelet did not send looks the same
    job("oom2", "j6", ["/bin/sh", "-c", "kill -KILL $$$$"], backoffLimit=0)
    wait_cond("j6", "oom2", "Failed")
    t = pods_of("j6", "oom2")[0]["status"]["containerStatuses"][0]["state"]["terminated"]
    eq((t["reason"], t["exitCode"]), ("OOMKilled", 137), "self-SIGKILL")


def t_image():
    ns("j7")
    job("img", "j7", ["true"], pod={"containers": [{"name": "main", "image": "registry.example/does-not-exist:1", "command": ["true"]}]})
    def reason():
        ps = pods_of("j7", "img")
        cs = ps and (ps[0].get("status") or {}).get("containerStatuses")
        return cs and cs[0]["state"].get("waiting", {}).get("reason")
    k.wait(lambda: reason() == "ErrImagePull", 20, "ErrImagePull")
    k.wait(lambda: reason() == "ImagePullBackOff", 20, "ImagePullBackOff")
    st, e, _ = k.get("/api/v1/namespaces/j7/pods/%s/log" % pods_of("j7", "img")[0]["metadata"]["name"])
    eq(st, 400, "log of a waiting container")
    k.req("DELETE", "/apis/batch/v1/namespaces/j7/jobs/img?propagationPolicy=Background")
    # a missing secret: CreateContainerConfigError
    job("cfg", "j7", ["true"], pod={"containers": [{"name": "main", "image": "busybox", "command": ["true"],
                                                    "env": [{"name": "S", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k"}}}]}]})
    def waiting():
        ps = pods_of("j7", "cfg")
        cs = ps and (ps[0].get("status") or {}).get("containerStatuses")
        return cs and cs[0]["state"].get("waiting")
    w = k.wait(lambda: (waiting() or {}).get("reason") == "CreateContainerConfigError" and waiting(), 20, "CreateContainerConfigError")
    eq(w["message"], 'secret "nope" not found', "message")
    k.ok("POST", "/api/v1/namespaces/j7/secrets", {"metadata": {"name": "nope"}, "stringData": {"k": "v"}})
    wait_cond("j7", "cfg", "Complete")


def t_graceful():
    ns("j8")
    mark = os.path.join(TMP, "sigterm-seen")
    script = "trap 'echo term > %s; exit 0' TERM; echo started; while :; do sleep 0.1; done" % mark
    job("gr", "j8", ["/bin/sh", "-c", script], pod={"terminationGracePeriodSeconds": 10})
    p = one_pod("j8", "gr", running)
    name = p["metadata"]["name"]
    k.wait(lambda: k.get("/api/v1/namespaces/j8/pods/%s/log" % name)[1] == b"started\n", 10, "the container to start")
    st, d, _ = k.req("DELETE", "/api/v1/namespaces/j8/pods/" + name)
    eq(st, 202, "graceful delete")
    assert d["metadata"].get("deletionTimestamp") and d["metadata"]["deletionGracePeriodSeconds"] == 10, d["metadata"]
    k.wait(lambda: os.path.exists(mark), 10, "SIGTERM in the container")
    k.wait(lambda: k.get("/api/v1/namespaces/j8/pods/" + name)[0] == 404, 15, "the pod to go")
    # foreground deletion of the Job: its pods go first
    one_pod("j8", "gr", lambda x: running(x) and not x["metadata"].get("deletionTimestamp"))
    st, d, _ = k.req("DELETE", "/apis/batch/v1/namespaces/j8/jobs/gr?propagationPolicy=Foreground")
    eq(st, 202, "foreground delete")
    assert "foregroundDeletion" in d["metadata"]["finalizers"], d["metadata"]
    k.wait(lambda: k.get("/apis/batch/v1/namespaces/j8/jobs/gr")[0] == 404, 20, "the Job to go")
    eq(pods_of("j8", "gr"), [], "pods gone before the Job")


def t_logs():
    ns("j9")
    job("lg", "j9", ["/bin/sh", "-c", "echo one; sleep 1.5; echo two; sleep 1; echo three"])
    p = one_pod("j9", "lg", running)
    name = p["metadata"]["name"]
    c = k.conn(30)
    c.request("GET", "/api/v1/namespaces/j9/pods/%s/log?follow=true&timestamps=true" % name,
              headers={"Authorization": "Bearer " + k.token})
    r = c.getresponse()
    lines = r.read().decode().splitlines()
    c.close()
    eq([l.split(" ", 1)[1] for l in lines], ["one", "two", "three"], "followed lines")
    ts = [l.split(" ", 1)[0] for l in lines]
    assert all(t.endswith("Z") and "." in t for t in ts), ts
    since = ts[1]
    st, body, _ = k.get("/api/v1/namespaces/j9/pods/%s/log?sinceTime=%s" % (name, since))
    eq(body, b"two\nthree\n", "sinceTime")
    eq(k.get("/api/v1/namespaces/j9/pods/%s/log?tailLines=1" % name)[1], b"three\n", "tailLines")
    eq(k.get("/api/v1/namespaces/j9/pods/%s/log?limitBytes=5" % name)[1], b"one\nt", "limitBytes")


def t_node_lost():
    ns("j10")
    job("nl", "j10", ["/bin/sh", "-c", "exec sleep 30"], backoffLimit=0,
        pod={"nodeSelector": {"kubernetes.io/hostname": "node-b"}})
    p = one_pod("j10", "nl", running)
    eq(p["spec"]["nodeName"], "node-b", "placed")
    k.ok("POST", "/_double/nodes/node-b/ready?value=false")
    n = k.ok("GET", "/api/v1/nodes/node-b")
    ready = next(c for c in n["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] in ("False", "Unknown"), ready
    assert any(t["key"] == "node.kubernetes.io/unreachable" and t["effect"] == "NoExecute" for t in n["spec"]["taints"]), n["spec"]
    c = wait_cond("j10", "nl", "Failed")
    k.ok("POST", "/_double/nodes/node-b/ready?value=true")
    # a node deleted through the API: its pods go (PodGC)
    k.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-c", "labels": {"kubernetes.io/hostname": "node-c"}},
                                   "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "10"},
                                              "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"},
                                              "conditions": [{"type": "Ready", "status": "True"}]}})
    job("gc", "j10", ["/bin/sh", "-c", "exec sleep 30"], backoffLimit=0, pod={"nodeSelector": {"kubernetes.io/hostname": "node-c"}})
    p = one_pod("j10", "gc", running)
    k.ok("DELETE", "/api/v1/nodes/node-c")
    c = wait_cond("j10", "gc", "Failed")
    eq(c["reason"], "BackoffLimitExceeded", "the Job of a pod on a deleted node")
    # unschedulable: a pod that fits nowhere
    job("big", "j10", ["true"], pod={"containers": [{"name": "main", "image": "busybox", "command": ["true"],
                                                     "resources": {"limits": {"nvidia.com/gpu": "8"}}}]})
    def msg():
        ps = pods_of("j10", "big")
        for c in (ps and (ps[0].get("status") or {}).get("conditions")) or []:
            if c["type"] == "PodScheduled" and c["status"] == "False":
                return c["message"]
    m = k.wait(msg, 20, "Unschedulable")
    assert m.startswith("0/2 nodes are available: ") and "Insufficient nvidia.com/gpu" in m, m


def t_ttl_orphan():
    ns("j11")
    job("ttl", "j11", ["true"], ttlSecondsAfterFinished=0)
    k.wait(lambda: k.get("/apis/batch/v1/namespaces/j11/jobs/ttl")[0] == 404, 30, "the finished Job to go (TTL)")
    k.wait(lambda: not pods_of("j11", "ttl"), 20, "its pods to go")
    # DELETE without a propagation policy orphans a Job's pods (batch/v1's default)
    job("orph", "j11", ["/bin/sh", "-c", "exec sleep 30"], pod={"terminationGracePeriodSeconds": 1})
    p = one_pod("j11", "orph", running)
    eq(k.req("DELETE", "/apis/batch/v1/namespaces/j11/jobs/orph")[0], 200, "delete")
    def orphaned():
        x = k.ok("GET", "/api/v1/namespaces/j11/pods/" + p["metadata"]["name"])
        return not x["metadata"].get("ownerReferences") and not x["metadata"].get("finalizers")
    k.wait(orphaned, 20, "the pod orphaned, without the tracking finalizer")
    k.ok("DELETE", "/api/v1/namespaces/j11/pods/" + p["metadata"]["name"], want=(200, 202))
    k.wait(lambda: k.get("/api/v1/namespaces/j11/pods/" + p["metadata"]["name"])[0] == 404, 20, "the orphan to go")


def t_replacement():
    ns("j12")
    slow = "trap 'sleep 4; exit 1' TERM; while :; do sleep 0.1; done"
    for policy in ("Failed", "TerminatingOrFailed"):
        name = "rp-" + policy.lower()
        job(name, "j12", ["/bin/sh", "-c", slow], podReplacementPolicy=policy, backoffLimit=3,
            pod={"terminationGracePeriodSeconds": 10})
        p = one_pod("j12", name, running)
        time.sleep(0.3)
        k.ok("DELETE", "/api/v1/namespaces/j12/pods/" + p["metadata"]["name"], want=(202,))
        if policy == "Failed":
            k.wait(lambda: get_job("j12", name)["status"].get("terminating") == 1, 3, "terminating: 1")
            eq(len(pods_of("j12", name)), 1, "no replacement while the pod terminates (Failed)")
            one_pod("j12", name, lambda x: x["metadata"]["name"] != p["metadata"]["name"], 20)
            k.wait(lambda: get_job("j12", name)["status"].get("failed") == 1, 10, "failed counted")
        else:
            one_pod("j12", name, lambda x: x["metadata"]["name"] != p["metadata"]["name"] and
                    not x["metadata"].get("deletionTimestamp"), 5)
            old = k.get("/api/v1/namespaces/j12/pods/" + p["metadata"]["name"])
            eq(old[0], 200, "the replacement came while the old pod terminated (TerminatingOrFailed)")


def t_pod_features():
    ns("j13")
    k.ok("POST", "/api/v1/namespaces/j13/configmaps", {"metadata": {"name": "cfg"}, "data": {"greeting": "hello"}})
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "labels": {"a": "b"}, "annotations": {"note": "n1"}},
           "spec": {"restartPolicy": "OnFailure",
                    "initContainers": [{"name": "init", "image": "busybox", "command": ["sh", "-c", "echo init > /work/init.txt"],
                                        "volumeMounts": [{"name": "scratch", "mountPath": "/work"}]}],
                    "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c"],
                                    "args": ["cat /work/init.txt /cfg/greeting; echo; cat /info/note; echo; echo CPU=$CPU IP=$IP; "
                                             "if [ ! -f /work/second ]; then touch /work/second; exit 1; fi; echo second run"],
                                    "env": [{"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                                            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                                    "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
                                    "volumeMounts": [{"name": "scratch", "mountPath": "/work"},
                                                     {"name": "cfg", "mountPath": "/cfg", "readOnly": True},
                                                     {"name": "info", "mountPath": "/info"}]}],
                    "volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "cfg"}},
                                {"name": "info", "downwardAPI": {"items": [
                                    {"path": "note", "fieldRef": {"fieldPath": "metadata.annotations['note']"}}]}}]}}
    if os.geteuid() != 0:  # mount paths must not exist on the host without root (symlinks)
        print("note: not root: the pod's mount paths are under the test's folder (symlinks, no mount namespace)", flush=True)
        for v in pod["spec"]["containers"][0]["volumeMounts"] + pod["spec"]["initContainers"][0]["volumeMounts"]:
            v["mountPath"] = os.path.join(TMP, "p1" + v["mountPath"])
        a = pod["spec"]["containers"][0]["args"][0]
        for d in ("/work", "/cfg", "/info"):
            a = a.replace(d + "/", os.path.join(TMP, "p1" + d) + "/")
        pod["spec"]["containers"][0]["args"][0] = a
        pod["spec"]["initContainers"][0]["command"][2] = pod["spec"]["initContainers"][0]["command"][2].replace("/work/", os.path.join(TMP, "p1/work/"))
    k.ok("POST", "/api/v1/namespaces/j13/pods", pod)
    p = k.wait(lambda: (lambda x: x if x["status"].get("phase") == "Succeeded" else None)(
        k.ok("GET", "/api/v1/namespaces/j13/pods/p1")), 30, "p1 to succeed")
    cs = p["status"]["containerStatuses"][0]
    eq((cs["restartCount"], cs["lastState"]["terminated"]["exitCode"]), (1, 1), "restarted once (OnFailure)")
    eq(p["status"]["initContainerStatuses"][0]["state"]["terminated"]["reason"], "Completed", "init container")
    log = k.get("/api/v1/namespaces/j13/pods/p1/log?container=main")[1].decode()
    eq(log, "init\nhello\nn1\nCPU=2 IP=127.0.0.1\nsecond run\n", "log")
    prev = k.get("/api/v1/namespaces/j13/pods/p1/log?container=main&previous=true")[1].decode()
    eq(prev, "init\nhello\nn1\nCPU=2 IP=127.0.0.1\n", "previous log")
    st, e, _ = k.get("/api/v1/namespaces/j13/pods/p1/log")
    eq(st, 200, "one container (init containers do not count)")
    # deletecollection
    for i in range(3):
        k.ok("POST", "/api/v1/namespaces/j13/configmaps", {"metadata": {"name": "dc%d" % i, "labels": {"dc": "y"}}})
    k.ok("DELETE", "/api/v1/namespaces/j13/configmaps?labelSelector=dc%3Dy")
    eq([o["metadata"]["name"] for o in k.ok("GET", "/api/v1/namespaces/j13/configmaps")["items"]], ["cfg"], "deletecollection")


def t_crd():
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wg"]},
                    "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                      "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                                      "status": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}}}]}}
    k.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    rl = k.ok("GET", "/apis/example.com/v1")
    eq(rl["resources"][0]["name"], "widgets", "discovery of the CRD")
    ns("crd")
    w = k.ok("POST", "/apis/example.com/v1/namespaces/crd/widgets", {"apiVersion": "example.com/v1", "kind": "Widget",
                                                                    "metadata": {"name": "w1"}, "spec": {"size": 3}})
    st, e, _ = k.post("/apis/example.com/v1/namespaces/crd/widgets", {"apiVersion": "example.com/v1", "kind": "Widget",
                                                                     "metadata": {"name": "w2"}, "spec": {"size": "big"}})
    eq((st, e["details"]["causes"][0]["field"]), (422, "spec.size"), "the CRD's schema")
    w = k.ok("PATCH", "/apis/example.com/v1/namespaces/crd/widgets/w1/status", {"status": {"ok": True}}, ctype="application/merge-patch+json")
    eq(w["status"], {"ok": True}, "status subresource")
    k.ok("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")
    eq(k.get("/apis/example.com/v1/namespaces/crd/widgets")[0], 404, "the CRD's resource is gone")


def t_gpus_limits():
    ns("j14")
    k.ok("POST", "/api/v1/namespaces/j14/limitranges", {"metadata": {"name": "defaults"}, "spec": {"limits": [
        {"type": "Container", "defaultRequest": {"cpu": "1", "memory": "4Gi"}, "max": {"nvidia.com/gpu": "4"}}]}})
    k.ok("POST", "/api/v1/namespaces/j14/resourcequotas", {"metadata": {"name": "q"}, "spec": {"hard": {"requests.nvidia.com/gpu": "3"}}})
    gpu = lambda n: {"containers": [{"name": "main", "image": "busybox", "command": ["/bin/sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES; sleep 2"],
                                     "resources": {"limits": {"nvidia.com/gpu": str(n)}}}], "nodeSelector": {"kubernetes.io/hostname": "node-a"}}
    job("g2", "j14", [], pod=gpu(2))
    job("g1", "j14", [], pod=gpu(1))
    p2 = one_pod("j14", "g2", running)
    p1 = one_pod("j14", "g1", running)
    eq(p2["spec"]["containers"][0]["resources"]["requests"], {"nvidia.com/gpu": "2", "cpu": "1", "memory": "4Gi"}, "LimitRange defaults")
    for p in (p1, p2):
        k.wait(lambda: k.get("/api/v1/namespaces/j14/pods/%s/log" % p["metadata"]["name"])[1].strip(), 10, "the GPU list in the log")
    devs = [k.get("/api/v1/namespaces/j14/pods/%s/log" % p["metadata"]["name"])[1].strip() for p in (p2, p1)]
    got = sorted(int(x) for d in devs for x in d.split(b","))
    eq(len(got), 3, "three GPUs allotted (%s)" % devs)
    eq(len(set(got)), 3, "distinct GPUs (%s)" % devs)
    k.wait(lambda: (lambda o: o if o["status"].get("used", {}).get("requests.nvidia.com/gpu") == "3" else None)(
        k.ok("GET", "/api/v1/namespaces/j14/resourcequotas/q")), 10, "quota usage")
    st, e, _ = k.post("/api/v1/namespaces/j14/pods", {"metadata": {"name": "over"}, "spec": gpu(1)})
    eq((st, e["reason"]), (403, "Forbidden"), "quota exceeded")
    assert e["message"].startswith('pods "over" is forbidden: exceeded quota: q, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=3, limited: requests.nvidia.com/gpu=3'), e["message"]
    st, e, _ = k.post("/api/v1/namespaces/j14/pods", {"metadata": {"name": "big"}, "spec": gpu(5)})
    eq((st, e["message"]), (403, 'pods "big" is forbidden: maximum nvidia.com/gpu usage per Container is 4, but limit is 5'), "LimitRange max")
    st, e, _ = k.post("/api/v1/namespaces/j14/pods", {"metadata": {"name": "pc"}, "spec": dict(gpu(0), priorityClassName="nope")})
    eq((st, e["message"]), (403, 'pods "pc" is forbidden: no PriorityClass with name nope was found'), "priority class")
    k.ok("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                                               "metadata": {"name": "dbl-default"}, "value": 7, "globalDefault": True})
    st, e, _ = k.post("/apis/scheduling.k8s.io/v1/priorityclasses", {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                                                    "metadata": {"name": "dbl-default2"}, "value": 8, "globalDefault": True})
    eq(st, 403, "a second default priority class")
    p = k.ok("POST", "/api/v1/namespaces/j14/pods?dryRun=All", {"metadata": {"name": "dp"}, "spec": gpu(0)})
    eq((p["spec"]["priorityClassName"], p["spec"]["priority"]), ("dbl-default", 7), "the default priority class")
    k.ok("DELETE", "/apis/scheduling.k8s.io/v1/priorityclasses/dbl-default")


def t_deadline():
    ns("j15")
    job("dl", "j15", ["/bin/sh", "-c", "exec sleep 30"], activeDeadlineSeconds=1, pod={"terminationGracePeriodSeconds": 1})
    c = wait_cond("j15", "dl", "Failed", 30)
    eq((c["reason"], c["message"]), ("DeadlineExceeded", "Job was active longer than specified deadline"), "deadline")
    eq([p["status"]["phase"] for p in pods_of("j15", "dl") if p["status"].get("phase") not in ("Failed", "Succeeded")], [],
       "no pod left running")
    # suspended time does not count: the deadline starts again on resume
    job("dl2", "j15", ["/bin/sh", "-c", "sleep 1"], activeDeadlineSeconds=4, suspend=True)
    wait_cond("j15", "dl2", "Suspended")
    time.sleep(4.5)
    k.ok("PATCH", "/apis/batch/v1/namespaces/j15/jobs/dl2", {"spec": {"suspend": False}}, ctype="application/merge-patch+json")
    wait_cond("j15", "dl2", "Complete", 30)


def t_scale():
    ns("j16")
    job("sc", "j16", ["/bin/sh", "-c", "exec sleep 30"], parallelism=2, pod={"terminationGracePeriodSeconds": 1})
    k.wait(lambda: len([p for p in pods_of("j16", "sc") if running(p)]) == 2, 20, "two running pods")
    k.ok("PATCH", "/apis/batch/v1/namespaces/j16/jobs/sc", {"spec": {"parallelism": 1}}, ctype="application/merge-patch+json")
    k.wait(lambda: len(pods_of("j16", "sc")) == 1, 20, "one pod left")
    j = get_job("j16", "sc")
    eq((j["status"].get("active"), j["status"].get("failed", 0)), (1, 0), "scaled down, no failure")


def main():
    for name, fn in [("discovery", t_discovery), ("crud, conflicts, not found, patches, apply", t_crud),
                     ("validation (422 / 400 Strict / immutable)", t_invalid),
                     ("selectors and pagination", t_select_page), ("watch, bookmarks, compaction", t_watch),
                     ("authentication and per-namespace tokens", t_auth), ("injected failures and stats", t_faults)]:
        check(name, fn)
    par = [("a Job runs to Complete", t_job_complete), ("suspend and resume", t_suspend_resume),
           ("an Indexed Job of 2", t_indexed), ("podFailurePolicy FailJob, backoffLimit", t_failure_policy),
           ("eviction: DisruptionTarget", t_evict), ("OOMKilled", t_oom), ("ErrImagePull, CreateContainerConfigError", t_image),
           ("graceful deletion (SIGTERM), foreground deletion", t_graceful), ("logs: follow, timestamps, sinceTime", t_logs),
           ("node NotReady; Unschedulable", t_node_lost), ("TTL after finished, orphaned pods", t_ttl_orphan),
           ("podReplacementPolicy Failed / TerminatingOrFailed", t_replacement),
           ("init containers, volumes, env, OnFailure restarts, previous logs, deletecollection", t_pod_features),
           ("CustomResourceDefinitions", t_crd), ("GPUs, LimitRange, ResourceQuota, priority classes", t_gpus_limits),
           ("activeDeadlineSeconds (suspended time does not count)", t_deadline),
           ("parallelism lowered: a pod deleted, not a failure", t_scale)]
    ths = [threading.Thread(target=check, args=(n, f), daemon=True) for n, f in par]
    for t in ths:
        t.start()
    for t in ths:
        t.join(120)
    if len(results) != 7 + len(par):
        print("FAIL: %d checks did not finish" % (7 + len(par) - len(results)))
        results.append(False)
    print("%d passed, %d failed" % (sum(results), len(results) - sum(results)))
    sys.exit(0 if all(results) else 1)


main()
