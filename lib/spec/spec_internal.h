/* spec_internal.h: what the files of lib/spec share and nobody else sees.
 *
 *   - the YAML node tree (spec_yaml.c): every node keeps its line and column;
 *     aliases point at the anchored node (the tree is a DAG, never copied);
 *   - the enum tables (spec_enum.c) behind spec_*_name / spec_*_parse;
 *   - the schema-driven decoder (spec_decode.c): one table per object says,
 *     for every key, its kind, where the value goes and its range or enum,
 *     so unknown keys, wrong types and out-of-range values are reported by
 *     one mechanism, every error of a file at once;
 *   - the decoders of the three kinds (spec_job.c, spec_experiment.c,
 *     spec_cluster.c) that spec_load.c dispatches to;
 *   - what else reads the same tables: the OpenAPI schemas of the CRDs
 *     (spec_openapi.c) and the values of a struct written back as JSON
 *     (spec_values.c).
 */
#ifndef LATHE_SPEC_INTERNAL_H
#define LATHE_SPEC_INTERNAL_H

#include "spec.h"

/* ---- YAML tree ---- */
typedef enum { SPEC_YSCALAR, SPEC_YMAP, SPEC_YSEQ } spec_ykind;

typedef struct spec_ynode spec_ynode;
struct spec_ynode {
    spec_ykind kind;
    int line, col;      /* 1-based */
    bool quoted;        /* scalar written quoted, as a block, or tagged !!str */
    bool null;          /* plain "", "~" or "null": an absent value */
    bool invalid;       /* refused by the YAML layer (reported there); decoders skip it */
    char *text;         /* scalar text, NUL-terminated, never holds a NUL */
    spec_ynode **items; /* SEQ: the items; MAP: keys and values alternate */
    size_t n_items;     /* SEQ: items; MAP: 2 x pairs */
    size_t cap;
    uint64_t weight; /* nodes in this subtree with aliases expanded */
    bool open;       /* still being built (an alias to it would recurse) */
};

typedef struct spec_ydoc {
    spec_ynode *root;
    int line, col;    /* where the document starts */
    size_t errors;    /* tree errors inside it (duplicate keys ...) */
} spec_ydoc;

typedef struct spec_ystream {
    spec_ydoc *docs; /* non-empty documents, in file order */
    size_t n_docs;
    spec_ynode **all; /* every node, to free them (aliases share nodes) */
    size_t n_all, cap_all;
} spec_ystream;

/* Reads YAML text into trees, one per non-empty document. Reports refused
 * input (binary, invalid UTF-8, syntax, limits, duplicate keys) into d.
 * Returns false when reading stopped early; the documents completed before
 * stay in out. Always free out with spec_ystream_free. */
bool spec_yaml_parse(const char *file, const char *text, size_t len, spec_ystream *out,
                     diag_list *d);
void spec_ystream_free(spec_ystream *s);
/* Node allocation for trees built outside the parser (experiment overlays). */
spec_ynode *spec_ynode_new(spec_ystream *owner, spec_ykind kind, int line, int col);
/* Appends an item (SEQ), or a key then its value (MAP: two calls). */
void spec_ynode_append(spec_ynode *parent, spec_ynode *child);

/* The value of `key` in a mapping (NULL when absent, or when m is not a map). */
const spec_ynode *spec_ymap_get(const spec_ynode *m, const char *key);
/* The value of `key` in item i of a sequence (NULL when seq is not a
 * sequence that long, or the item has no such key): where to report an
 * error of entry i, such as a duplicate. */
const spec_ynode *spec_yitem_get(const spec_ynode *seq, size_t i, const char *key);
/* The key node of `key` in a mapping, for positions. */
const spec_ynode *spec_ymap_key(const spec_ynode *m, const char *key);
/* Follows a dotted path "lora.alpha" through mappings; NULL when absent. */
const spec_ynode *spec_ypath(const spec_ynode *m, const char *dotted);
/* True when the node is absent or a null scalar. */
bool spec_yabsent(const spec_ynode *n);
/* "a mapping", "a list" or the scalar's text quoted and shortened, for
 * "found ..." in messages. Writes into out (size outsz). */
void spec_ydescribe(const spec_ynode *n, char *out, size_t outsz);
/* The scalar as flow YAML text ("8", "[q_proj, v_proj]"), for naming. */
char *spec_yflow_text(const spec_ynode *n);

/* ---- enum tables ---- */
typedef struct spec_enum_entry {
    const char *name;
    int value;
    bool alias; /* accepted, but not the canonical spelling */
} spec_enum_entry;

typedef struct spec_enum_def {
    const spec_enum_entry *e;
    size_t n;
} spec_enum_def;

extern const spec_enum_def spec_enum_method, spec_enum_quant, spec_enum_precision,
    spec_enum_optimizer, spec_enum_strategy, spec_enum_data_format, spec_enum_node_state,
    spec_enum_lr_scheduler, spec_enum_preemption;

/* Case-insensitive lookup of a name or alias. */
bool spec_enum_lookup(const spec_enum_def *d, const char *s, int *out);
/* The canonical name of a value; "?" when none. */
const char *spec_enum_name(const spec_enum_def *d, int v);
/* "lora, qlora, dora, full or auto" */
void spec_enum_list(const spec_enum_def *d, sb *out);
/* The canonical name closest to s (for "did you mean"), or NULL. */
const char *spec_enum_suggest(const spec_enum_def *d, const char *s);

/* ---- schema-driven decoder ---- */
typedef struct spec_dctx {
    const char *file;
    diag_list *d;
    sb path; /* the dotted field path of the value being decoded */
    /* values that failed to decode (a hash set of node pointers), so that
     * checks across fields skip them instead of adding follow-on errors */
    const spec_ynode **bad;
    size_t n_bad, cap_bad;
} spec_dctx;

/* A context for file (not copied) reporting into d; free with
 * spec_dctx_free. */
void spec_dctx_init(spec_dctx *c, const char *file, diag_list *d);
void spec_dctx_free(spec_dctx *c);
/* True when node n was reported as invalid. */
bool spec_dctx_bad(const spec_dctx *c, const spec_ynode *n);

typedef enum {
    SF_STR,      /* char *                                  */
    SF_INT,      /* int                                     */
    SF_LONG,     /* long                                    */
    SF_I64,      /* int64_t                                 */
    SF_U64,      /* uint64_t (0 .. 2^63-1)                  */
    SF_DOUBLE,   /* double                                  */
    SF_BOOL,     /* bool                                    */
    SF_ENUM,     /* an enum stored as int (aux: spec_enum_def) */
    SF_ENUM_STR, /* char *, the canonical name of an enum value */
    SF_TOGGLE,   /* spec_toggle: true, false or auto        */
    SF_DURATION, /* double seconds: 8h, 90m, 1h30m, PT8H, 3600 */
    SF_BYTES,    /* double bytes: 32Gi, 28GB, 1024          */
    SF_COUNT,    /* double: 7B, 1.5M, 32                    */
    SF_CPU,      /* double cores: 4, "4", 500m              */
    SF_STRLIST,  /* char **, count at off_n, spec_pos * at off_pos (with SF_POS) */
    SF_KV,       /* spec_kv *, count at off_n: a mapping, or a list of {name, value} */
    SF_OBJ,      /* a nested mapping decoded into the same base (aux: spec_schema) */
    SF_LIST,     /* a list of mappings: element array at off, count at off_n */
    SF_CUSTOM,   /* decoded by fn */
    SF_IGNORE    /* a known key handled elsewhere (e.g. kind) */
} spec_ftype;

enum {
    SF_REQUIRED = 1 << 0,
    SF_MIN = 1 << 1,      /* value >= min (> min with SF_MIN_EXCL) */
    SF_MAX = 1 << 2,      /* value <= max (< max with SF_MAX_EXCL) */
    SF_MIN_EXCL = 1 << 3,
    SF_MAX_EXCL = 1 << 4,
    SF_DNS = 1 << 5,      /* SF_STR: a DNS-1123 label */
    SF_EMPTY_OK = 1 << 6, /* SF_STR: "" is allowed */
    SF_UNITS = 1 << 7,    /* SF_INT / SF_LONG: count suffixes allowed (50K) */
    SF_POS = 1 << 8       /* off_pos holds where to record the position */
};

typedef struct spec_field spec_field;
typedef struct spec_schema spec_schema;
typedef void (*spec_decode_fn)(spec_dctx *c, const spec_field *f, const spec_ynode *v,
                               void *base);

struct spec_field {
    const char *key;
    spec_ftype type;
    size_t off;     /* where the value goes, from the base */
    size_t off_n;   /* SF_STRLIST / SF_KV / SF_LIST: where the count goes */
    size_t off_pos; /* with SF_POS: a spec_pos (SF_STRLIST: a spec_pos * array) */
    unsigned flags;
    double min, max;
    const spec_enum_def *enm;  /* SF_ENUM, SF_ENUM_STR */
    const spec_schema *sub;    /* SF_OBJ, SF_LIST */
    spec_decode_fn fn;         /* SF_CUSTOM */
    const char *hint;          /* advice added to range errors */
    /* SF_CUSTOM / SF_IGNORE: the shapes the value takes, for the schemas
     * generated from these tables (spec_openapi.c); the decoder never reads
     * them. One field: the value is written like it (an argv like an
     * SF_STRLIST). Several SF_OBJ fields: a mapping of any of their shapes
     * (their keys together, none required). NULL: any value. */
    const spec_field *like;
    size_t n_like;
};

struct spec_schema {
    const spec_field *fields;
    size_t n_fields;
    size_t elem_size;          /* SF_LIST: size of one element */
    void (*init)(void *elem);  /* SF_LIST: defaults of a new element */
    /* SF_LIST: called after each element's mapping m was decoded, with the
     * element's path current, for keys the table marks SF_IGNORE */
    void (*after)(spec_dctx *c, const spec_ynode *m, void *elem);
};

/* Path handling: push returns the old length to pop back to. */
size_t spec_path_push(spec_dctx *c, const char *key);
size_t spec_path_push_index(spec_dctx *c, size_t i);
void spec_path_pop(spec_dctx *c, size_t old_len);

/* A diagnostic at node n (or the context's position when n is NULL) with
 * the current path. printf-style message. */
diag *spec_report(spec_dctx *c, diag_level level, const spec_ynode *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Decodes mapping m (written after key node `key_at`, for "missing" errors)
 * field by field into base. Unknown keys, wrong kinds and ranges are all
 * reported; decoding goes on after an error. A non-mapping is reported. */
void spec_decode_map(spec_dctx *c, const spec_ynode *m, const spec_ynode *key_at,
                     const spec_schema *s, void *base);
/* What a field expects, in words ("an integer from 1 to 1024"), as the
 * decoder's messages say it. */
void spec_field_expected(const spec_field *f, sb *out);

/* Decodes one value by its field description. Returns false on an error. */
bool spec_decode_field(spec_dctx *c, const spec_field *f, const spec_ynode *v, void *base);

/* Scalar parsers shared with custom decoders: whole-text integers and
 * finite decimals only. */
bool spec_parse_i64(const char *s, int64_t *out);
bool spec_parse_double(const char *s, double *out);

/* DNS-1123 label check; on failure fixed gets a corrected name (or ""). */
bool spec_dns_label(const char *s, char *fixed, size_t fixedsz);

/* The values base holds, as JSON the decoder takes again (spec_values.c):
 * only those that differ from dflt (every value when dflt is NULL; NULL
 * strings and empty lists never). SF_CUSTOM / SF_IGNORE are skipped.
 * Caller decrefs. */
json_t *spec_schema_values(const spec_schema *s, const void *base, const void *dflt);

/* Every dotted leaf path of a schema ("lora.rank", ...), for matrix paths.
 * Caller frees with str_list_free. */
size_t spec_schema_leaves(const spec_schema *s, char ***out);
/* The field a dotted path names in a schema, or NULL; *is_obj when the path
 * ends at a section rather than a value. */
const spec_field *spec_schema_find(const spec_schema *s, const char *dotted, bool *is_obj);

/* ---- kinds ---- */
extern const char *const spec_api_versions[];
extern const size_t spec_n_api_versions;

/* The schema of a job's spec body (spec.* fields), for experiments. */
extern const spec_schema spec_job_body_schema;
/* The whole documents: apiVersion, kind, metadata, spec (spec_openapi.c
 * and its test walk them). */
extern const spec_schema spec_job_schema, spec_experiment_schema;

/* Decodes a whole LoRATrainingJob document. Returns NULL when the document
 * had errors (all reported). */
spec_job *spec_decode_job(spec_dctx *c, const spec_ynode *root, const spec_ydoc *doc);
/* Decodes a job spec body at the current path into j (defaults already set):
 * the shared core of jobs and experiment variants. */
void spec_decode_job_body(spec_dctx *c, const spec_ynode *body, const spec_ynode *key_at,
                          spec_job *j);
spec_experiment *spec_decode_experiment(spec_dctx *c, const spec_ynode *root,
                                        const spec_ydoc *doc, spec_ystream *owner);
spec_cluster *spec_decode_cluster(spec_dctx *c, const spec_ynode *root, const spec_ydoc *doc);

void spec_experiment_free(spec_experiment *e);
void spec_cluster_free(spec_cluster *c);

/* ---- the ServerConfig's `policy:` section (spec_policy.c) ---- */
/* Its table; offsets into spec_server (the decoder's SF_OBJ keeps the base). */
extern const spec_schema spec_server_policy_schema;
void spec_policy_defaults(spec_policy *p);
void spec_policy_free(spec_policy *p);
/* The checks across its fields (no team twice); pn is the `policy:` node,
 * the context's path at it. */
void spec_policy_check(spec_dctx *c, const spec_ynode *pn, const spec_policy *p);

/* Deep copies and frees of key/value lists and string lists. */
spec_kv *spec_kv_clone(const spec_kv *kv, size_t n);
void spec_kv_free(spec_kv *kv, size_t n);
char **spec_strv_clone(char *const *v, size_t n);

#endif
