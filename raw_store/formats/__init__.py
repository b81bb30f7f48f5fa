"""Input formats: one module per format, registered in raw_store.formats.registry (see raw_store.readers)."""
