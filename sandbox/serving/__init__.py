"""Serving measurement: an OpenAI-compatible streaming load generator, the lifecycle of the server
under test, and the protocol that compares a baseline and a candidate configuration.

Like the rest of ``arbor.sandbox`` this package imports nothing from the agents or the core: it
takes plain requests and returns plain dicts, so the Critic re-derives every verdict itself.
"""
