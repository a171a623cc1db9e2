"""device-matrix: run XLA training test suites across a matrix of devices."""

__version__ = "0.7.0"
