"""R2G: per-message NLP (spaCy English, jieba-backed Chinese) and raw-to-graph rules."""
