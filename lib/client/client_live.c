/* client_live.c: progress that a person watches: on a terminal, a frame of
 * lines redrawn in place (ANSI cursor movement) with progress bars; when the
 * output is a pipe or a file, plain lines printed only when something
 * changed (a job's state, another tenth of its steps), so logs stay short. */
#include "client.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

void client_job_line(sb *out, const json_t *job, int name_width, bool bar)
{
    const char *name = client_str(job, "name"), *state = client_str(job, "state");
    sb_printf(out, "%-*s  %-9s", name_width, name ? name : "?", state ? state : "?");
    const char *why = client_str(job, "wait_reason");
    if (state && !strcmp(state, "queued") && why) {
        sb_printf(out, "  waiting: %s", why);
        return;
    }
    const json_t *p = json_object_get(job, "progress");
    long long step = client_int(p, "step", -1), total = client_int(p, "total_steps", -1);
    if (bar && step >= 0 && total > 0) {
        char b[32];
        double frac = (double)step / (double)total;
        client_progress_bar(b, sizeof b, frac, 20);
        sb_printf(out, "  [%s] %3.0f%%", b, floor(100 * (frac > 1 ? 1 : frac)));
    }
    char text[256];
    client_progress_text(text, sizeof text, job);
    if (*text) sb_printf(out, "  %s", text);
}

void client_live_init(client_live *l, FILE *f, bool plain)
{
    memset(l, 0, sizeof *l);
    l->f = f;
    const char *term = getenv("TERM");
    l->tty = !plain && isatty(fileno(f)) && term && *term && strcmp(term, "dumb") != 0;
}

void client_live_free(client_live *l)
{
    for (size_t i = 0; i < l->n_seen; i++) {
        free(l->seen[i].name);
        free(l->seen[i].state);
    }
    free(l->seen);
    memset(l, 0, sizeof *l);
}

/* The terminal's width in columns (80 when it does not say). */
static int live_width(FILE *f)
{
    struct winsize ws;
    if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return 80;
}

void client_live_frame(client_live *l, const char *text)
{
    if (!l->tty) return;
    if (l->lines > 0) fprintf(l->f, "\033[%dA", l->lines); /* up to the frame's start */
    fputs("\r\033[J", l->f);                               /* clear below */
    /* each line cut to the width, so that none wraps and the count of
     * lines to go back up stays right */
    size_t width = (size_t)live_width(l->f) - 1;
    int n = 0;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        size_t cut = len;
        if (cut > width) {
            cut = width;
            while (cut > 0 && ((unsigned char)p[cut] & 0xC0) == 0x80) cut--; /* whole UTF-8 */
        }
        fwrite(p, 1, cut, l->f);
        p += len;
        if (*p == '\n') {
            fputc('\n', l->f);
            n++;
            p++;
        }
    }
    l->lines = n;
    fflush(l->f);
}

void client_live_end(client_live *l)
{
    l->lines = 0;
}

/* The record of what was last printed for name (created when new). */
static client_live_seen *seen_slot(client_live *l, const char *name, bool *is_new)
{
    for (size_t i = 0; i < l->n_seen; i++)
        if (!strcmp(l->seen[i].name, name)) {
            *is_new = false;
            return &l->seen[i];
        }
    if (l->n_seen == l->cap_seen) {
        l->cap_seen = l->cap_seen ? 2 * l->cap_seen : 8;
        l->seen = xrealloc(l->seen, l->cap_seen * sizeof *l->seen);
    }
    client_live_seen *s = &l->seen[l->n_seen++];
    s->name = xstrdup(name);
    s->state = xstrdup("");
    s->tenth = -1;
    *is_new = true;
    return s;
}

bool client_live_changed(client_live *l, const json_t *job, sb *out)
{
    const char *name = client_str(job, "name"), *state = client_str(job, "state");
    if (!name || !state) return false;
    bool is_new;
    client_live_seen *s = seen_slot(l, name, &is_new);
    const json_t *p = json_object_get(job, "progress");
    long long step = client_int(p, "step", -1), total = client_int(p, "total_steps", -1);
    int tenth = step >= 0 && total > 0 ? (int)(10 * step / total) : -1;
    bool changed = is_new || strcmp(s->state, state) != 0 || tenth > s->tenth;
    if (!changed) return false;
    free(s->state);
    s->state = xstrdup(state);
    if (tenth > s->tenth) s->tenth = tenth;
    client_job_line(out, job, 0, false);
    return true;
}
