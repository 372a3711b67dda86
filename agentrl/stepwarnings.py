"""Why a training step is worth a warning, from its metrics.jsonl line: what the watcher prints and writes.

    no_signal(line)       # "no learning signal: ..." when the update changed nothing, else ""
    sampler_fault(line)   # "the rollout's tokens are unlikely ..." when the rollout samples off the model, else ""

Both read only the line (agentrl's names, ``agentrl.verl.metric_names``); nothing here imports verl.
"""

from __future__ import annotations


def no_signal(line: dict) -> str:
    """Why a training step taught nothing ("" when it may have): every group's rewards equal, or a zero
    gradient norm. The job page and the console say the same words."""
    share, grad = line.get("frac_reward_zero_std"), line.get("grad_norm")
    if share == 1.0:
        mean = line.get("reward_mean")
        return ("no learning signal: in every group the samples got the same reward"
                + (f" (mean {mean:.2f})" if isinstance(mean, (int, float)) else "")
                + ", so every GRPO advantage is 0 and the update changes nothing. If every sample was right, the "
                  "prompts are learnt or too easy; if every one was wrong, make the task easier or the reward finer "
                  "(partial credit), raise samples_per_prompt or the temperature, and check the reward on a few "
                  "rollouts (`agentrl prior`)")
    if grad == 0.0:
        return ("no learning signal: the gradient norm is 0, so the update changes nothing (all advantages 0, "
                "or every rollout left out as unscorable)")
    return ""


SAMPLER_MARGIN = 2.0  # nats a token above the policy's entropy


def sampler_fault(line: dict) -> str:
    """Why the rollout's tokens look sampled from another distribution than the trainer's model ("" when they do
    not): at temperature 1 their mean -log p under the trainer's weights is about the policy's entropy; far above it
    the rollout engine's sampling or its weights are wrong while its log-probs may still match the trainer's."""
    ppl, entropy = line.get("rollout_log_ppl"), line.get("entropy")
    if not isinstance(ppl, (int, float)) or not isinstance(entropy, (int, float)) or ppl <= entropy + SAMPLER_MARGIN:
        return ""
    return (f"the rollout's tokens are unlikely under the trainer's weights: {ppl:.2f} nats a token against a policy "
            f"entropy of {entropy:.2f}, so the rollout engine samples from another distribution than the model it "
            f"serves (a sampler or weight-sync fault; vLLM's CPU build did this with ATEN_CPU_CAPABILITY=avx2). Read a "
            f"few rollouts; on a CPU agentrl.rollout=transformers avoids it. A temperature far above 1 also raises it")
