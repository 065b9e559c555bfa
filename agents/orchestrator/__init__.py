"""The Orchestrator role: the heuristic tree-policy selector (``heuristic``) and the LLM one
(``llm``). Both implement ``arbor.agents.contracts.Orchestrator``."""
