/* base.h: what every part of lathe stands on.
 *
 *   - memory:      xmalloc / xcalloc / xrealloc / xstrdup (abort with a message
 *                  on exhaustion; lathe never continues on a failed allocation)
 *   - strings:     sb_* growable string buffer, text helpers, "did you mean"
 *   - diagnostics: diag_* list of errors/warnings with file:line:col, field
 *                  path, expected / found and a suggestion
 *   - units:       byte quantities (32Gi, 28GB), counts (7B), durations (8h,
 *                  1h30m, PT8H), money, RFC 3339 times; parsing and printing
 *   - files:       read a whole file with a size limit, atomic write
 *   - randomness:  rng_*, one seeded generator with an explicit state
 *   - JSON:        json_kind, the name of a value's type for messages
 *
 * Nothing here keeps global mutable state.
 */
#ifndef LATHE_BASE_H
#define LATHE_BASE_H

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- exit codes of the lathe tool (documented in docs/cli.md) ---- */
enum {
    LT_EXIT_OK = 0,
    LT_EXIT_USAGE = 1,       /* bad command line */
    LT_EXIT_INVALID = 2,     /* invalid input file or value */
    LT_EXIT_NOFIT = 3,       /* the job cannot run on what was given */
    LT_EXIT_IO = 4,          /* a file could not be read or written */
    LT_EXIT_UNAVAILABLE = 5, /* a server or engine could not be reached */
    LT_EXIT_INTERNAL = 70    /* a bug in lathe */
};

/* ---- memory ---- */
void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *fmt, va_list ap);

/* ---- growable string ---- */
typedef struct sb {
    char *buf; /* always NUL-terminated once anything was appended */
    size_t len;
    size_t cap;
} sb;

void sb_init(sb *s);
void sb_free(sb *s);
void sb_clear(sb *s);
void sb_putc(sb *s, char c);
void sb_puts(sb *s, const char *str);
void sb_putn(sb *s, const char *str, size_t n);
void sb_printf(sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(sb *s, const char *fmt, va_list ap);
const char *sb_str(const sb *s); /* "" when empty */
char *sb_take(sb *s);            /* hands the buffer over; s becomes empty */

/* ---- text ---- */
bool str_ieq(const char *a, const char *b);
bool str_starts_with(const char *s, const char *prefix);
bool str_ends_with(const char *s, const char *suffix);
bool str_iends_with(const char *s, const char *suffix);
/* Edit distance (Damerau: adjacent swaps count one), case-insensitive. */
size_t str_edit_distance(const char *a, const char *b);
/* The candidate closest to `word`, or NULL when none is close enough to be a
 * plausible misspelling (distance <= max(1, len/3)). */
const char *str_suggest(const char *word, const char *const *candidates, size_t n);
/* Split "a,b , c" into trimmed, non-empty parts. Caller frees with
 * str_list_free. Returns the count. */
size_t str_split(const char *s, char sep, char ***out);
void str_list_free(char **list, size_t n);
/* Format 6738415616 as "6,738,415,616". */
void str_thousands(char *out, size_t outsz, uint64_t v);

/* ---- diagnostics ---- */
typedef enum { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } diag_level;

typedef struct diag {
    diag_level level;
    char *file;       /* may be NULL */
    int line, col;    /* 1-based; 0 when unknown */
    char *path;       /* field path, e.g. "spec.lora.rank"; may be NULL */
    char *message;    /* what is wrong */
    char *expected;   /* may be NULL */
    char *found;      /* may be NULL */
    char *suggestion; /* may be NULL */
} diag;

typedef struct diag_list {
    diag *items;
    size_t len, cap;
    size_t errors, warnings;
} diag_list;

void diag_list_init(diag_list *d);
void diag_list_free(diag_list *d);
/* Adds a diagnostic. Strings are copied; any of them may be NULL. */
diag *diag_add(diag_list *d, diag_level level, const char *file, int line, int col,
               const char *path, const char *message);
void diag_set_expected(diag *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void diag_set_found(diag *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void diag_set_suggestion(diag *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "file:line:col: error: path: message (expected X, found Y)\n  hint: ..." */
void diag_format(const diag *x, sb *out);
void diag_print_all(const diag_list *d, void *stream /* FILE* */);

/* ---- randomness ---- */
/* xoshiro256** seeded by splitmix64, with an explicit state (rng.c). */
typedef struct rng_state {
    uint64_t s[4];
} rng_state;
void rng_seed(rng_state *r, uint64_t seed);
uint64_t rng_next(rng_state *r);
/* One splitmix64 step: advances *x and returns a well-mixed 64-bit value. */
uint64_t rng_splitmix64(uint64_t *x);

/* ---- JSON ---- */
/* What a JSON value is, for messages: "an object", "an array", "a string",
 * "an integer", "a number with a fraction", "a boolean" or "null". */
const char *json_kind(const json_t *v);

/* ---- units ---- */
/* Bytes: "32Gi", "28GB", "512Mi", "1.5TB", "1024" (bytes), "80G" (GiB, as GPU
 * vendors and Kubernetes users write it loosely... see units.c). Returns false
 * on anything else. */
bool units_parse_bytes(const char *s, double *bytes);
/* Counts: "7B", "1.5M", "500K", "70b", "32", "1e9". */
bool units_parse_count(const char *s, double *count);
/* Durations: "8h", "90m", "1h30m", "45s", "2d", "1h30m15s", "PT8H",
 * "P1DT2H", "3600" (seconds). Result in seconds, > 0. */
bool units_parse_duration(const char *s, double *seconds);
/* "1.5 GiB", "812.0 MiB" */
void units_format_bytes(char *out, size_t outsz, double bytes);
/* "8h", "1h30m", "45s", "2d3h" */
void units_format_duration(char *out, size_t outsz, double seconds);
/* "2026-11-29T21:54:00Z", "2027-01-31T09:30:00.5+02:00" (RFC 3339, UTC or
 * with an offset, fractions of a second allowed) -> seconds since the
 * epoch. False for anything else (no zone, month 13, February 30). The
 * API's times, token expiries, the audit log's --since. */
bool units_parse_time(const char *s, double *t);
/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar. */
int64_t units_days_from_civil(int64_t y, int m, int d);
#define GIB (1024.0 * 1024.0 * 1024.0)

/* ---- files ---- */
/* Reads a whole file (at most max_bytes; larger is an error). On failure
 * returns NULL and writes a message into err (size errsz). The buffer is
 * NUL-terminated; *len excludes the NUL. */
char *file_read_all(const char *path, size_t max_bytes, size_t *len, char *err, size_t errsz);
bool file_exists(const char *path);
bool dir_exists(const char *path);
/* Writes data to path atomically: a temp file beside it, fsync, rename,
 * fsync of the folder. Returns 0 or an errno value. */
int file_write_atomic(const char *path, const void *data, size_t len);
/* Removes a folder and everything in it, never following a symbolic link
 * (a link is removed, not what it points to). A missing folder is no
 * error. Returns 0, or an errno value with the path that failed in err. */
int file_remove_tree(const char *path, char *err, size_t errsz);
/* Joins a folder and a name with one '/'. Caller frees. */
char *path_join(const char *dir, const char *name);

/* ---- threads (thread.c) ---- */
/* Names the calling thread ("lathe-ctl", "k8s-watch": at most 15 bytes), as
 * `top -H` and /proc/PID/task/TID/comm show it. */
void thread_set_name(const char *name);

#endif
