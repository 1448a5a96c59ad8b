"""Store stage: the SQLite file a sweep writes, and its export to the tidy score table.

- :class:`Store` (:mod:`rlaudit.store.sqlite`): the single writer — schema, lock, resume, events.
- :func:`export_table`, :func:`source_from_store`, :func:`store_status` (:mod:`rlaudit.store.export`).
"""

from rlaudit.store.export import EVAL_PROTOCOLS, export_table, failures, source_from_store, store_status
from rlaudit.store.sqlite import SCHEMA_VERSION, Store, open_readonly

__all__ = ["EVAL_PROTOCOLS", "SCHEMA_VERSION", "Store", "export_table", "failures", "open_readonly",
           "source_from_store", "store_status"]
