/* pretokenize.re: the Qwen2 pre-tokenizer (see pretokenize.h). re2c picks
 * the longest match, while the original expression takes its alternatives in
 * order; so each alternative is its own matcher and pretokenize_next tries
 * them in turn. Built with: re2c -8 --case-ranges -I <re2c stdlib>. */
#include "tokenizer/pretokenize.h"

/*!include:re2c "unicode_categories.re" */

/*!re2c
    re2c:define:YYCTYPE = "unsigned char";
    re2c:yyfill:enable = 0;
    re2c:flags:utf-8 = 1;

    ws = [\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000];
    nl = [\r\n];
    letter = L;
    number = N;
    not_lnw = [^\x00] \ (L | N | ws);
    not_lnnl = [^\x00] \ (L | N | nl);
*/


/* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
static size_t contraction(const unsigned char *s)
{
    const unsigned char *YYCURSOR = s, *YYMARKER = s;
    (void)YYMARKER;
    /*!re2c
        "'" ('s' | 't' | 're' | 've' | 'm' | 'll' | 'd') { return (size_t)(YYCURSOR - s); }
        * { return 0; }
    */
}

/* [^\r\n\p{L}\p{N}]?\p{L}+ */
static size_t letters(const unsigned char *s)
{
    const unsigned char *YYCURSOR = s, *YYMARKER = s;
    (void)YYMARKER;
    /*!re2c
        not_lnnl? letter+ { return (size_t)(YYCURSOR - s); }
        * { return 0; }
    */
}

/* \p{N} */
static size_t number1(const unsigned char *s)
{
    const unsigned char *YYCURSOR = s, *YYMARKER = s;
    (void)YYMARKER;
    /*!re2c
        number { return (size_t)(YYCURSOR - s); }
        * { return 0; }
    */
}

/* \p{N}{1,3} */
static size_t number3(const unsigned char *s)
{
    const unsigned char *YYCURSOR = s, *YYMARKER = s;
    (void)YYMARKER;
    /*!re2c
        number{1,3} { return (size_t)(YYCURSOR - s); }
        * { return 0; }
    */
}

/* ` ?[^\s\p{L}\p{N}]+[\r\n]*` */
static size_t punctuation(const unsigned char *s)
{
    const unsigned char *YYCURSOR = s, *YYMARKER = s;
    (void)YYMARKER;
    /*!re2c
        " "? not_lnw+ nl* { return (size_t)(YYCURSOR - s); }
        * { return 0; }
    */
}

/* \s*[\r\n]+ : the longest whitespace run that ends in line breaks */
static size_t newlines(const unsigned char *s)
{
    const unsigned char *YYCURSOR = s, *YYMARKER = s;
    (void)YYMARKER;
    /*!re2c
        ws* nl+ { return (size_t)(YYCURSOR - s); }
        * { return 0; }
    */
}

/* \s+ */
static size_t space(const unsigned char *s)
{
    const unsigned char *YYCURSOR = s, *YYMARKER = s;
    (void)YYMARKER;
    /*!re2c
        ws+ { return (size_t)(YYCURSOR - s); }
        * { return 0; }
    */
}

/* \s+(?!\S): a whitespace run that ends the text, or all of a run but its
 * last character when something else follows (so that character can lead
 * the next piece). */
static size_t trailing_space(const unsigned char *s)
{
    size_t n = space(s);
    if (n == 0 || s[n] == 0)
        return n;
    size_t last = n - 1;
    while (last > 0 && (s[last] & 0xc0) == 0x80) /* back to the last character's first byte */
        last--;
    return last;
}

size_t pretokenize_next(enum pretokenizer kind, const char *text, const char *end)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t (*const alternatives[])(const unsigned char *) = { contraction, letters, kind == PRE_LLAMA3 ? number3 : number1,
                                                              punctuation, newlines, trailing_space, space };
    (void)end;
    for (size_t i = 0; i < sizeof alternatives / sizeof alternatives[0]; i++) {
        size_t n = alternatives[i](s);
        if (n > 0)
            return n;
    }
    return 1; /* a byte that is not valid UTF-8 */
}
