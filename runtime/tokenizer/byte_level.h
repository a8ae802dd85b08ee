/* byte_level.h: GPT-2's byte-level alphabet, which byte-level BPE vocabularies
 * (Qwen, Llama 3) spell their tokens in: printable bytes stand for
 * themselves, the other 68 take the code points from U+0100 on, in byte
 * order. So every byte sequence is a string of visible characters. */
#ifndef MINFER_BYTE_LEVEL_H
#define MINFER_BYTE_LEVEL_H

#include <stdbool.h>
#include <stdint.h>

static inline bool byte_level_printable(int b)
{
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

/* The code point that stands for byte b. */
static inline int byte_level_char(int b)
{
    if (byte_level_printable(b))
        return b;
    int n = 0;
    for (int k = 0; k < b; k++)
        n += !byte_level_printable(k);
    return 256 + n;
}

/* The byte code point cp stands for, or -1. */
static inline int byte_level_byte(int cp)
{
    if (cp < 256)
        return byte_level_printable(cp) ? cp : -1;
    int n = cp - 256;
    for (int b = 0; b < 256; b++)
        if (!byte_level_printable(b) && n-- == 0)
            return b;
    return -1;
}

/* Writes code point cp (< 0x800) as UTF-8; returns the byte count. */
static inline int byte_level_utf8(int cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

#endif
