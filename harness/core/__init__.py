"""The ground every package stands on: records, run identity, where files go, typed settings, registries, errors."""
