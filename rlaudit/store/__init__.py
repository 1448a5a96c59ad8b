"""Store stage: the SQLite file a sweep writes, and reading it back.

- :class:`Store` (:mod:`rlaudit.store.sqlite`): the single writer — schema, lock, resume, events.
- :func:`export_table`, :func:`store_status`, :func:`failures`, :func:`stored_protocol_text`,
  :func:`stored_protocol_hash`, :func:`stored_machines`, :func:`run_machines`, :func:`done_run_ids`, :func:`run_evaluations`,
  :func:`compute_used`, :func:`timed_runs` (:mod:`rlaudit.store.export`): the readers.

All SQL of rlaudit is in this package.
"""

from rlaudit.store.export import (EVAL_PROTOCOLS, compute_used, done_run_ids, export_table, failures,
                                  run_evaluations, run_machines, store_status, stored_machines,
                                  stored_protocol_hash, stored_protocol_text, timed_runs)
from rlaudit.store.sqlite import SCHEMA_VERSION, Store, open_readonly

__all__ = ["EVAL_PROTOCOLS", "SCHEMA_VERSION", "Store", "compute_used", "done_run_ids", "export_table", "failures",
           "open_readonly", "run_evaluations", "run_machines", "store_status", "stored_machines", "stored_protocol_hash",
           "stored_protocol_text", "timed_runs"]
