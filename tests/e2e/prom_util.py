"""A real Prometheus (Debian's `prometheus` package, installed by
scripts/deps.sh) for the tests that scrape a server: started on 127.0.0.1 on
a free port with the test's configuration and a temporary data folder,
stopped afterwards."""
import contextlib
import os
import shutil
import subprocess

import pytest

from conftest import free_port, stop_process

PROMETHEUS = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None)


@contextlib.contextmanager
def running_prometheus(tmp_path, config_text):
    """Yields the base URL of a Prometheus loading config_text. Skips the
    test when prometheus is missing, and fails it under CI, where
    scripts/deps.sh must have installed it."""
    if not PROMETHEUS:
        if os.environ.get("CI") == "true":
            pytest.fail("prometheus is missing under CI: scripts/deps.sh must install it")
        pytest.skip("prometheus is not installed (apt-get install prometheus, or scripts/deps.sh)")
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(config_text)
    port = free_port()
    log = open(tmp_path / "prometheus.log", "w")
    proc = subprocess.Popen(
        [PROMETHEUS, "--config.file=%s" % cfg, "--storage.tsdb.path=%s" % (tmp_path / "tsdb"),
         "--web.listen-address=127.0.0.1:%d" % port],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        yield "http://127.0.0.1:%d" % port
    finally:
        stop_process(proc)
        log.close()
