"""The agentrl plugin: the ``bfcl`` dataset converter and the ``bfcl_ast`` reward.

Kept light: bfcl-eval is imported only when rows are converted or a rollout is scored.
"""

from agentrl.hookspecs import hookimpl


@hookimpl
def register_dataset_converters(register):
    from agentrl_bfcl.rows import rows

    register("bfcl", rows, description="BFCL v4 rows (bfcl-eval 2026.3.23): --from bfcl CATEGORY[:train|:heldout]")
