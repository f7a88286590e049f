/* client_internal.h: what the client part's files share and nobody else
 * uses. */
#ifndef LATHE_CLIENT_INTERNAL_H
#define LATHE_CLIENT_INTERNAL_H

#include "client.h"

/* A GET whose answer body goes to fn while it arrives (job logs). With
 * follow no request timeout applies. An error status is turned into err
 * (what names the object) and nothing reaches fn. */
int client_stream_get(client *c, const char *path, bool follow, const char *what,
                      client_write_fn fn, void *ctx, client_error *err);

#endif
