/* fuzz_progress.c: libFuzzer target for the progress readers of the local
 * executor (lib/exec/exec_progress.c). A trainer's output is not ours to
 * trust: a `command` job can print anything. Every line of the input goes
 * through the `[lathe-train]` line parser (with a path buffer whose size the
 * first byte picks) and the ms-swift logging.jsonl line parser; the whole
 * input goes through the trainer_state.json reader. Each must return a
 * known kind, numbers that are unknown (-1 / NAN) or in range, and a path
 * that is terminated inside its buffer. */
#include "base/base.h"
#include "exec/exec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_point(const exec_progress *p)
{
    if (p->step < -1 || p->total_steps < -1) abort();
}

static void train_line(const char *line, size_t len, size_t pathsz)
{
    char path[300];
    memset(path, 'x', sizeof path);
    exec_progress p;
    exec_line_kind k = exec_parse_train_line(line, len, &p, pathsz ? path : NULL, pathsz);
    if (k < EXEC_LINE_NONE || k > EXEC_LINE_OTHER) abort();
    if (k == EXEC_LINE_STEP && p.step < 0) abort();
    if (pathsz && memchr(path, '\0', pathsz) == NULL) abort();
    check_point(&p);
}

static void swift_line(const char *line, size_t len)
{
    exec_progress p;
    bool ok = exec_parse_swift_line(line, len, &p);
    if (ok && (p.step < 0 || (isnan(p.loss) && isnan(p.eval_loss)))) abort(); /* a step or its evaluation */
    check_point(&p);
}

static void hf_state(const char *text, size_t len, int64_t after)
{
    exec_progress *pts;
    size_t n;
    char err[256];
    err[0] = '\0';
    if (!exec_parse_hf_state(text, len, "trainer_state.json", after, &pts, &n, err, sizeof err)) {
        if (strncmp(err, "trainer_state.json: ", 20) != 0 || pts || n) abort();
        return;
    }
    for (size_t i = 0; i < n; i++) {
        check_point(&pts[i]);
        if (pts[i].step <= after || (isnan(pts[i].loss) && isnan(pts[i].eval_loss))) abort();
    }
    free(pts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    size_t pathsz = data[0] % 40; /* 0 = no path buffer */
    int64_t after = (int64_t)(data[0] >> 4) - 2;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    for (size_t pos = 0; pos <= len;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        train_line(text + pos, end - pos, pathsz);
        swift_line(text + pos, end - pos);
        pos = end + 1;
    }
    hf_state(text, len, after);
    return 0;
}
