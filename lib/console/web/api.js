// api.js: the console's only way to the server: the HTTP API v1 on the
// same origin, with the user's token in an Authorization header. The token
// lives in this tab's sessionStorage: it is never put in a URL, a cookie or
// the page, so no other site can make the browser send it, and closing the
// tab forgets it.

const KEY = "lathe.token";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function token() {
  return sessionStorage.getItem(KEY);
}

export function setToken(t) {
  if (t) sessionStorage.setItem(KEY, t);
  else sessionStorage.removeItem(KEY);
}

// Called on 401 (the token expired or was removed): the app signs out.
let onUnauthorized = () => {};
export function setUnauthorizedHandler(f) {
  onUnauthorized = f;
}

// Requests wait while the server says it is over the token's rate limit.
let pausedUntil = 0;

// One call: JSON in, JSON (or text) out; errors as ApiError with the API's
// message.
export async function call(method, path, opts = {}) {
  const wait = pausedUntil - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  const headers = { Accept: opts.text ? "text/plain" : "application/json" };
  const t = opts.token || token();
  if (t) headers.Authorization = "Bearer " + t;
  let res;
  try {
    res = await fetch(path, { method, headers, cache: "no-store", signal: opts.signal });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, "unreachable", "the server does not answer (" + e.message + ")");
  }
  if (res.status === 429) {
    const after = Number(res.headers.get("Retry-After")) || 1;
    pausedUntil = Date.now() + after * 1000;
  }
  const body = opts.text && res.ok ? await res.text() : await res.json().catch(() => null);
  if (!res.ok) {
    const e = body && body.error ? body.error : { code: "http_" + res.status, message: res.statusText };
    if (res.status === 401 && !opts.token) onUnauthorized(e.message);
    throw new ApiError(res.status, e.code, e.message);
  }
  return body;
}

export const get = (path, opts) => call("GET", path, opts);
export const post = (path, opts) => call("POST", path, opts);

// "?a=1&b=2" from an object (undefined and null left out).
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  const s = q.toString();
  return s ? "?" + s : "";
}

// A job's API path: /v1/jobs/NAME[/tail]?team=TEAM&... (the team picks
// the job for an admin's token; a team's token acts for its own anyway).
export function jobUrl(team, name, tail = "", params = {}) {
  return "/v1/jobs/" + encodeURIComponent(name) + tail + query({ team, ...params });
}
