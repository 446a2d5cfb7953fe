"""Whole networks through NVDLA's own compiler: a small zoo of Caffe networks with seeded
weights (:mod:`.zoo`) written in the schema of the user's checkout (:mod:`.caffe`), their float
forward pass and INT8 calibration table (:mod:`.forward`), the checkout's ``nvdla_compiler``
built into the cache and run (:mod:`.compiler`), and a compiled network run on a target through
the loadable machinery and compared with the float result (:mod:`.run`). The compiler's known
bugs a network meets are named by :func:`.compiler.known_issues` (``net compile`` and ``net run``
print them), never worked around."""
