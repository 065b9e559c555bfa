"""Stable, documented SQL views for `arbor query` and any SQL tool (docs/campaigns.md#sql-views).

The tables may change between versions; these views are the interface users write queries
against. ``v_verdicts`` pulls the Critic's measured speedup out of the gate log (the last gate's
``stats.speedup``), which is where a rejected node's speedup lives; ``verified_speedup`` is the
node's speedup once accepted. JSON extraction is the one dialect-specific part.

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

V_NODES = """
CREATE VIEW v_nodes AS
SELECT n.id AS node_id, c.name AS campaign, n.campaign_id, n.parent_id, n.depth, n.state,
       n.specialist, n.move_id AS move, n.family, n.hypothesis, n.speedup AS verified_speedup,
       n.value, n.diagnosis, n.reason, n.step, n.artifact_sha, n.created_at, n.finished_at
FROM nodes n JOIN campaigns c ON c.id = n.campaign_id
"""

V_MEASUREMENTS = """
CREATE VIEW v_measurements AS
SELECT m.id AS measurement_id, m.node_id, c.name AS campaign, n.campaign_id, n.move_id AS move,
       m.attempt, m.purpose, m.status, m.error_class, m.runner, m.duration_s, m.created_at
FROM measurements m JOIN nodes n ON n.id = m.node_id JOIN campaigns c ON c.id = n.campaign_id
"""

V_VERDICTS = """
CREATE VIEW v_verdicts AS
SELECT v.id AS verdict_id, v.node_id, c.name AS campaign, n.campaign_id, n.move_id AS move,
       n.family, v.decision, v.diagnosis, v.reason, {critic} AS critic_speedup,
       n.speedup AS verified_speedup, v.agent, v.created_at
FROM verdicts v JOIN nodes n ON n.id = v.node_id JOIN campaigns c ON c.id = n.campaign_id
"""

CRITIC_SPEEDUP = {
    "sqlite": "CAST(json_extract(v.gates, '$[#-1].stats.speedup') AS REAL)",
    "postgresql": "CAST((v.gates::json -> -1 -> 'stats' ->> 'speedup') AS DOUBLE PRECISION)",
}


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    critic = CRITIC_SPEEDUP.get(dialect, "NULL")
    for sql in (V_NODES, V_MEASUREMENTS, V_VERDICTS.format(critic=critic)):
        op.execute(sql)


def downgrade() -> None:
    for view in ("v_verdicts", "v_measurements", "v_nodes"):
        op.execute(f"DROP VIEW IF EXISTS {view}")
