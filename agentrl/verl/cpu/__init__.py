"""What verl lacks to train on a machine with no GPU: a CPU platform and a transformers rollout.

Loaded through verl's own ``verl.plugins`` entry point (see ``agentrl.verl.plugin``); nothing in verl
is changed on disk. With a GPU present, none of this is selected and verl's vLLM rollout is used.
"""

ROLLOUT_NAME = "agentrl_cpu"  # actor_rollout_ref.rollout.name of agentrl's CPU rollout (registration.py registers it)
