"""Initial schema: campaigns, artifacts, nodes, measurements, verdicts, events, leases.

Triggers make the audit log append-only and finished nodes immutable at the database level, so
a bug (or a second tool writing to the store) cannot rewrite history behind the store's back.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TERMINAL = "('accepted','rejected','failed','pruned')"


def upgrade() -> None:
    op.create_table(
        "campaigns",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("spec_hash", sa.String(64), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("stop_reason", sa.Text, nullable=True),
        sa.Column("elapsed_s", sa.Float, nullable=False),
        sa.Column("root_node_id", sa.Integer, nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "artifacts",
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaigns.id"), nullable=False),
        sa.Column("parent_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=True),
        sa.Column("depth", sa.Integer, nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("artifact_sha", sa.String(64), sa.ForeignKey("artifacts.sha256"), nullable=False),
        sa.Column("specialist", sa.String(60), nullable=False),
        sa.Column("move_id", sa.String(120), nullable=True),
        sa.Column("family", sa.String(120), nullable=True),
        sa.Column("hypothesis", sa.Text, nullable=False),
        sa.Column("prior", sa.Float, nullable=False),
        sa.Column("predicted_gain", sa.Float, nullable=True),
        sa.Column("value", sa.Float, nullable=True),
        sa.Column("speedup", sa.Float, nullable=True),
        sa.Column("diagnosis", sa.String(40), nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("step", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime, nullable=True),
        sa.UniqueConstraint("campaign_id", "artifact_sha", name="uq_nodes_campaign_artifact"),
    )
    op.create_index("ix_nodes_campaign_state", "nodes", ["campaign_id", "state"])
    op.create_index("ix_nodes_parent", "nodes", ["parent_id"])
    op.create_table(
        "measurements",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=False),
        sa.Column("artifact_sha", sa.String(64), sa.ForeignKey("artifacts.sha256"), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("purpose", sa.String(20), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("error_class", sa.String(40), nullable=True),
        sa.Column("error_text", sa.Text, nullable=True),
        sa.Column("baseline_samples", sa.JSON, nullable=False),
        sa.Column("candidate_samples", sa.JSON, nullable=False),
        sa.Column("stats", sa.JSON, nullable=False),
        sa.Column("correctness", sa.JSON, nullable=False),
        sa.Column("fingerprint", sa.JSON, nullable=False),
        sa.Column("runner", sa.String(20), nullable=False),
        sa.Column("duration_s", sa.Float, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("node_id", "attempt", name="uq_measurements_node_attempt"),
    )
    op.create_index("ix_measurements_node_id", "measurements", ["node_id"])
    op.create_index("ix_measurements_artifact_sha", "measurements", ["artifact_sha"])
    op.create_table(
        "verdicts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=False),
        sa.Column("measurement_id", sa.Integer, sa.ForeignKey("measurements.id"), nullable=True),
        sa.Column("decision", sa.String(20), nullable=False),
        sa.Column("diagnosis", sa.String(40), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("gates", sa.JSON, nullable=False),
        sa.Column("agent", sa.String(60), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_verdicts_node_id", "verdicts", ["node_id"])
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaigns.id"), nullable=False),
        sa.Column("node_id", sa.Integer, nullable=True),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("agent", sa.String(60), nullable=True),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
        sa.Column("cost_usd", sa.Float, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_events_campaign_id", "events", ["campaign_id", "id"])
    op.create_table(
        "leases",
        sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id"), primary_key=True),
        sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaigns.id"), nullable=False),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("acquired_at", sa.DateTime, nullable=False),
        sa.Column("heartbeat_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_leases_campaign_id", "leases", ["campaign_id"])

    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute(
            "CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events "
            "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END"
        )
        op.execute(
            "CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events "
            "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END"
        )
        op.execute(
            "CREATE TRIGGER nodes_finished_immutable BEFORE UPDATE ON nodes "
            f"WHEN OLD.state IN {TERMINAL} "
            "BEGIN SELECT RAISE(ABORT, 'finished nodes are immutable'); END"
        )
    elif dialect == "postgresql":
        op.execute(
            "CREATE FUNCTION arbor_forbid() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION 'arbor: % on % is not allowed', TG_OP, TG_TABLE_NAME; END $$ "
            "LANGUAGE plpgsql"
        )
        op.execute(
            "CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events "
            "FOR EACH ROW EXECUTE FUNCTION arbor_forbid()"
        )
        op.execute(
            "CREATE TRIGGER nodes_finished_immutable BEFORE UPDATE ON nodes FOR EACH ROW "
            f"WHEN (OLD.state IN {TERMINAL}) EXECUTE FUNCTION arbor_forbid()"
        )


def downgrade() -> None:
    for table in ("leases", "events", "verdicts", "measurements", "nodes", "artifacts", "campaigns"):
        op.drop_table(table)
