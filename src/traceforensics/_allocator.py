"""polars' allocator setting, in a module that imports nothing: it is set before polars loads.

``dirty_decay_ms``: how long jemalloc keeps freed pages for reuse before giving them back
(``traceforensics/__init__.py`` says why 100 ms).
"""

TF_ALLOCATOR_CONF = "dirty_decay_ms:100,muzzy_decay_ms:0"
