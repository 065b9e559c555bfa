"""The Specialist role: heuristic move specialists for kernels and serving configs (sharing
``heuristic.HeuristicSpecialist``) and the LLM specialists that write candidates (sharing
``llm_base.LLMSpecialistBase``). All implement ``arbor.agents.contracts.Specialist``."""
