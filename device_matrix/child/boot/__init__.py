"""The folder the script launcher puts first on PYTHONPATH for the interpreter it becomes.

Only :mod:`sitecustomize` is here: ``site`` imports it before the script's ``__main__``,
so the launcher's journaling is installed without a frame of its own above the script's.
"""
