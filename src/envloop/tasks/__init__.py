"""Task formats: Harbor task directories and JSONL rows, their digests, and safe archive handling."""
