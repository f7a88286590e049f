/* console.c: finding the web console's built-in files (console.h). */
#include "console.h"

#include <string.h>

const console_asset *console_find(const char *path)
{
    if (!path) return NULL;
    if (!strcmp(path, "/")) path = "/index.html";
    for (size_t i = 0; i < console_asset_count; i++)
        if (!strcmp(console_asset_table[i].path, path)) return &console_asset_table[i];
    return NULL;
}

const console_asset *console_assets(size_t *n)
{
    *n = console_asset_count;
    return console_asset_table;
}

bool console_has_charts(void)
{
    return console_charts != 0;
}
