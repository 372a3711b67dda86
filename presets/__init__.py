"""Reward presets, one readable file each: math, coding, llm_judge, tool_use, custom.

Each defines ``grade(sample, item)``. Copy one with ``agentrl reward new --preset NAME > reward.py``.
"""
