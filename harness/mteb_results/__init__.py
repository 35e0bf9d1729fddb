"""mteb's results format, both ways: harness records exported as mteb result files, mteb's files read back.

Export writes mteb result files; reading takes mteb result files (e.g. a checkout of the public results
repository) for the leaderboard's published rows.

mteb's layout (its ``ResultCache`` and the ``embeddings-benchmark/results`` repository):
``<org>__<model>/<revision>/<TaskName>.json`` (a ``TaskResult``: ``task_name``, ``dataset_revision``,
``mteb_version``, ``evaluation_time``, ``scores.<split>[{hf_subset, languages, main_score, ...}]``) beside
``model_meta.json`` (a ``ModelMeta``). Which harness dataset is which mteb task is data: the ``mteb_task`` (and
``mteb_subset``) of each catalog entry in ``conf/task/<family>.yaml``; records of ``task=mteb`` carry their task.

Export writes through mteb's own classes (``TaskResult``, ``ModelMeta``), so mteb must be installed
(``pip install 'harness[mteb]'``); reading needs only the JSON, so the leaderboard does not depend on mteb.
"""
