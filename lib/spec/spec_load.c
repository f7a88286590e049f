/* spec_load.c: loading a file: read it (size limit), parse it into YAML
 * trees (spec_yaml.c), check each document's apiVersion and kind, and hand
 * it to the decoder of its kind. Also the spec_file accessors and the
 * lookups in a loaded cluster. */
#include "spec_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* lathe.dev/v1 is the group of lathe's own CustomResourceDefinitions: a file
 * that `kubectl apply` takes is a file lathe reads. */
const char *const spec_api_versions[] = {"lathe/v1", "training.example.com/v1", "lathe.dev/v1"};
const size_t spec_n_api_versions = sizeof spec_api_versions / sizeof spec_api_versions[0];

static const char *const kind_names[] = {"LoRATrainingJob", "LoRAExperiment", "Cluster"};

const char *spec_kind_name(spec_kind k)
{
    return (unsigned)k < 3 ? kind_names[k] : "?";
}

/* The kind of a document, or false after reporting a missing / unknown one. */
static bool doc_kind(spec_dctx *c, const spec_ynode *root, spec_kind *out)
{
    const spec_ynode *k = spec_ymap_get(root, "kind");
    if (spec_yabsent(k)) {
        diag *x = spec_report(c, DIAG_ERROR, root, "the document has no kind");
        diag_set_expected(x, "kind: LoRATrainingJob, LoRAExperiment or Cluster");
        diag_set_suggestion(x, "add `kind: LoRATrainingJob` at the top");
        return false;
    }
    size_t old = spec_path_push(c, "kind");
    bool ok = false;
    if (k->kind == SPEC_YSCALAR) {
        for (size_t i = 0; i < 3 && !ok; i++)
            if (strcmp(k->text, kind_names[i]) == 0) *out = (spec_kind)i, ok = true;
    }
    if (!ok) {
        diag *x = spec_report(c, DIAG_ERROR, k, "unknown kind");
        char found[64];
        spec_ydescribe(k, found, sizeof found);
        diag_set_expected(x, "LoRATrainingJob, LoRAExperiment or Cluster");
        diag_set_found(x, "%s", found);
        const char *s = k->kind == SPEC_YSCALAR ? str_suggest(k->text, kind_names, 3) : NULL;
        if (s) diag_set_suggestion(x, "did you mean %s?", s);
    }
    spec_path_pop(c, old);
    return ok;
}

/* apiVersion must be one lathe reads; reported, but decoding goes on. */
static void doc_api_version(spec_dctx *c, const spec_ynode *root)
{
    const spec_ynode *a = spec_ymap_get(root, "apiVersion");
    size_t old = spec_path_push(c, "apiVersion");
    bool ok = false;
    if (a && a->kind == SPEC_YSCALAR)
        for (size_t i = 0; i < spec_n_api_versions; i++) ok |= !strcmp(a->text, spec_api_versions[i]);
    if (!ok) {
        diag *x = spec_report(c, DIAG_ERROR, a ? a : root,
                              a ? "unsupported apiVersion" : "the document has no apiVersion");
        diag_set_expected(x, "lathe/v1, lathe.dev/v1 or training.example.com/v1");
        if (a) {
            char found[64];
            spec_ydescribe(a, found, sizeof found);
            diag_set_found(x, "%s", found);
        }
        diag_set_suggestion(x, "write `apiVersion: lathe/v1`");
    }
    spec_path_pop(c, old);
}

static void file_add_doc(spec_file *f, spec_doc doc)
{
    if ((f->n_docs & (f->n_docs - 1)) == 0) /* 0, 1, 2, 4, ...: grow by doubling */
        f->docs = xrealloc(f->docs, (f->n_docs ? f->n_docs * 2 : 1) * sizeof *f->docs);
    f->docs[f->n_docs++] = doc;
}

static void doc_free(spec_doc *d)
{
    spec_job_free(d->job);
    spec_experiment_free(d->experiment);
    spec_cluster_free(d->cluster);
}

/* Decodes one document; keeps it only when it (and its YAML) had no error. */
static void load_doc(spec_dctx *c, const spec_ydoc *yd, spec_ystream *ys, spec_file *out)
{
    const spec_ynode *root = yd->root;
    size_t before = c->d->errors;
    if (root->kind != SPEC_YMAP) {
        diag *x = spec_report(c, DIAG_ERROR, root, "a document must be a mapping");
        diag_set_expected(x, "apiVersion, kind, metadata and spec");
        char found[64];
        spec_ydescribe(root, found, sizeof found);
        diag_set_found(x, "%s", found);
        return;
    }
    spec_kind kind;
    if (!doc_kind(c, root, &kind)) return;
    doc_api_version(c, root);
    spec_doc doc = {.kind = kind};
    switch (kind) {
    case SPEC_KIND_JOB: doc.job = spec_decode_job(c, root, yd); break;
    case SPEC_KIND_EXPERIMENT: doc.experiment = spec_decode_experiment(c, root, yd, ys); break;
    case SPEC_KIND_CLUSTER: doc.cluster = spec_decode_cluster(c, root, yd); break;
    }
    bool loaded = doc.job || doc.experiment || doc.cluster;
    if (loaded && c->d->errors == before && yd->errors == 0) file_add_doc(out, doc);
    else doc_free(&doc);
}

size_t spec_load_string(const char *name, const char *text, size_t len, spec_file *out,
                        diag_list *d)
{
    memset(out, 0, sizeof *out);
    out->path = xstrdup(name ? name : "<input>");
    diag_list local;
    diag_list_init(&local);
    if (!d) d = &local;
    size_t before = d->errors;

    spec_ystream ys;
    bool whole = spec_yaml_parse(out->path, text, len, &ys, d);
    spec_dctx c;
    spec_dctx_init(&c, out->path, d);
    for (size_t i = 0; i < ys.n_docs; i++) load_doc(&c, &ys.docs[i], &ys, out);
    if (whole && ys.n_docs == 0 && d->errors == before) {
        diag *x = diag_add(d, DIAG_ERROR, out->path, 0, 0, NULL, "the file holds no document");
        diag_set_suggestion(x, "a job file starts with `apiVersion: lathe/v1` and "
                               "`kind: LoRATrainingJob`");
    }
    spec_dctx_free(&c);
    spec_ystream_free(&ys);
    size_t errors = d->errors - before;
    diag_list_free(&local);
    return errors;
}

size_t spec_load_file(const char *path, spec_file *out, diag_list *d)
{
    char err[512];
    size_t len;
    char *text = file_read_all(path, SPEC_MAX_FILE_BYTES, &len, err, sizeof err);
    if (text) {
        size_t n = spec_load_string(path, text, len, out, d);
        free(text);
        return n;
    }
    memset(out, 0, sizeof *out);
    out->path = xstrdup(path);
    diag_list local;
    diag_list_init(&local);
    if (!d) d = &local;
    struct stat st;
    diag *x = diag_add(d, DIAG_ERROR, path, 0, 0, NULL, err);
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size > SPEC_MAX_FILE_BYTES) {
        /* read fine, refused: invalid input rather than a file error */
        diag_set_expected(x, "at most %u bytes", SPEC_MAX_FILE_BYTES);
        diag_set_suggestion(x, "a job, experiment or cluster file is a few KiB; is this the "
                               "right file?");
    } else {
        out->io_error = true;
    }
    diag_list_free(&local);
    return 1;
}

void spec_file_free(spec_file *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n_docs; i++) doc_free(&f->docs[i]);
    free(f->docs);
    free(f->path);
    memset(f, 0, sizeof *f);
}

spec_job *spec_file_job(const spec_file *f)
{
    for (size_t i = 0; i < f->n_docs; i++)
        if (f->docs[i].kind == SPEC_KIND_JOB) return f->docs[i].job;
    return NULL;
}

spec_cluster *spec_file_cluster(const spec_file *f)
{
    for (size_t i = 0; i < f->n_docs; i++)
        if (f->docs[i].kind == SPEC_KIND_CLUSTER) return f->docs[i].cluster;
    return NULL;
}
