/* k8s_lease.c: leader election through a coordination.k8s.io/v1 Lease, the
 * way client-go's leaderelection package does it.
 *
 * Each tick reads the Lease and then, by what it read:
 *   - absent: creates it with this replica as holder (409 AlreadyExists =
 *     another replica created it first: not held);
 *   - held by this replica: renews it (renewTime now, acquireTime and
 *     leaseTransitions kept);
 *   - free (holderIdentity empty, i.e. released) or expired: takes it
 *     (acquireTime = renewTime = now, leaseTransitions + 1);
 *   - held by another replica and not expired: not held.
 * Every write is a PUT of the object read, so it carries the
 * resourceVersion read: of two replicas that act on the same version, the
 * API server lets one through and answers the other 409 Conflict, which
 * means that other replica won: not held, at once.
 *
 * Expiry never compares clocks of two machines (renewTime is the holder's
 * wall clock, written for people, never read here): a replica remembers
 * when, on its own steady clock (the `now` of its ticks), it last saw the
 * record change (holderIdentity, renewTime or resourceVersion), and a
 * foreign holder is expired once now - that moment >= the record's
 * leaseDurationSeconds (this replica's duration when the record has none).
 *
 * A tick that could not tell (the API unreachable, 5xx, any error but a
 * conflict or an AlreadyExists) keeps the holder's status until
 * renew_deadline has passed since the start of its last successful write,
 * counted up to the end of the failed tick (so a tick that spent long in
 * the client's retries cannot report a lease it has lost); then the
 * Lease is lost, and only a later successful write gives it back. The
 * start of the tick is taken as the write's time because the others can
 * only have seen the write after it.
 *
 * Thread-safety: a k8s_lease is used by one thread at a time (its state is
 * not locked); the client it borrows is thread-safe and may be shared.
 */
#include "k8s_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEASE_API "coordination.k8s.io/v1"

struct k8s_lease {
    k8s_client *cl;            /* borrowed */
    char *ns, *name, *identity;
    double duration;           /* seconds; a foreign record without a duration expires after it */
    double renew_deadline;     /* seconds a holder keeps it without a successful write */
    int duration_s;            /* leaseDurationSeconds written: duration, whole seconds */
    json_t *obj;               /* the Lease as last read or written; NULL before */
    char *holder;              /* obj's holderIdentity ("" = free); NULL before the first read */
    int transitions;           /* obj's leaseTransitions */
    char *seen;                /* obj's holder, renewTime and resourceVersion; NULL = none */
    double seen_at;            /* when `seen` last changed, on the caller's clock */
    bool renewed;              /* this replica's last write as holder is renewed_at */
    double renewed_at;         /* the start of the tick of that write */
    bool held;                 /* the last tick's answer */
};

/* What one try found out about holding the Lease. */
typedef enum {
    LEASE_HELD,    /* written as holder */
    LEASE_LOST,    /* another replica holds it (or won the race) */
    LEASE_UNKNOWN  /* a call failed: the deadline decides */
} lease_outcome;

static k8s_ref lease_ref(const k8s_lease *l)
{
    return (k8s_ref){.api = LEASE_API, .resource = "leases", .ns = l->ns, .name = l->name};
}

/* e back to "nothing failed", so a caller can tell a lease held by another
 * replica (rc K8S_OK) from a failed call. */
static void error_clear(k8s_error *e)
{
    if (!e) return;
    e->rc = K8S_OK;
    e->http = 0;
    e->reason[0] = '\0';
    e->message[0] = '\0';
}

/* The wall clock as a MicroTime: RFC 3339 in UTC with exactly six
 * fractional digits, the only form metav1.MicroTime reads. */
static void microtime_now(char *out, size_t outsz)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    int micro = (int)(ts.tv_nsec / 1000) % 1000000; /* 0..999999: six digits */
    snprintf(out, outsz, "%.19s.%06dZ", day, micro);
}

static const json_t *spec_of(const json_t *obj)
{
    return json_object_get(obj, "spec");
}

/* A string of the spec; "" when absent or null (an absent holder is a free Lease). */
static const char *spec_str(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(spec_of(obj), key));
    return s ? s : "";
}

static json_int_t spec_int(const json_t *obj, const char *key, json_int_t dflt)
{
    const json_t *v = json_object_get(spec_of(obj), key);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

/* Makes obj (owned) the Lease last seen; restarts the expiry count at now
 * when its record differs from the one seen before. */
static void observe(k8s_lease *l, json_t *obj, double now)
{
    const char *rv =
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    char *seen = xasprintf("%s\n%s\n%s", spec_str(obj, "holderIdentity"),
                           spec_str(obj, "renewTime"), rv ? rv : "");
    if (!l->seen || strcmp(l->seen, seen) != 0) {
        free(l->seen);
        l->seen = seen;
        l->seen_at = now;
    } else {
        free(seen);
    }
    json_decref(l->obj);
    l->obj = obj;
    free(l->holder);
    l->holder = xstrdup(spec_str(obj, "holderIdentity"));
    l->transitions = (int)spec_int(obj, "leaseTransitions", 0);
}

/* Whether the foreign record seen has gone unchanged for its duration. */
static bool expired(const k8s_lease *l, double now)
{
    json_int_t d = spec_int(l->obj, "leaseDurationSeconds", 0);
    double duration = d > 0 ? (double)d : l->duration;
    return now - l->seen_at >= duration;
}

/* Sets the spec fields of a holder's record in obj. */
static void set_record(json_t *obj, const char *holder, int duration_s, const char *acquired,
                       const char *renewed, int transitions)
{
    json_t *spec = json_object_get(obj, "spec");
    if (!json_is_object(spec)) {
        spec = json_object();
        json_object_set_new(obj, "spec", spec);
    }
    json_object_set_new(spec, "holderIdentity", json_string(holder));
    json_object_set_new(spec, "leaseDurationSeconds", json_integer(duration_s));
    json_object_set_new(spec, "acquireTime", json_string(acquired));
    json_object_set_new(spec, "renewTime", json_string(renewed));
    json_object_set_new(spec, "leaseTransitions", json_integer(transitions));
}

/* POSTs a new Lease with this replica as holder. */
static lease_outcome create(k8s_lease *l, double now, k8s_error *e)
{
    char ts[40];
    microtime_now(ts, sizeof ts);
    json_t *obj = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}}", "apiVersion", LEASE_API,
                            "kind", "Lease", "metadata", "name", l->name, "namespace", l->ns,
                            "labels", K8S_LABEL_MANAGED, "lathe");
    set_record(obj, l->identity, l->duration_s, ts, ts, 0);
    k8s_ref ref = lease_ref(l);
    json_t *out = NULL;
    k8s_rc rc = k8s_create(l->cl, &ref, obj, &out, e);
    json_decref(obj);
    if (rc == K8S_OK) {
        observe(l, out, now);
        return LEASE_HELD;
    }
    /* AlreadyExists: another replica created it between the read and the
     * create, so that replica holds it. (A create of this replica that the
     * client retried after its answer was lost also answers this; the next
     * tick then reads this replica as the holder and renews.) */
    return rc == K8S_E_EXISTS ? LEASE_LOST : LEASE_UNKNOWN;
}

/* PUTs the Lease read (so with its resourceVersion) with this replica as
 * holder: a renewal keeps acquireTime and leaseTransitions, a takeover
 * sets acquireTime and counts a transition. */
static lease_outcome write_holder(k8s_lease *l, double now, bool takeover, k8s_error *e)
{
    char ts[40];
    microtime_now(ts, sizeof ts);
    const char *acquired = spec_str(l->obj, "acquireTime");
    if (takeover || !*acquired) acquired = ts;
    json_t *obj = json_deep_copy(l->obj);
    set_record(obj, l->identity, l->duration_s, acquired, ts,
               l->transitions + (takeover ? 1 : 0));
    k8s_ref ref = lease_ref(l);
    json_t *out = NULL;
    k8s_rc rc = k8s_replace(l->cl, &ref, obj, &out, e);
    json_decref(obj);
    if (rc == K8S_OK) {
        observe(l, out, now);
        return LEASE_HELD;
    }
    return rc == K8S_E_CONFLICT ? LEASE_LOST : LEASE_UNKNOWN;
}

/* Decides on the Lease just read (l->obj). */
static lease_outcome act(k8s_lease *l, double now, k8s_error *e)
{
    if (strcmp(l->holder, l->identity) == 0) return write_holder(l, now, false, e);
    if (!*l->holder || expired(l, now)) return write_holder(l, now, true, e);
    return LEASE_LOST;
}

/* Records a try's outcome; returns whether the Lease is held. started is
 * k8s_now_mono() at the tick's start: what the tick itself took counts
 * against the deadline. */
static bool settle(k8s_lease *l, lease_outcome o, double now, double started)
{
    switch (o) {
    case LEASE_HELD:
        l->renewed = true;
        l->renewed_at = now;
        break;
    case LEASE_LOST:
        l->renewed = false;
        break;
    case LEASE_UNKNOWN: {
        double end = now + (k8s_now_mono() - started);
        if (l->renewed && end - l->renewed_at >= l->renew_deadline) l->renewed = false;
        break;
    }
    }
    l->held = l->renewed;
    return l->held;
}

/* A positive setting, or dflt for 0 (or anything not positive). */
static double setting(double v, double dflt)
{
    return v > 0 && isfinite(v) ? v : dflt;
}

k8s_lease *k8s_lease_new(k8s_client *cl, const k8s_lease_config *c)
{
    if (!cl || !c || !c->name || !*c->name || !c->identity || !*c->identity) return NULL;
    k8s_lease *l = xcalloc(1, sizeof *l);
    l->cl = cl;
    const char *ns = c->namespace_;
    if (!ns || !*ns) ns = k8s_client_config(cl)->namespace_;
    l->ns = xstrdup(ns && *ns ? ns : "default");
    l->name = xstrdup(c->name);
    l->identity = xstrdup(c->identity);
    l->duration = setting(c->duration, 15);
    l->duration_s = (int)fmin(ceil(l->duration), 1e9);
    l->duration = l->duration_s;
    l->renew_deadline = setting(c->renew_deadline, 10);
    /* a deadline at or past the duration would let two replicas act at
     * once; k8s_lease_new cannot fail on it, so it is cut to client-go's
     * default ratio (10 of 15) instead. retry_period is the caller's
     * pace: the tick does not need it. */
    if (l->renew_deadline >= l->duration) l->renew_deadline = l->duration * 2.0 / 3.0;
    return l;
}

bool k8s_lease_tick(k8s_lease *l, double now, k8s_error *e)
{
    double started = k8s_now_mono();
    error_clear(e);
    k8s_ref ref = lease_ref(l);
    json_t *cur = NULL;
    k8s_rc rc = k8s_get(l->cl, &ref, &cur, e);
    lease_outcome o;
    if (rc == K8S_OK && !json_is_object(cur)) {
        k8s_error_set(e, K8S_E_OTHER, 200, "getting leases.coordination.k8s.io %s in %s: the "
                      "answer is not an object; fix: is %s a Kubernetes API server?",
                      l->name, l->ns, k8s_client_config(l->cl)->server);
        json_decref(cur);
        o = LEASE_UNKNOWN;
    } else if (rc == K8S_OK) {
        observe(l, cur, now);
        o = act(l, now, e);
    } else if (rc == K8S_E_NOT_FOUND) {
        error_clear(e); /* absent is not a failure: it is created */
        o = create(l, now, e);
    } else {
        o = LEASE_UNKNOWN;
    }
    return settle(l, o, now, started);
}

bool k8s_lease_held(const k8s_lease *l)
{
    return l->held;
}

const char *k8s_lease_holder(const k8s_lease *l)
{
    return l->holder;
}

int k8s_lease_transitions(const k8s_lease *l)
{
    return l->transitions;
}

/* PUTs obj (a copy of the Lease this replica holds) released: no holder,
 * leaseDurationSeconds 1 (what client-go writes, so a client that does not
 * read an empty holder as free still takes it within a second). */
static k8s_rc put_released(k8s_lease *l, const json_t *held, json_t **out)
{
    char ts[40];
    microtime_now(ts, sizeof ts);
    json_t *obj = json_deep_copy(held);
    set_record(obj, "", 1, ts, ts, (int)spec_int(held, "leaseTransitions", 0));
    k8s_ref ref = lease_ref(l);
    k8s_rc rc = k8s_replace(l->cl, &ref, obj, out, NULL);
    json_decref(obj);
    return rc;
}

void k8s_lease_release(k8s_lease *l)
{
    if (!l->held || !l->obj) return;
    l->held = l->renewed = false;
    json_t *out = NULL;
    k8s_rc rc = put_released(l, l->obj, &out);
    if (rc == K8S_E_CONFLICT) {
        /* the object changed since this replica wrote it (a label, say):
         * release the new version, as long as it is still this replica's */
        k8s_ref ref = lease_ref(l);
        json_t *cur = NULL;
        if (k8s_get(l->cl, &ref, &cur, NULL) == K8S_OK &&
            strcmp(spec_str(cur, "holderIdentity"), l->identity) == 0)
            rc = put_released(l, cur, &out);
        json_decref(cur);
    }
    if (rc != K8S_OK) return; /* the others take it once it expires */
    json_decref(l->obj);
    l->obj = out;
    free(l->holder);
    l->holder = xstrdup("");
    l->transitions = (int)spec_int(out, "leaseTransitions", l->transitions);
    /* forget the record seen: release has no `now`, so the next tick's
     * read starts the expiry count (a free Lease needs none) */
    free(l->seen);
    l->seen = NULL;
}

void k8s_lease_free(k8s_lease *l)
{
    if (!l) return;
    json_decref(l->obj);
    free(l->holder);
    free(l->seen);
    free(l->ns);
    free(l->name);
    free(l->identity);
    free(l);
}
