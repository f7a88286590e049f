/* test_console.c: the web console's files as the server serves them:
 * every built-in asset at its path with its type and ETag (a matching
 * If-None-Match gets 304), / is index.html, the pages come with a Content
 * Security Policy that keeps scripts, styles and API calls to this server
 * and forbids framing, index.html loads nothing from elsewhere, a change to
 * an asset is 405, an unknown path is the API's 404, the assets need no
 * token while the API still does, and GET /v1/whoami says who a token is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include "console/console.h"

#include <ctype.h>

HS_GROUP_SERVER(1)

/* Whether the headers hold `want` (compared without case: header names
 * are case-insensitive). */
static bool has(const char *headers, const char *want)
{
    char *a = xstrdup(headers), *b = xstrdup(want);
    for (char *p = a; *p; p++) *p = (char)tolower((unsigned char)*p);
    for (char *p = b; *p; p++) *p = (char)tolower((unsigned char)*p);
    bool found = strstr(a, b) != NULL;
    free(a);
    free(b);
    return found;
}

/* GET path with extra request headers; the answer's headers go to hdr. */
static hs_resp get_with(const char *path, const char *req_header, sb *hdr)
{
    hs_resp r = {0};
    char *url = xasprintf("http://%s%s", H.addr, path);
    struct curl_slist *list = req_header ? curl_slist_append(NULL, req_header) : NULL;
    sb out;
    sb_init(&out);
    CURL *c = hs_curl_new("GET", url, list, NULL, &out, 30);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, hs_collect);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, hdr);
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    r.body = sb_take(&out);
    curl_slist_free_all(list);
    curl_easy_cleanup(c);
    free(url);
    return r;
}

static void test_assets(void **state)
{
    (void)state;
    size_t n;
    const console_asset *a = console_assets(&n);
    assert_true(n >= 8);
    assert_true(console_has_charts()); /* the build found uPlot (npm ci in lib/console) */
    for (size_t i = 0; i < n; i++) {
        sb hdr;
        sb_init(&hdr);
        hs_resp r = get_with(a[i].path, NULL, &hdr);
        if (r.status != 200) fail_msg("%s: %ld", a[i].path, r.status);
        assert_int_equal(strlen(r.body), a[i].len);
        assert_memory_equal(r.body, a[i].data, a[i].len);
        char *ct = xasprintf("Content-Type: %s", a[i].type);
        assert_true(has(sb_str(&hdr), ct));
        free(ct);
        char *etag = xasprintf("ETag: %s", a[i].etag);
        assert_true(has(sb_str(&hdr), etag));
        free(etag);
        hs_resp_free(&r);
        sb_free(&hdr);
        /* the same ETag: 304, no body */
        char *inm = xasprintf("If-None-Match: %s", a[i].etag);
        sb_init(&hdr);
        r = get_with(a[i].path, inm, &hdr);
        assert_int_equal(r.status, 304);
        assert_string_equal(r.body, "");
        hs_resp_free(&r);
        sb_free(&hdr);
        free(inm);
    }
    assert_non_null(console_find("/vendor/uplot/LICENSE"));
    assert_null(console_find("/nope.js"));
    assert_true(console_find("/") == console_find("/index.html"));
}

static void test_index_and_headers(void **state)
{
    (void)state;
    sb hdr;
    sb_init(&hdr);
    hs_resp r = get_with("/", NULL, &hdr);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "<script src=\"/app.js\" type=\"module\">"));
    assert_null(strstr(r.body, "http://"));
    assert_null(strstr(r.body, "https://"));
    assert_null(strstr(r.body, "<script>")); /* no inline script: the CSP forbids it */
    const char *h = sb_str(&hdr);
    assert_true(has(h, "Content-Security-Policy: default-src 'none'; script-src 'self';"));
    assert_non_null(strstr(h, "frame-ancestors 'none'"));
    assert_true(has(h, "X-Frame-Options: DENY"));
    assert_true(has(h, "X-Content-Type-Options: nosniff"));
    assert_true(has(h, "Referrer-Policy: no-referrer"));
    assert_false(has(h, "Set-Cookie"));
    hs_resp_free(&r);
    sb_free(&hdr);
    assert_int_equal(hs_status(&H, "POST", "/index.html", "token-admin"), 405);
    r = hs_http(&H, "GET", "/nothing-here", NULL, NULL);
    assert_int_equal(r.status, 404);
    assert_non_null(strstr(r.body, "the console at /"));
    hs_resp_free(&r);
    assert_int_equal(hs_status(&H, "GET", "/v1/jobs", NULL), 401); /* the API still wants a token */
}

static void test_whoami(void **state)
{
    (void)state;
    hs_resp r = hs_http(&H, "GET", "/v1/whoami", "token-a", NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "team")), "team-a");
    assert_false(json_is_true(json_object_get(r.json, "admin")));
    assert_string_equal(json_string_value(json_object_get(r.json, "scope")), "submit");
    hs_resp_free(&r);
    r = hs_http(&H, "GET", "/v1/whoami", "token-admin", NULL);
    assert_true(json_is_true(json_object_get(r.json, "admin")));
    assert_true(json_is_null(json_object_get(r.json, "team")));
    hs_resp_free(&r);
    assert_int_equal(hs_status(&H, "GET", "/v1/whoami", "not-a-token"), 401);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_assets),
        cmocka_unit_test(test_index_and_headers),
        cmocka_unit_test(test_whoami),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
