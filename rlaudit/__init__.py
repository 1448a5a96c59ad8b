"""rlaudit: does a deep-RL comparison's conclusion still hold at another training budget?

Pipeline stages, one subpackage each: ``protocol`` (read and validate a comparison) -> ``run`` (plan,
train, evaluate) -> ``store`` (SQLite results) -> ``stats`` (normalisation, bootstrap, metrics) ->
``audit`` (orderings, inversions, claims, checklist) -> ``report`` (HTML/Markdown/LaTeX/JSON, plots).
``importers`` turn published results into the same tidy score table (:mod:`rlaudit.scores`).
"""

__version__ = "0.1.0"
