/* test_k8s_config.c: where the Kubernetes client goes and who it is there:
 * kubeconfig fixtures (tokens, token files, CA data and files, client
 * certificates, insecure with its warning, exec credential plugins v1 and
 * v1beta1 and their failures, contexts current and named, what is missing),
 * KUBECONFIG lists, the in-cluster service account, token rotation and the
 * exec plugin's cache seen by a scripted local HTTP listener, and the
 * sentences of errors. */
#include "k8s/k8s.h"
#include "k8s/k8s_internal.h"

#include "k8s_test_http.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>

#include <cmocka.h>

static char *data_path(const char *name)
{
    return path_join(LATHE_TEST_DATA, name);
}

static bool load(k8s_config *c, const char *file, const char *context, char *err, size_t n)
{
    char *p = data_path(file);
    bool ok = k8s_config_kubeconfig(c, p, context, err, n);
    free(p);
    return ok;
}

static char *temp_dir(void)
{
    char *d = xstrdup("/tmp/lathe-k8s-test-XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char *p = path_join(dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    free(p);
}

static void remove_dir(char *d)
{
    char err[200];
    file_remove_tree(d, err, sizeof err);
    free(d);
}

/* ---- kubeconfig fields ---- */
static void test_token_and_ca_data(void **state)
{
    (void)state;
    k8s_config c;
    char err[1024];
    assert_true(load(&c, "kubeconfig-token.yaml", NULL, err, sizeof err));
    assert_string_equal(c.server, "https://127.0.0.1:6443");
    assert_string_equal(c.token, "static-token");
    assert_non_null(c.ca_data);
    assert_non_null(strstr(c.ca_data, "-----BEGIN CERTIFICATE-----"));
    assert_null(c.ca_file);
    assert_string_equal(c.namespace_, "team-a");
    assert_non_null(strstr(c.source, "kubeconfig-token.yaml"));
    assert_non_null(strstr(c.source, "context lab"));
    assert_false(c.insecure);
    k8s_config_free(&c);
}

static void test_token_file_and_ca_file(void **state)
{
    (void)state;
    k8s_config c;
    char err[1024];
    assert_true(load(&c, "kubeconfig-tokenfile.yaml", NULL, err, sizeof err));
    char *tf = data_path("token.txt"), *ca = data_path("ca.pem");
    assert_string_equal(c.token_file, tf);
    assert_string_equal(c.ca_file, ca);
    assert_null(c.token);
    free(tf);
    free(ca);
    k8s_config_free(&c);
}

static void test_client_certs(void **state)
{
    (void)state;
    k8s_config c;
    char err[1024];
    assert_true(load(&c, "kubeconfig-cert-data.yaml", NULL, err, sizeof err));
    assert_non_null(strstr(c.cert_data, "BEGIN CERTIFICATE"));
    assert_non_null(strstr(c.key_data, "BEGIN PRIVATE KEY"));
    k8s_config_free(&c);
    assert_true(load(&c, "kubeconfig-cert-files.yaml", NULL, err, sizeof err));
    assert_true(str_ends_with(c.cert_file, "/client.pem"));
    assert_true(str_ends_with(c.key_file, "/client-key.pem"));
    k8s_config_free(&c);
}

/* Runs fn with stderr sent to a file; returns what it wrote (caller frees). */
static char *capture_stderr(void (*fn)(void *), void *arg)
{
    char path[] = "/tmp/lathe-k8s-stderr-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    size_t len;
    char err[200];
    char *text = file_read_all(path, 1 << 20, &len, err, sizeof err);
    unlink(path);
    return text;
}

static void make_client(void *arg)
{
    k8s_config *c = arg;
    char err[512];
    k8s_client *cl = k8s_client_new(c, err, sizeof err);
    assert_non_null(cl);
    k8s_client_free(cl);
}

static void test_insecure_warns(void **state)
{
    (void)state;
    k8s_config c;
    char err[1024];
    assert_true(load(&c, "kubeconfig-insecure.yaml", NULL, err, sizeof err));
    assert_true(c.insecure);
    char *out = capture_stderr(make_client, &c);
    assert_non_null(strstr(out, "warning: TLS verification of https://127.0.0.1:6443 is off"));
    /* once per client */
    assert_null(strstr(strstr(out, "warning") + 1, "warning"));
    free(out);
    k8s_config_free(&c);
    /* no warning when verification is on */
    assert_true(load(&c, "kubeconfig-token.yaml", NULL, err, sizeof err));
    out = capture_stderr(make_client, &c);
    assert_string_equal(out, "");
    free(out);
    k8s_config_free(&c);
}

static void test_contexts(void **state)
{
    (void)state;
    k8s_config c;
    char err[1024];
    assert_true(load(&c, "kubeconfig-contexts.yaml", NULL, err, sizeof err));
    assert_string_equal(c.server, "https://one.example:6443");
    assert_string_equal(c.token, "alice-token");
    assert_string_equal(c.namespace_, "default");
    k8s_config_free(&c);
    assert_true(load(&c, "kubeconfig-contexts.yaml", "second", err, sizeof err));
    assert_string_equal(c.server, "https://[fd00::2]:443");
    assert_string_equal(c.token, "bob-token");
    assert_string_equal(c.namespace_, "team-b");
    assert_non_null(strstr(c.source, "context second"));
    k8s_config_free(&c);

    assert_false(load(&c, "kubeconfig-contexts.yaml", "secnod", err, sizeof err));
    assert_non_null(strstr(err, "kubeconfig-contexts.yaml"));
    assert_non_null(strstr(err, "contexts: no entry named \"secnod\""));
    assert_non_null(strstr(err, "did you mean \"second\"?"));
    assert_non_null(strstr(err, "first, second, lost-cluster, lost-user"));
    assert_false(load(&c, "kubeconfig-contexts.yaml", "lost-cluster", err, sizeof err));
    assert_non_null(strstr(err, "clusters: no entry named \"three\""));
    assert_non_null(strstr(err, "contexts[2].context.cluster"));
    assert_false(load(&c, "kubeconfig-contexts.yaml", "lost-user", err, sizeof err));
    assert_non_null(strstr(err, "users: no entry named \"carol\""));
    assert_non_null(strstr(err, "fix:"));
}

static void test_field_errors(void **state)
{
    (void)state;
    k8s_config c;
    char err[1024];
    assert_false(load(&c, "kubeconfig-exec-nocommand.yaml", NULL, err, sizeof err));
    assert_non_null(strstr(err, "users[0].user.exec.command: is missing"));
    assert_non_null(strstr(err, "fix:"));

    static const struct {
        const char *text, *want;
    } cases[] = {
        {"current-context: x\ncontexts: []\n", "contexts: no entry named \"x\""},
        {"clusters: []\n", "current-context: is not set"},
        {"current-context: a\ncontexts:\n  - name: a\n    context: {cluster: c}\n"
         "clusters:\n  - name: c\n    cluster: {certificate-authority-data: abc}\n",
         "clusters[0].cluster.server: is missing"},
        {"current-context: a\ncontexts:\n  - name: a\n    context: {cluster: c}\n"
         "clusters:\n  - name: c\n    cluster: {server: ftp://x}\n",
         "is not an http(s) URL"},
        {"current-context: a\ncontexts:\n  - name: a\n    context: {cluster: c}\n"
         "clusters:\n  - name: c\n    cluster: {server: 'https://x', certificate-authority-data: '!!'}\n",
         "clusters[0].cluster.certificate-authority-data: is not base64 of PEM text"},
        {"current-context: a\ncontexts:\n  - name: a\n    context: {cluster: c, user: u}\n"
         "clusters:\n  - name: c\n    cluster: {server: 'https://x'}\n"
         "users:\n  - name: u\n    user: {exec: {command: x, apiVersion: client.authentication.k8s.io/v1alpha1}}\n",
         "users[0].user.exec.apiVersion: \"client.authentication.k8s.io/v1alpha1\" is not supported"},
        {"current-context: a\ncontexts:\n  - name: a\n    context: {cluster: c, user: u}\n"
         "clusters:\n  - name: c\n    cluster: {server: 'https://x'}\n"
         "users:\n  - name: u\n    user: {auth-provider: {name: gcp}}\n",
         "users[0].user.auth-provider: is not supported"},
        {"current-context: a\ncontexts:\n  - name: a\n    context: {cluster: c, user: u}\n"
         "clusters:\n  - name: c\n    cluster: {server: 'https://x'}\n"
         "users:\n  - name: u\n    user: {client-certificate: client.pem}\n",
         "users[0].user.client-key: is missing"},
        {"current-context: a\ncontexts:\n  - name: a\n    context: {cluster: c, user: u}\n"
         "clusters:\n  - name: c\n    cluster: {server: 'https://x'}\n"
         "users:\n  - name: u\n    user: {tokenFile: no-such-token}\n",
         "users[0].user.tokenFile: the file"},
        {"current-context: [a\n", "not readable YAML"},
        {"", "is empty"},
        {"- a\n- b\n", "expected a mapping"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool ok = k8s_config_parse_kubeconfig(&c, "inline.yaml", cases[i].text,
                                              strlen(cases[i].text), LATHE_TEST_DATA, NULL, err,
                                              sizeof err);
        if (ok || !strstr(err, cases[i].want) || !strstr(err, "inline.yaml"))
            fail_msg("case %zu: ok %d, message \"%s\", wanted \"%s\"", i, ok, err,
                     cases[i].want);
    }
}

static void test_kubeconfig_env(void **state)
{
    (void)state;
    k8s_config c;
    char err[1024];
    char *good = data_path("kubeconfig-token.yaml");
    char *list = xasprintf("/no/such/kubeconfig:%s:/also/missing", good);
    setenv("KUBECONFIG", list, 1);
    assert_true(k8s_config_kubeconfig(&c, NULL, NULL, err, sizeof err));
    assert_string_equal(c.token, "static-token");
    k8s_config_free(&c);
    unsetenv("KUBERNETES_SERVICE_HOST");
    assert_true(k8s_config_load(&c, NULL, NULL, err, sizeof err));
    assert_string_equal(c.token, "static-token");
    k8s_config_free(&c);
    setenv("KUBECONFIG", "/no/such/a:/no/such/b", 1);
    assert_false(k8s_config_kubeconfig(&c, NULL, NULL, err, sizeof err));
    assert_non_null(strstr(err, "KUBECONFIG=/no/such/a:/no/such/b"));
    unsetenv("KUBECONFIG");
    /* HOME's ~/.kube/config */
    char *home = temp_dir();
    char *kd = path_join(home, ".kube");
    mkdir(kd, 0700);
    size_t len;
    char *text = file_read_all(good, 1 << 20, &len, err, sizeof err);
    write_file(kd, "config", text);
    free(text);
    char *old_home = getenv("HOME") ? xstrdup(getenv("HOME")) : NULL;
    setenv("HOME", home, 1);
    assert_true(k8s_config_kubeconfig(&c, NULL, NULL, err, sizeof err));
    assert_string_equal(c.token, "static-token");
    k8s_config_free(&c);
    if (old_home) setenv("HOME", old_home, 1);
    free(old_home);
    free(kd);
    remove_dir(home);
    free(list);
    free(good);
}

static void test_in_cluster(void **state)
{
    (void)state;
    char *sa = temp_dir();
    write_file(sa, "token", "sa-token-1\n");
    write_file(sa, "ca.crt", "-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n");
    write_file(sa, "namespace", "lathe-system\n");
    k8s_config c;
    char err[1024];
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    assert_false(k8s_config_in_cluster(&c, sa, err, sizeof err));
    assert_non_null(strstr(err, "KUBERNETES_SERVICE_HOST"));
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    assert_true(k8s_config_in_cluster(&c, sa, err, sizeof err));
    assert_string_equal(c.server, "https://10.96.0.1:443");
    assert_string_equal(c.token, "sa-token-1");
    assert_true(str_ends_with(c.token_file, "/token"));
    assert_true(str_ends_with(c.ca_file, "/ca.crt"));
    assert_string_equal(c.namespace_, "lathe-system");
    assert_string_equal(c.source, "in-cluster service account");
    k8s_config_free(&c);
    setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
    assert_true(k8s_config_in_cluster(&c, sa, err, sizeof err));
    assert_string_equal(c.server, "https://[fd00:10:96::1]:443");
    k8s_config_free(&c);
    char *tok = path_join(sa, "token");
    unlink(tok);
    free(tok);
    assert_false(k8s_config_in_cluster(&c, sa, err, sizeof err));
    assert_non_null(strstr(err, "cannot read the token"));
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    remove_dir(sa);
}

/* ---- credentials seen on the wire ---- */
static char *header_of(const char *req, const char *name)
{
    char *key = xasprintf("\r\n%s: ", name);
    const char *p = strstr(req, key);
    char *out = NULL;
    if (p) {
        p += strlen(key);
        const char *e = strstr(p, "\r\n");
        out = xstrndup(p, e ? (size_t)(e - p) : strlen(p));
    }
    free(key);
    return out;
}

static char *kubeconfig_for(int port, const char *user_yaml)
{
    return xasprintf("current-context: a\ncontexts:\n  - name: a\n    context: {cluster: c, user: u}\n"
                     "clusters:\n  - name: c\n    cluster: {server: 'http://127.0.0.1:%d'}\n"
                     "users:\n  - name: u\n    user:\n%s",
                     port, user_yaml);
}

static const char pod_json[] = "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"p\"}}";

static void get_pod(k8s_client *cl, k8s_rc want, k8s_error *e)
{
    k8s_ref ref = {.api = "v1", .resource = "pods", .ns = "team-a", .name = "p"};
    json_t *out = NULL;
    k8s_rc rc = k8s_get(cl, &ref, &out, e);
    if (rc != want) fail_msg("rc %s, wanted %s: %s", k8s_rc_name(rc), k8s_rc_name(want), e->message);
    json_decref(out);
}

static void test_token_rotation(void **state)
{
    (void)state;
    th_server *t = th_start();
    th_fallback(t, 200, pod_json);
    char *dir = temp_dir();
    write_file(dir, "token", "first-token\n");
    char *user = xasprintf("      tokenFile: %s/token\n", dir);
    char *kc = kubeconfig_for(t->port, user);
    k8s_config c;
    char err[1024];
    assert_true(k8s_config_parse_kubeconfig(&c, "rot.yaml", kc, strlen(kc), dir, NULL, err,
                                            sizeof err));
    k8s_client *cl = k8s_client_new(&c, err, sizeof err);
    assert_non_null(cl);
    k8s_error e;
    get_pod(cl, K8S_OK, &e);
    /* a rotation: a new file renamed over the old one */
    write_file(dir, "token.new", "second-token-longer\n");
    char *a = path_join(dir, "token.new"), *b = path_join(dir, "token");
    assert_int_equal(rename(a, b), 0);
    get_pod(cl, K8S_OK, &e);
    char *r0 = th_request(t, 0), *r1 = th_request(t, 1);
    char *h0 = header_of(r0, "Authorization"), *h1 = header_of(r1, "Authorization");
    assert_string_equal(h0, "Bearer first-token");
    assert_string_equal(h1, "Bearer second-token-longer");
    char *ua = header_of(r0, "User-Agent"), *acc = header_of(r0, "Accept");
    assert_string_equal(ua, "lathe/" LATHE_VERSION);
    assert_string_equal(acc, "application/json");
    assert_true(str_starts_with(r0, "GET /api/v1/namespaces/team-a/pods/p HTTP/1.1"));
    free(ua);
    free(acc);
    free(h0);
    free(h1);
    free(r0);
    free(r1);
    free(a);
    free(b);
    k8s_client_free(cl);
    k8s_config_free(&c);
    free(kc);
    free(user);
    remove_dir(dir);
    th_stop(t);
}

static size_t plugin_runs(const char *dir)
{
    char *p = path_join(dir, "runs");
    size_t len = 0, n = 0;
    char err[200];
    char *t = file_read_all(p, 1 << 20, &len, err, sizeof err);
    for (size_t i = 0; t && i < len; i++) n += t[i] == '\n';
    free(t);
    free(p);
    return n;
}

static void exec_plugin_case(const char *api)
{
    char *pd = temp_dir();
    setenv("LATHE_PLUGIN_DIR", pd, 1);
    th_server *t = th_start();
    th_add(t, NULL, 200, NULL, pod_json, 0);
    th_add(t, NULL, 401, NULL, "{\"kind\":\"Status\",\"code\":401,\"reason\":\"Unauthorized\"}", 0);
    th_fallback(t, 200, pod_json);
    char *user = xasprintf("      exec:\n        apiVersion: client.authentication.k8s.io/%s\n"
                           "        command: %s/exec-plugin.sh\n"
                           "        args: [client.authentication.k8s.io/%s, token]\n"
                           "        env: [{name: GREETING, value: hi}]\n",
                           api, LATHE_TEST_DATA, api);
    char *kc = kubeconfig_for(t->port, user);
    k8s_config c;
    char err[1024];
    assert_true(k8s_config_parse_kubeconfig(&c, "exec.yaml", kc, strlen(kc), LATHE_TEST_DATA,
                                            NULL, err, sizeof err));
    k8s_client *cl = k8s_client_new(&c, err, sizeof err);
    k8s_error e;
    get_pod(cl, K8S_OK, &e);  /* runs the plugin: token 1 */
    assert_int_equal(plugin_runs(pd), 1);
    get_pod(cl, K8S_OK, &e);  /* 401 with token 1, the plugin again, then token 2 */
    assert_int_equal(plugin_runs(pd), 2);
    get_pod(cl, K8S_OK, &e);  /* cached */
    assert_int_equal(plugin_runs(pd), 2);
    const char *want[] = {"Bearer exec-hi-1", "Bearer exec-hi-1", "Bearer exec-hi-2",
                          "Bearer exec-hi-2"};
    assert_int_equal(th_count(t), 4);
    for (size_t i = 0; i < 4; i++) {
        char *r = th_request(t, i), *h = header_of(r, "Authorization");
        assert_string_equal(h, want[i]);
        free(h);
        free(r);
    }
    char *info = path_join(pd, "info");
    size_t len;
    char *text = file_read_all(info, 1 << 20, &len, err, sizeof err);
    char *want_api = xasprintf("\"apiVersion\":\"client.authentication.k8s.io/%s\"", api);
    assert_non_null(strstr(text, want_api));
    assert_non_null(strstr(text, "\"kind\":\"ExecCredential\""));
    free(want_api);
    free(text);
    free(info);
    k8s_client_free(cl);
    k8s_config_free(&c);
    free(kc);
    free(user);
    th_stop(t);
    unsetenv("LATHE_PLUGIN_DIR");
    remove_dir(pd);
}

static void test_exec_plugin_v1(void **state)
{
    (void)state;
    k8s_config c;
    char err[1024];
    assert_true(load(&c, "kubeconfig-exec-v1.yaml", NULL, err, sizeof err));
    assert_int_equal(c.exec_argc, 3);
    assert_true(str_ends_with(c.exec_argv[0], "/exec-plugin.sh"));
    assert_true(c.exec_argv[0][0] == '/');
    assert_string_equal(c.exec_argv[2], "token");
    assert_int_equal(c.n_exec_env, 1);
    assert_string_equal(c.exec_env[0], "GREETING=hello");
    assert_string_equal(c.exec_api_version, "client.authentication.k8s.io/v1");
    k8s_cred cr;
    assert_true(k8s_exec_run(&c, 10, &cr, err, sizeof err));
    assert_string_equal(cr.token, "exec-hello-0");
    assert_true(cr.expiry > 1e10);
    k8s_cred_free(&cr);
    /* a certificate instead of a token */
    free(c.exec_argv[2]);
    c.exec_argv[2] = xstrdup("cert");
    assert_true(k8s_exec_run(&c, 10, &cr, err, sizeof err));
    assert_null(cr.token);
    assert_non_null(strstr(cr.cert, "BEGIN CERTIFICATE"));
    assert_non_null(strstr(cr.key, "BEGIN PRIVATE KEY"));
    k8s_cred_free(&cr);
    k8s_config_free(&c);
    exec_plugin_case("v1");
}

static void test_exec_plugin_v1beta1(void **state)
{
    (void)state;
    k8s_config c;
    char err[1024];
    assert_true(load(&c, "kubeconfig-exec-v1beta1.yaml", NULL, err, sizeof err));
    assert_string_equal(c.exec_api_version, "client.authentication.k8s.io/v1beta1");
    k8s_cred cr;
    assert_true(k8s_exec_run(&c, 10, &cr, err, sizeof err));
    assert_string_equal(cr.token, "exec-hello-0");
    k8s_cred_free(&cr);
    /* the plugin answers in another version than the kubeconfig asks for */
    free(c.exec_argv[1]);
    c.exec_argv[1] = xstrdup("client.authentication.k8s.io/v1");
    assert_false(k8s_exec_run(&c, 10, &cr, err, sizeof err));
    assert_non_null(strstr(err, "not client.authentication.k8s.io/v1beta1"));
    k8s_config_free(&c);
    exec_plugin_case("v1beta1");
}

static void test_exec_plugin_failures(void **state)
{
    (void)state;
    k8s_config c;
    char err[1024];
    k8s_error e;
    assert_true(load(&c, "kubeconfig-exec-fail.yaml", NULL, err, sizeof err));
    k8s_client *cl = k8s_client_new(&c, err, sizeof err);
    get_pod(cl, K8S_E_UNAUTHORIZED, &e);
    assert_non_null(strstr(e.message, "exec-plugin.sh"));
    assert_non_null(strstr(e.message, "users[].user.exec.command"));
    assert_non_null(strstr(e.message, "exited with status 3"));
    assert_non_null(strstr(e.message, "fix:"));
    k8s_client_free(cl);
    k8s_config_free(&c);

    assert_true(load(&c, "kubeconfig-exec-garbage.yaml", NULL, err, sizeof err));
    cl = k8s_client_new(&c, err, sizeof err);
    get_pod(cl, K8S_E_UNAUTHORIZED, &e);
    assert_non_null(strstr(e.message, "not an ExecCredential JSON object"));
    k8s_client_free(cl);
    /* not on PATH */
    free(c.exec_argv[0]);
    c.exec_argv[0] = xstrdup("lathe-no-such-plugin");
    k8s_cred cr;
    assert_false(k8s_exec_run(&c, 10, &cr, err, sizeof err));
    assert_non_null(strstr(err, "cannot be started"));
    /* a plugin that hangs is stopped */
    free(c.exec_argv[0]);
    c.exec_argv[0] = xstrdup("/bin/sleep");
    free(c.exec_argv[1]);
    c.exec_argv[1] = xstrdup("30");
    free(c.exec_argv[2]);
    c.exec_argc = 2;
    double t0 = k8s_now_mono();
    assert_false(k8s_exec_run(&c, 0.5, &cr, err, sizeof err));
    assert_non_null(strstr(err, "did not finish"));
    assert_true(k8s_now_mono() - t0 < 20);
    /* one that closes its stdout and runs on */
    free(c.exec_argv[0]);
    c.exec_argv[0] = xstrdup("/bin/sh");
    free(c.exec_argv[1]);
    c.exec_argv[1] = xstrdup("-c");
    c.exec_argv = xrealloc(c.exec_argv, 3 * sizeof *c.exec_argv);
    c.exec_argv[2] = xstrdup("exec >&-; sleep 30");
    c.exec_argc = 3;
    t0 = k8s_now_mono();
    assert_false(k8s_exec_run(&c, 0.5, &cr, err, sizeof err));
    assert_non_null(strstr(err, "did not finish"));
    assert_true(k8s_now_mono() - t0 < 20);
    k8s_config_free(&c);

    /* what a plugin prints */
    static const char *const bad[] = {
        "{\"kind\":\"ExecCredential\",\"apiVersion\":\"v\"}",
        "{\"kind\":\"ExecCredential\",\"apiVersion\":\"v\",\"status\":{}}",
        "{\"kind\":\"Other\",\"apiVersion\":\"v\",\"status\":{\"token\":\"t\"}}",
        "{\"kind\":\"ExecCredential\",\"apiVersion\":\"v\",\"status\":{\"token\":\"t\",\"expirationTimestamp\":\"tomorrow\"}}",
        "[1]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(k8s_cred_parse(bad[i], strlen(bad[i]), "v", &cr, err, sizeof err));
        assert_true(strlen(err) > 10);
    }
}

static void test_expired_credential_runs_again(void **state)
{
    (void)state;
    char *pd = temp_dir();
    setenv("LATHE_PLUGIN_DIR", pd, 1);
    th_server *t = th_start();
    th_fallback(t, 200, pod_json);
    char *user = xasprintf("      exec:\n        apiVersion: client.authentication.k8s.io/v1\n"
                           "        command: ./exec-plugin.sh\n"
                           "        args: [client.authentication.k8s.io/v1, expired]\n");
    char *kc = kubeconfig_for(t->port, user);
    k8s_config c;
    char err[1024];
    assert_true(k8s_config_parse_kubeconfig(&c, "exec.yaml", kc, strlen(kc), LATHE_TEST_DATA,
                                            NULL, err, sizeof err));
    k8s_client *cl = k8s_client_new(&c, err, sizeof err);
    k8s_error e;
    get_pod(cl, K8S_OK, &e);
    get_pod(cl, K8S_OK, &e);
    assert_int_equal(plugin_runs(pd), 2);
    k8s_client_free(cl);
    k8s_config_free(&c);
    free(kc);
    free(user);
    th_stop(t);
    unsetenv("LATHE_PLUGIN_DIR");
    remove_dir(pd);
}

/* ---- error sentences ---- */
static k8s_client *plain_client(int port, int retries)
{
    k8s_config c = {0};
    c.server = xasprintf("http://127.0.0.1:%d", port);
    c.token = xstrdup("t");
    c.source = xstrdup("test");
    c.max_retries = retries;
    c.timeout = 5;
    char err[512];
    k8s_client *cl = k8s_client_new(&c, err, sizeof err);
    assert_non_null(cl);
    k8s_config_free(&c);
    return cl;
}

static void test_error_sentences(void **state)
{
    (void)state;
    th_server *t = th_start();
    th_add(t, NULL, 404, NULL,
           "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":"
           "\"namespaces \\\"team-a\\\" not found\",\"reason\":\"NotFound\",\"details\":"
           "{\"name\":\"team-a\",\"kind\":\"namespaces\"},\"code\":404}",
           0);
    th_add(t, NULL, 403, NULL,
           "{\"kind\":\"Status\",\"message\":\"jobs.batch is forbidden: User \\\"system:serviceaccount:lathe:x\\\" cannot create resource\",\"reason\":\"Forbidden\",\"code\":403}",
           0);
    th_add(t, NULL, 422, NULL,
           "{\"kind\":\"Status\",\"message\":\"Job.batch \\\"lathe-x-1\\\" is invalid\",\"reason\":\"Invalid\","
           "\"details\":{\"causes\":[{\"reason\":\"FieldValueRequired\",\"message\":\"Required value\","
           "\"field\":\"spec.template.spec.containers\"},{\"message\":\"must be no more than 63 characters\","
           "\"field\":\"metadata.labels\"}]},\"code\":422}",
           0);
    th_add(t, NULL, 409, NULL,
           "{\"kind\":\"Status\",\"message\":\"jobs.batch \\\"lathe-x-1\\\" already exists\",\"reason\":\"AlreadyExists\",\"code\":409}",
           0);
    th_add(t, NULL, 409, NULL,
           "{\"kind\":\"Status\",\"message\":\"the object has been modified\",\"reason\":\"Conflict\",\"code\":409}",
           0);
    th_add(t, NULL, 401, NULL, "{\"kind\":\"Status\",\"reason\":\"Unauthorized\",\"message\":\"Unauthorized\",\"code\":401}", 0);
    th_add(t, NULL, 418, NULL, "<html>teapot</html>", 0);
    k8s_client *cl = plain_client(t->port, -1);
    k8s_ref job = {.api = "batch/v1", .resource = "jobs", .ns = "team-a", .name = "lathe-x-1"};
    json_t *obj = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "batch/v1", "kind", "Job",
                            "metadata", "name", "lathe-x-1");
    k8s_error e;
    assert_int_equal(k8s_create(cl, &job, obj, NULL, &e), K8S_E_NOT_FOUND);
    assert_int_equal(e.http, 404);
    assert_string_equal(e.reason, "NotFound");
    assert_non_null(strstr(e.message, "creating jobs.batch lathe-x-1 in team-a: namespaces \"team-a\" not found"));
    assert_non_null(strstr(e.message, "create the namespace (lathe render CLUSTER.yaml --target k8s | kubectl apply -f -)"));
    assert_int_equal(k8s_create(cl, &job, obj, NULL, &e), K8S_E_FORBIDDEN);
    assert_non_null(strstr(e.message, "the kubeconfig user needs RBAC permission to create jobs.batch in team-a"));
    assert_int_equal(k8s_create(cl, &job, obj, NULL, &e), K8S_E_INVALID);
    assert_non_null(strstr(e.message, "spec.template.spec.containers: Required value"));
    assert_non_null(strstr(e.message, "metadata.labels: must be no more than 63 characters"));
    assert_non_null(strstr(e.message, "fix: fix the fields"));
    assert_int_equal(k8s_create(cl, &job, obj, NULL, &e), K8S_E_EXISTS);
    assert_non_null(strstr(e.message, "already exists"));
    assert_int_equal(k8s_replace(cl, &job, obj, NULL, &e), K8S_E_CONFLICT);
    assert_non_null(strstr(e.message, "updating jobs.batch lathe-x-1 in team-a"));
    assert_int_equal(k8s_get(cl, &job, NULL, &e), K8S_E_UNAUTHORIZED);
    assert_non_null(strstr(e.message, "check the token / kubeconfig user"));
    assert_int_equal(k8s_get(cl, &job, NULL, &e), K8S_E_OTHER);
    assert_non_null(strstr(e.message, "HTTP 418: <html>teapot</html>"));
    /* the create went to the collection */
    char *r0 = th_request(t, 0);
    assert_true(str_starts_with(r0, "POST /apis/batch/v1/namespaces/team-a/jobs HTTP/1.1"));
    char *ct = header_of(r0, "Content-Type");
    assert_string_equal(ct, "application/json");
    free(ct);
    free(r0);
    json_decref(obj);
    k8s_client_free(cl);
    int port = t->port;
    th_stop(t);

    /* nobody listens any more */
    cl = plain_client(port, -1);
    assert_int_equal(k8s_get(cl, &job, NULL, &e), K8S_E_UNREACHABLE);
    assert_int_equal(e.http, 0);
    char *want = xasprintf("is the API server at http://127.0.0.1:%d up?", port);
    assert_non_null(strstr(e.message, want));
    assert_non_null(strstr(e.message, "getting jobs.batch lathe-x-1 in team-a"));
    free(want);
    k8s_client_free(cl);
}

static void test_status_parse(void **state)
{
    (void)state;
    k8s_status st;
    const char *s = "{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\",\"message\":\"too old\"}";
    assert_true(k8s_status_parse(s, strlen(s), &st));
    assert_int_equal(st.code, 410);
    assert_string_equal(st.reason, "Expired");
    assert_string_equal(st.message, "too old");
    k8s_status_free(&st);
    assert_false(k8s_status_parse("{\"kind\":\"Pod\"}", 14, &st));
    k8s_status_free(&st);
    assert_false(k8s_status_parse("nope", 4, &st));
    assert_int_equal(k8s_rc_of(409, "AlreadyExists"), K8S_E_EXISTS);
    assert_int_equal(k8s_rc_of(409, "Conflict"), K8S_E_CONFLICT);
    assert_int_equal(k8s_rc_of(410, NULL), K8S_E_GONE);
    assert_int_equal(k8s_rc_of(503, NULL), K8S_E_SERVER);
    assert_string_equal(k8s_rc_name(K8S_E_EXISTS), "already exists");
    /* a long message keeps its fix */
    k8s_error e;
    k8s_ref ref = {.api = "v1", .resource = "pods", .ns = "n", .name = "p"};
    k8s_ask a = {.verb = "create", .ref = &ref, .server = "https://x"};
    k8s_status big = {.code = 422};
    strcpy(big.reason, "Invalid");
    big.message = xmalloc(3000);
    memset(big.message, 'm', 2999);
    big.message[2999] = '\0';
    k8s_error_fill(&e, &a, 422, &big, NULL, NULL);
    assert_true(strlen(e.message) < sizeof e.message);
    assert_true(str_ends_with(e.message, "fix: fix the fields named above"));
    free(big.message);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_and_ca_data),
        cmocka_unit_test(test_token_file_and_ca_file),
        cmocka_unit_test(test_client_certs),
        cmocka_unit_test(test_insecure_warns),
        cmocka_unit_test(test_contexts),
        cmocka_unit_test(test_field_errors),
        cmocka_unit_test(test_kubeconfig_env),
        cmocka_unit_test(test_in_cluster),
        cmocka_unit_test(test_token_rotation),
        cmocka_unit_test(test_exec_plugin_v1),
        cmocka_unit_test(test_exec_plugin_v1beta1),
        cmocka_unit_test(test_exec_plugin_failures),
        cmocka_unit_test(test_expired_credential_runs_again),
        cmocka_unit_test(test_error_sentences),
        cmocka_unit_test(test_status_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
