"""server.py: the HTTP(S) front: routing of the Kubernetes REST paths,
authentication (bearer tokens, client certificates, per-namespace tokens
from tokens.json), discovery, the verbs (get, list, watch, create,
update, patch, delete, deletecollection, pod logs, eviction), tables for
kubectl, injected failures, request statistics, and the /_double control
endpoints."""
import base64
import http.server
import json
import os
import re
import socket
import socketserver
import ssl
import threading
import time
import urllib.parse

from .labelsel import parse_field_selector, parse_label_selector, labels_match, fields_match
from .store import Expired, Watcher
from .tables import to_table
from .util import ApiError, bad_request, dumps, get_path, qualified

VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.2", "gitCommit": "0000000000000000000000000000000000000000",
           "gitTreeState": "clean", "buildDate": "2025-02-12T21:19:07Z", "goVersion": "go1.23.6",
           "compiler": "gc", "platform": "linux/amd64"}


MAX_BODY = 3 * 1024 * 1024  # the real server's default --max-request-bytes


def log(line):
    """One line on stderr (the double's log): what a failing test wants to see."""
    import sys
    try:
        sys.stderr.write("kube-double: %s\n" % line[:2000])
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with getattr(self, "lock", threading.Lock()):
            self.requests = 0
            self.by_verb = {}
            self.by_resource = {}
            self.invalid = []
            self.creates = {}
            self.statuses = {}

    def count(self, verb, resource):
        with self.lock:
            self.requests += 1
            if verb:
                self.by_verb[verb] = self.by_verb.get(verb, 0) + 1
            if resource and verb:
                d = self.by_resource.setdefault(resource, {})
                d[verb] = d.get(verb, 0) + 1

    def created(self, key):
        with self.lock:
            self.creates[key] = self.creates.get(key, 0) + 1

    def answered(self, code):
        with self.lock:
            self.statuses[str(code)] = self.statuses.get(str(code), 0) + 1

    def record_invalid(self, method, path, status, message):
        with self.lock:
            if len(self.invalid) < 1000:
                self.invalid.append({"method": method, "path": path, "status": status, "message": message})
        log("%s %s %s: %s" % (status, method, path, message))

    def snapshot(self):
        with self.lock:
            return {"requests": self.requests, "by_verb": dict(self.by_verb),
                    "by_resource": {k: dict(v) for k, v in self.by_resource.items()},
                    "invalid": list(self.invalid), "creates": dict(self.creates),
                    "statuses": dict(self.statuses)}


class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []  # [status, remaining, regex]

    def add(self, status, count, path):
        with self.lock:
            self.rules.append([status, count, re.compile(path) if path else None])

    def take(self, path):
        with self.lock:
            for r in self.rules:
                if r[1] > 0 and (r[2] is None or r[2].search(path)):
                    r[1] -= 1
                    st = r[0]
                    self.rules = [x for x in self.rules if x[1] > 0]
                    return st
        return None


class Auth:
    """The admin token and client certificates: everything. tokens.json:
    {"TOKEN": ["ns", ...]} or {"TOKEN": {"user": "name", "namespaces": [...]}}
    ("*" = every namespace; cluster-scoped resources need the admin)."""

    def __init__(self, state_dir, admin_token):
        self.admin = admin_token
        self.path = os.path.join(state_dir, "tokens.json")
        self.lock = threading.Lock()
        self.mtime = None
        self.extra = {}

    def _reload(self):
        try:
            st = os.stat(self.path)
        except OSError:
            self.extra, self.mtime = {}, None
            return
        key = (st.st_mtime_ns, st.st_size)
        if key == self.mtime:
            return
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            return  # half written: keep the previous tokens, read it again next time
        extra = {}
        for tok, v in (data.items() if isinstance(data, dict) else []):
            if isinstance(v, list):
                extra[tok] = {"user": "token-user", "namespaces": v}
            elif isinstance(v, dict):
                extra[tok] = {"user": v.get("user") or "token-user", "namespaces": v.get("namespaces") or []}
        self.extra, self.mtime = extra, key

    def identify(self, token):
        """(user, namespaces or None for all) or None when unknown."""
        if token == self.admin:
            return ("admin", None)
        with self.lock:
            self._reload()
            e = self.extra.get(token)
        if e is None:
            return None
        if "*" in e["namespaces"]:
            return (e["user"], ["*"])
        return (e["user"], list(e["namespaces"]))


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    block_on_close = False  # an outage or the stop must not wait for open streams
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, addr, handler, app):
        self.app = app
        self.conns = set()
        self.conns_lock = threading.Lock()
        super().__init__(addr, handler)

    def finish_request(self, request, client_address):
        ctx = self.app.tls
        if ctx is not None:
            request.settimeout(30)
            try:
                request = ctx.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError, ValueError):
                try:
                    request.close()
                except OSError:
                    pass
                return
            request.settimeout(None)
        with self.conns_lock:
            self.conns.add(request)
        try:
            self.RequestHandlerClass(request, client_address, self)
        finally:
            with self.conns_lock:
                self.conns.discard(request)

    def handle_error(self, request, client_address):
        pass  # a client that went away

    def close_all(self):
        with self.conns_lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                c.close()
            except OSError:
                pass


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kube-double"
    sys_version = ""
    wbufsize = 65536  # one write per answer (flushed after each request and each chunk)
    timeout = 600  # an idle keep-alive connection is closed after this

    def handle_expect_100(self):
        self.send_response_only(100)
        self.end_headers()
        self.wfile.flush()  # buffered: the client waits for it before it sends the body
        return True

    def setup(self):
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def log_message(self, fmt, *args):
        if self.server.app.verbose:
            super().log_message(fmt, *args)

    # ---- plumbing ----
    def _send(self, code, body, ctype="application/json", headers=None):
        data = body if isinstance(body, bytes) else (dumps(body) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Audit-Id", "double")
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()
        self.server.app.stats.answered(code)

    def _error(self, e):
        if e.code in (400, 422) and self.command in ("POST", "PUT", "PATCH"):
            self.server.app.stats.record_invalid(self.command, self.path, e.code, e.message)
        elif e.code in (403, 500) or (e.code == 409 and self.command != "POST"):
            log("%d %s %s: %s" % (e.code, self.command, self.path, e.message))
        self._send(e.code, e.status(), headers=e.headers)

    def _start_chunked(self, ctype="application/json"):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.flush()
        self.server.app.stats.answered(200)

    def _chunk(self, data):
        if not data:
            return
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _peer_gone(self):
        """True when the client closed its side (an idle stream notices
        only so: nothing is written to it)."""
        import select
        try:
            r, _, _ = select.select([self.connection], [], [], 0)
            if not r:
                return False
            data = self.connection.recv(1)
            return not data
        except (ssl.SSLWantReadError, BlockingIOError):
            return False
        except (OSError, ValueError):
            return True

    def _end_chunked(self):
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass
        self.close_connection = True

    def _body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if te == "chunked":
            out = b""
            while True:
                line = self.rfile.readline(1024)
                n = int(line.split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    self.rfile.readline(1024)
                    break
                out += self.rfile.read(n)
                self.rfile.readline(8)
                if len(out) > MAX_BODY:
                    raise ApiError(413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728")
            return out
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise ApiError(413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728")
        return self.rfile.read(n) if n else b""

    def _json_body(self, raw):
        if not raw:
            raise bad_request("the body of the request was empty")
        ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if ctype in ("application/yaml", "application/apply-patch+yaml"):
            import yaml
            try:
                return yaml.safe_load(raw.decode("utf-8"))
            except Exception as e:  # noqa: BLE001
                raise bad_request("error decoding YAML: %s" % e)
        if ctype == "application/vnd.kubernetes.protobuf":
            from . import protobuf
            return protobuf.decode(raw, self._res or self.server.app.registry.get("", "v1", "namespaces"))
        try:
            return json.loads(raw.decode("utf-8"))
        except ValueError as e:
            raise bad_request("couldn't get version/kind; json parse error: %s" % e)

    # ---- entry points ----
    def do_GET(self):
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

    def _dispatch(self):
        app = self.server.app
        self._res = None
        url = urllib.parse.urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        self.q = q
        raw = b""
        try:
            if self.command in ("POST", "PUT", "PATCH", "DELETE"):
                raw = self._body()
            if path == "/_double/healthz" or path in ("/healthz", "/livez", "/readyz"):
                app.stats.count(None, None)
                return self._send(200, b"ok", "text/plain")
            user = self._authenticate()
            if path.startswith("/_double/"):
                if user[1] is not None:
                    raise ApiError(403, "Forbidden", "the control endpoints need the admin")
                return app.control.handle(self, path, q, raw)
            st = app.faults.take(self.path)
            if st is not None:
                app.stats.count("injected", None)
                self._injected(st)
                return
            self._api(path, q, raw, user)
        except ApiError as e:
            try:
                self._error(e)
            except OSError:
                self.close_connection = True
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, socket.timeout):
            self.close_connection = True
        except Exception as e:  # noqa: BLE001 - the server's own bug: a 500 with the reason
            import traceback
            traceback.print_exc()
            try:
                self._error(ApiError(500, "InternalError", "Internal error occurred: %s: %s" % (type(e).__name__, e)))
            except OSError:
                self.close_connection = True

    def _injected(self, st):
        if st == 429:
            e = ApiError(429, "TooManyRequests", "Too many requests, please try again later.",
                         {"retryAfterSeconds": 1}, {"Retry-After": "1"})
        elif st == 503:
            e = ApiError(503, "ServiceUnavailable", "The server is currently unable to handle the request",
                         {"retryAfterSeconds": 1}, {"Retry-After": "1"})
        elif st == 504:
            e = ApiError(504, "Timeout", "The server was unable to return a response in the time allotted, but may still be processing the request")
        else:
            e = ApiError(st, "InternalError", "Internal error occurred: injected failure (kube-double)")
        self._send(e.code, e.status(), headers=e.headers)

    def _authenticate(self):
        app = self.server.app
        auth = self.headers.get("Authorization") or ""
        if auth.startswith("Bearer "):
            who = app.auth.identify(auth[7:].strip())
            if who is not None:
                return who
        else:
            try:
                cert = self.connection.getpeercert() if hasattr(self.connection, "getpeercert") else None
            except (ValueError, OSError):
                cert = None
            if cert:
                cn = None
                for rdn in cert.get("subject", ()):
                    for k, v in rdn:
                        if k == "commonName":
                            cn = v
                return (cn or "admin", None)
            if app.tls is None and app.anonymous:
                return ("admin", None)
        app.stats.count("unauthorized", None)
        raise ApiError(401, "Unauthorized", "Unauthorized")

    # ---- the Kubernetes API ----
    def _api(self, path, q, raw, user):
        app = self.server.app
        if path == "/version":
            app.stats.count("get", None)
            return self._send(200, VERSION)
        if path == "/api":
            app.stats.count("get", None)
            return self._send(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:%d" % app.port}]})
        if path == "/apis":
            app.stats.count("get", None)
            return self._send(200, app.discovery.group_list())
        if path == "/openapi/v3":
            app.stats.count("get", None)
            return self._send(200, app.discovery.openapi_root())
        if path.startswith("/openapi/v3/"):
            app.stats.count("get", None)
            doc = app.discovery.openapi_gv(path[len("/openapi/v3/"):])
            if doc is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return self._send(200, doc)
        if path.startswith("/openapi"):
            app.stats.count("get", None)
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 2:
            if len(parts) == 2:
                g = app.discovery.group(parts[1])
                if g is None:
                    raise ApiError(404, "NotFound", "the server could not find the requested resource")
                app.stats.count("get", None)
                return self._send(200, g)
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            rl = app.discovery.resource_list(group, version)
            if rl is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            app.stats.count("get", None)
            return self._send(200, rl)
        # /namespaces/NS/RES[/NAME[/SUB]] or /RES[/NAME[/SUB]]
        ns = None
        if rest[0] == "watch":  # legacy watch paths
            rest = rest[1:]
            q["watch"] = "true"
        if len(rest) >= 3 and rest[0] == "namespaces":
            r = app.registry.get(group, version, rest[2])
            if r is not None and r.namespaced:
                ns = rest[1]
                rest = rest[2:]
        res = app.registry.get(group, version, rest[0]) if rest else None
        if res is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) >= 3 else None
        if len(rest) > 3 or (sub and sub not in res.subresources):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not res.namespaced:
            ns = None
        verb = self._verb(name, sub, q)
        self._res = res
        rkey = res.plural + ("/" + sub if sub else "")
        app.stats.count(verb, rkey)
        self._authorize(user, verb, res, ns, name)
        dry = q.get("dryRun") == "All"
        fv = q.get("fieldValidation") or None
        if fv not in (None, "Strict", "Warn", "Ignore"):
            raise bad_request('fieldValidation: Unsupported value: "%s": supported values: "Ignore", "Strict", "Warn"' % fv)
        if res.namespaced and name is not None and ns is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        ops = app.ops
        if verb == "list":
            return self._list(res, ns, q)
        if verb == "watch":
            return self._watch(res, ns, q)
        if verb == "get":
            obj = ops.get(res, ns, name)
            return self._send_obj(res, obj)
        if verb == "log":
            return app.logs.serve(self, ns, name, q)
        if verb == "create":
            if sub == "eviction":
                return app.evict_api(self, res, ns, name, self._json_body(raw))
            if sub == "binding":
                b = self._json_body(raw)
                app.bind(ns, name, get_path(b, "target", "name"))
                return self._send(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
            body = self._json_body(raw)
            if res.plural == "selfsubjectaccessreviews":
                return self._access_review(user, body)
            obj = ops.create(res, ns, body, dry, fv)
            if not dry:
                app.stats.created(res.api_version + "/" + res.plural)
            return self._send(201, obj)
        if verb == "update":
            body = self._json_body(raw)
            obj = ops.update(res, ns, name, body, sub, dry, fv)
            return self._send(200, obj)
        if verb == "patch":
            ctype = self.headers.get("Content-Type") or ""
            force = q.get("force") in ("true", "1")
            obj, created = ops.patch(res, ns, name, ctype, raw, sub, dry, fv, q.get("fieldManager"), force)
            if created and not dry:
                app.stats.created(res.api_version + "/" + res.plural)
            return self._send(201 if created else 200, obj)
        if verb == "delete":
            opts = {}
            if raw:
                try:
                    opts = json.loads(raw.decode("utf-8")) or {}
                except ValueError:
                    raise bad_request("the body of the request was in an unknown format")
            if "propagationPolicy" in q:
                opts["propagationPolicy"] = q["propagationPolicy"]
            if "gracePeriodSeconds" in q:
                try:
                    opts["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
                except ValueError:
                    raise bad_request("invalid gracePeriodSeconds")
            if "orphanDependents" in q:
                opts["orphanDependents"] = q["orphanDependents"] == "true"
            code, out = ops.delete(res, ns, name, opts, dry)
            return self._send(code, out)
        if verb == "deletecollection":
            lreqs = parse_label_selector(q.get("labelSelector"))
            freqs = parse_field_selector(q.get("fieldSelector"), res.plural)
            opts = {}
            if raw:
                try:
                    opts = json.loads(raw.decode("utf-8")) or {}
                except ValueError:
                    opts = {}
            if "propagationPolicy" in q:
                opts["propagationPolicy"] = q["propagationPolicy"]
            if "gracePeriodSeconds" in q:
                opts["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
            deleted = []
            for o in app.store.list(res.key, ns):
                if labels_match(lreqs, o["metadata"].get("labels")) and fields_match(freqs, o):
                    try:
                        ops.delete(res, o["metadata"].get("namespace"), o["metadata"]["name"], opts, dry)
                        deleted.append(o)
                    except ApiError:
                        pass
            return self._send(200, {"kind": res.kind + "List", "apiVersion": res.api_version,
                                    "metadata": {"resourceVersion": str(app.store.rv)}, "items": deleted})
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    def _access_review(self, user, body):
        """kubectl auth can-i: the admin may do everything, a tokens.json
        token what its namespaces allow (namespaced resources only)."""
        ra = get_path(body, "spec", "resourceAttributes") or {}
        allowed, reason = True, "the admin may do everything"
        if user[1] is not None:
            nss = user[1]
            res = next((r for r in self.server.app.registry.all()
                        if r.plural == ra.get("resource") and r.group == (ra.get("group") or "")), None)
            ns = ra.get("namespace") or ""
            allowed = bool(res is not None and res.namespaced and ns and ("*" in nss or ns in nss))
            reason = "the token's namespaces: %s" % ",".join(nss)
        out = dict(body)
        out["apiVersion"] = "authorization.k8s.io/v1"
        out["kind"] = "SelfSubjectAccessReview"
        out.setdefault("metadata", {})
        out["status"] = {"allowed": allowed, "reason": reason}
        return self._send(201, out)

    def _verb(self, name, sub, q):
        m = self.command
        watch = q.get("watch") in ("1", "true", "True")
        if m in ("GET", "HEAD"):
            if name is None:
                return "watch" if watch else "list"
            if sub == "log":
                return "log"
            return "get"
        if m == "POST":
            if name is not None and sub not in ("eviction", "binding"):
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            return "create"
        if name is None:
            if m == "DELETE":
                return "deletecollection"
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        return {"PUT": "update", "PATCH": "patch", "DELETE": "delete"}[m]

    def _authorize(self, user, verb, res, ns, name):
        who, nss = user
        if nss is None or res.plural == "selfsubjectaccessreviews":
            return
        if res.namespaced and ns and ("*" in nss or ns in nss):
            return
        verbname = {"log": "get", "watch": "watch"}.get(verb, verb)
        resname = res.plural
        what = '%s "%s"' % (qualified(res), name) if name else qualified(res)
        where = ' in the namespace "%s"' % ns if ns else " at the cluster scope"
        raise ApiError(403, "Forbidden", '%s is forbidden: User "%s" cannot %s resource "%s" in API group "%s"%s' % (
            what, who, verbname, resname, res.group, where), {"name": name or "", "group": res.group, "kind": res.plural})

    def _wants_table(self):
        acc = self.headers.get("Accept") or ""
        return "as=Table" in acc

    def _send_obj(self, res, obj):
        if self._wants_table():
            t = to_table(res.plural, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                         self.q.get("includeObject", "Metadata"), res.printer_columns)
            return self._send(200, t)
        return self._send(200, obj)

    # ---- list ----
    def _list(self, res, ns, q):
        app = self.server.app
        lreqs = parse_label_selector(q.get("labelSelector"))
        freqs = parse_field_selector(q.get("fieldSelector"), res.plural)
        limit = 0
        if q.get("limit"):
            try:
                limit = max(0, int(q["limit"]))
            except ValueError:
                raise bad_request("invalid limit")
        start = None
        at = None
        cont = q.get("continue")
        if cont:
            try:
                tok = json.loads(base64.urlsafe_b64decode(cont + "=" * (-len(cont) % 4)).decode())
                at, start = int(tok["rv"]), tuple(tok["start"])
                if len(start) != 2:
                    raise ValueError("start")
            except (ValueError, KeyError, TypeError):
                raise bad_request("continue key is not valid: the continue token is not valid")
        else:
            rvq = q.get("resourceVersion")
            if rvq and q.get("resourceVersionMatch") == "Exact":
                try:
                    at = int(rvq)
                except ValueError:
                    raise bad_request("invalid resourceVersion")
        try:
            snap, rv = app.store.snapshot(res.key, at, ns)
        except Expired as e:
            if cont:
                raise ApiError(410, "Expired", "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
            raise ApiError(410, "Expired", str(e))
        items = []
        for key in sorted(snap):
            o = snap[key]
            if start is not None and key <= start:
                continue
            if ns and o["metadata"].get("namespace") != ns:
                continue
            if labels_match(lreqs, o["metadata"].get("labels")) and fields_match(freqs, o):
                items.append((key, o))
        lm = {"resourceVersion": str(rv)}
        if limit and len(items) > limit:
            rest = len(items) - limit
            items = items[:limit]
            tok = dumps({"rv": rv, "start": list(items[-1][0])}).encode()
            lm["continue"] = base64.urlsafe_b64encode(tok).decode().rstrip("=")
            if not lreqs and not freqs:
                lm["remainingItemCount"] = rest
        objs = [o for _, o in items]
        if self._wants_table():
            return self._send(200, to_table(res.plural, objs, lm, q.get("includeObject", "Metadata"), res.printer_columns))
        body = {"kind": res.kind + "List", "apiVersion": res.api_version, "metadata": lm, "items": objs}
        data = ('{"kind":%s,"apiVersion":%s,"metadata":%s,"items":[' % (
            json.dumps(body["kind"]), json.dumps(body["apiVersion"]), dumps(lm))).encode()
        data += b",".join(dumps(o).encode() for o in objs) + b"]}\n"
        return self._send(200, data)

    # ---- watch ----
    def _watch(self, res, ns, q):
        app = self.server.app
        lreqs = parse_label_selector(q.get("labelSelector"))
        freqs = parse_field_selector(q.get("fieldSelector"), res.plural)
        rvq = q.get("resourceVersion") or ""
        try:
            since = int(rvq) if rvq else 0
        except ValueError:
            raise bad_request("invalid resourceVersion: %s" % rvq)
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        initial = q.get("sendInitialEvents") == "true"
        try:
            timeout = float(q.get("timeoutSeconds") or 1800)
        except ValueError:
            raise bad_request("invalid timeoutSeconds")
        table = self._wants_table()
        w = Watcher(res.key, ns, lreqs, freqs)
        try:
            first, _ = app.store.start_watch(w, 0 if initial else since)
        except Expired as e:
            if app.store.expired_mode == "status":
                raise ApiError(410, "Expired", str(e))
            self._start_chunked()
            self._chunk(self._event_bytes("ERROR", _expired_status(str(e)), res, table))
            self._end_chunked()
            return
        app.watch_opened(w)
        try:
            self._start_chunked()
            for item in first:
                self._chunk(self._event_bytes(item[1], item[2], res, table))
            if initial:
                bm = {"kind": res.kind, "apiVersion": res.api_version,
                      "metadata": {"resourceVersion": str(app.store.rv),
                                   "annotations": {"k8s.io/initial-events-end": "true"}}}
                self._chunk(self._event_bytes("BOOKMARK", bm, res, False))
            deadline = time.monotonic() + max(0.0, timeout)
            next_bm = time.monotonic() + app.bookmark_interval
            while not app.stopping.is_set():
                now = time.monotonic()
                if now >= deadline:
                    break
                if bookmarks and now >= next_bm:
                    app.store.bookmark(w)
                    next_bm = now + app.bookmark_interval
                item = w.get(min(0.5, max(0.01, deadline - now), max(0.01, next_bm - now) if bookmarks else 0.5))
                if item is None:
                    if self._peer_gone():
                        break
                    continue
                if item[0] == "EVENT":
                    self._chunk(self._event_bytes(item[1], item[2], res, table))
                elif item[0] == "BOOKMARK":
                    if bookmarks:
                        bm = {"kind": res.kind, "apiVersion": res.api_version,
                              "metadata": {"resourceVersion": str(item[1])}}
                        self._chunk(self._event_bytes("BOOKMARK", bm, res, False))
                elif item[0] == "CLOSED":
                    if item[1] == "expired":
                        self._chunk(self._event_bytes("ERROR", _expired_status(
                            "too old resource version: %s (%d)" % (rvq or "0", app.store.compacted + 1)), res, False))
                    break
            self._end_chunked()
        finally:
            app.store.stop_watch(w)
            app.watch_closed(w)

    def _event_bytes(self, type_, obj, res, table):
        if table and type_ in ("ADDED", "MODIFIED", "DELETED"):
            obj = to_table(res.plural, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                           self.q.get("includeObject", "Metadata"), res.printer_columns)
        return (dumps({"type": type_, "object": obj}) + "\n").encode()


def _expired_status(msg):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": msg,
            "reason": "Expired", "code": 410}


class Discovery:
    def __init__(self, registry):
        self.reg = registry

    def _resources(self, group, version):
        out = []
        for r in self.reg.all():
            if r.group != group or r.version != version:
                continue
            verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
            if r.plural == "selfsubjectaccessreviews":
                verbs = ["create"]
            out.append({"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
                        "verbs": verbs, **({"shortNames": r.short} if r.short else {}),
                        **({"categories": r.categories} if r.categories else {}),
                        "storageVersionHash": ""})
            for s in r.subresources:
                if s == "status":
                    out.append({"name": r.plural + "/status", "singularName": "", "namespaced": r.namespaced,
                                "kind": r.kind, "verbs": ["get", "patch", "update"]})
                elif s == "log":
                    out.append({"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]})
                elif s == "eviction":
                    out.append({"name": "pods/eviction", "singularName": "", "namespaced": True, "group": "policy",
                                "version": "v1", "kind": "Eviction", "verbs": ["create"]})
                elif s == "binding":
                    out.append({"name": "pods/binding", "singularName": "", "namespaced": True, "kind": "Binding", "verbs": ["create"]})
                elif s == "finalize":
                    out.append({"name": "namespaces/finalize", "singularName": "", "namespaced": False, "kind": "Namespace", "verbs": ["update"]})
        for o in out:
            o.pop("storageVersionHash", None)
        return out

    def resource_list(self, group, version):
        rs = self._resources(group, version)
        if not rs and not (group == "" and version == "v1"):
            return None
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": (group + "/" + version) if group else version,
                "resources": rs}

    def group(self, name):
        vs = self.reg.groups().get(name)
        if not vs:
            return None
        return {"kind": "APIGroup", "apiVersion": "v1", "name": name,
                "versions": [{"groupVersion": name + "/" + v, "version": v} for v in vs],
                "preferredVersion": {"groupVersion": name + "/" + vs[0], "version": vs[0]}}

    def _gvs(self):
        out = {}
        for r in self.reg.all():
            prefix = "apis/%s/%s" % (r.group, r.version) if r.group else "api/" + r.version
            out.setdefault(prefix, []).append(r)
        return out

    def openapi_root(self):
        """A minimal OpenAPI v3 index: enough for kubectl to see that PATCH
        takes fieldValidation (server-side validation); no schemas."""
        return {"paths": {p: {"serverRelativeURL": "/openapi/v3/%s?hash=%d" % (p, len(rs))}
                          for p, rs in sorted(self._gvs().items())}}

    def openapi_gv(self, prefix):
        rs = self._gvs().get(prefix)
        if not rs:
            return None
        params = [{"name": n, "in": "query", "schema": {"type": "string"}} for n in
                  ("dryRun", "fieldManager", "fieldValidation", "force", "pretty")]
        paths = {}
        for r in rs:
            base = "/" + prefix + ("/namespaces/{namespace}" if r.namespaced else "") + "/" + r.plural + "/{name}"
            gvk = {"group": r.group, "version": r.version, "kind": r.kind}
            op = {"operationId": "patch" + r.kind, "parameters": params,
                  "x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk,
                  "responses": {"200": {"description": "OK"}}}
            paths[base] = {"patch": op, "put": dict(op, operationId="replace" + r.kind, **{"x-kubernetes-action": "put"}),
                           "parameters": params}
            coll = "/" + prefix + ("/namespaces/{namespace}" if r.namespaced else "") + "/" + r.plural
            paths[coll] = {"post": dict(op, operationId="create" + r.kind, **{"x-kubernetes-action": "post"}),
                           "parameters": params}
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes (kube-double)", "version": "v1.32.2"},
                "paths": paths, "components": {"schemas": {}}}

    def group_list(self):
        groups = []
        for name, vs in self.reg.groups().items():
            groups.append({"name": name, "versions": [{"groupVersion": name + "/" + v, "version": v} for v in vs],
                           "preferredVersion": {"groupVersion": name + "/" + vs[0], "version": vs[0]}})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
