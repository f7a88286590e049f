/* tok_bytes.c: the ByteLevel mapping between bytes and the printable code
 * points that byte-level BPE vocabularies are written in (GPT-2's
 * bytes_to_unicode, which Hugging Face tokenizers' ByteLevel uses).
 *
 * The fact: bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for
 * themselves; the other 68 bytes (0x00..0x20, 0x7F..0xA0, 0xAD), in
 * increasing order, are written as U+0100, U+0101, ... U+0143. So a space
 * is "Ġ" (U+0120) and a newline "Ċ" (U+010A). */
#include "tok/tok_internal.h"

uint32_t tok_byte_to_cp(unsigned char b)
{
    if (b <= 0x20) return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0) return 0x100 + 33 + (uint32_t)(b - 0x7F);
    if (b == 0xAD) return 0x100 + 33 + 34;
    return b;
}

int tok_cp_to_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp >= 0x100 && cp <= 0x120) return (int)(cp - 0x100);
    if (cp >= 0x121 && cp <= 0x142) return (int)(0x7F + (cp - 0x121));
    if (cp == 0x143) return 0xAD;
    return -1;
}

bool tok_unmap(const char *s, size_t len, sb *out)
{
    size_t start = out->len, i = 0;
    while (i < len) {
        uint32_t cp;
        int b;
        if (!uni_next(s, len, &i, &cp) || (b = tok_cp_to_byte(cp)) < 0) {
            /* roll back what was appended */
            out->len = start;
            if (out->buf) out->buf[start] = 0;
            return false;
        }
        sb_putc(out, (char)b);
    }
    return true;
}

void tok_map(const char *s, size_t len, sb *out)
{
    for (size_t i = 0; i < len; i++) {
        char u[4];
        size_t n = uni_encode(tok_byte_to_cp((unsigned char)s[i]), u);
        sb_putn(out, u, n);
    }
}
