"""The Critic: the gates that decide every verdict (``critic``, ``gates`` and the modules they
run), the serving gates, and the LLM narrator (``narrator``) that may explain a verdict but never
change it."""
