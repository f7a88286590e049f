/* serve_stream.c: `"stream": true` as server-sent events. The reply is a
 * libmicrohttpd callback response on the connection's own thread: the
 * reader waits for the generation's next tokens (serve_gen.c), so a slow
 * client holds up its own thread only, never the engine's. Events, in
 * OpenAI's order: for chat a first chunk with the assistant role, then one
 * chunk per new piece of text of a choice (text that might still become a
 * stop string is held back), a chunk with each choice's finish_reason,
 * with stream_options.include_usage a last chunk with "choices": [] and the
 * usage, then `data: [DONE]`. An error after the stream began is sent as
 * a `data: {"error": ...}` event before [DONE]. A client that goes away
 * ends the reply; its engine requests are cancelled when MHD lets go. */
#include "serve_internal.h"

#include <stdlib.h>
#include <string.h>

enum { ST_START, ST_BODY, ST_TAIL, ST_END };

static void sse(sv_gen *g, json_t *obj)
{
    char *text = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    sb_puts(&g->out, "data: ");
    sb_puts(&g->out, text ? text : "{}");
    sb_puts(&g->out, "\n\n");
    free(text);
}

static void chunk(sv_gen *g, sv_choice *ch, const char *text, bool role, const char *finish)
{
    json_t *c = sv_oai_chunk(g->req.api, g->id, g->created, g->model, g->req.include_usage);
    json_array_append_new(json_object_get(c, "choices"),
                          sv_oai_chunk_choice(g->req.api, ch->index, text, role, finish));
    sse(g, c);
}

/* New text and ends of every choice. */
static void body(sv_gen *g)
{
    if (!g->failed) sv_gen_step(g, true);
    for (size_t i = 0; i < g->n_ch; i++) {
        sv_choice *ch = &g->ch[i];
        const sb *t = &ch->dt.text;
        size_t ready = t->len;
        if (!ch->ended) ready -= sv_stop_holdback(sb_str(t), t->len, g->req.stop, g->req.n_stop);
        if (ready > ch->sent) {
            char *piece = xstrndup(t->buf + ch->sent, ready - ch->sent);
            chunk(g, ch, piece, false, NULL);
            free(piece);
            ch->sent = ready;
        }
        if (ch->ended && ch->finish_reason && !ch->finish_sent) {
            chunk(g, ch, g->req.api == SV_API_CHAT ? NULL : "", false, ch->finish_reason);
            ch->finish_sent = true;
        }
    }
    if (g->failed) {
        sse(g, sv_error_json(&g->err));
        sb_puts(&g->out, "data: [DONE]\n\n");
        g->stage = ST_END;
    } else if (sv_gen_all_ended(g)) {
        g->stage = ST_TAIL;
    }
}

static void tail(sv_gen *g)
{
    if (g->req.include_usage) {
        json_t *c = sv_oai_chunk(g->req.api, g->id, g->created, g->model, false);
        json_object_set_new(c, "usage",
                            sv_oai_usage(g->prompt_tokens, sv_gen_completion_tokens(g)));
        sse(g, c);
    }
    sb_puts(&g->out, "data: [DONE]\n\n");
    g->stage = ST_END;
}

/* Appends the next events to g->out (may append nothing). */
static void produce(sv_gen *g)
{
    switch (g->stage) {
    case ST_START:
        for (size_t i = 0; g->req.api == SV_API_CHAT && i < g->n_ch; i++)
            chunk(g, &g->ch[i], "", true, NULL);
        g->stage = ST_BODY;
        break;
    case ST_BODY:
        body(g);
        break;
    case ST_TAIL:
        tail(g);
        break;
    default:
        break;
    }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    sv_gen *g = cls;
    (void)pos;
    while (g->out_off >= g->out.len) {
        if (g->stage == ST_END) return MHD_CONTENT_READER_END_OF_STREAM;
        sb_clear(&g->out);
        g->out_off = 0;
        produce(g);
    }
    size_t n = g->out.len - g->out_off;
    if (n > max) n = max;
    memcpy(buf, g->out.buf + g->out_off, n);
    g->out_off += n;
    return (ssize_t)n;
}

static void stream_done(void *cls)
{
    sv_gen_release(cls);
}

void sv_stream_reply(sv_conn *c, sv_gen *g)
{
    g->stage = ST_START;
    sv_reply_callback(c, 200, "text/event-stream", stream_read, g, stream_done);
    sv_reply_header(c, "Cache-Control", "no-cache");
    sv_reply_header(c, "X-Accel-Buffering", "no");
}
