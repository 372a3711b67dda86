"""Before and after training: check and split data, check the prior, evaluate, compare, inspect, export.

    agentrl data check data/train.jsonl --config configs/demo.yaml
    agentrl prior configs/demo.yaml --samples 5 --limit 50
    agentrl eval configs/demo.yaml --model base -o base.jsonl
    agentrl eval configs/demo.yaml --model runs/demo -o tuned.jsonl
    agentrl compare base.jsonl tuned.jsonl --by metadata.expected_tools
    agentrl inspect compare.json --worst 5
    agentrl export runs/demo exported/

Everything that generates runs the training agent loop (:class:`agentrl.verl.agent_loop.AgentrlAgentLoop`)
against a local engine (:mod:`agentrl.verl.engine`), so tools, parsing, budgets and rewards are the
ones training uses.
"""
