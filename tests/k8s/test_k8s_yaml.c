/* test_k8s_yaml.c: Kubernetes manifests as YAML (spec_json_to_yaml) round trips. JSON values (hostile strings
 * that look like numbers, booleans, nulls, timestamps, indicators, block
 * text; numbers; empty and nested collections; rendered Jobs) are emitted
 * as YAML, read back with lib/spec's libyaml layer (spec_yaml_parse), each
 * plain scalar resolved the way YAML 1.1 readers (PyYAML, the Kubernetes
 * API's YAML reader for these cases) resolve it, and compared with the
 * JSON; the same YAML is read with PyYAML too (a YAML 1.1 reader with its
 * own resolvers) when /usr/bin/python3 has it. tests/k8s/render.sh does the
 * same for rendered objects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "k8s/k8s.h"
#include "spec/spec_internal.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Does s match the extended regular expression re (whole string)? */
static bool matches(const char *re, const char *s)
{
    regex_t r;
    assert_int_equal(regcomp(&r, re, REG_EXTENDED | REG_NOSUB), 0);
    bool ok = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

/* A plain scalar as YAML 1.1's implicit resolvers read it. */
static json_t *resolve_plain(const char *s)
{
    static const char *const t[] = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE",
                                    "on", "On", "ON"};
    static const char *const f[] = {"n", "N", "no", "No", "NO", "false", "False", "FALSE",
                                    "off", "Off", "OFF"};
    if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL"))
        return json_null();
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (!strcmp(s, t[i])) return json_true();
        if (!strcmp(s, f[i])) return json_false();
    }
    if (matches("^[-+]?(0|[1-9][0-9_]*)$", s)) return json_integer(strtoll(s, NULL, 10));
    if (matches("^[-+]?(0b[01_]+|0x[0-9a-fA-F_]+|0[0-7_]+|[1-9][0-9_]*(:[0-5]?[0-9])+)$", s))
        return json_string("<a YAML 1.1 integer>");
    if (matches("^[-+]?([0-9][0-9_]*)?\\.[0-9.]*([eE][-+][0-9]+)?$", s) ||
        matches("^[-+]?[0-9][0-9_]*([eE][-+]?[0-9]+)$", s))
        return json_real(strtod(s, NULL));
    if (matches("^[-+]?\\.(inf|Inf|INF)$", s) || matches("^\\.(nan|NaN|NAN)$", s))
        return json_string("<a YAML float>");
    if (matches("^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}", s)) return json_string("<a YAML timestamp>");
    if (!strcmp(s, "<<") || !strcmp(s, "=")) return json_string("<a YAML 1.1 merge / value key>");
    return json_string(s);
}

static json_t *to_json(const spec_ynode *n)
{
    if (n->kind == SPEC_YSCALAR) return n->quoted ? json_string(n->text) : resolve_plain(n->text);
    if (n->kind == SPEC_YSEQ) {
        json_t *a = json_array();
        for (size_t i = 0; i < n->n_items; i++) json_array_append_new(a, to_json(n->items[i]));
        return a;
    }
    json_t *o = json_object();
    for (size_t i = 0; i + 1 < n->n_items; i += 2) {
        const spec_ynode *k = n->items[i];
        assert_int_equal(k->kind, SPEC_YSCALAR);
        json_t *kv = to_json(k);
        /* a key must read back as the same string */
        assert_true(json_is_string(kv));
        json_object_set_new(o, json_string_value(kv), to_json(n->items[i + 1]));
        json_decref(kv);
    }
    return o;
}

/* Emits v, reads it back, checks it is the same value (one document per
 * item when v is an array and docs is set). */
/* PyYAML's reading of yaml (all documents; one unless docs) must equal v.
 * Skipped when /usr/bin/python3 or its yaml module is missing. */
static void pyyaml_check(const char *y, const json_t *v, bool docs)
{
    static const char script[] =
        "import json, sys\n"
        "try:\n"
        "    import yaml\n"
        "except ImportError:\n"
        "    sys.exit(77)\n"
        "got = [d for d in yaml.safe_load_all(open(sys.argv[1], encoding='utf-8'))]\n"
        "want = json.load(open(sys.argv[2], encoding='utf-8'))\n"
        "if sys.argv[3] == 'one':\n"
        "    got = got[0] if len(got) == 1 else got\n"
        "sys.exit(0 if got == want else 1)\n";
    if (access("/usr/bin/python3", X_OK) != 0) return;
    char ypath[] = "/tmp/k8s_yaml_XXXXXX", jpath[] = "/tmp/k8s_json_XXXXXX";
    int yfd = mkstemp(ypath), jfd = mkstemp(jpath);
    assert_true(yfd >= 0 && jfd >= 0);
    char *js = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    assert_true(write(yfd, y, strlen(y)) == (ssize_t)strlen(y));
    assert_true(write(jfd, js, strlen(js)) == (ssize_t)strlen(js));
    close(yfd);
    close(jfd);
    free(js);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char *argv[] = {"/usr/bin/python3", "-c", (char *)script, ypath, jpath,
                        docs ? "all" : "one", NULL};
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    assert_true(waitpid(pid, &st, 0) == pid);
    unlink(ypath);
    unlink(jpath);
    assert_true(WIFEXITED(st));
    int rc = WEXITSTATUS(st);
    if (rc == 77 || rc == 127) return; /* no PyYAML here */
    if (rc != 0) fprintf(stderr, "PyYAML reads this differently:\n%s", y);
    assert_int_equal(rc, 0);
}

static void round_trip(const json_t *v, bool docs)
{
    char *y = spec_json_to_yaml(v, true);
    pyyaml_check(y, v, docs);
    spec_ystream s;
    diag_list d;
    diag_list_init(&d);
    bool ok = spec_yaml_parse("emitted.yaml", y, strlen(y), &s, &d);
    if (!ok || d.errors) {
        diag_print_all(&d, stderr);
        fprintf(stderr, "%s", y);
    }
    assert_true(ok);
    assert_int_equal(d.errors, 0);
    json_t *back;
    if (docs) {
        back = json_array();
        for (size_t i = 0; i < s.n_docs; i++) json_array_append_new(back, to_json(s.docs[i].root));
    } else {
        assert_int_equal(s.n_docs, 1);
        back = to_json(s.docs[0].root);
    }
    if (!json_equal((json_t *)v, back)) {
        char *a = json_dumps(v, JSON_INDENT(1)), *b = json_dumps(back, JSON_INDENT(1));
        fprintf(stderr, "emitted:\n%s\nwanted:\n%s\nread back:\n%s\n", y, a, b);
        free(a);
        free(b);
    }
    assert_true(json_equal((json_t *)v, back));
    json_decref(back);
    spec_ystream_free(&s);
    diag_list_free(&d);
    free(y);
}

static const char *const hostile[] = {
    "4", "500m", "32Gi", "0", "-1", "+1", "007", "0x1F", "0o17", "0b101", "1_000", "1:20",
    "190:20:30.15", "1e3", "1E3", "1.5", ".5", "5.", "-.5", "6.8523015e+5", ".inf", "-.inf",
    ".Inf", ".nan", "NaN", "inf", "true", "True", "TRUE", "false", "yes", "Yes", "no", "NO", "on",
    "On", "off", "y", "Y", "n", "N", "null", "Null", "NULL", "~", "", " ", "2026-12-01",
    "2001-12-14t21:59:43.10-05:00", "<<", "=", "- a", "-", "--", "---", "...", "a: b", "a:b",
    "#x", "x #y", "x# y", "[a]", "{a: b}", "a, b", "*alias", "&anchor", "!tag", "!!str", "|", ">",
    "'", "\"", "''", "%YAML", "@at", "`tick", "?", "? x", ": x", " leading", "trailing ",
    "multi\nline\n", "multi\nline", "two\n\nbreaks\n\n", "\nleading break", "trailing  \nspaces",
    "tab\there", "\ttab", "unicode 大模型微调", "emoji \xf0\x9f\x9a\x80", "back\\slash",
    "metadata.annotations['lathe.dev/spec']", "C:\\path", "nvidia.com/gpu", "\x01control",
    "line\rreturn", "a\xc2\x85nel", "\xef\xbb\xbf" "bom", "very long " /* folding */
    "text that goes on and on and on and on and on and on and on and on and on and on and on "
    "and on and on and on and on and on and on and on and on past any line width",
};

static void test_strings(void **state)
{
    (void)state;
    json_t *o = json_object(), *a = json_array();
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        json_array_append_new(a, json_string(hostile[i]));
        json_object_set_new(o, hostile[i], json_string(hostile[i])); /* as keys too */
    }
    json_t *top = json_pack("{s:o, s:o}", "list", a, "map", o);
    round_trip(top, false);
    round_trip(a, true); /* each string a document of its own */
    json_decref(top);
}

static void test_numbers_and_collections(void **state)
{
    (void)state;
    json_t *v = json_pack(
        "{s:i, s:i, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:b, s:b, s:n, s:{}, s:[], s:[[i,[]],{}],"
        " s:[{s:s, s:[{s:i}]}], s:{s:{s:{s:[s]}}}}",
        "zero", 0, "neg", -42, "big", (json_int_t)9007199254740993LL, "one", 1.0, "tenth", 0.1,
        "small", 2.5e-05, "huge", 1e300, "negr", -3.75, "third", 1.0 / 3.0, "t", 1, "f", 0,
        "nothing", "empty_obj", "empty_arr", "nested", 1, "objs", "name", "x", "items", "n", 1,
        "deep", "a", "b", "c", "d");
    round_trip(v, false);
    json_decref(v);
}

static void test_documents(void **state)
{
    (void)state;
    json_t *docs = json_pack("[{s:s}, {s:i}, {s:[s]}]", "kind", "Service", "a", 1, "b", "c");
    char *y = spec_json_to_yaml(docs, true);
    /* each document starts with --- */
    size_t n = 0;
    for (const char *p = y; (p = strstr(p, "---")); p += 3) n++;
    assert_int_equal(n, 3);
    assert_true(strncmp(y, "---", 3) == 0);
    free(y);
    round_trip(docs, true);
    json_decref(docs);

    /* one object: one document; an empty array: nothing */
    json_t *one = json_pack("{s:s}", "kind", "Job");
    y = spec_json_to_yaml(one, true);
    assert_string_equal(y, "---\nkind: Job\n");
    free(y);
    json_decref(one);
    json_t *none = json_array();
    y = spec_json_to_yaml(none, true);
    assert_string_equal(y, "");
    free(y);
    json_decref(none);
    y = spec_json_to_yaml(NULL, true);
    assert_string_equal(y, "");
    free(y);
}

static void test_key_order_and_block_text(void **state)
{
    (void)state;
    json_t *o = json_object();
    json_object_set_new(o, "zeta", json_integer(1));
    json_object_set_new(o, "alpha", json_integer(2));
    json_object_set_new(o, "spec", json_string("apiVersion: lathe/v1\nkind: LoRATrainingJob\n"));
    char *y = spec_json_to_yaml(o, true);
    const char *z = strstr(y, "zeta"), *a = strstr(y, "alpha");
    assert_true(z && a && z < a);
    assert_non_null(strstr(y, "spec: |\n  apiVersion: lathe/v1\n  kind: LoRATrainingJob\n"));
    free(y);
    json_decref(o);
}

/* A rendered multi-node attempt, as YAML and back. */
static void test_rendered_job(void **state)
{
    (void)state;
    spec_k8s k;
    spec_k8s_defaults(&k);
    char *argv[] = {"lathe", "train", "/etc/lathe/spec.yaml"};
    const char *env[] = {"LATHE_JOB=team-a/x", "YES=yes", "N=1"};
    const char *nodes[] = {"node-1", "node-2"};
    static const int codes[] = {2};
    spec_job *j = spec_job_new_default();
    char *spec = spec_job_to_yaml(j);
    spec_job_free(j);
    k8s_job_params p = {.name = "lathe-x-1", .namespace_ = "team-a", .job_id = 7, .job = "x",
                        .team = "team-a", .attempt = 1, .argv = argv, .argc = 3, .env = env,
                        .n_env = 3, .nnodes = 2, .gpus_per_node = 8, .cpu = 0.5,
                        .memory = 64.0 * GIB, .gpu_product = "NVIDIA-H100-80GB-HBM3",
                        .nodes = nodes, .n_nodes = 2, .rack = "rack-1",
                        .checkpoint_pvc = "lathe-checkpoints", .spec_yaml = spec, .grace = 120,
                        .max_duration = 28800, .fail_codes = codes, .n_fail_codes = 1,
                        .suspend = true, .settings = &k};
    json_t *objs = json_array();
    json_array_append_new(objs, k8s_render_service(&p));
    json_array_append_new(objs, k8s_render_job(&p));
    json_array_append_new(objs, k8s_render_admit_patch(&p));
    round_trip(objs, true);
    json_decref(objs);
    free(spec);
    spec_k8s_free(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_numbers_and_collections),
        cmocka_unit_test(test_documents),
        cmocka_unit_test(test_key_order_and_block_text),
        cmocka_unit_test(test_rendered_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
