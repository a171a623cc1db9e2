"""Running one row: plan, executors, attempts, the journal, the record."""
