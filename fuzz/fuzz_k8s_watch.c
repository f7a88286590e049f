/* fuzz_k8s_watch.c: libFuzzer target for what a Kubernetes API server
 * sends back: the watch stream's line splitter and event parser
 * (k8s_lines_feed, k8s_watch_parse_line), the Status parser
 * (k8s_status_parse) and the error sentence built from it
 * (k8s_error_fill), and the ExecCredential reader (k8s_cred_parse). The
 * input is fed to the splitter in chunks whose sizes come from its first
 * byte, so lines that span chunks are covered. A parsed event must have a
 * known type and an object; a sentence must fit its buffer, NUL-terminated. */
#include "base/base.h"
#include "k8s/k8s_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fz {
    size_t lines, events;
} fz;

static int on_line(void *ud, const char *line, size_t len, bool first, bool more)
{
    fz *f = ud;
    f->lines++;
    if (memchr(line, '\n', len)) abort();
    k8s_wevent ev;
    char err[256];
    if (k8s_watch_parse_line(line, len, &ev, err, sizeof err)) {
        if (!ev.object || ev.type > K8S_W_ERROR) abort();
        if (ev.type != K8S_W_ERROR && ev.type != K8S_W_BOOKMARK && !ev.name) abort();
        f->events++;
        k8s_wevent_free(&ev);
    } else if (!err[0]) {
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    size_t chunk = (size_t)(data[0] % 61) + 1;
    const char *text = (const char *)data + 1;
    size_t n = size - 1;

    /* the stream, in pieces: a small bound so overlong lines are reached */
    for (int pieces = 0; pieces < 2; pieces++) {
        k8s_lines l;
        k8s_lines_init(&l, 512, pieces);
        fz f = {0};
        int rc = 0;
        for (size_t off = 0; off < n && rc == 0; off += chunk) {
            size_t k = n - off < chunk ? n - off : chunk;
            rc = k8s_lines_feed(&l, text + off, k, on_line, &f);
        }
        if (rc == 0) k8s_lines_finish(&l, on_line, &f);
        if (rc == -1 && (pieces || !l.overflow)) abort();
        k8s_lines_free(&l);
    }

    /* the whole input as a Status, and the sentence made of it */
    k8s_status st;
    bool is = k8s_status_parse(text, n, &st);
    k8s_ref ref = {.api = "batch/v1", .resource = "jobs", .ns = "team-a", .name = "lathe-x-1"};
    k8s_ask a = {.verb = "create", .ref = &ref, .server = "https://127.0.0.1:6443"};
    k8s_error e;
    char *body = xstrndup(text, n);
    k8s_error_fill(&e, &a, is && st.code ? st.code : 422, is ? &st : NULL, body, NULL);
    if (strnlen(e.message, sizeof e.message) >= sizeof e.message) abort();
    free(body);
    k8s_status_free(&st);

    /* and as an ExecCredential */
    k8s_cred c;
    char err[300];
    if (k8s_cred_parse(text, n, "client.authentication.k8s.io/v1", &c, err, sizeof err)) {
        if (!c.token && !c.cert) abort();
        k8s_cred_free(&c);
    }
    return 0;
}
