/* fuzz_calib.c: libFuzzer target for the memory-calibration JSONL reader
 * (est_rows_parse; `bench_estimator FILE` reads any file of that schema)
 * and, through it, the estimator on whatever shapes and settings a row can
 * hold. A malformed line is an error naming the input and its line; every
 * row that is usable must give finite, non-negative terms and a peak no
 * smaller than the largest phase's allocated bytes for the allocated
 * counter, and a finite error against its measurement. */
#include "base/base.h"
#include "plan/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_row(const est_row *row)
{
    if (!row->usable) {
        if (!row->skip_reason || !row->skip_reason[0]) abort();
        return;
    }
    if (!(row->measured_gib > 0)) abort();
    est_result r;
    est_estimate(&row->in, &est_calib_default, &r);
    double terms[] = {r.weights_quantised, r.weights_dense, r.adapter, r.gradients, r.optimizer,
                      r.activations, r.logits, r.allocated, r.reserved, r.device, r.peak};
    for (size_t i = 0; i < sizeof terms / sizeof terms[0]; i++)
        if (!isfinite(terms[i]) || terms[i] < 0) abort();
    if (r.reserved < r.allocated || r.peak < r.allocated * 0.999999) abort();
    double ape = est_row_ape(row, &est_calib_default);
    if (!isfinite(ape) || ape < 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    est_row *rows;
    size_t n;
    diag_list d;
    diag_list_init(&d);
    bool ok = est_rows_parse((const char *)data, size, "fuzz.jsonl", &rows, &n, &d);
    if (!ok && (d.errors == 0 || !d.items[0].file || d.items[0].line < 1)) abort();
    if (ok)
        for (size_t i = 0; i < n; i++) check_row(&rows[i]);
    est_rows_free(rows, n);
    diag_list_free(&d);
    return 0;
}
