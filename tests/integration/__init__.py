"""The integration tier: the tests that start processes (the CLI, git, pytest, podman, Ray, a browser) (#41)."""
