"""tables.py: meta.k8s.io/v1 Table answers for kubectl get (jobs, pods,
nodes, namespaces, services, PVCs, events, and NAME/AGE for the rest)."""
import time

from .util import get_path, parse_time


def age(ts, now=None):
    t = parse_time(ts)
    if t is None:
        return "<unknown>"
    return duration(max(0, (now or time.time()) - t))


def duration(s):
    s = int(s)
    if s < 120:
        return "%ds" % s
    m = s // 60
    if m < 10:
        return "%dm%ds" % (m, s % 60) if s % 60 else "%dm" % m
    if m < 180:
        return "%dm" % m
    h = m // 60
    if h < 8:
        return "%dh%dm" % (h, m % 60) if m % 60 else "%dh" % h
    if h < 48:
        return "%dh" % h
    d = h // 24
    if d < 8:
        return "%dd%dh" % (d, h % 24) if h % 24 else "%dd" % d
    if d < 365 * 2:
        return "%dd" % d
    return "%dy" % (d // 365)


def _col(name, typ="string", fmt="", desc="", prio=0):
    return {"name": name, "type": typ, "format": fmt, "description": desc or name, "priority": prio}


def _job_status(j):
    conds = {c.get("type"): c for c in get_path(j, "status", "conditions") or [] if c.get("status") == "True"}
    if "Complete" in conds:
        return "Complete"
    if "Failed" in conds:
        return "Failed"
    if j["metadata"].get("deletionTimestamp"):
        return "Terminating"
    if "SuccessCriteriaMet" in conds or "FailureTarget" in conds:
        return "Terminating"
    if "Suspended" in conds:
        return "Suspended"
    return "Running"


def _job_row(j):
    st = j.get("status") or {}
    comp = get_path(j, "spec", "completions")
    succ = st.get("succeeded", 0)
    if comp is None:
        par = get_path(j, "spec", "parallelism", default=1)
        compl = "%d/1 of %d" % (succ, par) if par > 1 else "%d/1" % succ
    else:
        compl = "%d/%d" % (succ, comp)
    start = parse_time(st.get("startTime"))
    end = parse_time(st.get("completionTime"))
    dur = duration((end or time.time()) - start) if start else ""
    return [j["metadata"]["name"], _job_status(j), compl, dur, age(j["metadata"].get("creationTimestamp"))]


def _pod_row(p):
    st = p.get("status") or {}
    cs = st.get("containerStatuses") or []
    ready = sum(1 for c in cs if c.get("ready"))
    total = len(get_path(p, "spec", "containers") or [])
    reason = st.get("reason") or st.get("phase") or "Pending"
    restarts = sum(c.get("restartCount", 0) for c in cs)
    for c in cs:
        w = get_path(c, "state", "waiting", "reason")
        t = get_path(c, "state", "terminated")
        if w:
            reason = w
        elif t:
            reason = t.get("reason") or ("Signal:%d" % t["signal"] if t.get("signal") else "ExitCode:%d" % t.get("exitCode", 0))
    if p["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return [p["metadata"]["name"], "%d/%d" % (ready, total), reason, restarts, age(p["metadata"].get("creationTimestamp"))]


def _pod_wide(p):
    return _pod_row(p) + [get_path(p, "status", "podIP", default="<none>"),
                          get_path(p, "spec", "nodeName", default="<none>"),
                          get_path(p, "status", "nominatedNodeName", default="<none>"), "<none>"]


def _job_wide(j):
    conts = get_path(j, "spec", "template", "spec", "containers") or []
    sel = get_path(j, "spec", "selector", "matchLabels") or {}
    return _job_row(j) + [",".join(c.get("name", "") for c in conts), ",".join(c.get("image", "") for c in conts),
                          ",".join("%s=%s" % kv for kv in sorted(sel.items()))]


def _node_wide(n):
    info = get_path(n, "status", "nodeInfo") or {}
    ip = next((a.get("address") for a in get_path(n, "status", "addresses") or [] if a.get("type") == "InternalIP"), "<none>")
    return _node_row(n) + [ip, "<none>", info.get("osImage", ""), info.get("kernelVersion", ""),
                           info.get("containerRuntimeVersion", "")]


def _node_row(n):
    ready = "Unknown"
    for c in get_path(n, "status", "conditions") or []:
        if c.get("type") == "Ready":
            ready = "Ready" if c.get("status") == "True" else "NotReady"
    if get_path(n, "spec", "unschedulable"):
        ready += ",SchedulingDisabled"
    labels = n["metadata"].get("labels") or {}
    roles = ",".join(sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))) or "<none>"
    return [n["metadata"]["name"], ready, roles, age(n["metadata"].get("creationTimestamp")),
            get_path(n, "status", "nodeInfo", "kubeletVersion", default="v1.32.2")]


TABLES = {
    "jobs": ([_col("Name", fmt="name"), _col("Status"), _col("Completions"), _col("Duration"), _col("Age"),
              _col("Containers", prio=1), _col("Images", prio=1), _col("Selector", prio=1)], _job_wide),
    "pods": ([_col("Name", fmt="name"), _col("Ready"), _col("Status"), _col("Restarts", "string"), _col("Age"),
              _col("IP", prio=1), _col("Node", prio=1), _col("Nominated Node", prio=1), _col("Readiness Gates", prio=1)],
             _pod_wide),
    "nodes": ([_col("Name", fmt="name"), _col("Status"), _col("Roles"), _col("Age"), _col("Version"),
               _col("Internal-IP", prio=1), _col("External-IP", prio=1), _col("OS-Image", prio=1),
               _col("Kernel-Version", prio=1), _col("Container-Runtime", prio=1)], _node_wide),
    "namespaces": ([_col("Name", fmt="name"), _col("Status"), _col("Age")],
                   lambda o: [o["metadata"]["name"], get_path(o, "status", "phase", default="Active"),
                              age(o["metadata"].get("creationTimestamp"))]),
    "persistentvolumeclaims": ([_col("Name", fmt="name"), _col("Status"), _col("Volume"), _col("Capacity"),
                                _col("Access Modes"), _col("StorageClass"), _col("Age")],
                               lambda o: [o["metadata"]["name"], get_path(o, "status", "phase", default=""),
                                          get_path(o, "spec", "volumeName", default=""),
                                          get_path(o, "status", "capacity", "storage", default=""),
                                          ",".join({"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
                                                    "ReadWriteOncePod": "RWOP"}.get(a, a) for a in get_path(o, "status", "accessModes", default=[])),
                                          get_path(o, "spec", "storageClassName", default="<unset>"),
                                          age(o["metadata"].get("creationTimestamp"))]),
    "services": ([_col("Name", fmt="name"), _col("Type"), _col("Cluster-IP"), _col("External-IP"), _col("Port(s)"), _col("Age")],
                 lambda o: [o["metadata"]["name"], get_path(o, "spec", "type", default="ClusterIP"),
                            get_path(o, "spec", "clusterIP", default=""), "<none>",
                            ",".join("%s/%s" % (p.get("port"), p.get("protocol", "TCP")) for p in get_path(o, "spec", "ports", default=[])) or "<none>",
                            age(o["metadata"].get("creationTimestamp"))]),
    "priorityclasses": ([_col("Name", fmt="name"), _col("Value", "integer"), _col("Global-Default", "boolean"), _col("Age")],
                        lambda o: [o["metadata"]["name"], o.get("value", 0), bool(o.get("globalDefault", False)),
                                   age(o["metadata"].get("creationTimestamp"))]),
    "resourcequotas": ([_col("Name", fmt="name"), _col("Age"), _col("Request"), _col("Limit")],
                       lambda o: [o["metadata"]["name"], age(o["metadata"].get("creationTimestamp")),
                                  ", ".join("%s: %s/%s" % (k, get_path(o, "status", "used", k, default="0"), v)
                                            for k, v in sorted((get_path(o, "spec", "hard") or {}).items()) if not k.startswith("limits.")),
                                  ", ".join("%s: %s/%s" % (k, get_path(o, "status", "used", k, default="0"), v)
                                            for k, v in sorted((get_path(o, "spec", "hard") or {}).items()) if k.startswith("limits."))]),
}


def _event_row(e):
    last = e.get("lastTimestamp") or e.get("eventTime") or e["metadata"].get("creationTimestamp")
    io = e.get("involvedObject") or {}
    return [age(last), e.get("type", ""), e.get("reason", ""),
            "%s/%s" % ((io.get("kind") or "").lower(), io.get("name", "")), e.get("message", "")]


TABLES.update({
    "events": ([_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message")], _event_row),
    "configmaps": ([_col("Name", fmt="name"), _col("Data", "integer"), _col("Age")],
                   lambda o: [o["metadata"]["name"], len(o.get("data") or {}) + len(o.get("binaryData") or {}),
                              age(o["metadata"].get("creationTimestamp"))]),
    "secrets": ([_col("Name", fmt="name"), _col("Type"), _col("Data", "integer"), _col("Age")],
                lambda o: [o["metadata"]["name"], o.get("type", "Opaque"), len(o.get("data") or {}),
                           age(o["metadata"].get("creationTimestamp"))]),
    "deployments": ([_col("Name", fmt="name"), _col("Ready"), _col("Up-to-date", "integer"), _col("Available", "integer"), _col("Age")],
                    lambda o: [o["metadata"]["name"], "%d/%d" % (get_path(o, "status", "readyReplicas", default=0),
                                                                 get_path(o, "spec", "replicas", default=1)),
                               get_path(o, "status", "updatedReplicas", default=0),
                               get_path(o, "status", "availableReplicas", default=0),
                               age(o["metadata"].get("creationTimestamp"))]),
    "serviceaccounts": ([_col("Name", fmt="name"), _col("Secrets", "integer"), _col("Age")],
                        lambda o: [o["metadata"]["name"], len(o.get("secrets") or []), age(o["metadata"].get("creationTimestamp"))]),
    "leases": ([_col("Name", fmt="name"), _col("Holder"), _col("Age")],
               lambda o: [o["metadata"]["name"], get_path(o, "spec", "holderIdentity", default=""),
                          age(o["metadata"].get("creationTimestamp"))]),
})


def _json_path(o, path):
    """The value at a simple JSONPath (.status.phase) of a printer column."""
    v = o
    for part in path.strip().lstrip(".").split("."):
        v = v.get(part) if isinstance(v, dict) else None
    return v


def _printer_table(columns):
    """A CRD's additionalPrinterColumns, as the API server serves them: Name
    first, then each column (a date column as an age)."""
    cols = [_col("Name", fmt="name")] + [
        _col(c["name"], c.get("type", "string"), c.get("format", ""), c.get("description", ""), c.get("priority", 0))
        for c in columns]

    def row(o):
        cells = [o["metadata"]["name"]]
        for c in columns:
            v = _json_path(o, c.get("jsonPath", ""))
            cells.append(age(v) if c.get("type") == "date" and v else ("" if v is None else v))
        return cells
    return cols, row


def to_table(plural, objs, list_meta, include_object="Metadata", printer_columns=None):
    if printer_columns:
        cols, rowfn = _printer_table(printer_columns)
    else:
        cols, rowfn = TABLES.get(plural, ([_col("Name", fmt="name"), _col("Age")],
                                          lambda o: [o["metadata"]["name"], age(o["metadata"].get("creationTimestamp"))]))
    rows = []
    for o in objs:
        row = {"cells": rowfn(o)}
        if include_object == "Object":
            row["object"] = o
        elif include_object != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": cols, "rows": rows}
