"""The unit tier: no process, no network (#41); see conftest.py."""
