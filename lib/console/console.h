/* console.h: the web console's files (docs/console.md), built into lathe:
 * lib/console/web (the pages, in plain JavaScript modules: no framework, no
 * build step) and uPlot from npm for the charts, with its licence. The
 * server (lib/server) serves them at / on its own port; everything the
 * console shows comes from the HTTP API v1 with the user's token. */
#ifndef LATHE_CONSOLE_H
#define LATHE_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct console_asset {
    const char *path;          /* the URL path: "/index.html", "/vendor/uplot/LICENSE" */
    const char *type;          /* the Content-Type */
    const unsigned char *data; /* len bytes (and a NUL after them) */
    size_t len;
    const char *etag;          /* "\"0123456789abcdef\"": its content's hash */
} console_asset;

/* The asset served at a URL path ("/" is /index.html), or NULL. */
const console_asset *console_find(const char *path);
/* Every asset (n of them). */
const console_asset *console_assets(size_t *n);
/* True when uPlot was found at build time (else the console shows its
 * figures without charts, and says how to get them). */
bool console_has_charts(void);

/* The generated table (console_assets.c, by embed.cmake). */
extern const console_asset console_asset_table[];
extern const size_t console_asset_count;
extern const int console_charts;

#endif
