"""Efficiency (task=efficiency): inference throughput and max batch as Table 2 measured them."""
