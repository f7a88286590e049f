/* srv_auth.c: bearer tokens. The config holds only SHA-256 hashes of the
 * tokens (OpenSSL's EVP digest); a request's token is hashed and compared
 * with each in constant time, so neither the config file nor the timing of
 * a refusal gives a token away. Also random tokens (RAND_bytes) for the
 * admin-token file and `lathe server hash-token`. */
#include "srv_internal.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
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

const srv_token *srv_auth_lookup(const srv_config *cfg, const char *authorization)
{
    if (!authorization) return NULL;
    static const char scheme[] = "Bearer ";
    if (strncasecmp(authorization, scheme, sizeof scheme - 1) != 0) return NULL;
    const char *tok = authorization + sizeof scheme - 1;
    while (*tok == ' ') tok++;
    size_t len = strlen(tok);
    while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t')) len--;
    if (len == 0) return NULL;
    unsigned char h[32];
    srv_sha256(tok, len, h);
    const srv_token *found = NULL;
    for (size_t i = 0; i < cfg->n_tokens; i++) /* no early exit: constant time */
        if (CRYPTO_memcmp(h, cfg->tokens[i].hash, 32) == 0) found = &cfg->tokens[i];
    return found;
}

bool srv_random_token(char out[65])
{
    unsigned char b[32];
    if (RAND_bytes(b, sizeof b) != 1) return false;
    srv_hex(b, sizeof b, out);
    return true;
}
