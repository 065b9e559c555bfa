import pytest

from tests.arbor.dashboard.shared_campaign import SharedCampaign, shared_campaign


@pytest.fixture(scope="session")
def shared() -> SharedCampaign:
    """A finished two-evaluation campaign (run once per session, shared with the other package)."""
    return shared_campaign()
