"""irtlib."""
