"""Property-based tests (hypothesis)."""
