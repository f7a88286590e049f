/* exec_k8s_poll.c: polling a Kubernetes attempt. Each poll reads the Job
 * and its pods from the informers' tables (no request), follows the logs
 * of pods that started into the attempt's output.log (read back by the
 * same reader and tally as local attempts), and says whether the attempt
 * runs (and why it waits: Kubernetes' own reason), or how it ended:
 *
 *   Job Complete                           succeeded
 *   Job Failed, pod DisruptionTarget       evicted (eviction, preemption by the
 *                                          kubelet or scheduler: back to the
 *                                          queue, no retry spent), or lost
 *                                          (DeletionByTaintManager: the node
 *                                          went away; retried elsewhere)
 *   Job Failed, container terminated       classified by exit code as locally:
 *                                          OOMKilled -> oom, a no-retry code
 *                                          -> invalid, 143 after lathe's
 *                                          suspension -> stopped, ...
 *   suspended by lathe, pods gone          stopped (cancel, preemption, timeout)
 *   ErrImagePull, ImagePullBackOff,        invalid: failed with the message,
 *   CreateContainerConfigError, ...        not retried
 *   the Job deleted by someone else        lost
 *
 * An end is reported once the followed logs are drained (at most 15 s
 * later), so the trainer's last lines are read before it. A user's Job
 * (adopt) is judged the same way, from its first container (it has no
 * "trainer"), and is never deleted: where lathe would delete its own Job
 * it suspends the user's, if lathe did not already.
 */
#include "exec_k8s_internal.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POLL_READ_MAX (4u << 20)
#define DRAIN_WAIT 15.0   /* seconds an end waits for the logs */
#define APPEAR_WAIT 120.0 /* seconds a created Job may take to show in the watch */

/* The condition `type` of a status with status "True", or NULL. */
static const json_t *true_condition(const json_t *status, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(status, "conditions"), i, c)
    {
        const char *t = k8s_jstr(c, "type"), *s = k8s_jstr(c, "status");
        if (t && s && strcmp(t, type) == 0 && strcmp(s, "True") == 0) return c;
    }
    return NULL;
}

/* The container whose exit is the attempt's and whose log is followed:
 * lathe's "trainer", or a user's Job's first container. */
static const char *main_container(const k8s_handle *kh, const json_t *pod)
{
    if (!kh->adopt) return K8S_CONTAINER;
    const json_t *c = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
    return k8s_jstr(c, "name") ? k8s_jstr(c, "name") : K8S_CONTAINER;
}

/* The main container's status (the first one's when it has none yet). */
static const json_t *trainer_status(const k8s_handle *kh, const json_t *pod)
{
    const char *want = main_container(kh, pod);
    size_t i;
    json_t *c, *first = NULL;
    json_array_foreach(json_object_get(json_object_get(pod, "status"), "containerStatuses"), i, c)
    {
        const char *n = k8s_jstr(c, "name");
        if (n && strcmp(n, want) == 0) return c;
        if (!first) first = c;
    }
    return first;
}

static int pod_rank(const json_t *pod)
{
    const json_t *m = json_object_get(pod, "metadata");
    const char *s = k8s_jstr(json_object_get(m, "annotations"), "batch.kubernetes.io/job-completion-index");
    if (!s) s = k8s_jstr(json_object_get(m, "labels"), "batch.kubernetes.io/job-completion-index");
    return s ? atoi(s) : 0;
}

/* ---- log followers ---- */
static void on_line(void *ud, const char *ts, const char *line, size_t len)
{
    k8s_follow *f = ud;
    k8s_handle *kh = f->h;
    pthread_mutex_lock(&kh->log_mu);
    sb out;
    sb_init(&out);
    if (f->rank > 0) sb_printf(&out, "[node %d] ", f->rank);
    sb_putn(&out, line, len);
    sb_putc(&out, '\n');
    if (kh->log_fd >= 0) {
        const char *p = sb_str(&out);
        size_t left = out.len;
        while (left > 0) {
            ssize_t w = write(kh->log_fd, p, left);
            if (w <= 0) break;
            p += w;
            left -= (size_t)w;
        }
    }
    sb_free(&out);
    if (ts && strcmp(ts, f->ts) == 0) {
        f->same++;
    } else {
        snprintf(f->ts, sizeof f->ts, "%s", ts ? ts : "");
        f->same = 1;
    }
    kh->fol_dirty = true;
    pthread_mutex_unlock(&kh->log_mu);
}

static void on_end(void *ud, const char *why)
{
    (void)why;
    k8s_follow *f = ud;
    pthread_mutex_lock(&f->h->log_mu);
    f->ended = true;
    pthread_mutex_unlock(&f->h->log_mu);
}

static bool container_started(const k8s_handle *kh, const json_t *pod)
{
    const json_t *cs = trainer_status(kh, pod);
    const json_t *state = json_object_get(cs, "state");
    return json_object_get(state, "running") || json_object_get(state, "terminated");
}

static void follow_pods(k8s_handle *kh, const k8s_view *v)
{
    for (size_t i = 0; i < v->n_pods; i++) {
        const char *name = k8s_meta_str(v->pods[i], "name");
        if (!name || v->pod_gone[i] || !container_started(kh, v->pods[i])) continue;
        bool have = false;
        for (size_t k = 0; k < kh->n_fol && !have; k++) have = strcmp(kh->fol[k]->pod, name) == 0;
        if (have) continue;
        k8s_follow *f = xcalloc(1, sizeof *f);
        f->h = kh;
        f->pod = xstrdup(name);
        f->rank = pod_rank(v->pods[i]);
        json_t *at = json_object_get(kh->resume, name);
        const char *since = k8s_jstr(at, "ts");
        long skip = (long)json_integer_value(json_object_get(at, "same"));
        if (since) {
            snprintf(f->ts, sizeof f->ts, "%s", since);
            f->same = skip;
        }
        kh->fol = xrealloc(kh->fol, (kh->n_fol + 1) * sizeof *kh->fol);
        kh->fol[kh->n_fol++] = f;
        f->f = k8s_log_follow(kh->kb->cl, kh->ns, name, main_container(kh, v->pods[i]), since, skip,
                              on_line, on_end, f);
        if (!f->f) f->ended = true;
    }
}

static bool followers_ended(k8s_handle *kh)
{
    pthread_mutex_lock(&kh->log_mu);
    bool all = true;
    for (size_t i = 0; i < kh->n_fol; i++) all = all && kh->fol[i]->ended;
    pthread_mutex_unlock(&kh->log_mu);
    return all;
}

void k8s_handle_stop_followers(k8s_handle *kh)
{
    for (size_t i = 0; i < kh->n_fol; i++) {
        k8s_log_follower_free(kh->fol[i]->f);
        free(kh->fol[i]->pod);
        free(kh->fol[i]);
    }
    free(kh->fol);
    kh->fol = NULL;
    kh->n_fol = 0;
}

/* logpos.json: where each follower is, so a new server resumes there. */
static void save_positions(k8s_handle *kh)
{
    pthread_mutex_lock(&kh->log_mu);
    if (!kh->fol_dirty) {
        pthread_mutex_unlock(&kh->log_mu);
        return;
    }
    json_t *o = json_object();
    for (size_t i = 0; i < kh->n_fol; i++)
        if (kh->fol[i]->ts[0])
            json_object_set_new(o, kh->fol[i]->pod,
                                json_pack("{s:s, s:I}", "ts", kh->fol[i]->ts, "same",
                                          (json_int_t)kh->fol[i]->same));
    kh->fol_dirty = false;
    pthread_mutex_unlock(&kh->log_mu);
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    char *p = path_join(kh->h.work_dir, "logpos.json");
    file_write_atomic(p, s, strlen(s));
    free(p);
    free(s);
    json_decref(o);
}

/* ---- judging the state ---- */
typedef struct verdict {
    bool ended;
    exec_status st;
    const char *cleanup; /* delete the Job with this propagation; NULL = leave it (TTL) */
} verdict;

static void running(k8s_handle *kh, verdict *vd)
{
    memset(&vd->st, 0, sizeof vd->st);
    vd->st.phase = EXEC_RUNNING;
    vd->st.exit_code = -1;
    vd->st.term_sent = kh->term_at > 0;
    vd->st.kill_sent = kh->kill_sent;
    vd->st.started_at = kh->h.started_at;
    exec_classify(&vd->st, false, false, NULL, 0);
}

static void ended(k8s_handle *kh, verdict *vd, exec_phase phase, double now)
{
    vd->ended = true;
    /* an attempt lathe stopped (cancel, preemption, timeout) is not looked
     * at again: its Job goes, pods first (a user's Job stays, suspended);
     * others stay for their TTL */
    if (kh->term_at > 0) vd->cleanup = "Foreground";
    vd->st.phase = phase;
    vd->st.term_sent = kh->term_at > 0;
    vd->st.kill_sent = kh->kill_sent;
    vd->st.started_at = kh->h.started_at;
    vd->st.ended_at = now;
}

/* A container's end as exit code and signal (Kubernetes reports a death
 * by signal N as exit code 128 + N). */
static void container_end(const json_t *term, exec_status *st)
{
    int code = (int)json_integer_value(json_object_get(term, "exitCode"));
    int sig = (int)json_integer_value(json_object_get(term, "signal"));
    if (!sig && code > 128 && code < 160) sig = code - 128;
    st->exit_code = sig ? -1 : code;
    st->signal = sig;
    if (sig == SIGTERM || sig == SIGINT) st->exit_code = 128 + sig; /* as exec_classify reads it */
}

/* Waiting reasons that no wait will fix. */
static bool fatal_waiting(const char *reason)
{
    static const char *const bad[] = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                                      "ErrImageNeverPull", "CreateContainerConfigError",
                                      "CreateContainerError", "RunContainerError"};
    for (size_t i = 0; reason && i < sizeof bad / sizeof bad[0]; i++)
        if (strcmp(reason, bad[i]) == 0) return true;
    return false;
}

/* The pod that failed the Job: one with a DisruptionTarget first, else one
 * whose container terminated with a non-zero code. */
static const json_t *failed_pod(const k8s_handle *kh, const k8s_view *v, bool *disrupted)
{
    const json_t *best = NULL;
    *disrupted = false;
    for (size_t i = 0; i < v->n_pods; i++) {
        const json_t *st = json_object_get(v->pods[i], "status");
        if (true_condition(st, "DisruptionTarget")) {
            *disrupted = true;
            return v->pods[i];
        }
        const json_t *term = json_object_get(json_object_get(trainer_status(kh, v->pods[i]), "state"), "terminated");
        if (term && json_integer_value(json_object_get(term, "exitCode")) != 0 && !best) best = v->pods[i];
    }
    return best;
}

/* The Job failed through its podFailurePolicy's DisruptionTarget rule
 * (reason PodFailurePolicy, "Pod NS/NAME has condition DisruptionTarget
 * matching FailJob rule ..."), though no pod lathe saw holds the condition:
 * the watch can miss a pod's last update (a re-list after the pod was
 * deleted gives its older state), so the Job's own words decide. */
static bool job_says_disrupted(const json_t *cond)
{
    const char *r = k8s_jstr(cond, "reason"), *m = k8s_jstr(cond, "message");
    return r && strcmp(r, "PodFailurePolicy") == 0 && m && strstr(m, "condition DisruptionTarget");
}

/* Whether the node named is gone from the cluster or not Ready, as the
 * Nodes watch last saw it. */
static bool node_down(k8s_handle *kh, const char *node)
{
    if (!node || !*node) return false;
    k8s_backend *kb = kh->kb;
    bool down = true;
    pthread_mutex_lock(&kb->mu);
    const json_t *obj = kmap_get(&kb->node_objs, node);
    if (obj) {
        const json_t *ready = true_condition(json_object_get(obj, "status"), "Ready");
        down = ready == NULL;
    }
    pthread_mutex_unlock(&kb->mu);
    return down;
}

static void judge_failed(k8s_handle *kh, const k8s_view *v, const json_t *cond, verdict *vd,
                         double now)
{
    bool disrupted;
    const json_t *pod = failed_pod(kh, v, &disrupted);
    if (!disrupted && job_says_disrupted(cond)) {
        disrupted = true;
        if (!pod && v->n_pods) pod = v->pods[0];
    }
    const char *pname = pod ? k8s_meta_str(pod, "name") : "?";
    if (disrupted) {
        const json_t *c = true_condition(json_object_get(pod, "status"), "DisruptionTarget");
        const char *r = k8s_jstr(c, "reason"), *m = k8s_jstr(c, "message");
        const char *node = k8s_jstr(json_object_get(pod, "spec"), "nodeName");
        bool node_lost = r ? strcmp(r, "DeletionByTaintManager") == 0 || strcmp(r, "DeletionByPodGC") == 0
                           : node_down(kh, node);
        if (!c) m = k8s_jstr(cond, "message");
        if (node_lost) {
            ended(kh, vd, EXEC_LOST, now);
            vd->st.exit_code = -1;
            vd->st.end = EXEC_END_LOST;
            vd->st.retryable = true;
            snprintf(vd->st.reason, sizeof vd->st.reason, "node %s was lost: pod %s %s (%s)",
                     node ? node : "?", pname, r ? r : "DisruptionTarget", m ? m : "");
        } else {
            ended(kh, vd, EXEC_EXITED, now);
            vd->st.exit_code = -1;
            vd->st.end = EXEC_END_EVICTED;
            vd->st.retryable = true;
            snprintf(vd->st.reason, sizeof vd->st.reason, "pod %s was evicted: %s (%s)", pname,
                     r ? r : "DisruptionTarget", m ? m : "");
        }
        return;
    }
    ended(kh, vd, EXEC_EXITED, now);
    const json_t *term = pod ? json_object_get(json_object_get(trainer_status(kh, pod), "state"), "terminated") : NULL;
    if (term) {
        container_end(term, &vd->st);
        const char *reason = k8s_jstr(term, "reason");
        bool oom_killed = reason && strcmp(reason, "OOMKilled") == 0;
        exec_classify(&vd->st, kh->tally.oom_line, oom_killed, kh->no_retry, kh->n_no_retry);
        if (oom_killed && vd->st.end == EXEC_END_OOM)
            snprintf(vd->st.reason, sizeof vd->st.reason,
                     "out of memory: pod %s was OOMKilled (exit code %d)", pname,
                     (int)json_integer_value(json_object_get(term, "exitCode")));
        return;
    }
    /* no container end to read: the Job's own words */
    vd->st.exit_code = -1;
    vd->st.end = EXEC_END_FAILED;
    vd->st.retryable = true;
    snprintf(vd->st.reason, sizeof vd->st.reason, "the Job failed: %s: %s",
             k8s_jstr(cond, "reason") ? k8s_jstr(cond, "reason") : "Failed",
             k8s_jstr(cond, "message") ? k8s_jstr(cond, "message") : "");
}

/* Why a running attempt's pods wait, in Kubernetes' words. */
static void waiting_reason(const k8s_handle *kh, const k8s_view *v, bool suspended, char *out,
                           size_t outsz)
{
    out[0] = '\0';
    if (suspended) {
        snprintf(out, outsz, "the Job is suspended");
        return;
    }
    bool any = false;
    for (size_t i = 0; i < v->n_pods; i++) {
        if (v->pod_gone[i]) continue;
        any = true;
        const json_t *st = json_object_get(v->pods[i], "status");
        const json_t *cs = trainer_status(kh, v->pods[i]);
        if (json_object_get(json_object_get(cs, "state"), "running")) continue;
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(st, "conditions"), k, c)
        {
            const char *t = k8s_jstr(c, "type"), *s = k8s_jstr(c, "status");
            if (t && s && strcmp(t, "PodScheduled") == 0 && strcmp(s, "False") == 0) {
                snprintf(out, outsz, "%s: %s", k8s_jstr(c, "reason") ? k8s_jstr(c, "reason") : "Pending",
                         k8s_jstr(c, "message") ? k8s_jstr(c, "message") : "");
                return;
            }
        }
        const json_t *w = json_object_get(json_object_get(cs, "state"), "waiting");
        if (w) {
            snprintf(out, outsz, "%s%s%s", k8s_jstr(w, "reason") ? k8s_jstr(w, "reason") : "waiting",
                     k8s_jstr(w, "message") ? ": " : "", k8s_jstr(w, "message") ? k8s_jstr(w, "message") : "");
            return;
        }
        if (!cs) {
            snprintf(out, outsz, "pod %s is %s", k8s_meta_str(v->pods[i], "name"),
                     k8s_jstr(st, "phase") ? k8s_jstr(st, "phase") : "Pending");
            return;
        }
    }
    if (!any) snprintf(out, outsz, "the Job controller has not created its pods yet");
}

static void judge(k8s_handle *kh, const k8s_view *v, double now, verdict *vd)
{
    memset(vd, 0, sizeof *vd);
    running(kh, vd);
    if (!v->job) {
        if (v->gone) {
            ended(kh, vd, kh->term_at > 0 ? EXEC_EXITED : EXEC_LOST, now);
            vd->st.exit_code = -1;
            if (kh->term_at > 0) {
                vd->st.signal = SIGTERM;
                vd->st.exit_code = 128 + SIGTERM;
                exec_classify(&vd->st, false, false, NULL, 0);
            } else {
                vd->st.end = EXEC_END_LOST;
                vd->st.retryable = true;
                snprintf(vd->st.reason, sizeof vd->st.reason,
                         "the Job %s/%s was deleted outside lathe", kh->ns, kh->name);
            }
        } else if (v->synced && now - kh->created_at > APPEAR_WAIT) {
            ended(kh, vd, EXEC_LOST, now);
            vd->st.exit_code = -1;
            vd->st.end = EXEC_END_LOST;
            vd->st.retryable = true;
            snprintf(vd->st.reason, sizeof vd->st.reason, "the Job %s/%s is not in the cluster",
                     kh->ns, kh->name);
        } else {
            snprintf(vd->st.waiting, sizeof vd->st.waiting, "%s",
                     v->synced ? "the Job was created; the watch has not shown it yet"
                               : "the Kubernetes API's view is not current");
        }
        return;
    }
    const json_t *status = json_object_get(v->job, "status");
    const json_t *cond;
    if (true_condition(status, "Complete") || true_condition(status, "SuccessCriteriaMet")) {
        ended(kh, vd, EXEC_EXITED, now);
        vd->st.exit_code = 0;
        exec_classify(&vd->st, false, false, NULL, 0);
        return;
    }
    if ((cond = true_condition(status, "Failed")) || (cond = true_condition(status, "FailureTarget"))) {
        judge_failed(kh, v, cond, vd, now);
        return;
    }
    bool suspended = json_is_true(json_object_get(json_object_get(v->job, "spec"), "suspend"));
    bool alive = false;
    const json_t *last_term = NULL;
    for (size_t i = 0; i < v->n_pods; i++) {
        const json_t *term = json_object_get(json_object_get(trainer_status(kh, v->pods[i]), "state"), "terminated");
        if (term && (!last_term || pod_rank(v->pods[i]) == 0)) last_term = term;
        if (!v->pod_gone[i] && !term) alive = true;
    }
    if (suspended && kh->term_at > 0 && !alive) {
        ended(kh, vd, EXEC_EXITED, now);
        if (last_term) container_end(last_term, &vd->st);
        else {
            vd->st.signal = SIGTERM;
            vd->st.exit_code = 128 + SIGTERM;
        }
        exec_classify(&vd->st, kh->tally.oom_line, false, kh->no_retry, kh->n_no_retry);
        vd->cleanup = "Foreground";
        return;
    }
    for (size_t i = 0; i < v->n_pods; i++) {
        if (v->pod_gone[i]) continue;
        const json_t *w = json_object_get(json_object_get(trainer_status(kh, v->pods[i]), "state"), "waiting");
        const char *r = k8s_jstr(w, "reason");
        if (!fatal_waiting(r)) continue;
        ended(kh, vd, EXEC_EXITED, now);
        vd->st.exit_code = -1;
        vd->st.end = EXEC_END_INVALID;
        vd->st.retryable = false;
        snprintf(vd->st.reason, sizeof vd->st.reason, "pod %s cannot start: %s: %s",
                 k8s_meta_str(v->pods[i], "name"), r, k8s_jstr(w, "message") ? k8s_jstr(w, "message") : "");
        vd->cleanup = "Background";
        return;
    }
    waiting_reason(kh, v, suspended && kh->term_at == 0, vd->st.waiting, sizeof vd->st.waiting);
}

static void cleanup(k8s_handle *kh, const char *propagation)
{
    if (!propagation || kh->cleaned) return;
    if (kh->adopt) {
        /* the user's Job is never deleted: suspended (when lathe's stop has
         * not already), its pods go and it may be admitted again */
        char err[512];
        kh->cleaned = kh->term_at > 0 || exec_k8s_suspend(kh, err, sizeof err);
        return;
    }
    k8s_ref ref = {.api = "batch/v1", .resource = "jobs", .ns = kh->ns, .name = kh->name};
    k8s_error e;
    k8s_rc rc = k8s_delete(kh->kb->cl, &ref, propagation, -1, &e);
    kh->cleaned = rc == K8S_OK || rc == K8S_E_NOT_FOUND;
}

static void tally_line(const char *line, size_t len, void *ctx)
{
    k8s_handle *kh = ctx;
    exec_tally_line(&kh->tally, line, len, kh->poll_now);
}

void exec_k8s_poll(exec_handle *h, double now, exec_status *st, exec_update *up)
{
    k8s_handle *kh = (k8s_handle *)h;
    exec_tally_clear(&kh->tally);
    kh->poll_now = now;
    verdict vd;
    memset(&vd, 0, sizeof vd);
    if (!kh->ended) {
        k8s_view v;
        k8s_handle_view(kh, &v);
        char err[512];
        if (kh->term_at > 0 && v.job && !json_is_true(json_object_get(json_object_get(v.job, "spec"), "suspend")) &&
            !true_condition(json_object_get(v.job, "status"), "Complete") &&
            !true_condition(json_object_get(v.job, "status"), "Failed"))
            exec_k8s_suspend(kh, err, sizeof err); /* a stop that did not get through */
        if (kh->kill_at > 0 && now >= kh->kill_at && !kh->kill_sent) {
            if (exec_k8s_kill_pods(kh, err, sizeof err)) {
                kh->kill_sent = true;
                k8s_handle_save(kh);
            }
        }
        follow_pods(kh, &v);
        judge(kh, &v, now, &vd);
        k8s_view_free(&v);
        if (vd.ended) {
            if (kh->end_seen == 0) kh->end_seen = now;
            if (followers_ended(kh) || now - kh->end_seen >= DRAIN_WAIT) {
                exec_log_read(&kh->log, SIZE_MAX, tally_line, kh);
                /* the output may name an OOM the pod state did not */
                if (vd.st.end == EXEC_END_FAILED && kh->tally.oom_line)
                    exec_classify(&vd.st, true, false, kh->no_retry, kh->n_no_retry);
                cleanup(kh, vd.cleanup);
                kh->final = vd.st;
                kh->ended = true;
                /* no attempt of lathe's runs the user's Job any more */
                if (kh->adopt) k8s_backend_admitted(kh->kb, kh->ns, kh->name, false);
            } else {
                running(kh, &vd);
                snprintf(vd.st.waiting, sizeof vd.st.waiting, "ended; reading the rest of its log");
            }
        }
    }
    exec_log_read(&kh->log, kh->ended ? SIZE_MAX : POLL_READ_MAX, tally_line, kh);
    save_positions(kh);
    *st = kh->ended ? kh->final : vd.st;
    exec_tally_update(&kh->tally, up);
}
