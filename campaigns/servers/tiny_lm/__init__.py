"""The parts of the bundled CPU inference server (``../tiny_lm_server.py`` is its entry point):
the model, the continuous-batching engine, and the OpenAI-compatible HTTP front end."""
