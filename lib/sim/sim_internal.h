/* sim_internal.h: what the files of lib/sim share and nobody else uses:
 * one CSV line split into fields and a job appended to a trace (trace.c),
 * for the converters. */
#ifndef LATHE_SIM_INTERNAL_H
#define LATHE_SIM_INTERNAL_H

#include "base/base.h"
#include "sim.h"

typedef struct field {
    char *text; /* unquoted copy, surrounding blanks trimmed */
    int col;    /* 1-based character column where it starts */
} field;

typedef struct row {
    field *f;
    int n, cap;
} row;

/* Splits one line (without its end of line) into r's fields, tmp a scratch
 * buffer. Returns NULL, or the message of a quoting error. */
const char *sim_csv_split(const char *line, size_t len, row *r, sb *tmp);
void sim_row_free(row *r);

/* Appends a copy of *j to t's jobs, growing the array. */
void sim_trace_push(sim_trace *t, const sim_job *j);

#endif
