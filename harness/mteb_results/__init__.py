"""mteb's results format, both ways: harness records exported through mteb's classes, mteb's files read back.

Which dataset is which mteb task is each catalog entry's ``mteb_task`` (and ``mteb_subset``)."""
