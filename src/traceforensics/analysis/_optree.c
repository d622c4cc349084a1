/*
 * _optree: the host op tree's stack sweep (``optree._parents_sweep``) in one C pass.
 *
 *     parents(group, start, end, can_parent, ids, out) -> None
 *
 * Rows sorted by (group, start, -end): ``group``, ``start``, ``end``, ``ids`` int64 arrays,
 * ``can_parent`` a bool array, ``out`` a writable int64 array sharing no memory with them,
 * all one-dimensional, contiguous and of one length (anything else: TypeError/ValueError).
 * Per group a stack holds the can-parent ranges still open; row k's parent is the top of the
 * stack once the ranges ending at or before k's start are popped (-1: none), then k is pushed
 * when it can parent::
 *
 *     thread:  [aten::linear..........................]      stack: linear
 *                 [aten::addmm..................]            stack: linear, addmm
 *                    [cudaLaunchKernel]                     parent: addmm (not pushed)
 *
 * Why: the columnar form (binary lifting over a sparse table of range maxima) costs log2(n)
 * passes over n rows (~4 ms for the 1x ResNet-50 trace's 40k host rows, seconds at 10M); this
 * is one pass, with a stack as deep as the nesting. No Python object is made per row.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    int64_t end;
    int64_t id;
} Open;

/* The struct-module code of a buffer's items, without a native or little-endian prefix. */
static const char *item_code(const Py_buffer *buf) {
    const char *f = buf->format == NULL ? "B" : buf->format;
    if (*f == '@' || *f == '=' || *f == '<') f++;
    return f;
}

/* One C-contiguous, one-dimensional view of ``obj``: int64 items (``bools`` false: numpy's
 * "l" or "q") or bools ("?"). The format is checked, not only the item size: a float64 or
 * uint8 array would otherwise be read as other numbers. */
static int view(PyObject *obj, Py_buffer *buf, int bools, int writable, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, buf, flags) < 0) return -1;
    const char *code = item_code(buf);
    int ok = bools ? (buf->itemsize == 1 && strcmp(code, "?") == 0)
                   : (buf->itemsize == 8 && (strcmp(code, "l") == 0 || strcmp(code, "q") == 0));
    if (buf->ndim != 1 || !ok) {
        PyErr_Format(PyExc_TypeError, "%s: a one-dimensional array of %s expected", what,
                     bools ? "bools" : "int64 (8 bytes)");
        PyBuffer_Release(buf);
        return -1;
    }
    return 0;
}

/* Whether two views share any byte (``out`` written over an input would corrupt the sweep). */
static int overlap(const Py_buffer *a, const Py_buffer *b) {
    const char *a0 = a->buf, *b0 = b->buf;
    return a->len > 0 && b->len > 0 && a0 < b0 + b->len && b0 < a0 + a->len;
}

static PyObject *parents(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[6];
    if (!PyArg_ParseTuple(args, "OOOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5]))
        return NULL;
    static const char *names[6] = {"group", "start", "end", "can_parent", "ids", "out"};
    Py_buffer b[6];
    int got = 0;
    PyObject *result = NULL;
    Open *stack = NULL;
    for (; got < 6; got++)
        if (view(objs[got], &b[got], got == 3, got == 5, names[got]) < 0) goto done;
    Py_ssize_t n = b[0].len / 8;
    for (int i = 1; i < 6; i++)
        if (b[i].len / b[i].itemsize != n) {
            PyErr_SetString(PyExc_ValueError, "arrays of one length expected");
            goto done;
        }
    for (int i = 0; i < 5; i++)
        if (overlap(&b[i], &b[5])) {
            PyErr_Format(PyExc_ValueError, "out shares memory with %s", names[i]);
            goto done;
        }
    const int64_t *group = b[0].buf, *start = b[1].buf, *end = b[2].buf, *ids = b[4].buf;
    const uint8_t *can_parent = b[3].buf;
    int64_t *out = b[5].buf;
    Py_ssize_t cap = 64, top = 0;
    if ((stack = PyMem_Malloc(cap * sizeof(Open))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (k > 0 && group[k] != group[k - 1]) top = 0; /* another thread: nothing open */
        while (top > 0 && stack[top - 1].end <= start[k]) top--;
        out[k] = top > 0 ? stack[top - 1].id : -1;
        if (can_parent[k]) {
            if (top == cap) {
                Open *grown = PyMem_Realloc(stack, 2 * cap * sizeof(Open));
                if (grown == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                stack = grown;
                cap *= 2;
            }
            stack[top].end = end[k];
            stack[top].id = ids[k];
            top++;
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(stack);
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"parents", parents, METH_VARARGS,
     "parents(group, start, end, can_parent, ids, out) -> None\n\n"
     "The host op tree's stack sweep over rows sorted by (group, start, -end): each row's "
     "parent id (-1: none) into out."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_optree", "The host op tree's stack sweep in one C pass.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__optree(void) { return PyModule_Create(&module); }
