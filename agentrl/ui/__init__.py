"""The job page: a local web app over run directories, and a one-file report.

    agentrl ui runs/                       # server.py -> app.py: http://127.0.0.1:8266/
    agentrl report runs/demo -o r.html     # report.py

Reading order: rundir.py (status, progress, config, checkpoints, log from a run directory) -> index.py
(where each rollout's line is in rollouts.jsonl) -> explorer.py (a page of rollouts, advantages) ->
app.py / report.py (pages from templates/, charts drawn by static/app.js with the installed Plotly).
synthetic.py writes made-up run directories for tests and benchmarks.
"""
