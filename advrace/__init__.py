"""advrace: frozen, versioned, checksummed adversarial benchmarks for reading comprehension."""

__version__ = "0.1.0"
