"""Operating provisioned targets: status, logs, history, start/stop/restart, teardown, metrics."""
