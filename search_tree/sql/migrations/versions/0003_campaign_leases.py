"""One writer per campaign: the campaign lease (owner, host, pid, heartbeat).

Two ``arbor run`` of one campaign used to interleave their steps and trip over each other's node
transitions; the lease makes the second one refuse (or take over from a dead owner) up front.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "campaign_leases",
        sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaigns.id"), primary_key=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("acquired_at", sa.DateTime, nullable=False),
        sa.Column("heartbeat_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("campaign_leases")
