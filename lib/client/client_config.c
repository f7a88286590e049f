/* client_config.c: where the client finds the server and its token.
 *
 * Precedence, highest first: the command's flags (--server, --token), the
 * environment (LATHE_SERVER, LATHE_TOKEN, LATHE_TIMEOUT), the config file
 * (LATHE_CONFIG, else $XDG_CONFIG_HOME/lathe/config.yaml, else
 * ~/.config/lathe/config.yaml), then the default address. The config file is
 * a YAML mapping read with libyaml's document loader; every problem in it is
 * a diagnostic with file:line:col.
 */
#include "client.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* The config file may be no larger than this. */
#define CLIENT_CONFIG_MAX_BYTES (64u << 10)

static const char *const config_keys[] = {"server", "token", "timeout", "cacert"};
#define N_CONFIG_KEYS (sizeof config_keys / sizeof config_keys[0])

char *client_config_path(void)
{
    const char *p = getenv("LATHE_CONFIG");
    if (p && *p) return xstrdup(p);
    const char *xdg = getenv("XDG_CONFIG_HOME");
    if (xdg && *xdg) return xasprintf("%s/lathe/config.yaml", xdg);
    const char *home = getenv("HOME");
    if (home && *home) return xasprintf("%s/.config/lathe/config.yaml", home);
    return NULL;
}

/* True for a host name or address character (names, IPv4, [IPv6]). */
static bool name_char(char c)
{
    return isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_';
}

static bool ipv6_char(char c)
{
    return isxdigit((unsigned char)c) || c == ':' || c == '.';
}

/* Checks HOST[:PORT] (n bytes at s): HOST a name or IPv4 address, or an
 * IPv6 address in brackets; PORT 1 to 65535. */
static bool check_host_port(const char *s, size_t n, char *why, size_t whysz)
{
    size_t i = 0;
    if (s[0] == '[') {
        for (i = 1; i < n && s[i] != ']'; i++)
            if (!ipv6_char(s[i])) {
                snprintf(why, whysz, "'%c' cannot appear in an IPv6 address", s[i]);
                return false;
            }
        if (i == n || i == 1) {
            snprintf(why, whysz, "an IPv6 address is written [ADDRESS]");
            return false;
        }
        i++;
    } else {
        while (i < n && name_char(s[i])) i++;
        if (i == 0 || (i < n && s[i] != ':')) {
            snprintf(why, whysz, "'%c' cannot appear in HOST[:PORT]", i < n ? s[i] : ':');
            return false;
        }
    }
    if (i == n) return true;
    if (s[i] != ':' || i + 1 == n || n - i - 1 > 5) {
        snprintf(why, whysz, "after the host comes nothing or :PORT");
        return false;
    }
    long port = 0;
    for (size_t k = i + 1; k < n; k++) {
        if (!isdigit((unsigned char)s[k])) {
            snprintf(why, whysz, "the port must be a number");
            return false;
        }
        port = port * 10 + (s[k] - '0');
    }
    if (port < 1 || port > 65535) {
        snprintf(why, whysz, "the port must be from 1 to 65535");
        return false;
    }
    return true;
}

char *client_normalise_server(const char *addr, char *why, size_t whysz)
{
    const char *rest = addr;
    const char *scheme = "http://";
    if (str_starts_with(addr, "http://")) rest = addr + 7;
    else if (str_starts_with(addr, "https://")) {
        rest = addr + 8;
        scheme = "https://";
    } else if (strstr(addr, "://")) {
        snprintf(why, whysz, "only http:// and https:// addresses are supported");
        return NULL;
    }
    size_t n = strlen(rest);
    while (n > 0 && rest[n - 1] == '/') n--;
    if (n == 0) {
        snprintf(why, whysz, "no host");
        return NULL;
    }
    if (!check_host_port(rest, n, why, whysz)) return NULL;
    return xasprintf("%s%.*s", scheme, (int)n, rest);
}

/* Records value (from the source named from) into *slot unless a higher
 * source already set it. */
static void set_from(char **slot, char **slot_from, const char *value, const char *from)
{
    if (*slot || !value || !*value) return;
    *slot = xstrdup(value);
    *slot_from = xstrdup(from);
}

/* One "key: value" of the config file. */
static void config_entry(client_config *cfg, const char *path, const yaml_node_t *k,
                         const yaml_node_t *v, double *timeout, diag_list *d)
{
    int line = (int)k->start_mark.line + 1, col = (int)k->start_mark.column + 1;
    const char *key = k->type == YAML_SCALAR_NODE ? (const char *)k->data.scalar.value : "";
    size_t i = 0;
    while (i < N_CONFIG_KEYS && strcmp(key, config_keys[i])) i++;
    if (i == N_CONFIG_KEYS) {
        diag *x = diag_add(d, DIAG_ERROR, path, line, col, key, "unknown key");
        diag_set_expected(x, "server, token, timeout or cacert");
        const char *s = str_suggest(key, config_keys, N_CONFIG_KEYS);
        if (s) diag_set_suggestion(x, "did you mean '%s'?", s);
        return;
    }
    if (v->type != YAML_SCALAR_NODE) {
        diag *x = diag_add(d, DIAG_ERROR, path, (int)v->start_mark.line + 1,
                           (int)v->start_mark.column + 1, key, "expected a single value");
        diag_set_found(x, "%s", v->type == YAML_MAPPING_NODE ? "a mapping" : "a list");
        return;
    }
    const char *val = (const char *)v->data.scalar.value;
    if (i == 0) set_from(&cfg->server, &cfg->server_from, val, path);
    else if (i == 1) set_from(&cfg->token, &cfg->token_from, val, path);
    else if (i == 3) {
        /* relative to the config file's folder, not the working one */
        char *dir = xstrdup(path), *slash = strrchr(dir, '/');
        char *abs = NULL;
        if (val[0] != '/' && slash) {
            *slash = '\0';
            abs = path_join(dir, val);
        }
        set_from(&cfg->cacert, &cfg->cacert_from, abs ? abs : val, path);
        free(abs);
        free(dir);
    } else if (!units_parse_duration(val, timeout)) {
        diag *x = diag_add(d, DIAG_ERROR, path, (int)v->start_mark.line + 1,
                           (int)v->start_mark.column + 1, "timeout", "not a duration");
        diag_set_expected(x, "a duration such as 30s or 2m");
        diag_set_found(x, "%s", val);
    }
}

/* Reads the config file at path (a missing file is no error). */
static void config_file(client_config *cfg, const char *path, double *timeout, diag_list *d)
{
    if (!file_exists(path)) return;
    char err[512];
    size_t len;
    char *text = file_read_all(path, CLIENT_CONFIG_MAX_BYTES, &len, err, sizeof err);
    if (!text) {
        diag_add(d, DIAG_ERROR, path, 0, 0, NULL, err);
        return;
    }
    yaml_parser_t p;
    yaml_document_t doc;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    if (!yaml_parser_load(&p, &doc)) {
        diag *x = diag_add(d, DIAG_ERROR, path, (int)p.problem_mark.line + 1,
                           (int)p.problem_mark.column + 1, NULL, "not valid YAML");
        diag_set_found(x, "%s", p.problem ? p.problem : "a syntax error");
        yaml_parser_delete(&p);
        free(text);
        return;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && root->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *kv = root->data.mapping.pairs.start;
             kv < root->data.mapping.pairs.top; kv++)
            config_entry(cfg, path, yaml_document_get_node(&doc, kv->key),
                         yaml_document_get_node(&doc, kv->value), timeout, d);
    } else if (root) {
        diag *x = diag_add(d, DIAG_ERROR, path, (int)root->start_mark.line + 1,
                           (int)root->start_mark.column + 1, NULL,
                           "the config file must be a mapping");
        diag_set_expected(x, "lines such as 'server: http://host:8740' and 'token: ...'");
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&p);
    free(text);
}

/* Replaces cfg->server by its normalised form, or reports why it is bad. */
static bool config_normalise(client_config *cfg, diag_list *d)
{
    char why[128];
    char *norm = client_normalise_server(cfg->server, why, sizeof why);
    if (!norm) {
        diag *x = diag_add(d, DIAG_ERROR, cfg->server_from, 0, 0, "server",
                           "not a server address");
        diag_set_expected(x, "[http://]HOST[:PORT], such as 127.0.0.1:8740");
        diag_set_found(x, "%s (%s)", cfg->server, why);
        return false;
    }
    free(cfg->server);
    cfg->server = norm;
    return true;
}

bool client_config_check_cacert(const client_config *cfg, diag_list *d)
{
    if (file_exists(cfg->cacert)) return true;
    diag *x = diag_add(d, DIAG_ERROR, cfg->cacert_from, 0, 0, "cacert",
                       "the CA file does not exist or cannot be read");
    diag_set_found(x, "%s", cfg->cacert);
    diag_set_suggestion(x, "give the PEM file of the CA that signed the server's certificate "
                           "(for a self-signed server, its certificate file)");
    return false;
}

bool client_config_resolve(client_config *cfg, const char *flag_server, const char *flag_token,
                           const char *config_path, diag_list *d)
{
    memset(cfg, 0, sizeof *cfg);
    size_t errors = d->errors;
    set_from(&cfg->server, &cfg->server_from, flag_server, "--server");
    set_from(&cfg->token, &cfg->token_from, flag_token, "--token");
    set_from(&cfg->server, &cfg->server_from, getenv("LATHE_SERVER"), "LATHE_SERVER");
    set_from(&cfg->token, &cfg->token_from, getenv("LATHE_TOKEN"), "LATHE_TOKEN");
    set_from(&cfg->cacert, &cfg->cacert_from, getenv("LATHE_CACERT"), "LATHE_CACERT");

    double file_timeout = 0, env_timeout = 0;
    const char *t = getenv("LATHE_TIMEOUT");
    if (t && *t && !units_parse_duration(t, &env_timeout)) {
        diag *x = diag_add(d, DIAG_ERROR, NULL, 0, 0, "LATHE_TIMEOUT", "not a duration");
        diag_set_expected(x, "a duration such as 30s or 2m");
        diag_set_found(x, "%s", t);
    }
    char *path = config_path ? xstrdup(config_path) : client_config_path();
    if (path) config_file(cfg, path, &file_timeout, d);
    free(path);

    set_from(&cfg->server, &cfg->server_from, CLIENT_DEFAULT_SERVER, "the default");
    cfg->timeout = env_timeout > 0    ? env_timeout
                   : file_timeout > 0 ? file_timeout
                                      : CLIENT_DEFAULT_TIMEOUT;
    if (d->errors == errors) config_normalise(cfg, d);
    if (cfg->cacert) client_config_check_cacert(cfg, d);
    return d->errors == errors;
}

void client_config_free(client_config *cfg)
{
    free(cfg->server);
    free(cfg->token);
    free(cfg->server_from);
    free(cfg->token_from);
    free(cfg->cacert);
    free(cfg->cacert_from);
    memset(cfg, 0, sizeof *cfg);
}
