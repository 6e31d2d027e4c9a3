"""Example handlers used by the repository's ``schedules.yaml``."""
