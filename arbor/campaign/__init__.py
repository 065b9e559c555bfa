"""The campaign engine: everything between a validated spec and a finished campaign.

* ``run``           — set up, resume and summarise a campaign (``run_campaign``, ``summarize``);
* ``graph``         — the LangGraph wiring of the loop and its checkpoints;
* ``steps``         — the loop's nodes: select, propose, measure, judge;
* ``context``       — what every step shares; ``stopping`` — when to stop;
* ``verify``        — final verification of the best node before reporting;
* ``agent_setup``, ``llm_setup``, ``sandbox_setup`` — wiring of the agents, the LLM backend and the sandbox;
* ``source``        — campaign YAML / database file / URL → store + campaign, for every reader.

Import the submodule you need: this package imports nothing, so a read command does not pay for
LangGraph.
"""
