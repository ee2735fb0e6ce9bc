"""Running the queue: workers, executors, and the embedded background worker."""
