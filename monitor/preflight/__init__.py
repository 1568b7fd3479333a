"""``--check``: will this configuration reach a first finding? Each check is one line --
what was checked, ``ok`` or ``FAIL``, and for a failure what to do -- shared by
``monitor collect --check``, ``monitor stream --check`` and ``monitor run --check``.

* :mod:`monitor.preflight.report`: the lines and the count of problems;
* :mod:`monitor.preflight.topics`: the monitor's own topics on its cluster -- present
  with the documented settings (:mod:`monitor.contract.topics`), created on request, the
  principal allowed what its command does with each;
* :mod:`monitor.preflight.runtime`: what the job needs of its machine -- Java, Spark's
  Kafka source, its checkpoint and store writable.

Checks read and never change anything, but for ``--create-topics``.
"""
