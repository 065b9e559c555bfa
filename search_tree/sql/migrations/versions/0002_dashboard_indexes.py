"""Indexes for incremental readers (dashboard): nodes by (campaign, last write).

A dashboard polling a live campaign asks "which nodes changed since my last poll"; without this
index that is a scan of the campaign's whole tree every second.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_nodes_campaign_updated", "nodes", ["campaign_id", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_nodes_campaign_updated", table_name="nodes")
