/* dtype.c: the element types of safetensors files and their conversion to
 * and from fp32 (BF16 and F16 by bit manipulation, round to nearest even). */
#include "hf/hf.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtype_table[TR_DTYPE_COUNT] = {
    [TR_F32] = {"F32", 4}, [TR_F16] = {"F16", 2},  [TR_BF16] = {"BF16", 2},
    [TR_F64] = {"F64", 8}, [TR_I64] = {"I64", 8},  [TR_I32] = {"I32", 4},
    [TR_I16] = {"I16", 2}, [TR_I8] = {"I8", 1},    [TR_U8] = {"U8", 1},
    [TR_BOOL] = {"BOOL", 1},
};

const char *tr_dtype_name(tr_dtype t)
{
    return (unsigned)t < TR_DTYPE_COUNT ? dtype_table[t].name : "?";
}

bool tr_dtype_parse(const char *s, tr_dtype *out)
{
    for (int i = 0; i < TR_DTYPE_COUNT; i++)
        if (strcmp(s, dtype_table[i].name) == 0) {
            *out = (tr_dtype)i;
            return true;
        }
    return false;
}

size_t tr_dtype_size(tr_dtype t)
{
    return (unsigned)t < TR_DTYPE_COUNT ? dtype_table[t].size : 0;
}

bool tr_dtype_is_float(tr_dtype t)
{
    return t == TR_F32 || t == TR_F16 || t == TR_BF16;
}

static float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float tr_bf16_to_f32(uint16_t h)
{
    return bits_to_f32((uint32_t)h << 16);
}

uint16_t tr_f32_to_bf16(float f)
{
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

/* IEEE half: 1 sign, 5 exponent (bias 15), 10 mantissa bits. */
float tr_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) { /* zero or subnormal: man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t tr_f32_to_f16(float f)
{
    uint32_t u = f32_to_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;          /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00u;         /* overflow (>= 65520) -> inf */
    if (a < 0x38800000u) {                               /* below 2^-14: subnormal */
        float v = bits_to_f32(a) * 16777216.0f;          /* in units of 2^-24 */
        return sign | (uint16_t)lrintf(v);               /* nearest even */
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);          /* round mantissa to 10 bits */
    return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

void tr_to_f32(float *dst, const void *src, tr_dtype t, size_t n)
{
    const unsigned char *s = src;
    if (t == TR_F32) {
        memcpy(dst, src, n * 4);
    } else if (t == TR_BF16 && (uintptr_t)src % 2 == 0) {
        /* the hot path of BF16 weights: a shift the compiler vectorises
         * (the build uses -fno-strict-aliasing) */
        const uint16_t *h = src;
        uint32_t *d = (uint32_t *)dst;
        for (size_t i = 0; i < n; i++) d[i] = (uint32_t)h[i] << 16;
    } else if (t == TR_BF16) {
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            dst[i] = tr_bf16_to_f32(h);
        }
    } else if (t == TR_F16) {
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            dst[i] = tr_f16_to_f32(h);
        }
    } else {
        memset(dst, 0, n * sizeof *dst);
    }
}

void tr_from_f32(void *dst, const float *src, tr_dtype t, size_t n)
{
    unsigned char *d = dst;
    if (t == TR_F32) {
        memcpy(dst, src, n * 4);
    } else {
        for (size_t i = 0; i < n; i++) {
            uint16_t h = t == TR_BF16 ? tr_f32_to_bf16(src[i]) : tr_f32_to_f16(src[i]);
            memcpy(d + 2 * i, &h, 2);
        }
    }
}
