"""Batch maintenance of the lake and graph: integrity checks now; consolidation, promotion, forgetting later."""
