/*
 * _colscan: a JSON array of Kineto event objects read straight into coded columns.
 *
 * The pure-Python path decodes each event into a msgspec struct and then reads the structs'
 * fields into lists (``batches.ColumnBuilder``); this module reads the text in one pass into
 * flat arrays, so no per-event Python object is made at all, only one per distinct value:
 *
 *     scan(text, coded_keys, number_keys, args_key, arg_number_keys, arg_value_keys,
 *          kept_keys) -> tuple | None
 *
 * - ``values``: a list of the distinct values read; equal tokens (the same text) share one
 *   entry, ``values[0]`` is None (a missing key). Arrays under args keys are entries of
 *   their own.
 * - ``coded_keys``: top-level keys read as codes, int32 [n][len(coded_keys)] indices in
 *   ``values`` (ph, cat, name, pid, tid: a trace repeats a few thousand of them).
 * - ``number_keys`` (top level) then ``arg_number_keys`` (in the args object): number
 *   slots, uint8 tags [n][m] (missing, null, int, float, other) and int64 [n][m] values
 *   (the int, the double's bits, or for "other" the value's code).
 * - ``has_args``: uint8 [n], whether args is an object (null and missing read as 0).
 * - ``arg_value_keys``: (event index, key index, value code) triples in file order.
 * - ``kept_keys``: args keys kept as the JSON text of their value, exactly as written, as
 *   (event index, key, text) triples: three arrays (int64 event indices, int32 indices in
 *   ``kept_keys``, int32 indices in ``kept_texts``) and the distinct texts as str.
 *
 * Returns ``(n, values, codes, tags, numbers, has_args, arg_events, arg_keys, arg_values,
 * kept_events, kept_keys, kept_values, kept_texts)`` (arrays as bytes), or None whenever the
 * text is anything but the clean case: not strict RFC 8259 JSON with valid UTF-8, an element
 * that is not an object, an escaped key, a duplicate key among those read, an object or array
 * where a top-level value is read, an object under an args key read, args that are neither an
 * object nor null, an integer beyond int64, a float that overflows, a number of over 1000
 * characters (anywhere), values nested over 256 deep. None means "decode this text the
 * general way": the caller then runs the typed decoder, which judges the text by its own
 * rules, so this reader only ever accepts a subset of what that decoder accepts, and gives the
 * same values for it.
 *
 * The scan makes no Python object and calls no Python API: it runs without the GIL (where
 * GIL_FREE, below), recording each distinct value as read (``Pending``: a string's bytes, an
 * int64, a double, an array's text); ``materialize`` then makes the Python objects with the GIL,
 * in order of first occurrence. Floats: Clinger's fast path, else strtod_l in the C locale, both
 * correctly rounded, so the bits Python's float() gives. The text must not change during the
 * call (no other thread writes into it: the stream's main thread alone owns its buffer).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <stdint.h>
#include <string.h>

/* The scan runs without the GIL where the C library reads a double text without it (strtod_l
 * in the C locale: correctly rounded, as Python's float() is), so a thread beside it (the
 * previous chunk's columns, gunzip) runs meanwhile; elsewhere PyOS_string_to_double needs the
 * GIL and the scan keeps it. */
#if defined(__GLIBC__) || defined(__APPLE__)
#define GIL_FREE 1
#include <locale.h>
#include <stdlib.h>
#ifdef __APPLE__
#include <xlocale.h>
#endif
static locale_t c_locale;
#else
#define GIL_FREE 0
#endif

#define MAX_KEYS 64
#if !defined(COLSCAN_NO_SWAR) && defined(__BYTE_ORDER__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__GNUC__)
#define SWAR 1
#define FIRST_FLAGGED(mask) (__builtin_ctzll(mask) >> 3)
#else /* another byte order or compiler: the byte loop alone */
#define SWAR 0
#define FIRST_FLAGGED(mask) 0
#endif
#define MAX_DEPTH 256

typedef struct {
    uint64_t hash;
    const char *ptr;
    Py_ssize_t len;
    PyObject *value; /* owned */
    Py_ssize_t index; /* the value's position in a list of distinct values */
} Slot;

typedef struct {
    Slot *slots;
    size_t cap; /* power of two */
    size_t used;
} Intern;

typedef struct {
    const char *p;
    const char *end;
    Intern strings;
    char *buf; /* unescaped string bytes */
    size_t buf_cap;
} Scanner;

typedef struct {
    const char *ptr;
    Py_ssize_t len;
} Key;

/* A failure that means "not the clean case": the caller decodes the text another way. */
#define REFUSE (-1)
/* A Python error (memory): raised to the caller. */
#define ERROR (-2)

/* A hash of n bytes, eight at a time (the table compares the bytes on a match). */
static uint64_t hash_bytes(const char *s, Py_ssize_t n) {
    uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ULL;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, (size_t)(n - i));
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

static void intern_free(Intern *t) {
    if (t->slots == NULL) return;
    for (size_t i = 0; i < t->cap; i++) Py_XDECREF(t->slots[i].value);
    PyMem_RawFree(t->slots);
    t->slots = NULL;
}

/* (no Python call: runs without the GIL; ERROR means out of memory, raised by the caller) */
static int intern_grow(Intern *t) {
    size_t cap = t->cap ? t->cap * 2 : 1024;
    Slot *slots = PyMem_RawCalloc(cap, sizeof(Slot));
    if (slots == NULL) return ERROR;
    for (size_t i = 0; i < t->cap; i++) {
        Slot *s = &t->slots[i];
        if (s->ptr == NULL) continue;
        size_t j = (size_t)s->hash & (cap - 1);
        while (slots[j].ptr != NULL) j = (j + 1) & (cap - 1);
        slots[j] = *s;
    }
    PyMem_RawFree(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 0;
}

/* The slot of the n bytes at s in ``t``: the one holding equal bytes, else the empty one to
 * fill (``ptr`` NULL; its hash and bytes already set, ``value``/``index`` for the caller);
 * NULL when the table cannot grow. No Python call. */
static Slot *intern_slot(Intern *t, const char *s, Py_ssize_t n) {
    if ((t->used + 1) * 2 > t->cap && intern_grow(t) < 0) return NULL;
    uint64_t h = hash_bytes(s, n);
    size_t j = (size_t)h & (t->cap - 1);
    while (t->slots[j].ptr != NULL) {
        Slot *slot = &t->slots[j];
        if (slot->hash == h && slot->len == n && memcmp(slot->ptr, s, (size_t)n) == 0)
            return slot;
        j = (j + 1) & (t->cap - 1);
    }
    t->slots[j].hash = h;
    t->slots[j].len = n;
    return &t->slots[j];
}

/* Mark a slot ``intern_slot`` gave empty as holding its bytes at s. */
static void intern_fill(Intern *t, Slot *slot, const char *s, PyObject *value, Py_ssize_t index) {
    slot->ptr = s;
    slot->value = value;
    slot->index = index;
    t->used++;
}

/* The str of raw (escape-free) UTF-8 bytes, shared between equal texts; a new reference.
 * Sets *refused for invalid UTF-8. */
static PyObject *interned(Intern *t, const char *s, Py_ssize_t n, int *refused) {
    Slot *slot = intern_slot(t, s, n);
    if (slot == NULL) return PyErr_NoMemory();
    if (slot->ptr != NULL) {
        Py_INCREF(slot->value);
        return slot->value;
    }
    PyObject *value = PyUnicode_DecodeUTF8(s, n, "strict");
    if (value == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            *refused = 1;
        }
        return NULL;
    }
    intern_fill(t, slot, s, value, 0);
    Py_INCREF(value);
    return value;
}

/* A growable array of fixed-size items, handed over as bytes (no Python call: it grows
 * without the GIL; ERROR means out of memory, raised once the GIL is back). */
typedef struct {
    char *data;
    size_t size, cap;
} Buf;

static int buf_put(Buf *b, const void *item, size_t n) {
    if (b->size + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->size + n) cap *= 2;
        char *data = PyMem_RawRealloc(b->data, cap);
        if (data == NULL) return ERROR;
        b->data = data;
        b->cap = cap;
    }
    memcpy(b->data + b->size, item, n);
    b->size += n;
    return 0;
}

/* Bytes of the text (a kept args value) whose str is made after the scan. */
typedef struct {
    const char *ptr;
    Py_ssize_t len;
} Span;

/* The index among ``spans`` of raw UTF-8 bytes (checked by the caller), appending them the
 * first time they occur (the str are made after the scan, ``materialize``); -1 when out of
 * memory. No Python call. */
static Py_ssize_t text_index(Intern *t, Buf *spans, const char *s, Py_ssize_t n) {
    Slot *slot = intern_slot(t, s, n);
    if (slot == NULL) return -1;
    if (slot->ptr != NULL) return slot->index;
    Py_ssize_t index = (Py_ssize_t)(spans->size / sizeof(Span));
    Span span = {s, n};
    if (buf_put(spans, &span, sizeof span) < 0) return -1;
    intern_fill(t, slot, s, NULL, index);
    return index;
}

static void skip_ws(Scanner *sc) {
    const char *p = sc->p, *end = sc->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    sc->p = p;
}

/* Past the opening "{" or "[" at sc->p: 1 (and past ``close``) when it is empty, else 0. */
static int empty_after_open(Scanner *sc, char close) {
    sc->p++;
    skip_ws(sc);
    if (sc->p < sc->end && *sc->p == close) {
        sc->p++;
        return 1;
    }
    return 0;
}

/* After a member of an object or array: 1 past a ",", 0 past the closing ``close``, REFUSE for
 * anything else. */
static int next_member(Scanner *sc, char close) {
    skip_ws(sc);
    if (sc->p < sc->end && (*sc->p == ',' || *sc->p == close)) return *sc->p++ == ',';
    return REFUSE;
}

/* Length of the valid UTF-8 sequence at p (lead byte >= 0x80), or 0 when invalid
 * (overlong forms, surrogates and code points beyond U+10FFFF are invalid). */
static int utf8_seq(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    if (c >= 0xC2 && c <= 0xDF) {
        return (end - p >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && p[1] < 0xA0) return 0;  /* overlong */
        if (c == 0xED && p[1] > 0x9F) return 0;  /* surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
            (p[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && p[1] < 0x90) return 0;  /* overlong */
        if (c == 0xF4 && p[1] > 0x8F) return 0;  /* beyond U+10FFFF */
        return 4;
    }
    return 0;
}

static int hex4(const char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

/* Check the string starting at sc->p (on its opening quote) and move past its closing quote.
 * body, len: the bytes between the quotes; escaped: whether a backslash occurs. */
static int scan_string(Scanner *sc, const char **body, Py_ssize_t *len, int *escaped) {
    const unsigned char *p = (const unsigned char *)sc->p + 1;
    const unsigned char *end = (const unsigned char *)sc->end;
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    int esc = 0;
    for (;;) {
        /* eight bytes at a time to the first that is '"', '\\', a control or non-ASCII: the
         * lowest flagged byte of the mask is exact (a borrow only flags bytes above it) */
        /* (the lowest flagged byte is the first in memory on little-endian machines only) */
        while (SWAR && end - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            uint64_t quote = w ^ (ones * '"'), slash = w ^ (ones * '\\');
            uint64_t special = (((quote - ones) & ~quote) | ((slash - ones) & ~slash) |
                                (w - ones * 0x20) | w) & high;
            if (special) {
                p += FIRST_FLAGGED(special);
                goto found;
            }
            p += 8;
        }
        while (p < end && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80) p++;
        if (p >= end) return REFUSE;
    found:;
        unsigned char c = *p;
        if (c == '"') {
            *body = sc->p + 1;
            *len = (Py_ssize_t)((const char *)p - (sc->p + 1));
            *escaped = esc;
            sc->p = (const char *)p + 1;
            return 0;
        }
        if (c == '\\') {
            esc = 1;
            if (end - p < 2) return REFUSE;
            unsigned char e = p[1];
            if (e == 'u') {
                unsigned cp;
                if (end - p < 6 || hex4((const char *)p + 2, &cp) < 0) return REFUSE;
                p += 6;
                /* msgspec rejects a lone surrogate wherever the string is, read or not */
                if (cp >= 0xDC00 && cp <= 0xDFFF) return REFUSE;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned lo;
                    if (end - p < 6 || p[0] != '\\' || p[1] != 'u' ||
                        hex4((const char *)p + 2, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
                        return REFUSE;
                    p += 6;
                }
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                       e == 'r' || e == 't') {
                p += 2;
            } else {
                return REFUSE;
            }
        } else if (c < 0x20) {
            return REFUSE;
        } else {
            int n = utf8_seq(p, end);
            if (n == 0) return REFUSE;
            p += n;
        }
    }
}

static void put_utf8(char *out, size_t *k, unsigned cp) {
    if (cp < 0x80) {
        out[(*k)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*k)++] = (char)(0xC0 | (cp >> 6));
        out[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*k)++] = (char)(0xE0 | (cp >> 12));
        out[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*k)++] = (char)(0xF0 | (cp >> 18));
        out[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*k)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* The str of a checked string body with escapes; a lone surrogate refuses. */
static PyObject *unescaped(Scanner *sc, const char *s, Py_ssize_t n, int *refused) {
    if ((size_t)n > sc->buf_cap) {
        char *buf = PyMem_Realloc(sc->buf, (size_t)n);
        if (buf == NULL) return PyErr_NoMemory();
        sc->buf = buf;
        sc->buf_cap = (size_t)n;
    }
    size_t k = 0;
    for (Py_ssize_t i = 0; i < n;) {
        char c = s[i];
        if (c != '\\') {
            sc->buf[k++] = c;
            i++;
            continue;
        }
        char e = s[i + 1];
        i += 2;
        switch (e) {
            case 'b': sc->buf[k++] = '\b'; break;
            case 'f': sc->buf[k++] = '\f'; break;
            case 'n': sc->buf[k++] = '\n'; break;
            case 'r': sc->buf[k++] = '\r'; break;
            case 't': sc->buf[k++] = '\t'; break;
            case 'u': {
                unsigned cp, lo;
                if (hex4(s + i, &cp) < 0) { /* (checked by scan_string) */
                    *refused = 1;
                    return NULL;
                }
                i += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (i + 6 > n || s[i] != '\\' || s[i + 1] != 'u' || hex4(s + i + 2, &lo) < 0 ||
                        lo < 0xDC00 || lo > 0xDFFF) {
                        *refused = 1;
                        return NULL;
                    }
                    i += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    *refused = 1;
                    return NULL;
                }
                /* an escape's UTF-8 is never longer than its 6 (or 12) bytes of text */
                put_utf8(sc->buf, &k, cp);
                break;
            }
            default: sc->buf[k++] = e; /* '"', '\\', '/' */
        }
    }
    return PyUnicode_DecodeUTF8(sc->buf, (Py_ssize_t)k, "strict");
}

/* Move past the number at sc->p, checking its grammar; *is_float: it has a fraction or an
 * exponent, *digits: digits of its integer part. */
static int number_span(Scanner *sc, int *is_float, int *digits) {
    const char *p = sc->p, *end = sc->end;
    *is_float = 0;
    *digits = 0;
    if (p < end && *p == '-') p++;
    if (p < end && *p == '0') {
        p++;
        *digits = 1;
    } else if (p < end && *p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
            (*digits)++;
        }
    } else {
        return REFUSE;
    }
    if (p < end && *p == '.') {
        *is_float = 1;
        p++;
        if (p >= end || *p < '0' || *p > '9') return REFUSE;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        *is_float = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return REFUSE;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    /* the text ends in "]", so a number is never at the very end of the buffer; msgspec's
     * parser gives up (or goes wrong) on numbers of ~100k digits */
    if (p >= end || p - sc->p > 1000) return REFUSE;
    sc->p = p;
    return 0;
}

/* The integer text [start, p) (checked by number_span) as int64; REFUSE beyond int64. */
static int int_of(const char *start, const char *p, int digits, int64_t *out) {
    /* 19 digits never overflow uint64 */
    if (digits > 19) return REFUSE;
    uint64_t v = 0;
    int negative = *start == '-';
    for (const char *q = start + negative; q < p; q++) v = v * 10 + (uint64_t)(*q - '0');
    if (v > (uint64_t)INT64_MAX + (uint64_t)negative) return REFUSE;
    *out = negative ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    return 0;
}

/* Exact powers of ten as doubles (10^22 is the largest). */
static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                               1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                               1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Clinger's fast path: a float text whose digits make an integer m <= 2^53 and whose decimal
 * exponent e is within 22 is m * 10^e or m / 10^-e, one IEEE operation on two exact doubles,
 * so correctly rounded (the value strtod gives); 0 for any other text. */
static int fast_double(const char *s, const char *end, double *out) {
#if FLT_EVAL_METHOD != 0 /* (x87 extended precision would round twice) */
    (void)s, (void)end, (void)out;
    return 0;
#else
    int negative = *s == '-', digits = 0, exp10 = 0;
    uint64_t m = 0;
    const char *q = s + negative;
    for (; q < end && *q >= '0' && *q <= '9'; q++) {
        if (m == 0 && *q == '0') continue;
        if (++digits > 19) return 0;
        m = m * 10 + (uint64_t)(*q - '0');
    }
    if (q < end && *q == '.') {
        for (q++; q < end && *q >= '0' && *q <= '9'; q++) {
            exp10--;
            if (m == 0 && *q == '0') continue;
            if (++digits > 19) return 0;
            m = m * 10 + (uint64_t)(*q - '0');
        }
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        int e_negative = 0, e = 0;
        q++;
        if (q < end && (*q == '+' || *q == '-')) e_negative = *q++ == '-';
        for (; q < end && *q >= '0' && *q <= '9'; q++) {
            if (e > 100000) return 0;
            e = e * 10 + (*q - '0');
        }
        exp10 += e_negative ? -e : e;
    }
    if (q != end) return 0;
    if (m == 0) {
        *out = negative ? -0.0 : 0.0;
        return 1;
    }
    if (m > (1ULL << 53) || exp10 < -22 || exp10 > 22) return 0;
    double v = (double)m;
    v = exp10 < 0 ? v / POW10[-exp10] : v * POW10[exp10];
    *out = negative ? -v : v;
    return 1;
#endif
}

/* The float text [start, p) (checked by number_span) as a double; REFUSE when it overflows,
 * ERROR on a Python error (only where the scan keeps the GIL). */
static int double_of(const char *start, const char *p, double *out) {
    double v;
    if (!fast_double(start, p, &v)) {
        char *stop = NULL;
#if GIL_FREE
        v = strtod_l(start, &stop, c_locale);
#else
        v = PyOS_string_to_double(start, &stop, NULL);
        if (v == -1.0 && PyErr_Occurred()) return ERROR;
#endif
        if (stop != p) return REFUSE;
    }
    if (Py_IS_INFINITY(v)) return REFUSE;
    *out = v;
    return 0;
}

/* Check the number at sc->p as a read one is (an int within int64, a float that does not
 * overflow) and move past it; its value in *i or *d (*is_float). No Python call. */
static int check_number(Scanner *sc, int64_t *i, double *d, int *is_float) {
    const char *start = sc->p;
    int digits;
    if (number_span(sc, is_float, &digits) < 0) return REFUSE;
    return *is_float ? double_of(start, sc->p, d) : int_of(start, sc->p, digits, i);
}

/* The number at sc->p as a Python int or float, moving past it. */
static PyObject *scan_number(Scanner *sc, int *refused) {
    int64_t i = 0;
    double d = 0;
    int is_float;
    int rc = check_number(sc, &i, &d, &is_float);
    if (rc < 0) {
        *refused = rc == REFUSE;
        return NULL;
    }
    return is_float ? PyFloat_FromDouble(d) : PyLong_FromLongLong((long long)i);
}

static int expect_word(Scanner *sc, const char *word, size_t n) {
    if ((size_t)(sc->end - sc->p) < n || memcmp(sc->p, word, n) != 0) return REFUSE;
    sc->p += n;
    return 0;
}

/* Check the value at sc->p and move past it (nothing is built; no Python call). Without
 * ``objects`` an object refuses: the values ``build_value`` (nested) reads, strings, numbers,
 * literals and arrays of them. */
static int skip_value(Scanner *sc, int depth, int objects) {
    if (depth > MAX_DEPTH) return REFUSE;
    skip_ws(sc);
    if (sc->p >= sc->end) return REFUSE;
    char c = *sc->p;
    if (c == '"') {
        const char *body;
        Py_ssize_t len;
        int esc;
        return scan_string(sc, &body, &len, &esc);
    }
    if (c == '{' && !objects) return REFUSE;
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        if (empty_after_open(sc, close)) return 0;
        for (;;) {
            if (c == '{') {
                skip_ws(sc);
                const char *body;
                Py_ssize_t len;
                int esc;
                if (sc->p >= sc->end || *sc->p != '"' || scan_string(sc, &body, &len, &esc) < 0)
                    return REFUSE;
                skip_ws(sc);
                if (sc->p >= sc->end || *sc->p != ':') return REFUSE;
                sc->p++;
            }
            if (skip_value(sc, depth + 1, objects) < 0) return REFUSE;
            int more = next_member(sc, close);
            if (more <= 0) return more;
        }
    }
    if (c == 't') return expect_word(sc, "true", 4);
    if (c == 'f') return expect_word(sc, "false", 5);
    if (c == 'n') return expect_word(sc, "null", 4);
    /* a skipped number is checked as a read one is (int64, no overflow): the same texts
     * refuse whichever keys they are under */
    int64_t i;
    double d;
    int is_float;
    return check_number(sc, &i, &d, &is_float);
}

/* The value at sc->p as a Python object: a string, number, literal, or (with ``nested``) an
 * array of such values; an object, or an array without ``nested``, refuses. */
static PyObject *build_value(Scanner *sc, int nested, int depth, int *refused) {
    if (depth > MAX_DEPTH) {
        *refused = 1;
        return NULL;
    }
    skip_ws(sc);
    if (sc->p >= sc->end) {
        *refused = 1;
        return NULL;
    }
    char c = *sc->p;
    if (c == '"') {
        const char *body;
        Py_ssize_t len;
        int esc;
        if (scan_string(sc, &body, &len, &esc) < 0) {
            *refused = 1;
            return NULL;
        }
        return esc ? unescaped(sc, body, len, refused) : interned(&sc->strings, body, len, refused);
    }
    if (c == '[' && nested) {
        PyObject *list = PyList_New(0);
        if (list == NULL) return NULL;
        if (empty_after_open(sc, ']')) return list;
        for (;;) {
            PyObject *item = build_value(sc, nested, depth + 1, refused);
            if (item == NULL || PyList_Append(list, item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(list);
                return NULL;
            }
            Py_DECREF(item);
            int more = next_member(sc, ']');
            if (more > 0) continue;
            if (more == 0) return list;
            Py_DECREF(list);
            *refused = 1;
            return NULL;
        }
    }
    if (c == 't' || c == 'f' || c == 'n') {
        PyObject *v = c == 't' ? Py_True : c == 'f' ? Py_False : Py_None;
        if (expect_word(sc, c == 't' ? "true" : c == 'f' ? "false" : "null", c == 'f' ? 5 : 4) <
            0) {
            *refused = 1;
            return NULL;
        }
        Py_INCREF(v);
        return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return scan_number(sc, refused);
    *refused = 1;
    return NULL;
}

/* An object key at sc->p (on its quote), then the colon; *k: its bytes, *esc: escaped. */
static int scan_key(Scanner *sc, Key *k, int *esc) {
    if (sc->p >= sc->end || *sc->p != '"') return REFUSE;
    if (scan_string(sc, &k->ptr, &k->len, esc) < 0) return REFUSE;
    skip_ws(sc);
    if (sc->p >= sc->end || *sc->p != ':') return REFUSE;
    sc->p++;
    return 0;
}

/* Keys looked up by a hash of their length and end bytes: one comparison per key read. */
#define TABLE 256
typedef struct {
    const Key *keys;
    int16_t slot[TABLE]; /* index + 1 in keys, 0 for empty */
} KeyTable;

static unsigned key_hash(const char *p, Py_ssize_t n) {
    unsigned first = n ? (unsigned char)p[0] : 0, last = n ? (unsigned char)p[n - 1] : 0;
    return ((unsigned)n * 31u + first * 7u + last * 3u) & (TABLE - 1);
}

static void table_build(KeyTable *t, const Key *keys, int n) {
    t->keys = keys;
    memset(t->slot, 0, sizeof t->slot);
    for (int i = 0; i < n; i++) {
        unsigned j = key_hash(keys[i].ptr, keys[i].len);
        while (t->slot[j]) j = (j + 1) & (TABLE - 1);
        t->slot[j] = (int16_t)(i + 1);
    }
}

static int key_index(const KeyTable *t, const Key *k) {
    for (unsigned j = key_hash(k->ptr, k->len); t->slot[j]; j = (j + 1) & (TABLE - 1)) {
        const Key *c = &t->keys[t->slot[j] - 1];
        if (c->len == k->len && memcmp(c->ptr, k->ptr, (size_t)k->len) == 0)
            return t->slot[j] - 1;
    }
    return -1;
}

/* What a number slot holds (``tags``): its value is in ``numbers`` as int64, double bits, or
 * for TAG_OTHER the value's code in ``values``. */
enum { TAG_MISSING = 0, TAG_NULL = 1, TAG_INT = 2, TAG_FLOAT = 3, TAG_OTHER = 4 };

typedef struct {
    /* top-level keys: the coded ones first, then the number ones */
    Key event[MAX_KEYS];
    int n_event, n_coded;
    Key args;
    /* args keys: the number ones first (slots after the top-level number keys), then the
     * value ones (triples) */
    Key rule[MAX_KEYS];
    int n_rule, n_arg_number;
    Key kept[MAX_KEYS];
    int n_kept;
    KeyTable event_table, rule_table, kept_table;
} Spec;

typedef struct {
    Buf codes;       /* int32 [n][n_coded]: index in values (0: missing, None) */
    Buf tags;        /* uint8 [n][n_numbers] */
    Buf numbers;     /* int64 [n][n_numbers] */
    Buf has_args;    /* uint8 [n]: args is an object */
    Buf arg_events;  /* int64 event index per args value read */
    Buf arg_keys;    /* int32 index among the value keys */
    Buf arg_values;  /* int32 index in values */
    Buf kept_events; /* int64 event index per kept arg */
    Buf kept_keys;   /* int32 index in kept_keys per kept arg */
    Buf kept_values; /* int32 index in kept_texts per kept arg */
    Buf pending;          /* Pending: values[1:], made after the scan (``materialize``) */
    Buf kept_spans;       /* Span: the distinct kept texts, made after the scan */
    PyObject *values;     /* list: the distinct scalars read (and each array as read) */
    PyObject *kept_texts; /* list of the distinct texts, str */
    Intern codes_of;      /* token text -> index in values */
    Intern texts;
} Out;

/* A value of ``values`` as read: its Python object is made after the scan, with the GIL. */
typedef struct {
    char kind;       /* '"' a string, 'i' an int, 'd' a double, 'w' a literal, '[' an array */
    char esc;        /* a string with escapes */
    const char *ptr; /* a string's body, a literal's or an array's text */
    Py_ssize_t len;
    int64_t i;
    double d;
} Pending;

/* ``value`` appended to out->pending; *code: its index in ``values``. */
static int pending_code(Out *out, const Pending *value, int32_t *code) {
    Py_ssize_t index = 1 + (Py_ssize_t)(out->pending.size / sizeof(Pending));
    if (index >= INT32_MAX) return REFUSE; /* codes are int32 (never with ~4 MB chunks) */
    if (buf_put(&out->pending, value, sizeof *value) < 0) return ERROR;
    *code = (int32_t)index;
    return 0;
}

/* The index in out->values of the scalar token [from, sc->p) of ``kind`` ('"': a string
 * with body/len/esc, 'n' a number, 'w' a literal), appending it the first time the token
 * occurs (equal tokens share one value). No Python call. */
static int token_code(Scanner *sc, Out *out, const char *from, char kind, const char *body,
                      Py_ssize_t len, int esc, int is_float, int digits, int32_t *code) {
    Py_ssize_t n = sc->p - from;
    Slot *slot = intern_slot(&out->codes_of, from, n);
    if (slot == NULL) return ERROR;
    if (slot->ptr != NULL) {
        *code = (int32_t)slot->index;
        return 0;
    }
    Pending value = {kind, (char)esc, from, n, 0, 0.0};
    if (kind == '"') {
        value.ptr = body;
        value.len = len;
    } else if (kind == 'n') {
        int rc = is_float ? double_of(from, sc->p, &value.d)
                          : int_of(from, sc->p, digits, &value.i);
        if (rc < 0) return rc;
        value.kind = is_float ? 'd' : 'i';
    }
    int rc = pending_code(out, &value, code);
    if (rc < 0) return rc;
    intern_fill(&out->codes_of, slot, from, NULL, *code);
    return 0;
}

/* The code of the value at sc->p: a scalar (shared by equal tokens) or, with ``nested``, an
 * array (appended as built). An object, or an array without ``nested``, refuses. */
static int value_code(Scanner *sc, Out *out, int nested, int32_t *code) {
    skip_ws(sc);
    if (sc->p >= sc->end) return REFUSE;
    const char *from = sc->p;
    char c = *from;
    if (c == '"') {
        const char *body;
        Py_ssize_t len;
        int esc;
        if (scan_string(sc, &body, &len, &esc) < 0) return REFUSE;
        return token_code(sc, out, from, '"', body, len, esc, 0, 0, code);
    }
    if (c == 't' || c == 'f' || c == 'n') {
        if (expect_word(sc, c == 't' ? "true" : c == 'f' ? "false" : "null", c == 'f' ? 5 : 4) < 0)
            return REFUSE;
        return token_code(sc, out, from, 'w', NULL, 0, 0, 0, 0, code);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        int is_float, digits;
        if (number_span(sc, &is_float, &digits) < 0) return REFUSE;
        return token_code(sc, out, from, 'n', NULL, 0, 0, is_float, digits, code);
    }
    if (c != '[' || !nested) return REFUSE;
    int rc = skip_value(sc, 1, 0);
    if (rc < 0) return rc;
    Pending value = {'[', 0, from, sc->p - from, 0, 0.0};
    return pending_code(out, &value, code);
}

/* A number slot: null, an int64, a double (its bits), or anything else ``value_code`` reads
 * (TAG_OTHER, its code). */
static int number_slot(Scanner *sc, Out *out, int nested, uint8_t *tag, int64_t *value) {
    skip_ws(sc);
    if (sc->p >= sc->end) return REFUSE;
    const char *from = sc->p;
    char c = *from;
    if (c == '-' || (c >= '0' && c <= '9')) {
        int is_float, digits;
        if (number_span(sc, &is_float, &digits) < 0) return REFUSE;
        if (!is_float) {
            *tag = TAG_INT;
            return int_of(from, sc->p, digits, value);
        }
        double d;
        int rc = double_of(from, sc->p, &d);
        if (rc < 0) return rc;
        memcpy(value, &d, sizeof d);
        *tag = TAG_FLOAT;
        return 0;
    }
    if (c == 'n') {
        *tag = TAG_NULL;
        return expect_word(sc, "null", 4);
    }
    int32_t code;
    int rc = value_code(sc, out, nested, &code);
    if (rc < 0) return rc;
    *tag = TAG_OTHER;
    *value = code;
    return 0;
}

static int put_triple(Buf *events, Buf *keys, Buf *values, Py_ssize_t event, int key, int32_t v) {
    int64_t at = (int64_t)event;
    int32_t k = (int32_t)key;
    if (buf_put(events, &at, sizeof at) < 0 || buf_put(keys, &k, sizeof k) < 0 ||
        buf_put(values, &v, sizeof v) < 0)
        return ERROR;
    return 0;
}

/* The args object at sc->p (on its "{"): number keys into the event's slots (after
 * ``n_top`` top-level ones), value keys and kept keys onto their triples. */
static int scan_args(Scanner *sc, const Spec *spec, Out *out, Py_ssize_t event, int n_top,
                     uint8_t *tags, int64_t *numbers) {
    uint64_t seen_rule = 0, seen_kept = 0;
    if (empty_after_open(sc, '}')) return 0;
    for (;;) {
        Key k;
        int esc, rc = 0;
        skip_ws(sc);
        if (scan_key(sc, &k, &esc) < 0 || esc) return REFUSE;
        int r = key_index(&spec->rule_table, &k);
        int kk = r < 0 ? key_index(&spec->kept_table, &k) : -1;
        if (r >= 0) {
            if (seen_rule & (1ULL << r)) return REFUSE;
            seen_rule |= 1ULL << r;
            if (r < spec->n_arg_number) {
                rc = number_slot(sc, out, 1, &tags[n_top + r], &numbers[n_top + r]);
            } else {
                int32_t code;
                rc = value_code(sc, out, 1, &code);
                if (rc == 0)
                    rc = put_triple(&out->arg_events, &out->arg_keys, &out->arg_values, event,
                                    r - spec->n_arg_number, code);
            }
        } else if (kk >= 0) {
            if (seen_kept & (1ULL << kk)) return REFUSE;
            seen_kept |= 1ULL << kk;
            skip_ws(sc);
            const char *from = sc->p;
            rc = skip_value(sc, 1, 1);
            if (rc == 0) {
                Py_ssize_t text = text_index(&out->texts, &out->kept_spans, from, sc->p - from);
                rc = text < 0            ? ERROR
                     : text >= INT32_MAX ? REFUSE /* never with ~4 MB chunks */
                                         : put_triple(&out->kept_events, &out->kept_keys,
                                                      &out->kept_values, event, kk, (int32_t)text);
            }
        } else {
            rc = skip_value(sc, 1, 1);
        }
        if (rc < 0) return rc;
        int more = next_member(sc, '}');
        if (more > 0) continue;
        return more < 0 ? REFUSE : 0;
    }
}

/* One event object at sc->p (on its "{"): its codes, number slots and args flag appended. */
static int scan_event(Scanner *sc, const Spec *spec, Out *out, Py_ssize_t event) {
    int32_t codes[MAX_KEYS];
    uint8_t tags[2 * MAX_KEYS];
    int64_t numbers[2 * MAX_KEYS];
    int n_top = spec->n_event - spec->n_coded, n_numbers = n_top + spec->n_arg_number;
    uint8_t has_args = 0;
    int seen_args = 0;
    uint64_t seen = 0;
    memset(codes, 0, sizeof codes);
    memset(tags, 0, sizeof tags);
    memset(numbers, 0, sizeof numbers);
    if (!empty_after_open(sc, '}')) {
        for (;;) {
            Key k;
            int esc, rc = 0;
            skip_ws(sc);
            if (scan_key(sc, &k, &esc) < 0 || esc) return REFUSE;
            int i = key_index(&spec->event_table, &k);
            if (i >= 0) {
                if (seen & (1ULL << i)) return REFUSE;
                seen |= 1ULL << i;
                if (i < spec->n_coded)
                    rc = value_code(sc, out, 0, &codes[i]);
                else
                    rc = number_slot(sc, out, 0, &tags[i - spec->n_coded],
                                     &numbers[i - spec->n_coded]);
            } else if (k.len == spec->args.len &&
                       memcmp(k.ptr, spec->args.ptr, (size_t)k.len) == 0) {
                if (seen_args) return REFUSE;
                seen_args = 1;
                skip_ws(sc);
                if (sc->p < sc->end && *sc->p == '{') {
                    has_args = 1;
                    rc = scan_args(sc, spec, out, event, n_top, tags, numbers);
                } else {
                    /* args that is not an object or null (damaged): the general way */
                    rc = expect_word(sc, "null", 4);
                }
            } else {
                rc = skip_value(sc, 1, 1);
            }
            if (rc < 0) return rc;
            int more = next_member(sc, '}');
            if (more > 0) continue;
            if (more < 0) return REFUSE;
            break;
        }
    }
    if (buf_put(&out->codes, codes, sizeof(int32_t) * (size_t)spec->n_coded) < 0 ||
        buf_put(&out->tags, tags, (size_t)n_numbers) < 0 ||
        buf_put(&out->numbers, numbers, sizeof(int64_t) * (size_t)n_numbers) < 0 ||
        buf_put(&out->has_args, &has_args, 1) < 0)
        return ERROR;
    return 0;
}

static int read_keys(PyObject *tuple, Key *keys, int *n, int room, const char *what) {
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) > room) {
        PyErr_Format(PyExc_TypeError, "%s: a tuple of at most %d str", what, room);
        return ERROR;
    }
    *n = (int)PyTuple_GET_SIZE(tuple);
    for (int i = 0; i < *n; i++) {
        PyObject *s = PyTuple_GET_ITEM(tuple, i);
        if (!PyUnicode_Check(s)) {
            PyErr_Format(PyExc_TypeError, "%s: a tuple of str", what);
            return ERROR;
        }
        keys[i].ptr = PyUnicode_AsUTF8AndSize(s, &keys[i].len);
        if (keys[i].ptr == NULL) return ERROR;
    }
    return 0;
}

static Buf *out_bufs(Out *out, int i) {
    Buf *bufs[] = {&out->codes,      &out->tags,       &out->numbers,     &out->has_args,
                   &out->arg_events, &out->arg_keys,   &out->arg_values,  &out->kept_events,
                   &out->kept_keys,  &out->kept_values};
    return i < (int)(sizeof bufs / sizeof bufs[0]) ? bufs[i] : NULL;
}

static void out_clear(Out *out) {
    for (int i = 0; out_bufs(out, i) != NULL; i++) PyMem_RawFree(out_bufs(out, i)->data);
    PyMem_RawFree(out->pending.data);
    PyMem_RawFree(out->kept_spans.data);
    Py_CLEAR(out->values);
    Py_CLEAR(out->kept_texts);
    intern_free(&out->codes_of);
    intern_free(&out->texts);
}

static int scan_array(Scanner *sc, const Spec *spec, Out *out, Py_ssize_t *count) {
    Py_ssize_t n = 0;
    skip_ws(sc);
    if (sc->p >= sc->end || *sc->p != '[') return REFUSE;
    if (!empty_after_open(sc, ']')) {
        for (;;) {
            skip_ws(sc);
            if (sc->p >= sc->end || *sc->p != '{') return REFUSE;
            int rc = scan_event(sc, spec, out, n);
            if (rc < 0) return rc;
            n++;
            int more = next_member(sc, ']');
            if (more < 0) return REFUSE;
            if (more == 0) break;
        }
    }
    skip_ws(sc);
    if (sc->p != sc->end) return REFUSE;
    *count = n;
    return 0;
}

/* Two key tuples as one list of keys (``first`` then ``second``); *n_first: len(first). */
static int read_key_pair(PyObject *first, PyObject *second, Key *keys, int *n, int *n_first,
                         const char *what) {
    int n_second;
    if (read_keys(first, keys, n_first, MAX_KEYS, what) < 0 ||
        read_keys(second, keys + *n_first, &n_second, MAX_KEYS - *n_first, what) < 0)
        return ERROR;
    *n = *n_first + n_second;
    return 0;
}

/* The Python objects of what the scan read, with the GIL: ``values`` (None, then each pending
 * value in order of first occurrence) and ``kept_texts``. */
static int materialize(Scanner *sc, Out *out) {
    const Pending *v = (const Pending *)out->pending.data;
    Py_ssize_t n = (Py_ssize_t)(out->pending.size / sizeof(Pending));
    if ((out->values = PyList_New(n + 1)) == NULL) return ERROR;
    Py_INCREF(Py_None);
    PyList_SET_ITEM(out->values, 0, Py_None);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value = NULL;
        int refused = 0;
        switch (v[i].kind) {
            case '"':
                value = v[i].esc ? unescaped(sc, v[i].ptr, v[i].len, &refused)
                                 : PyUnicode_DecodeUTF8(v[i].ptr, v[i].len, "strict");
                break;
            case 'i': value = PyLong_FromLongLong((long long)v[i].i); break;
            case 'd': value = PyFloat_FromDouble(v[i].d); break;
            case 'w':
                value = *v[i].ptr == 't' ? Py_True : *v[i].ptr == 'f' ? Py_False : Py_None;
                Py_INCREF(value);
                break;
            default: /* an array, checked by ``skip_value``: built from its text */
                sc->p = v[i].ptr;
                value = build_value(sc, 1, 1, &refused);
        }
        if (value == NULL) {
            if (!refused && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                refused = 1;
            }
            return refused ? REFUSE : ERROR;
        }
        PyList_SET_ITEM(out->values, i + 1, value);
    }
    const Span *t = (const Span *)out->kept_spans.data;
    Py_ssize_t k = (Py_ssize_t)(out->kept_spans.size / sizeof(Span));
    if ((out->kept_texts = PyList_New(k)) == NULL) return ERROR;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *text = PyUnicode_DecodeUTF8(t[i].ptr, t[i].len, "strict");
        if (text == NULL) return ERROR;
        PyList_SET_ITEM(out->kept_texts, i, text);
    }
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer text;
    PyObject *coded_keys, *number_keys, *args_key, *arg_number_keys, *arg_value_keys, *kept_keys;
    Spec spec;
    Out out;
    memset(&spec, 0, sizeof(spec));
    memset(&out, 0, sizeof(out));
    if (!PyArg_ParseTuple(args, "y*OOUOOO", &text, &coded_keys, &number_keys, &args_key,
                          &arg_number_keys, &arg_value_keys, &kept_keys))
        return NULL;
    PyObject *result = NULL;
    Scanner sc = {text.buf, (const char *)text.buf + text.len, {NULL, 0, 0}, NULL, 0};
    if (read_key_pair(coded_keys, number_keys, spec.event, &spec.n_event, &spec.n_coded,
                      "event keys") < 0 ||
        read_key_pair(arg_number_keys, arg_value_keys, spec.rule, &spec.n_rule,
                      &spec.n_arg_number, "args keys") < 0 ||
        read_keys(kept_keys, spec.kept, &spec.n_kept, MAX_KEYS, "kept_keys") < 0)
        goto finish;
    spec.args.ptr = PyUnicode_AsUTF8AndSize(args_key, &spec.args.len);
    if (spec.args.ptr == NULL) goto finish;
    table_build(&spec.event_table, spec.event, spec.n_event);
    table_build(&spec.rule_table, spec.rule, spec.n_rule);
    table_build(&spec.kept_table, spec.kept, spec.n_kept);
    Py_ssize_t n = 0;
    int rc;
#if GIL_FREE
    Py_BEGIN_ALLOW_THREADS
    rc = scan_array(&sc, &spec, &out, &n);
    Py_END_ALLOW_THREADS
#else
    rc = scan_array(&sc, &spec, &out, &n);
#endif
    if (rc == 0) rc = materialize(&sc, &out);
    if (rc == ERROR) {
        if (!PyErr_Occurred()) PyErr_NoMemory(); /* (the scan raises nothing itself) */
        goto finish;
    }
    if (rc == REFUSE) {
        if (PyErr_Occurred()) goto finish;
        result = Py_None;
        Py_INCREF(result);
        goto finish;
    }
    PyObject *bytes[10];
    int made = 0;
    for (; made < 10; made++) {
        Buf *b = out_bufs(&out, made);
        /* (y# of a NULL pointer would be None: an empty array is "") */
        bytes[made] = PyBytes_FromStringAndSize(b->data ? b->data : "", (Py_ssize_t)b->size);
        if (bytes[made] == NULL) break;
    }
    if (made == 10)
        result = Py_BuildValue("(nONNNNNNNNNNO)", n, out.values, bytes[0], bytes[1], bytes[2],
                               bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8],
                               bytes[9], out.kept_texts);
    else
        for (int i = 0; i < made; i++) Py_DECREF(bytes[i]);
finish:
    out_clear(&out);
    intern_free(&sc.strings);
    PyMem_Free(sc.buf);
    PyBuffer_Release(&text);
    return result;
}

/* array_end(text) -> int | None: the offset just past the JSON array at the start of text
 * (white space before it skipped), read by skip_value's rules (objects allowed); None when it
 * is not one. For the text after a file's last chunk (the last events, then the keys after
 * the event list): the events are scanned, the keys parsed apart, and no general decoder is
 * needed for them. */
static PyObject *array_end(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer text;
    if (!PyArg_ParseTuple(args, "y*", &text)) return NULL;
    Scanner sc = {text.buf, (const char *)text.buf + text.len, {NULL, 0, 0}, NULL, 0};
    skip_ws(&sc);
    int rc = REFUSE;
    if (sc.p < sc.end && *sc.p == '[') rc = skip_value(&sc, 1, 1);
    Py_ssize_t end = sc.p - (const char *)text.buf;
    intern_free(&sc.strings);
    PyMem_Free(sc.buf);
    PyBuffer_Release(&text);
    if (rc != 0) Py_RETURN_NONE;
    return PyLong_FromSsize_t(end);
}

static PyMethodDef methods[] = {
    {"array_end", array_end, METH_VARARGS,
     "array_end(text) -> int | None\n\n"
     "The offset just past the JSON array at the start of text, or None."},
    {"scan", scan, METH_VARARGS,
     "scan(text, coded_keys, number_keys, args_key, arg_number_keys, arg_value_keys, "
     "kept_keys) -> tuple | None\n\n"
     "A JSON array of event objects read into coded columns (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_colscan",
    "A JSON array of Kineto event objects read straight into coded columns.", -1, methods,
};

PyMODINIT_FUNC PyInit__colscan(void) {
#if GIL_FREE
    if (c_locale == (locale_t)0 && (c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0)) == (locale_t)0)
        return PyErr_NoMemory();
#endif
    return PyModule_Create(&module);
}
