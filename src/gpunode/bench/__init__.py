"""inv bench: a serving benchmark run on the target (client.py), its statistics, the results
document (schema.py), comparisons, the job's ETA and an optional plot."""
