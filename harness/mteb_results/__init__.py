"""mteb's results format (``<org>__<model>/<revision>/<TaskName>.json`` beside ``model_meta.json``), both ways:
harness records exported through mteb's classes, mteb's files read back (JSON only). Which dataset is which mteb
task is each catalog entry's ``mteb_task`` (and ``mteb_subset``); ``task=mteb`` records carry theirs."""
