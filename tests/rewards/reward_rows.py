"""Small builders for reward tests (plain dicts, the shape users pass)."""


def sample(final_answer="", trajectories=None, **extra):
    out = {"final_answer": final_answer, "rollout_id": "r-test", **extra}
    if trajectories is not None:
        out["trajectories"] = trajectories
    return out


def item(prompt="", **metadata):
    return {"messages": [{"role": "user", "content": prompt}], "metadata": metadata}
