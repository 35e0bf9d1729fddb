"""GLUE (task=glue): the paper's fine-tuning sweeps, from settings and grid to records."""
