"""Data every protocol reads: text, JSONL and Parquet files read one way, local data sizes for work estimates."""
