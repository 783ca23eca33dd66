"""Instructor solutions, one module per exercise (left out of the student copy)."""
