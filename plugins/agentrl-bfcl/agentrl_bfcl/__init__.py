"""agentrl-bfcl: the Berkeley Function Calling Leaderboard (bfcl-eval 2026.3.23) as an agentrl plugin.

    pip install --no-deps bfcl-eval==2026.3.23 && pip install -e plugins/agentrl-bfcl
    agentrl data convert --from bfcl simple_python:train -o data/bfcl_train.jsonl
    # a config: rewards [{"name": "bfcl_ast"}]; the rows declare BFCL's functions, nothing serves them

Rows come from bfcl-eval's own data files through its own loaders (``agentrl_bfcl.rows``), and the
``bfcl_ast`` reward scores the calls a rollout made with bfcl-eval's own AST checker (``agentrl_bfcl.ast_reward``),
reached without its model registry (``agentrl_bfcl.bfcl``). Multi-turn rows are played against BFCL's own
environments served as the ``bfcl`` MCP server (``agentrl_bfcl.server``) and scored by ``bfcl_multi_turn``
(``agentrl_bfcl.multi_turn_reward``), bfcl-eval's multi-turn checker.
"""

__version__ = "0.1.0"
