"""Regression suites shipped with the package; ``nvdla-hil regress`` runs them through pytest
(``pytest --pyargs nvdla_hil.harness.suites``) on any target."""
