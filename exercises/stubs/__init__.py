"""The exercise files you edit, one per exercise.

Fill in every ``TODO`` and check your work with
``python -m exercises check NAME`` (``python -m exercises list`` shows the names).
"""
