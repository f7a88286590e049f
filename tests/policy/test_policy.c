/* test_policy.c: the policy part (lib/policy): paths resolved as the
 * kernel would (links, "..", loops, a missing tail, a root that is a link),
 * the component-wise prefix, and the compiled policy's checks of a job's
 * paths, commands, images and users, each refusal naming the field, the
 * path, what it resolved to and the rule. Every case builds its own tree
 * under a temporary folder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "policy/policy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmp[64];

/* tmp + "/" + rel; caller frees */
static char *at(const char *rel)
{
    return xasprintf("%s/%s", tmp, rel);
}

static void mkdir_at(const char *rel)
{
    char *p = at(rel);
    assert_int_equal(mkdir(p, 0755), 0);
    free(p);
}

static void touch_at(const char *rel)
{
    char *p = at(rel);
    assert_int_equal(file_write_atomic(p, "x", 1), 0);
    free(p);
}

static void link_at(const char *target, const char *rel)
{
    char *p = at(rel);
    assert_int_equal(symlink(target, p), 0);
    free(p);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/lathe-policy-XXXXXX");
    if (!mkdtemp(tmp)) return -1;
    /* mkdtemp's folder may sit under a link (/tmp on some systems): use
     * the resolved name so that expectations are exact */
    char *real = realpath(tmp, NULL);
    snprintf(tmp, sizeof tmp, "%s", real);
    free(real);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char err[256];
    return file_remove_tree(tmp, err, sizeof err) == 0 ? 0 : -1;
}

/* resolve and compare with tmp-relative expectation */
static void expect_resolved(const char *path, const char *want_rel)
{
    char *out = NULL, why[256];
    policy_rc rc = policy_resolve(tmp, path, &out, why, sizeof why);
    if (rc != POLICY_OK) fprintf(stderr, "%s: %s\n", path, why);
    assert_int_equal(rc, POLICY_OK);
    char *want = want_rel[0] == '/' ? xstrdup(want_rel) : at(want_rel);
    assert_string_equal(out, want);
    free(want);
    free(out);
}

/* ---- paths ---- */
static void test_normalize(void **state)
{
    (void)state;
    struct {
        const char *base, *path, *want;
    } cases[] = {
        {NULL, "/", "/"},
        {NULL, "/a/b", "/a/b"},
        {NULL, "//a///b/", "/a/b"},
        {NULL, "/a/./b/.", "/a/b"},
        {NULL, "/a/../../..", "/"},
        {NULL, "/a/b/../c", "/a/c"},
        {"/srv", "x/y", "/srv/x/y"},
        {"/srv/", "../etc", "/etc"},
        {"/", ".", "/"},
        {NULL, "/..a/.b/...", "/..a/.b/..."},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *n = policy_normalize(cases[i].base, cases[i].path);
        assert_non_null(n);
        assert_string_equal(n, cases[i].want);
        char *again = policy_normalize(NULL, n); /* idempotent */
        assert_string_equal(again, n);
        free(again);
        free(n);
    }
    assert_null(policy_normalize("/srv", ""));
    assert_null(policy_normalize(NULL, "relative"));
    assert_null(policy_normalize("relative", "x"));
    assert_null(policy_normalize("/srv", "a\nb"));
    assert_null(policy_normalize(NULL, NULL));
}

static void test_under(void **state)
{
    (void)state;
    assert_true(policy_path_under("/data", "/data"));
    assert_true(policy_path_under("/data/x", "/data"));
    assert_false(policy_path_under("/database", "/data"));
    assert_false(policy_path_under("/dat", "/data"));
    assert_true(policy_path_under("/anything", "/"));
    assert_true(policy_path_under("/data/x", "/data/"));
    assert_false(policy_path_under("data/x", "/data"));
    assert_false(policy_path_under("/data", "/data/x"));
    assert_string_equal(policy_rc_name(POLICY_E_DENIED), "denied");
    assert_string_equal(policy_rc_name(POLICY_E_OUTSIDE), "outside");
    assert_string_equal(policy_rc_name(POLICY_OK), "ok");
}

static void test_resolve(void **state)
{
    (void)state;
    mkdir_at("r");
    mkdir_at("r/data");
    mkdir_at("r/data/sub");
    touch_at("r/data/sub/f.jsonl");
    mkdir_at("r/other");
    touch_at("r/other/secret");
    link_at("../other", "r/data/up");           /* relative link out */
    link_at("sub/f.jsonl", "r/data/alias");     /* relative link inside */
    char *abs_other = at("r/other/secret");
    link_at(abs_other, "r/data/abs");           /* absolute link out */
    free(abs_other);
    link_at("loop-b", "r/data/loop-a");         /* a loop */
    link_at("loop-a", "r/data/loop-b");
    link_at("data", "r/data-link");             /* a root that is a link */

    expect_resolved("r/data/sub/f.jsonl", "r/data/sub/f.jsonl");
    expect_resolved("r/data/alias", "r/data/sub/f.jsonl");
    expect_resolved("r/data/up/secret", "r/other/secret");
    expect_resolved("r/data/abs", "r/other/secret");
    expect_resolved("r/data-link/sub", "r/data/sub");
    /* ".." after a link is the parent of the link's target, as the kernel does */
    expect_resolved("r/data/up/../data/sub", "r/data/sub");
    /* a file in the middle: the rest cannot exist, kept as written */
    expect_resolved("r/data/alias/x", "r/data/sub/f.jsonl/x");
    /* lexical ".." escaping */
    expect_resolved("r/data/../other/secret", "r/other/secret");
    /* a tail that does not exist yet: appended, normalised */
    expect_resolved("r/data/new/./later/../file", "r/data/new/file");
    expect_resolved("r/data-link/new", "r/data/new");
    /* ".." from the missing part back into what exists: links are followed again */
    expect_resolved("r/data/new/../up/secret", "r/other/secret");
    expect_resolved("r/data/new/deeper/../../alias", "r/data/sub/f.jsonl");
    /* absolute input ignores the base */
    expect_resolved("/", "/");

    char *out = (char *)1, why[256];
    assert_int_equal(policy_resolve(tmp, "r/data/loop-a/x", &out, why, sizeof why),
                     POLICY_E_INVALID);
    assert_null(out);
    assert_non_null(strstr(why, "a loop of symbolic links"));
    assert_int_equal(policy_resolve(tmp, "", &out, why, sizeof why), POLICY_E_INVALID);
    assert_non_null(strstr(why, "empty"));
    assert_int_equal(policy_resolve(NULL, "rel", &out, why, sizeof why), POLICY_E_INVALID);
    assert_int_equal(policy_resolve(tmp, "a\tb", &out, why, sizeof why), POLICY_E_INVALID);
    char *lng = xcalloc(5000, 1);
    memset(lng, 'a', 4999);
    lng[0] = '/';
    assert_int_equal(policy_resolve(tmp, lng, &out, why, sizeof why), POLICY_E_INVALID);
    free(lng);
}

/* A folder the server cannot search is an I/O refusal, never "missing".
 * Root passes every permission check: as root the check runs in a child
 * that has become nobody (65534). */
static void test_resolve_eacces(void **state)
{
    (void)state;
    mkdir_at("closed");
    touch_at("closed/f");
    char *p = at("closed");
    assert_int_equal(chmod(p, 0), 0);
    assert_int_equal(chmod(tmp, 0755), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
        char *out = NULL, why[256];
        policy_rc rc = policy_resolve(tmp, "closed/f", &out, why, sizeof why);
        _exit(rc == POLICY_E_IO && strstr(why, "permission denied") && !out ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_int_equal(chmod(p, 0755), 0);
    free(p);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- the compiled policy ---- */

/* The tree of the rule tests, under tmp:
 *   data/               the server's data folder (lathe.db, jobs/1, jobs/2)
 *   srv/models/m1       a model
 *   srv/data/team-a/    team-a's data: d.jsonl, evil -> ../team-b/secret.jsonl,
 *                       db -> TMP/data/lathe.db, loop -> loop
 *   srv/data/team-ab/   a sibling whose name starts like team-a's
 *   srv/data/team-b/    secret.jsonl
 *   srv/database/x      beside srv/data
 *   srv/rootlink        -> data (a root that is itself a link)
 *   srv/progs/train.sh  a program
 */
static void make_tree(void)
{
    mkdir_at("data");
    touch_at("data/lathe.db");
    mkdir_at("data/jobs");
    mkdir_at("data/jobs/1");
    touch_at("data/jobs/1/ckpt");
    mkdir_at("data/jobs/2");
    touch_at("data/jobs/2/x");
    mkdir_at("srv");
    mkdir_at("srv/models");
    mkdir_at("srv/models/m1");
    mkdir_at("srv/data");
    mkdir_at("srv/data/team-a");
    mkdir_at("srv/data/team-ab");
    mkdir_at("srv/data/team-b");
    mkdir_at("srv/database");
    mkdir_at("srv/progs");
    touch_at("srv/data/team-a/d.jsonl");
    touch_at("srv/data/team-ab/x.jsonl");
    touch_at("srv/data/team-b/secret.jsonl");
    touch_at("srv/database/x");
    touch_at("srv/progs/train.sh");
    char *prog = at("srv/progs/train.sh");
    assert_int_equal(chmod(prog, 0755), 0);
    free(prog);
    link_at("../team-b/secret.jsonl", "srv/data/team-a/evil");
    char *db = at("data/lathe.db");
    link_at(db, "srv/data/team-a/db");
    free(db);
    link_at("loop", "srv/data/team-a/loop");
    link_at("data", "srv/rootlink");
}

static char *roots_a[] = {"srv/data/team-a"};
static char *roots_b[] = {"srv/data/team-b"};
static char *roots_c[] = {"srv/rootlink"};
static char *roots_models[] = {"srv/models"};
static char *roots_progs[] = {"srv/progs"};

/* everyone: models; team-a: its data; team-b: its data, no commands;
 * team-c: the linked root */
static void make_spec(spec_policy *sp, spec_policy_team *teams)
{
    memset(sp, 0, sizeof *sp);
    sp->sandbox.processes = 4096;
    sp->sandbox.open_files = 65536;
    sp->all.roots[SPEC_ROOT_MODELS] = roots_models;
    sp->all.n_roots[SPEC_ROOT_MODELS] = 1;
    sp->all.roots[SPEC_ROOT_PROGRAMS] = roots_progs;
    sp->all.n_roots[SPEC_ROOT_PROGRAMS] = 1;
    memset(teams, 0, 3 * sizeof *teams);
    teams[0].team = "team-a";
    teams[0].rules.roots[SPEC_ROOT_DATA] = roots_a;
    teams[0].rules.n_roots[SPEC_ROOT_DATA] = 1;
    teams[1].team = "team-b";
    teams[1].rules.roots[SPEC_ROOT_DATA] = roots_b;
    teams[1].rules.n_roots[SPEC_ROOT_DATA] = 1;
    teams[1].rules.commands = TOGGLE_OFF;
    teams[2].team = "team-c";
    teams[2].rules.roots[SPEC_ROOT_DATA] = roots_c;
    teams[2].rules.n_roots[SPEC_ROOT_DATA] = 1;
    sp->teams = teams;
    sp->n_teams = 3;
}

static policy *local_policy(const spec_policy *sp, char **data_dir, char **jobs_dir)
{
    *data_dir = at("data");
    *jobs_dir = at("data/jobs");
    policy_ctx ctx = {.config_dir = tmp, .data_dir = *data_dir, .jobs_dir = *jobs_dir,
                      .cwd = tmp, .local = true, .as_root = false};
    char err[512];
    policy *p = policy_new(sp, &ctx, err, sizeof err);
    if (!p) fprintf(stderr, "policy_new: %s\n", err);
    assert_non_null(p);
    return p;
}

/* The tree of make_tree with the three teams' rules of make_spec, compiled
 * for a local server; what test_check_path and test_check_job start from. */
typedef struct teams_fx {
    spec_policy sp;
    spec_policy_team teams[3];
    char *data_dir, *jobs_dir;
    policy *p;
} teams_fx;

static policy *teams_policy(teams_fx *t)
{
    make_tree();
    make_spec(&t->sp, t->teams);
    t->p = local_policy(&t->sp, &t->data_dir, &t->jobs_dir);
    return t->p;
}

static void teams_policy_free(teams_fx *t)
{
    policy_free(t->p);
    free(t->data_dir);
    free(t->jobs_dir);
}

/* One check: its result, and a part of its message (NULL: none expected). */
static void expect_path(const policy *p, const char *team, spec_root_kind kind, const char *path,
                         const char *own_rel, policy_rc want, const char *part)
{
    policy_verdict v;
    char *own = own_rel ? at(own_rel) : NULL;
    policy_rc rc = policy_check_path(p, policy_team(p, team), kind, "trainingData.datasetPath",
                                     path, own, &v);
    if (rc != want) fprintf(stderr, "%s: %s (%s)\n", path, v.message, policy_rc_name(rc));
    assert_int_equal(rc, want);
    assert_int_equal(v.rc, want);
    if (part) {
        if (!strstr(v.message, part)) fprintf(stderr, "message: %s\n", v.message);
        assert_non_null(strstr(v.message, part));
    }
    if (want != POLICY_OK) assert_true(strncmp(v.message, "trainingData.datasetPath: ", 26) == 0);
    if (want != POLICY_OK) assert_true(v.fix[0] != '\0');
    policy_verdict_free(&v);
    free(own);
}

static void test_check_path(void **state)
{
    (void)state;
    teams_fx t;
    policy *p = teams_policy(&t);

    /* the compiled rules: everyone's roots in every team's, resolved */
    const policy_rules *a = policy_team(p, "team-a");
    assert_string_equal(a->team, "team-a");
    assert_int_equal(a->n_roots[SPEC_ROOT_MODELS], 1);
    char *want = at("srv/models");
    assert_string_equal(a->roots[SPEC_ROOT_MODELS][0], want);
    free(want);
    const policy_rules *c = policy_team(p, "team-c");
    want = at("srv/data"); /* the linked root, by what it points to */
    assert_string_equal(c->roots[SPEC_ROOT_DATA][0], want);
    free(want);
    assert_null(policy_team(p, "nobody-team")->team); /* everyone's */
    assert_true(policy_team(p, NULL) == policy_team(p, "nobody-team"));
    assert_true(policy_spec(p) == &t.sp);
    assert_string_equal(policy_context(p)->data_dir, t.data_dir);
    assert_true(a->commands);
    assert_false(policy_team(p, "team-b")->commands);
    assert_int_equal(a->uid, -1); /* not as root: the server's own user */

    expect_path(p, "team-a", SPEC_ROOT_DATA, "srv/data/team-a/d.jsonl", NULL, POLICY_OK, NULL);
    /* a link into another team's folder */
    expect_path(p, "team-a", SPEC_ROOT_DATA, "srv/data/team-a/evil", NULL, POLICY_E_OUTSIDE,
                 "team-b/secret.jsonl, which is outside every data root allowed for team team-a");
    /* ".." out of the root */
    expect_path(p, "team-a", SPEC_ROOT_DATA, "srv/data/team-a/../team-b/secret.jsonl", NULL,
                 POLICY_E_OUTSIDE, "outside every data root");
    /* a sibling whose name starts with the root's ("/data" vs "/database") */
    expect_path(p, "team-a", SPEC_ROOT_DATA, "srv/data/team-ab/x.jsonl", NULL, POLICY_E_OUTSIDE,
                 NULL);
    expect_path(p, "team-c", SPEC_ROOT_DATA, "srv/database/x", NULL, POLICY_E_OUTSIDE, NULL);
    /* a root that is a link: reached by either name */
    expect_path(p, "team-c", SPEC_ROOT_DATA, "srv/rootlink/team-a/d.jsonl", NULL, POLICY_OK,
                 NULL);
    expect_path(p, "team-c", SPEC_ROOT_DATA, "srv/data/team-b/secret.jsonl", NULL, POLICY_OK,
                 NULL);
    /* a link into the server's data folder, and the folder itself */
    expect_path(p, "team-a", SPEC_ROOT_DATA, "srv/data/team-a/db", NULL, POLICY_E_DENIED,
                 "inside the server's data folder");
    char *abs_db = at("data/lathe.db");
    expect_path(p, "team-c", SPEC_ROOT_DATA, abs_db, NULL, POLICY_E_DENIED,
                 "inside the server's data folder");
    free(abs_db);
    /* another job's folder; the job's own */
    expect_path(p, "team-a", SPEC_ROOT_DATA, "data/jobs/2/x", "data/jobs/1", POLICY_E_DENIED,
                 "inside another job's folder");
    expect_path(p, "team-a", SPEC_ROOT_DATA, "data/jobs/1/ckpt", "data/jobs/1", POLICY_OK,
                 NULL);
    expect_path(p, "team-a", SPEC_ROOT_DATA, "data/jobs/1/ckpt", NULL, POLICY_E_DENIED,
                 "another job's folder");
    /* a tail that does not exist yet */
    expect_path(p, "team-a", SPEC_ROOT_DATA, "srv/data/team-a/new/later.jsonl", NULL, POLICY_OK,
                 NULL);
    expect_path(p, "team-a", SPEC_ROOT_DATA, "srv/data/team-a/loop", NULL, POLICY_E_INVALID,
                 "a loop of symbolic links");
    /* relative paths start in the working folder; absolute ones too */
    char *abs_ok = at("srv/data/team-a/./d.jsonl");
    expect_path(p, "team-a", SPEC_ROOT_DATA, abs_ok, NULL, POLICY_OK, NULL);
    free(abs_ok);
    /* a team without an entry: everyone's rules, no data root */
    expect_path(p, "team-z", SPEC_ROOT_DATA, "srv/data/team-a/d.jsonl", NULL, POLICY_E_OUTSIDE,
                 "allows none");
    expect_path(p, "team-z", SPEC_ROOT_MODELS, "srv/models/m1", NULL, POLICY_OK, NULL);

    teams_policy_free(&t);
}

static char *diags(const diag_list *d)
{
    sb out;
    sb_init(&out);
    for (size_t i = 0; i < d->len; i++) {
        diag_format(&d->items[i], &out);
        sb_putc(&out, '\n');
    }
    return sb_take(&out);
}

/* policy_check_job on a job of team: its errors, formatted (NULL: none). */
static char *check_job(const policy *p, const char *team, spec_job *j, size_t want)
{
    diag_list d;
    diag_list_init(&d);
    size_t n = policy_check_job(p, team, j, "job.yaml", NULL, &d);
    char *msg = diags(&d);
    if (n != want) fprintf(stderr, "%s", msg);
    assert_int_equal(n, want);
    assert_int_equal(d.errors, want);
    diag_list_free(&d);
    return msg;
}

static void set_str(char **slot, const char *v)
{
    free(*slot);
    *slot = v ? xstrdup(v) : NULL;
}

static void set_command(spec_job *j, const char *a0, const char *a1)
{
    str_list_free(j->trainer.command, j->trainer.n_command);
    j->trainer.command = xcalloc(2, sizeof *j->trainer.command);
    j->trainer.command[0] = xstrdup(a0);
    j->trainer.n_command = 1;
    if (a1) j->trainer.command[j->trainer.n_command++] = xstrdup(a1);
}

static void test_check_job(void **state)
{
    (void)state;
    teams_fx t;
    policy *p = teams_policy(&t);
    spec_job *j = spec_job_new_default();
    set_str(&j->base_model.path, "srv/models/m1");
    set_str(&j->training_data.dataset_path, "srv/data/team-a/d.jsonl");
    free(check_job(p, "team-a", j, 0));

    /* each field at its position, with the rule, what it found and a fix */
    j->training_data.pos_dataset_path = (spec_pos){7, 18};
    set_str(&j->training_data.dataset_path, "srv/data/team-a/evil");
    set_str(&j->training_data.eval_path, "data/lathe.db");
    set_str(&j->base_model.path, "srv/data/team-a/d.jsonl");
    char *msg = check_job(p, "team-a", j, 3);
    assert_non_null(strstr(msg, "job.yaml:7:18: error: spec.trainingData.datasetPath: "
                                "srv/data/team-a/evil resolves to "));
    assert_non_null(strstr(msg, "expected a path under a data root: "));
    assert_non_null(strstr(msg, "team-b/secret.jsonl)"));
    assert_non_null(strstr(msg, "trainingData.evalDatasetPath: data/lathe.db resolves to"));
    assert_non_null(strstr(msg, "inside the server's data folder"));
    assert_non_null(strstr(msg, "baseModel.path: srv/data/team-a/d.jsonl resolves to"));
    assert_non_null(strstr(msg, "outside every models root"));
    assert_non_null(strstr(msg, "hint: "));
    free(msg);
    set_str(&j->training_data.dataset_path, "srv/data/team-a/d.jsonl");
    set_str(&j->training_data.eval_path, NULL);
    set_str(&j->base_model.path, NULL);

    /* trainer.command: system programs, the programs root, names in the
     * system folders only, and a team without commands */
    set_command(j, "/bin/cat", "srv/data/team-a/d.jsonl");
    free(check_job(p, "team-a", j, 0));
    set_command(j, "cat", NULL);
    free(check_job(p, "team-a", j, 0));
    char *prog = at("srv/progs/train.sh");
    set_command(j, prog, NULL);
    free(check_job(p, "team-a", j, 0));
    set_str(&j->training_data.dataset_path, "srv/data/team-b/secret.jsonl");
    msg = check_job(p, "team-b", j, 1);
    set_str(&j->training_data.dataset_path, "srv/data/team-a/d.jsonl");
    assert_non_null(strstr(msg, "trainer.command: team team-b may not run its own programs"));
    assert_non_null(strstr(msg, "commands: false"));
    free(msg);
    free(prog);
    prog = at("srv/data/team-a/d.jsonl");
    set_command(j, prog, NULL);
    msg = check_job(p, "team-a", j, 1);
    assert_non_null(strstr(msg, "trainer.command: "));
    assert_non_null(strstr(msg, "outside every programs root"));
    assert_non_null(strstr(msg, "/usr, /bin"));
    free(msg);
    free(prog);
    set_command(j, "no-such-program-lathe-test", NULL);
    msg = check_job(p, "team-a", j, 1);
    assert_non_null(strstr(msg, "the program \"no-such-program-lathe-test\" is in none of the "
                                "system folders"));
    free(msg);
    set_command(j, "srv/progs/train.sh", NULL); /* a relative path: from the working folder */
    free(check_job(p, "team-a", j, 0));
    /* a local executor ignores images */
    set_str(&j->trainer.image, "evil/image:1");
    free(check_job(p, "team-a", j, 0));

    spec_job_free(j);
    teams_policy_free(&t);
}

/* Cluster paths: normalised only, the engine's volumes as roots, images. */
static void test_cluster(void **state)
{
    (void)state;
    char *images_all[] = {"registry.example.com/trainers/*"};
    char *images_a[] = {"team-a/*:v?"};
    spec_policy sp;
    spec_policy_team teams[3];
    make_spec(&sp, teams);
    sp.all.roots[SPEC_ROOT_MODELS] = NULL;
    sp.all.n_roots[SPEC_ROOT_MODELS] = 0;
    sp.all.images = images_all;
    sp.all.n_images = 1;
    teams[0].rules.images = images_a;
    teams[0].rules.n_images = 1;
    teams[0].rules.roots[SPEC_ROOT_DATA] = NULL;
    teams[0].rules.n_roots[SPEC_ROOT_DATA] = 0;
    policy_ctx ctx = {.config_dir = "/etc/lathe", .data_dir = "/var/lib/lathe",
                      .local = false, .as_root = false, .engine_image = "lathe:1.0",
                      .engine_roots = {[SPEC_ROOT_MODELS] = {"/models", "/checkpoints"},
                                       [SPEC_ROOT_DATA] = {"/data"}}};
    char err[512];
    policy *p = policy_new(&sp, &ctx, err, sizeof err);
    assert_non_null(p);
    const policy_rules *a = policy_team(p, "team-a");
    assert_int_equal(a->n_roots[SPEC_ROOT_MODELS], 2);
    assert_string_equal(a->roots[SPEC_ROOT_DATA][0], "/data");
    /* team-b's relative root is against the config's folder */
    assert_string_equal(policy_team(p, "team-b")->roots[SPEC_ROOT_DATA][1],
                        "/etc/lathe/srv/data/team-b");

    spec_job *j = spec_job_new_default();
    set_str(&j->base_model.path, "/models/qwen");
    set_str(&j->training_data.dataset_path, "/data/team-a/train.jsonl");
    free(check_job(p, "team-a", j, 0));
    set_str(&j->training_data.dataset_path, "/data/../etc/passwd");
    char *msg = check_job(p, "team-a", j, 1);
    assert_non_null(strstr(msg, "resolves to /etc/passwd"));
    free(msg);
    set_str(&j->training_data.dataset_path, "/database/x");
    free(check_job(p, "team-a", j, 1));
    set_str(&j->training_data.dataset_path, "/data/x");

    /* images: the team's and everyone's patterns; none = the engine's own */
    assert_true(policy_image_allowed(a, "registry.example.com/trainers/x:1"));
    assert_true(policy_image_allowed(a, "registry.example.com/trainers/sub/x:1")); /* no FNM_PATHNAME */
    assert_true(policy_image_allowed(a, "team-a/trainer:v2"));
    assert_false(policy_image_allowed(a, "team-a/trainer:v10"));
    assert_false(policy_image_allowed(a, "registry.example.com/other/x"));
    assert_false(policy_image_allowed(a, NULL));
    assert_false(policy_image_allowed(policy_team(p, "team-b"), "team-a/trainer:v2"));
    set_str(&j->trainer.image, "team-a/trainer:v2");
    free(check_job(p, "team-a", j, 0));
    msg = check_job(p, "team-b", j, 1);
    assert_non_null(strstr(msg, "trainer.image: the image team-a/trainer:v2 matches none of the "
                                "images allowed for team team-b"));
    free(msg);
    set_str(&j->trainer.image, NULL); /* the engine's image */
    free(check_job(p, "team-b", j, 0));
    set_str(&j->trainer.image, "lathe:1.0"); /* the same, by its name */
    free(check_job(p, "team-b", j, 0));
    set_str(&j->trainer.image, "lathe:1.1");
    free(check_job(p, "team-b", j, 1));
    set_str(&j->trainer.image, NULL);
    /* commands are checked, programs are the image's */
    set_command(j, "/opt/in-image/train", NULL);
    free(check_job(p, "team-a", j, 0));
    free(check_job(p, "team-b", j, 1));
    spec_job_free(j);
    policy_free(p);

    /* no images configured: only the engine's */
    sp.all.n_images = 0;
    teams[0].rules.n_images = 0;
    p = policy_new(&sp, &ctx, err, sizeof err);
    assert_non_null(p);
    j = spec_job_new_default();
    set_str(&j->training_data.dataset_path, "/data/x");
    set_str(&j->trainer.image, "any/image");
    msg = check_job(p, "team-a", j, 1);
    assert_non_null(strstr(msg, "only the engine's own trainer image runs"));
    free(msg);
    spec_job_free(j);
    policy_free(p);
}

/* Users and groups: numbers, names, unknown names, root without allowRoot,
 * and a server that is not root. */
static void test_users(void **state)
{
    (void)state;
    spec_policy sp;
    spec_policy_team teams[3];
    make_spec(&sp, teams);
    for (int i = 0; i < 3; i++) teams[i].rules.n_roots[SPEC_ROOT_DATA] = 0;
    sp.all.n_roots[SPEC_ROOT_MODELS] = sp.all.n_roots[SPEC_ROOT_PROGRAMS] = 0;
    policy_ctx ctx = {.config_dir = "/", .local = false, .as_root = true};
    char err[512];

    teams[0].user = "1234";
    teams[1].user = "root";
    teams[1].group = "4321";
    policy *p = policy_new(&sp, &ctx, err, sizeof err);
    assert_null(p);
    assert_non_null(strstr(err, "policy.teams[1] (team team-b): trainers would run as uid 0 "
                                "(root)"));
    assert_non_null(strstr(err, "allowRoot"));
    sp.sandbox.allow_root = true;
    p = policy_new(&sp, &ctx, err, sizeof err);
    assert_non_null(p);
    const policy_rules *a = policy_team(p, "team-a"), *b = policy_team(p, "team-b");
    assert_int_equal(a->uid, 1234);
    assert_int_equal(a->gid, policy_team(p, NULL)->gid); /* no passwd entry: the default group */
    assert_string_equal(a->user, "1234");
    assert_int_equal(b->uid, 0);
    assert_int_equal(b->gid, 4321);
    /* no user: the sandbox's default (nobody, 65534 where unknown) */
    const policy_rules *c = policy_team(p, "team-c");
    assert_true(c->uid > 0);
    assert_int_equal(c->uid, policy_team(p, NULL)->uid);
    assert_string_equal(c->user, "nobody");
    policy_free(p);
    sp.sandbox.allow_root = false;

    teams[1].user = "no-such-user-lathe-test";
    p = policy_new(&sp, &ctx, err, sizeof err);
    assert_null(p);
    assert_non_null(strstr(err, "policy.teams[1] (team team-b).user: no user "
                                "\"no-such-user-lathe-test\" on this machine"));
    teams[1].user = NULL;
    teams[1].group = "no-such-group-lathe-test";
    p = policy_new(&sp, &ctx, err, sizeof err);
    assert_null(p);
    assert_non_null(strstr(err, "no group \"no-such-group-lathe-test\""));
    teams[1].group = NULL;

    /* the default user as configured, by number */
    sp.sandbox.user = "2000";
    sp.sandbox.group = "2001";
    p = policy_new(&sp, &ctx, err, sizeof err);
    assert_non_null(p);
    assert_int_equal(policy_team(p, "team-c")->uid, 2000);
    assert_int_equal(policy_team(p, "team-c")->gid, 2001);
    assert_int_equal(policy_team(p, "team-a")->gid, 2001);
    policy_free(p);
    sp.sandbox.user = "0";
    p = policy_new(&sp, &ctx, err, sizeof err);
    assert_null(p);
    assert_non_null(strstr(err, "policy.sandbox: trainers would run as uid 0"));
    sp.sandbox.user = sp.sandbox.group = NULL;

    /* not root: only the server's own user may be named; trainers run as it */
    ctx.as_root = false;
    p = policy_new(&sp, &ctx, err, sizeof err);
    if (geteuid() == 1234) {
        assert_non_null(p);
        policy_free(p);
    } else {
        assert_null(p);
        assert_non_null(strstr(err, "policy.teams[0] (team team-a).user: \"1234\" is not the "
                                    "server's own user"));
        assert_non_null(strstr(err, "must run as root to switch"));
    }
    char own[32];
    snprintf(own, sizeof own, "%lld", (long long)geteuid());
    teams[0].user = own;
    p = policy_new(&sp, &ctx, err, sizeof err);
    assert_non_null(p);
    assert_int_equal(policy_team(p, "team-a")->uid, -1);
    assert_int_equal(policy_team(p, "team-a")->gid, -1);
    assert_int_equal(policy_team(p, NULL)->uid, -1);
    policy_free(p);

    /* no spec at all: every default */
    p = policy_new(NULL, &ctx, err, sizeof err);
    assert_non_null(p);
    assert_int_equal(policy_spec(p)->sandbox.mode, SPEC_SANDBOX_AUTO);
    assert_int_equal(policy_spec(p)->sandbox.processes, 4096);
    assert_true(policy_team(p, "x")->commands);
    assert_int_equal(policy_team(p, "x")->n_roots[SPEC_ROOT_DATA], 0);
    policy_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_under),
        cmocka_unit_test_setup_teardown(test_resolve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resolve_eacces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_job, setup, teardown),
        cmocka_unit_test(test_cluster),
        cmocka_unit_test(test_users),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
