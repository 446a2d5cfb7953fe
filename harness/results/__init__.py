"""Results of many regression runs: a database of runs and tests (:mod:`.db`), failure
signatures and clusters (:mod:`.signature`), known-failure labels (:mod:`.labels`), the
terminal history (:mod:`.history`), the static dashboard (:mod:`.dashboard`), the pytest
plugin that records a run as it goes (:mod:`.recorder`), live progress (:mod:`.progress`) and
a run directory, its ``latest`` link and its state (:mod:`.rundir`).

Nothing here is needed to run a test: the recorder is enabled by ``--nvdla-results-db`` (which
``nvdla-hil regress`` always passes, default ``<results-dir>/results.sqlite``).
"""
