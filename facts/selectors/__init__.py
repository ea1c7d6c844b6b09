"""Reads of facts, constraints and the working set, always scoped to one organization, one
module for each thing they read: ``lookup`` (a fact by key, the current head, lists,
conflicts), ``lineage`` (links, dependency closures and a chain's lineage), ``ranking``
(the facts a context pack holds, with its two back ends), ``constraints`` and
``working_set``. The package re-exports nothing: import from the module that owns a read.

The current head of any key and the lineage of its chain are one indexed query each,
however long the chain: every version of a chain shares ``Fact.chain``; what depends on
what, transitively, is one recursive query (``dependents_closure``, ``dependencies_closure``).
"""
