/*
 * _intpack: a Python list of ints and Nones packed into one flat array.
 *
 *     pack(values, width) -> (data, nulls) | None
 *
 * - ``data``: the values as native-endian signed integers of ``width`` bytes (4 or 8), None
 *   written as 0;
 * - ``nulls``: one byte per value, 1 where it is None; b"" when none is.
 *
 * None when an item is neither an int (exactly: a bool or an int subclass is not packed) nor
 * None, or lies beyond the signed range of ``width`` bytes: the caller keeps the list then.
 *
 * Why: the early-scan child sends its row lists (pid, tid, device, stream, correlation: ~290k
 * values for the 1x ResNet-50 trace) to the command, which unpickled every int as an object
 * and then read each into a polars column; packed, they travel and convert as arrays. The
 * loop calls no Python code (exact ints only), so the list cannot change under it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *pack(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *values;
    int width;
    if (!PyArg_ParseTuple(args, "O!i", &PyList_Type, &values, &width)) return NULL;
    if (width != 4 && width != 8) {
        PyErr_SetString(PyExc_ValueError, "width must be 4 or 8");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(values);
    PyObject *data = PyBytes_FromStringAndSize(NULL, n * width);
    if (data == NULL) return NULL; /* (no second allocation with an error already set) */
    PyObject *nulls = PyBytes_FromStringAndSize(NULL, n);
    if (nulls == NULL) goto fail;
    char *out = PyBytes_AS_STRING(data);
    char *null = PyBytes_AS_STRING(nulls);
    int any_null = 0;
    /* rows repeat the same object (a pid, a tid): it is converted once per run of it */
    PyObject *last = NULL;
    long long last_value = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(values, i);
        long long v = 0;
        null[i] = 0;
        if (item == Py_None) {
            null[i] = 1;
            any_null = 1;
        } else if (item == last) {
            v = last_value;
        } else {
            if (!PyLong_CheckExact(item)) goto unpacked;
            int overflow = 0;
            v = PyLong_AsLongLongAndOverflow(item, &overflow);
            if (overflow) goto unpacked;
            if (v == -1 && PyErr_Occurred()) goto fail;
            if (width == 4 && (v < INT32_MIN || v > INT32_MAX)) goto unpacked;
            last = item;
            last_value = v;
        }
        if (width == 8) {
            int64_t x = (int64_t)v;
            memcpy(out + i * 8, &x, 8);
        } else {
            int32_t x = (int32_t)v;
            memcpy(out + i * 4, &x, 4);
        }
    }
    if (!any_null) {
        Py_DECREF(nulls);
        nulls = PyBytes_FromStringAndSize(NULL, 0);
        if (nulls == NULL) goto fail;
    }
    return Py_BuildValue("(NN)", data, nulls);
unpacked:
    Py_DECREF(data);
    Py_DECREF(nulls);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(data);
    Py_XDECREF(nulls);
    return NULL;
}

static PyMethodDef methods[] = {
    {"pack", pack, METH_VARARGS,
     "pack(values, width) -> (data, nulls) | None\n\n"
     "A list of ints and Nones as one flat array of width-byte integers and a null mask."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_intpack", "A list of ints and Nones packed into one flat array.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__intpack(void) { return PyModule_Create(&module); }
