"""The fuzz units, one module per unit family; each defines its units' :class:`~..legal.UnitSpec`
(schema, needed features, coverage groups, generator). :mod:`..registry` lists them; importing a
module here registers nothing."""
