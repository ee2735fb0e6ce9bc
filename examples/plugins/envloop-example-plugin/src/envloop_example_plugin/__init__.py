"""An example envloop plugin: the `greeter` agent and the `keywords` JSONL scorer."""
