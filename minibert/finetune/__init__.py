"""Fine-tuning: the GLUE tasks' files (``glue.py``), their metrics (``metrics.py``) and BERT with a
classifier or regression head on the pooled [CLS] vector (``model.py``)."""
