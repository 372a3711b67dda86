"""A stdio "MCP server" that starts, says so on stderr, and never answers: ``python hung_server.py STARTS_FILE``.

Each start appends a line to STARTS_FILE, so a test can count how often a client tried it.
"""

import sys
import time

with open(sys.argv[1], "a") as fh:
    fh.write("started\n")
sys.stderr.write("hung_server: loading the index (this takes forever)\n")
sys.stderr.flush()
time.sleep(3600)
