"""Facts: probe commands and pure parsers of their raw output."""
