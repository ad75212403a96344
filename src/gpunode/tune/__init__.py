"""`inv tune`: a server's launch flags chosen by measuring them where it runs (docs/tune.md)."""
