"""Raw store: content-addressed zstd blobs, input-format readers, chunker, lake paths."""
