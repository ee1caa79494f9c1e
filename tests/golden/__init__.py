"""Golden release records of every attack; see golden_build.py and regenerate.py."""
