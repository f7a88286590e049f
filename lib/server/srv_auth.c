/* srv_auth.c: bearer tokens. The config holds only SHA-256 hashes of the
 * tokens (OpenSSL's EVP digest); a request's token is hashed and compared
 * with each in constant time, so neither the config file nor the timing of
 * a refusal gives a token away. Each token has a scope (read, submit,
 * admin) and may expire. The HTTP threads read the tokens from a table
 * that is never changed in place: SIGHUP builds a new one and swaps it in
 * under a mutex, and each request keeps a reference to the table it
 * started with, so a reload never frees a token a request still reads.
 * Also random tokens (RAND_bytes) for the admin-token file and `lathe
 * server hash-token`. */
#include "srv_internal.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <strings.h>
#include <string.h>

void srv_sha256(const void *data, size_t len, unsigned char out[32])
{
    unsigned int n = 32;
    if (!EVP_Digest(data, len, out, &n, EVP_sha256(), NULL)) {
        /* only fails when OpenSSL cannot allocate: lathe never continues then */
        fprintf(stderr, "lathe: SHA-256 failed (out of memory)\n");
        abort();
    }
}

void srv_hex(const unsigned char *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool srv_unhex(const char *hex, unsigned char *out, size_t n)
{
    if (strlen(hex) != 2 * n) return false;
    for (size_t i = 0; i < n; i++) {
        int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return true;
}

void srv_hash_token(const char *token, char out[65])
{
    unsigned char h[32];
    srv_sha256(token, strlen(token), h);
    srv_hex(h, 32, out);
}

const char *srv_scope_name(srv_scope s)
{
    return s == SRV_SCOPE_READ ? "read" : s == SRV_SCOPE_SUBMIT ? "submit" : "admin";
}

void srv_tokens_add_spec(srv_token **list, size_t *n, const spec_server_token *t, size_t nt)
{
    *list = xrealloc(*list, (*n + nt + 1) * sizeof **list);
    for (size_t i = 0; i < nt; i++) {
        srv_token *o = &(*list)[(*n)++];
        memset(o, 0, sizeof *o);
        srv_unhex(t[i].sha256, o->hash, 32); /* the spec checked the 64 hex digits */
        const char *sc = t[i].scope;
        if (sc && strcmp(sc, "read") == 0) o->scope = SRV_SCOPE_READ;
        else if (sc && strcmp(sc, "submit") == 0) o->scope = SRV_SCOPE_SUBMIT;
        else if ((sc && strcmp(sc, "admin") == 0) || t[i].admin) o->scope = SRV_SCOPE_ADMIN;
        else o->scope = SRV_SCOPE_SUBMIT;
        /* admin is whose jobs it sees (every team's), scope what it may do
         * with them: admin: true with scope: read reads every team */
        o->admin = t[i].admin || o->scope == SRV_SCOPE_ADMIN;
        o->team = t[i].team ? xstrdup(t[i].team) : NULL;
        o->name = t[i].name ? xstrdup(t[i].name) : NULL;
        o->expires_at = t[i].expires_at;
    }
}

void srv_token_list_free(srv_token *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(list[i].team);
        free(list[i].name);
    }
    free(list);
}

static srv_tokens *tokens_new(srv_token *items, size_t n)
{
    srv_tokens *t = xcalloc(1, sizeof *t);
    t->items = items;
    t->n = n;
    t->refs = 1; /* the table's own */
    return t;
}

void srv_token_table_init(srv_token_table *t, const srv_token *items, size_t n)
{
    pthread_mutex_init(&t->mu, NULL);
    srv_token *copy = xcalloc(n + 1, sizeof *copy);
    for (size_t i = 0; i < n; i++) {
        copy[i] = items[i];
        copy[i].team = items[i].team ? xstrdup(items[i].team) : NULL;
        copy[i].name = items[i].name ? xstrdup(items[i].name) : NULL;
    }
    t->cur = tokens_new(copy, n);
}

srv_tokens *srv_token_table_get(srv_token_table *t)
{
    pthread_mutex_lock(&t->mu);
    srv_tokens *x = t->cur;
    if (x) x->refs++;
    pthread_mutex_unlock(&t->mu);
    return x;
}

void srv_token_table_put(srv_token_table *t, srv_tokens *x)
{
    if (!x) return;
    pthread_mutex_lock(&t->mu);
    bool last = --x->refs == 0;
    pthread_mutex_unlock(&t->mu);
    if (!last) return;
    srv_token_list_free(x->items, x->n);
    free(x);
}

void srv_token_table_swap(srv_token_table *t, srv_token *items, size_t n)
{
    srv_tokens *x = tokens_new(items, n);
    pthread_mutex_lock(&t->mu);
    srv_tokens *old = t->cur;
    t->cur = x;
    pthread_mutex_unlock(&t->mu);
    srv_token_table_put(t, old); /* freed now, or by its last request */
}

void srv_token_table_free(srv_token_table *t)
{
    if (!t->cur) return;
    srv_token_table_put(t, t->cur);
    t->cur = NULL;
    pthread_mutex_destroy(&t->mu);
}

srv_auth_result srv_auth_check(const srv_tokens *t, const char *authorization, double now,
                               const srv_token **out)
{
    *out = NULL;
    if (!authorization) return SRV_AUTH_NONE;
    static const char scheme[] = "Bearer ";
    if (strncasecmp(authorization, scheme, sizeof scheme - 1) != 0) return SRV_AUTH_NONE;
    const char *tok = authorization + sizeof scheme - 1;
    while (*tok == ' ') tok++;
    size_t len = strlen(tok);
    while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t')) len--;
    if (len == 0) return SRV_AUTH_NONE;
    unsigned char h[32];
    srv_sha256(tok, len, h);
    const srv_token *found = NULL;
    /* no early exit and no branch on the bytes: every hash is compared in
     * full, whichever matches */
    for (size_t i = 0; t && i < t->n; i++)
        if (CRYPTO_memcmp(h, t->items[i].hash, 32) == 0) found = &t->items[i];
    if (!found) return SRV_AUTH_UNKNOWN;
    *out = found;
    /* expiry is checked only once the token is known to be right: it tells
     * nothing to someone who does not hold the token */
    if (found->expires_at > 0 && now >= found->expires_at) return SRV_AUTH_EXPIRED;
    return SRV_AUTH_OK;
}

bool srv_random_token(char out[65])
{
    unsigned char b[32];
    if (RAND_bytes(b, sizeof b) != 1) return false;
    srv_hex(b, sizeof b, out);
    return true;
}
