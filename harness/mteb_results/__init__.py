"""mteb's results format, both ways: harness records exported as mteb result files, mteb's files read back.

mteb's layout (``ResultCache``, ``embeddings-benchmark/results``): ``<org>__<model>/<revision>/<TaskName>.json``
(a ``TaskResult``: ``task_name``, ``dataset_revision``, ``mteb_version``, ``evaluation_time``,
``scores.<split>[{hf_subset, languages, main_score, ...}]``) beside ``model_meta.json``. Which dataset is which
mteb task is each catalog entry's ``mteb_task`` (and ``mteb_subset``) in ``conf/task/<family>.yaml``; ``task=mteb``
records carry theirs. Export writes through mteb's classes (``pip install 'harness[mteb]'``); reading (the
leaderboard's published rows) needs only the JSON."""
