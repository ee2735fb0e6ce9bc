"""envloop: self-hosted evaluation of AI models and agents."""

__version__ = "0.1.0"
