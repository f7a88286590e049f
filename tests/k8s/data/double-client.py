"""double-client.py: a small client of the double for its tests
(tests/k8s/double.sh): requests with the admin token over TLS with the
double's CA, streamed watches, bounded waits."""
import http.client
import json
import os
import ssl
import time
import urllib.parse


class Client:
    def __init__(self, state, token=None):
        self.state = state
        with open(os.path.join(state, "port")) as f:
            self.port = int(f.read().strip())
        with open(os.path.join(state, "token")) as f:
            self.token = token or f.read().strip()
        self.ctx = ssl.create_default_context(cafile=os.path.join(state, "pki", "ca.crt"))

    def conn(self, timeout=30):
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=timeout)

    def req(self, method, path, body=None, ctype="application/json", headers=None, token=True, timeout=30):
        c = self.conn(timeout)
        h = dict(headers or {})
        if token:
            h["Authorization"] = "Bearer " + (self.token if token is True else token)
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            if isinstance(data, str):
                data = data.encode()
            h["Content-Type"] = ctype
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            raw = r.read()
            try:
                obj = json.loads(raw) if raw and (r.getheader("Content-Type") or "").startswith("application/json") else raw
            except ValueError:
                obj = raw
            return r.status, obj, dict(r.getheaders())
        finally:
            c.close()

    def get(self, path, **kw):
        return self.req("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.req("POST", path, body, **kw)

    def ok(self, method, path, body=None, want=(200, 201), **kw):
        st, obj, _ = self.req(method, path, body, **kw)
        if st not in want:
            raise AssertionError("%s %s: %s %s" % (method, path, st, obj))
        return obj

    def wait(self, fn, timeout=30, what="condition", step=0.1):
        end = time.monotonic() + timeout
        last = None
        while time.monotonic() < end:
            try:
                v = fn()
                if v:
                    return v
            except AssertionError as e:
                last = e
            time.sleep(step)
        raise AssertionError("timed out after %ss waiting for %s%s" % (timeout, what, (": %s" % last) if last else ""))

    def watch(self, path, timeout=30):
        """A generator of (type, object) from a watch; stops at the end of the stream."""
        c = self.conn(timeout)
        c.request("GET", path, headers={"Authorization": "Bearer " + self.token})
        r = c.getresponse()
        if r.status != 200:
            body = r.read()
            c.close()
            yield ("HTTP", {"code": r.status, "body": json.loads(body) if body else None})
            return
        try:
            while True:
                line = r.readline()
                if not line:
                    return
                line = line.strip()
                if line:
                    ev = json.loads(line)
                    yield (ev["type"], ev["object"])
        finally:
            c.close()


def q(**kw):
    return "?" + urllib.parse.urlencode(kw)
