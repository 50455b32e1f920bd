"""Running the e2e tests' Node.js clients (tests/e2e/node): the official
OpenAI SDK, installed by `make node-deps` from the committed lock file.
Without node the tests skip with that reason; with node but without the SDK
they fail (the setup is broken, not absent)."""
import json
import os
import shutil
import subprocess

import pytest

NODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node")


def need_node():
    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed (scripts/deps.sh installs nodejs and npm)")
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "openai")):
        pytest.fail("the openai npm package is missing: run `make node-deps` "
                    "(npm ci in tests/e2e/node)")
    return node


def run_node(script, *args, timeout=300):
    """Runs tests/e2e/node/SCRIPT with args; returns its last stdout line as
    JSON, or fails the test with its output."""
    node = need_node()
    p = subprocess.run([node, os.path.join(NODE_DIR, script)] + [str(a) for a in args],
                       cwd=NODE_DIR, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        pytest.fail("%s exited %d:\n%s\n%s" % (script, p.returncode, p.stdout[-3000:],
                                                p.stderr[-3000:]))
    return json.loads(p.stdout.strip().splitlines()[-1])
