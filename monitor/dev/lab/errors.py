"""The one exception type the lab raises for problems a user can act on."""

from __future__ import annotations


class LabError(RuntimeError):
    """A lab operation failed for a reason worth showing as-is (no traceback needed).

    The CLI prints the message and exits non-zero; tests let it propagate so the reason
    (missing ``mvn``, a broker that died during start-up with its log tail, ...) ends up in
    the failure report.
    """
