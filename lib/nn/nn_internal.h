/* nn_internal.h: what the files of lib/nn share and nothing outside uses. */
#ifndef LATHE_NN_INTERNAL_H
#define LATHE_NN_INTERNAL_H

#include "nn/nn.h"

/* Frees the inference workspace of tr_model_forward_batch (model_batch.c);
 * tr_model_ws_free calls it. */
void tr_batch_ws_free(tr_model *m);

#endif
