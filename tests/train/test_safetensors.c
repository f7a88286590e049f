/* test_safetensors.c: the safetensors reader's strict validation (each
 * malformed header is rejected with a message naming the problem), the
 * writer's byte format against a real PEFT header, sharded models with an
 * index, unaligned files, and dtype conversions. */
#include "test_util.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

/* A file from a header text and n data bytes. */
static unsigned char *mkfile(const char *hdr, size_t data, size_t *len)
{
    size_t h = strlen(hdr);
    *len = 8 + h + data;
    unsigned char *b = xcalloc(*len, 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, hdr, h);
    return b;
}

static void expect_bad(const char *hdr, size_t data, const char *needle)
{
    size_t len;
    unsigned char *b = mkfile(hdr, data, &len);
    st_archive a;
    char err[512] = "";
    bool ok = st_parse_buffer(&a, b, len, "t.safetensors", err, sizeof err);
    if (ok || !strstr(err, needle)) fprintf(stderr, "header %s -> %s\n", hdr, ok ? "accepted" : err);
    assert_false(ok);
    assert_non_null(strstr(err, needle));
    free(b);
}

static void test_reader_rejects(void **state)
{
    (void)state;
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "truncated");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, "padded");
    expect_bad("{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "need 12");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "overlap");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "hole");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "invalid JSON");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "shape");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "data_offsets");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, "unknown field");
    expect_bad("{\"__metadata__\":{\"k\":1}}", 0, "__metadata__");
    expect_bad("[1,2]", 0, "does not start with '{'");
    expect_bad("{\"a\":", 0, "invalid JSON");
    /* a header length larger than the file */
    unsigned char b[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}'};
    st_archive a;
    char err[256];
    assert_false(st_parse_buffer(&a, b, sizeof b, "big", err, sizeof err));
    assert_non_null(strstr(err, "header length"));
    assert_false(st_parse_buffer(&a, b, 5, "tiny", err, sizeof err));
}

static void test_reader_accepts(void **state)
{
    (void)state;
    size_t len;
    unsigned char *b = mkfile("{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"BF16\",\"shape\":[2,1],"
                              "\"data_offsets\":[0,4]},\"e\":{\"dtype\":\"F32\",\"shape\":[0],"
                              "\"data_offsets\":[4,4]}}    ", 4, &len);
    b[len - 4] = 0x80; b[len - 3] = 0x3f; /* bf16 1.0 */
    b[len - 2] = 0x00; b[len - 1] = 0xc0; /* bf16 -2.0 */
    st_archive a;
    char err[256];
    assert_true(st_parse_buffer(&a, b, len, "ok", err, sizeof err));
    assert_int_equal(a.n, 2);
    const st_tensor *w = st_find(&a, "w");
    assert_non_null(w);
    assert_int_equal(w->dtype, TR_BF16);
    float f[2];
    tr_to_f32(f, w->data, w->dtype, 2);
    assert_true(f[0] == 1.0f && f[1] == -2.0f);
    assert_non_null(st_find(&a, "e"));
    assert_null(st_find(&a, "x"));
    assert_string_equal(a.metadata_json, "{\"format\":\"pt\"}");
    st_close(&a);
    free(b);
}

/* The writer reproduces, byte for byte, the header PEFT wrote for a phi-1.5
 * r=4 q/v adapter (tests/ref/models/peft-reference-phi15-r4). */
static void test_writer_matches_peft_header(void **state)
{
    (void)state;
    st_writer w;
    st_writer_init(&w);
    float *zeros = xcalloc(2048 * 4, sizeof(float));
    for (int l = 0; l < 24; l++)
        for (int p = 0; p < 2; p++) {
            const char *pn = p ? "v_proj" : "q_proj";
            char name[128];
            int64_t sa[2] = {4, 2048}, sbb[2] = {2048, 4};
            snprintf(name, sizeof name, "base_model.model.model.layers.%d.self_attn.%s.lora_A.weight", l, pn);
            st_writer_add(&w, name, TR_F32, 2, sa, zeros);
            snprintf(name, sizeof name, "base_model.model.model.layers.%d.self_attn.%s.lora_B.weight", l, pn);
            st_writer_add(&w, name, TR_F32, 2, sbb, zeros);
        }
    size_t len, rlen;
    unsigned char *bytes = st_writer_serialize(&w, &len);
    char err[256];
    char *ref = file_read_all(LATHE_SOURCE_DIR "/tests/ref/models/peft-reference-phi15-r4/"
                              "adapter_model.safetensors.header.json", 1 << 20, &rlen, err, sizeof err);
    assert_non_null(ref);
    assert_int_equal(rlen, 12592);
    assert_int_equal(len, 3158328); /* the size of PEFT's file */
    assert_memory_equal(bytes + 8, ref, rlen);
    assert_int_equal(bytes[0] | bytes[1] << 8, 12592);
    free(ref);
    free(bytes);
    free(zeros);
    st_writer_free(&w);
}

/* A model split into two shards with an index reads as one; a weight_map
 * entry pointing at the wrong shard is an error. */
static void test_shards(void **state)
{
    (void)state;
    char *dir = tu_tempdir();
    float v[4] = {1, 2, 3, 4};
    int64_t s1[1] = {4}, s2[1] = {2};
    st_writer w;
    st_writer_init(&w);
    st_writer_add(&w, "a", TR_F32, 1, s1, v);
    char *p1 = path_join(dir, "model-00001-of-00002.safetensors");
    assert_int_equal(st_writer_save(&w, p1), 0);
    st_writer_free(&w);
    st_writer_init(&w);
    st_writer_add(&w, "b", TR_F32, 1, s2, v + 2);
    char *p2 = path_join(dir, "model-00002-of-00002.safetensors");
    assert_int_equal(st_writer_save(&w, p2), 0);
    st_writer_free(&w);
    char *idx = path_join(dir, "model.safetensors.index.json");
    const char *good = "{\"metadata\":{},\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                       "\"b\":\"model-00002-of-00002.safetensors\"}}";
    assert_int_equal(file_write_atomic(idx, good, strlen(good)), 0);
    st_archive a;
    char err[512];
    assert_true(st_open(&a, dir, err, sizeof err));
    assert_int_equal(a.n, 2);
    assert_int_equal(a.n_files, 2);
    assert_true(((const float *)st_find(&a, "b")->data)[1] == 4.0f);
    st_close(&a);
    const char *bad = "{\"weight_map\":{\"a\":\"model-00002-of-00002.safetensors\","
                      "\"b\":\"model-00002-of-00002.safetensors\"}}";
    assert_int_equal(file_write_atomic(idx, bad, strlen(bad)), 0);
    assert_false(st_open(&a, dir, err, sizeof err));
    assert_non_null(strstr(err, "weight_map.a"));
    const char *escape = "{\"weight_map\":{\"a\":\"../x.safetensors\"}}";
    assert_int_equal(file_write_atomic(idx, escape, strlen(escape)), 0);
    assert_false(st_open(&a, dir, err, sizeof err));
    free(p1);
    free(p2);
    free(idx);
    tu_rmdir(dir);
}

/* A header whose length is not a multiple of 8 leaves the data unaligned:
 * the reader copies it to aligned memory instead of mapping it. */
static void test_unaligned_file(void **state)
{
    (void)state;
    char *dir = tu_tempdir();
    size_t len;
    unsigned char *b = mkfile("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, &len);
    float v[2] = {1.5f, -3.0f};
    memcpy(b + len - 8, v, 8);
    char *p = path_join(dir, "u.safetensors");
    assert_int_equal(file_write_atomic(p, b, len), 0);
    st_archive a;
    char err[256];
    assert_true(st_open(&a, p, err, sizeof err));
    const st_tensor *t = st_find(&a, "x");
    assert_int_equal((uintptr_t)t->data % 4, 0);
    assert_true(((const float *)t->data)[1] == -3.0f);
    st_close(&a);
    free(b);
    free(p);
    tu_rmdir(dir);
}

static void test_dtype_conversions(void **state)
{
    (void)state;
    const float vals[] = {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 3.14159265f};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        assert_true(tr_f16_to_f32(tr_f32_to_f16(vals[i])) == (i == 6 ? 3.140625f : vals[i]));
        float bf = tr_bf16_to_f32(tr_f32_to_bf16(vals[i]));
        assert_true(fabsf(bf - vals[i]) <= fabsf(vals[i]) / 256.0f);
    }
    assert_int_equal(tr_f32_to_f16(1e6f), 0x7c00);          /* overflow to inf */
    assert_int_equal(tr_f32_to_bf16(1.00390625f), 0x3f80);  /* tie rounds to even */
    assert_int_equal(tr_f32_to_bf16(1.01171875f), 0x3f82);  /* tie rounds to even (up) */
    assert_true(isnan(tr_bf16_to_f32(tr_f32_to_bf16(NAN))));
    tr_dtype t;
    assert_true(tr_dtype_parse("BF16", &t) && t == TR_BF16);
    assert_false(tr_dtype_parse("bf16", &t));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_rejects),
        cmocka_unit_test(test_reader_accepts),
        cmocka_unit_test(test_writer_matches_peft_header),
        cmocka_unit_test(test_shards),
        cmocka_unit_test(test_unaligned_file),
        cmocka_unit_test(test_dtype_conversions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
