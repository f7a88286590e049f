"""store.py: the object store: one global resourceVersion counter, objects
per resource, a bounded history ring of events (kept with the previous
state, so lists at an older resourceVersion and selector transitions in
watches are exact) and the watchers fed from it. Stored objects are never
mutated: every write stores a new dict."""
import collections
import threading

from .labelsel import fields_match, labels_match


class Expired(Exception):
    def __init__(self, rv, oldest):
        super().__init__("too old resource version: %d (%d)" % (rv, oldest))
        self.rv = rv
        self.oldest = oldest


class Event:
    __slots__ = ("rv", "key", "type", "obj", "prev")

    def __init__(self, rv, key, type_, obj, prev):
        self.rv, self.key, self.type, self.obj, self.prev = rv, key, type_, obj, prev


def _okey(obj):
    m = obj["metadata"]
    return (m.get("namespace") or "", m["name"])


class Watcher:
    """One open watch: a queue filled under the store lock (so it is in
    resourceVersion order with no gap), drained by the request thread."""
    MAX_QUEUE = 100000

    def __init__(self, key, ns, lreqs, freqs):
        self.key, self.ns, self.lreqs, self.freqs = key, ns, lreqs, freqs
        self.q = collections.deque()
        self.cond = threading.Condition()
        self.closed = None  # None, "expired" (send a 410 ERROR event), "cut" (close)

    def matches(self, obj):
        if obj is None:
            return False
        if self.ns and obj["metadata"].get("namespace") != self.ns:
            return False
        return labels_match(self.lreqs, obj["metadata"].get("labels")) and fields_match(self.freqs, obj)

    def translate(self, ev):
        """The event this watch sees for a store event, or None."""
        if ev.type == "DELETED":
            return ("DELETED", ev.obj) if self.matches(ev.prev or ev.obj) else None
        now, before = self.matches(ev.obj), self.matches(ev.prev)
        if now and before:
            return ("MODIFIED", ev.obj)
        if now:
            return ("ADDED", ev.obj)
        if before:
            return ("DELETED", ev.obj)
        return None

    def push(self, item):
        with self.cond:
            if self.closed:
                return
            if len(self.q) >= self.MAX_QUEUE:
                self.closed = "cut"  # a client that does not read: cut it, it restarts
            else:
                self.q.append(item)
            self.cond.notify_all()

    def close(self, how):
        with self.cond:
            if not self.closed:
                self.closed = how
            self.cond.notify_all()

    def get(self, timeout):
        """('EVENT', type, obj) / ('BOOKMARK', rv) / ('CLOSED', how) / None on timeout."""
        with self.cond:
            if not self.q and not self.closed:
                self.cond.wait(timeout)
            if self.q:
                return self.q.popleft()
            if self.closed:
                return ("CLOSED", self.closed)
            return None


class Store:
    def __init__(self, history_max=10000):
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.rv = 0
        self.seq = 0  # bumped on every write (controllers wait on it)
        self.objs = collections.defaultdict(dict)  # key -> {(ns, name): obj}
        self.by_ns = collections.defaultdict(lambda: collections.defaultdict(dict))  # key -> ns -> {name: obj}
        self.history = collections.deque()
        self.history_max = max(1, history_max)
        self.compacted = 0  # every event with rv > compacted is in history
        self.watchers = set()
        self.expired_mode = "event"  # how a watch start that is too old is answered
        self.uids = {}  # uid -> (key, ns, name)
        self.owned = collections.defaultdict(set)  # owner uid -> {(key, ns, name)} of its dependents

    # ---- reads (return stored objects: treat as read-only) ----
    def get(self, key, ns, name):
        with self.lock:
            return self.objs[key].get((ns or "", name))

    def list(self, key, ns=None):
        with self.lock:
            if ns:
                d = self.by_ns[key].get(ns)
                return list(d.values()) if d else []
            return list(self.objs[key].values())

    def snapshot(self, key, at_rv=None, ns=None):
        """{(ns, name): obj} of key (in namespace ns, or all) at resourceVersion
        at_rv (None = now)."""
        with self.lock:
            if ns:
                cur = {(ns, n): o for n, o in (self.by_ns[key].get(ns) or {}).items()}
            else:
                cur = dict(self.objs[key])
            if at_rv is not None and at_rv < self.compacted:
                raise Expired(at_rv, self.compacted)
            if at_rv is None or at_rv >= self.rv:
                return cur, self.rv
            for ev in reversed(self.history):
                if ev.rv <= at_rv:
                    break
                if ev.key != key:
                    continue
                k = _okey(ev.obj)
                if ns and k[0] != ns:
                    continue
                if ev.type == "ADDED":
                    cur.pop(k, None)
                else:
                    cur[k] = ev.prev
            return cur, at_rv

    # ---- writes (callers hold or take the lock) ----
    def _record(self, key, type_, obj, prev):
        self.rv += 1
        self.seq += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        ev = Event(self.rv, key, type_, obj, prev)
        self.history.append(ev)
        while len(self.history) > self.history_max:
            self.compacted = self.history.popleft().rv
        for w in list(self.watchers):
            if w.key == key:
                t = w.translate(ev)
                if t:
                    w.push(("EVENT", t[0], t[1]))
        self.changed.notify_all()
        return self.rv

    def _index(self, key, obj, prev):
        ident = (key,) + _okey(obj if obj is not None else prev)
        if prev is not None:
            for ref in prev["metadata"].get("ownerReferences") or []:
                deps = self.owned.get(ref.get("uid"))
                if deps is not None:
                    deps.discard(ident)
                    if not deps:
                        del self.owned[ref.get("uid")]
            if obj is None:
                self.uids.pop(prev["metadata"].get("uid"), None)
        if obj is not None:
            self.uids[obj["metadata"].get("uid")] = ident
            for ref in obj["metadata"].get("ownerReferences") or []:
                self.owned[ref.get("uid")].add(ident)

    def dependents(self, uid):
        """The objects with an ownerReference to uid: [(key, obj)]."""
        with self.lock:
            out = []
            for (key, ns, name) in sorted(self.owned.get(uid, ())):
                o = self.objs[key].get((ns, name))
                if o is not None:
                    out.append((key, o))
            return out

    def by_uid(self, uid):
        with self.lock:
            ident = self.uids.get(uid)
            if ident is None:
                return None
            return self.objs[ident[0]].get((ident[1], ident[2]))

    def events_since(self, rv):
        """The events after rv, oldest first, or None when the history no
        longer reaches back to rv (the caller resyncs)."""
        with self.lock:
            if rv < self.compacted:
                return None, self.rv
            out = []
            for ev in reversed(self.history):
                if ev.rv <= rv:
                    break
                out.append(ev)
            out.reverse()
            return out, self.rv

    def put(self, key, obj):
        """Create or replace obj (a new dict the store now owns)."""
        with self.lock:
            k = _okey(obj)
            prev = self.objs[key].get(k)
            self.objs[key][k] = obj
            self.by_ns[key][k[0]][k[1]] = obj
            self._index(key, obj, prev)
            self._record(key, "MODIFIED" if prev is not None else "ADDED", obj, prev)
            return obj

    def remove(self, key, ns, name):
        with self.lock:
            prev = self.objs[key].pop((ns or "", name), None)
            if prev is None:
                return None
            d = self.by_ns[key].get(ns or "")
            if d is not None:
                d.pop(name, None)
                if not d:
                    del self.by_ns[key][ns or ""]
            self._index(key, None, prev)
            # The DELETED event carries the last state with a new resourceVersion.
            last = dict(prev)
            last["metadata"] = dict(prev["metadata"])
            self._record(key, "DELETED", last, prev)
            return last

    def drop_key(self, key):
        with self.lock:
            for (ns, name) in list(self.objs[key].keys()):
                self.remove(key, ns, name)

    # ---- watches ----
    def start_watch(self, w, since_rv):
        """Registers w; returns the events to send first. since_rv None or 0:
        synthetic ADDED for every matching object; else the events after it.
        Raises Expired when the history no longer reaches since_rv."""
        with self.lock:
            first = []
            if not since_rv:
                for o in sorted(self.objs[w.key].values(), key=_okey):
                    if w.matches(o):
                        first.append(("EVENT", "ADDED", o))
            else:
                if since_rv < self.compacted:
                    raise Expired(since_rv, self.compacted)
                for ev in self.history:
                    if ev.rv > since_rv and ev.key == w.key:
                        t = w.translate(ev)
                        if t:
                            first.append(("EVENT", t[0], t[1]))
            self.watchers.add(w)
            return first, self.rv

    def stop_watch(self, w):
        with self.lock:
            self.watchers.discard(w)

    def bookmark(self, w):
        """Queues a bookmark at the current resourceVersion (in order)."""
        with self.lock:
            w.push(("BOOKMARK", self.rv))

    def compact(self, mode):
        with self.lock:
            # the compaction takes a resourceVersion of its own: everything
            # before it (continue tokens, watches) is too old
            self.rv += 1
            self.seq += 1
            self.compacted = self.rv
            self.history.clear()
            self.expired_mode = "status" if mode == "status" else "event"
            for w in list(self.watchers):
                w.close("expired" if self.expired_mode == "event" else "cut")

    def cut_all_watches(self):
        with self.lock:
            for w in list(self.watchers):
                w.close("cut")

    def wait_change(self, seq, timeout):
        """Waits until a write after seq (bounded); returns the new seq."""
        with self.lock:
            if self.seq == seq:
                self.changed.wait(timeout)
            return self.seq
