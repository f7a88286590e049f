/* test_client_unit.c: the client part's pieces that need no server: the
 * configuration's precedence and its file's errors, server addresses, YAML
 * from JSON (read back with libyaml), times, tables, progress text, and a
 * refused connection (exit 5 naming the address). */
#include "client/client.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* Writes text into a fresh file under /tmp; returns its path (caller frees
 * and unlinks). */
static char *write_temp(const char *text)
{
    char *path = xstrdup("/tmp/lathe-client-test-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void clear_env(void)
{
    unsetenv("LATHE_SERVER");
    unsetenv("LATHE_TOKEN");
    unsetenv("LATHE_TIMEOUT");
    unsetenv("LATHE_CONFIG");
}

static void test_precedence(void **state)
{
    (void)state;
    clear_env();
    char *file = write_temp("server: file-host:1\ntoken: file-token\ntimeout: 2m\n");
    client_config cfg;
    diag_list d;
    diag_list_init(&d);

    /* the file alone */
    assert_true(client_config_resolve(&cfg, NULL, NULL, file, &d));
    assert_string_equal(cfg.server, "http://file-host:1");
    assert_string_equal(cfg.token, "file-token");
    assert_string_equal(cfg.token_from, file);
    assert_true(cfg.timeout == 120);
    client_config_free(&cfg);

    /* the environment wins over the file */
    setenv("LATHE_SERVER", "env-host:2", 1);
    setenv("LATHE_TOKEN", "env-token", 1);
    assert_true(client_config_resolve(&cfg, NULL, NULL, file, &d));
    assert_string_equal(cfg.server, "http://env-host:2");
    assert_string_equal(cfg.server_from, "LATHE_SERVER");
    assert_string_equal(cfg.token, "env-token");
    client_config_free(&cfg);

    /* flags win over both */
    assert_true(client_config_resolve(&cfg, "https://flag-host:3/", "flag-token", file, &d));
    assert_string_equal(cfg.server, "https://flag-host:3");
    assert_string_equal(cfg.server_from, "--server");
    assert_string_equal(cfg.token, "flag-token");
    assert_string_equal(cfg.token_from, "--token");
    client_config_free(&cfg);

    /* nothing at all: the default address, no token */
    clear_env();
    assert_true(client_config_resolve(&cfg, NULL, NULL, "/nonexistent/lathe.yaml", &d));
    assert_string_equal(cfg.server, CLIENT_DEFAULT_SERVER);
    assert_null(cfg.token);
    assert_true(cfg.timeout == CLIENT_DEFAULT_TIMEOUT);
    client_config_free(&cfg);
    assert_int_equal(d.errors, 0);
    diag_list_free(&d);
    unlink(file);
    free(file);
}

static void test_config_errors(void **state)
{
    (void)state;
    clear_env();
    char *file = write_temp("server: ok:1\ntokn: x\ntimeout: soon\n");
    client_config cfg;
    diag_list d;
    diag_list_init(&d);
    assert_false(client_config_resolve(&cfg, NULL, NULL, file, &d));
    client_config_free(&cfg);
    assert_int_equal(d.errors, 2);
    assert_int_equal(d.items[0].line, 2);
    assert_int_equal(d.items[0].col, 1);
    assert_string_equal(d.items[0].suggestion, "did you mean 'token'?");
    assert_int_equal(d.items[1].line, 3);
    assert_string_equal(d.items[1].path, "timeout");
    diag_list_free(&d);
    unlink(file);
    free(file);

    /* bad YAML, and a list instead of a mapping */
    file = write_temp("server: [a\n");
    diag_list_init(&d);
    assert_false(client_config_resolve(&cfg, NULL, NULL, file, &d));
    client_config_free(&cfg);
    assert_int_equal(d.errors, 1);
    assert_true(d.items[0].line >= 1);
    diag_list_free(&d);
    unlink(file);
    free(file);

    /* a bad address from the environment names its source */
    setenv("LATHE_SERVER", "ftp://x", 1);
    diag_list_init(&d);
    assert_false(client_config_resolve(&cfg, NULL, NULL, "/nonexistent", &d));
    client_config_free(&cfg);
    assert_int_equal(d.errors, 1);
    assert_string_equal(d.items[0].file, "LATHE_SERVER");
    diag_list_free(&d);
    clear_env();
}

static void test_normalise(void **state)
{
    (void)state;
    char why[128];
    char *s = client_normalise_server("127.0.0.1:8740", why, sizeof why);
    assert_string_equal(s, "http://127.0.0.1:8740");
    free(s);
    s = client_normalise_server("http://[::1]:80//", why, sizeof why);
    assert_string_equal(s, "http://[::1]:80");
    free(s);
    assert_null(client_normalise_server("http://", why, sizeof why));
    assert_null(client_normalise_server("host name", why, sizeof why));
    assert_null(client_normalise_server("unix:///tmp/s", why, sizeof why));
    s = client_normalise_server("https://gpu-box.example.com", why, sizeof why);
    assert_string_equal(s, "https://gpu-box.example.com");
    free(s);
    /* Found by fuzz_client_config: brackets and colons were taken anywhere. */
    static const struct { const char *addr, *why; } bad[] = {
        {"http://a]b[c", "']' cannot appear in HOST[:PORT]"},
        {"host:80:90", "the port must be a number"},
        {"host:", "after the host comes nothing or :PORT"},
        {"host:0", "the port must be from 1 to 65535"},
        {"host:65536", "the port must be from 1 to 65535"},
        {"host:123456", "after the host comes nothing or :PORT"},
        {"[::1", "an IPv6 address is written [ADDRESS]"},
        {"[]:80", "an IPv6 address is written [ADDRESS]"},
        {"[::g]", "'g' cannot appear in an IPv6 address"},
        {"[::1]x", "after the host comes nothing or :PORT"},
        {":80", "':' cannot appear in HOST[:PORT]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        assert_null(client_normalise_server(bad[i].addr, why, sizeof why));
        if (strcmp(why, bad[i].why) != 0) fail_msg("%s: %s", bad[i].addr, why);
    }
}

/* Counts the scalar events of a YAML text and checks it parses. */
static int yaml_scalars(const char *text)
{
    yaml_parser_t p;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
    int n = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            n = -1;
            break;
        }
        if (ev.type == YAML_SCALAR_EVENT) n++;
        bool end = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
        if (end) break;
    }
    yaml_parser_delete(&p);
    return n;
}

static void test_yaml(void **state)
{
    (void)state;
    json_t *v = json_pack("{s:s, s:s, s:i, s:f, s:n, s:b, s:[s,s], s:{}, s:s}", "name", "r8",
                          "looks_like_number", "123", "step", 40, "loss", 2.5, "exit", "ok",
                          true, "list", "a", "b: c", "empty", "colon", "x: y");
    char *y = client_json_to_yaml(v);
    assert_non_null(strstr(y, "name: r8\n"));
    assert_non_null(strstr(y, "looks_like_number: \"123\"\n"));
    assert_non_null(strstr(y, "step: 40\n"));
    assert_non_null(strstr(y, "loss: 2.5\n"));
    assert_non_null(strstr(y, "exit: null\n"));
    assert_non_null(strstr(y, "ok: true\n"));
    assert_true(strstr(y, "- \"b: c\"\n") || strstr(y, "- 'b: c'\n")); /* quoted either way */
    assert_int_equal(yaml_scalars(y), 18);
    free(y);
    json_decref(v);
}

static void test_times(void **state)
{
    (void)state;
    double t;
    assert_true(client_parse_time("1970-01-01T00:01:40Z", &t));
    assert_true(t == 100);
    assert_true(client_parse_time("1970-01-01T01:00:00.5+01:00", &t));
    assert_true(t == 0.5);
    assert_false(client_parse_time("1970-01-01 00:00:00", &t));
    assert_false(client_parse_time("1970-01-01T00:00:00Zjunk", &t));
    char buf[32];
    client_format_age(buf, sizeof buf, 1000, 1045);
    assert_string_equal(buf, "45s");
    client_format_age(buf, sizeof buf, 1000, 1000 + 7500);
    assert_string_equal(buf, "2h5m");
    client_format_age(buf, sizeof buf, 0, 1000);
    assert_string_equal(buf, "-");
    client_format_money(buf, sizeof buf, 12.5);
    assert_string_equal(buf, "12.50");
    client_format_money(buf, sizeof buf, 0.00456);
    assert_string_equal(buf, "0.0046");
    client_format_money(buf, sizeof buf, 0);
    assert_string_equal(buf, "0.00");
}

static void test_table_and_progress(void **state)
{
    (void)state;
    client_table t;
    client_table_init(&t, 3, "NAME", "STATE", "LOSS");
    client_table_row(&t, "a-long-name", "running", "2.1");
    client_table_row(&t, "b", NULL, "");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    client_table_print(&t, f);
    fclose(f);
    assert_string_equal(buf, "NAME          STATE     LOSS\n"
                             "a-long-name   running   2.1\n"
                             "b             -         -\n");
    free(buf);
    client_table_free(&t);

    char bar[32];
    client_progress_bar(bar, sizeof bar, 0.5, 10);
    assert_string_equal(bar, "#####-----");
    client_progress_bar(bar, sizeof bar, 2, 4);
    assert_string_equal(bar, "####");

    json_t *job = json_pack("{s:{s:i, s:i, s:f, s:f, s:f}}", "progress", "step", 40,
                            "total_steps", 120, "loss", 2.34567, "tokens_per_second", 812.4,
                            "eta_seconds", 75.0);
    char text[128];
    client_progress_text(text, sizeof text, job);
    assert_string_equal(text, "step 40/120  loss 2.3457  812 tok/s  eta 1m15s");
    json_decref(job);
    job = json_pack("{s:n}", "progress");
    client_progress_text(text, sizeof text, job);
    assert_string_equal(text, "");
    json_decref(job);
}

/* A port on which nothing listens: bound, then closed. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t n = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &n);
    close(fd);
    return ntohs(a.sin_port);
}

static void test_refused(void **state)
{
    (void)state;
    clear_env();
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", closed_port());
    client_config cfg;
    diag_list d;
    diag_list_init(&d);
    assert_true(client_config_resolve(&cfg, addr, "t", "/nonexistent", &d));
    client *c = client_new(&cfg);
    client_error err;
    client_error_init(&err);
    json_t *out = NULL;
    assert_int_equal(client_job_get(c, "x", NULL, &out, &err), LT_EXIT_UNAVAILABLE);
    assert_null(out);
    assert_string_equal(err.code, "unreachable");
    assert_non_null(strstr(err.message, cfg.server));
    assert_non_null(strstr(err.message, "--server"));
    client_error_free(&err);
    client_free(c);
    client_config_free(&cfg);
    diag_list_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precedence),   cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_normalise),    cmocka_unit_test(test_yaml),
        cmocka_unit_test(test_times),        cmocka_unit_test(test_table_and_progress),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
