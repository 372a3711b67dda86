"""The agentrl plugin: the ``bfcl`` and ``bfcl-answers`` dataset converters, the ``bfcl_ast`` and ``bfcl_multi_turn`` rewards and the
``bfcl`` tool server (BFCL's multi-turn environments, one process per rollout), and the ``agentrl bfcl`` command
(eval files scored by bfcl-eval's own runner).

Kept light: bfcl-eval is imported only when rows are converted, a rollout is scored or the server runs.
"""

import sys

from agentrl.hookspecs import hookimpl


@hookimpl
def register_dataset_converters(register):
    from agentrl_bfcl.rows import rows

    register("bfcl", rows, description="BFCL v4 rows (bfcl-eval 2026.3.23): --from bfcl CATEGORY[:train|:heldout]")
    from agentrl_bfcl.answers import answer_rows

    register("bfcl-answers", answer_rows,
             description="BFCL single-turn rows with their answer in metadata.demonstration (warm-up data)")


@hookimpl
def register_rewards(register):
    from agentrl_bfcl import ast_reward, multi_turn_reward

    register("bfcl_ast", ast_reward.grade,
             description="BFCL single-turn rows (relevance/irrelevance included), scored by bfcl-eval's own AST checker")
    register("bfcl_multi_turn", multi_turn_reward.grade,
             description="BFCL multi-turn rows, scored by bfcl-eval's own multi-turn checker (state and response, turn by turn)")


@hookimpl
def register_tool_servers(register):
    register("bfcl", {"command": sys.executable, "args": ["-m", "agentrl_bfcl.server"], "stateful": True},
             description="BFCL's multi-turn environments (file system, math, messages, posts, tickets, trading, "
                         "travel, vehicle), one state per rollout from the row's initial config")


@hookimpl
def register_commands(register):
    from agentrl_bfcl import runner

    register("bfcl", runner.add_arguments,
             description="BFCL: agentrl eval files scored by bfcl-eval's own runner (export-results, side-by-side)")
