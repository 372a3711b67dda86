import pytest

from agentrl import plugins
from agentrl.rewards import builtin


@pytest.fixture(autouse=True)
def only_builtin_rewards():
    """Tests see the built-in presets and nothing a developer happens to have installed."""
    plugins.reset_plugin_manager(plugins.new_plugin_manager(builtin))
    yield
    plugins.reset_plugin_manager(None)
