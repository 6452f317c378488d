"""A worker stopped by a signal (SIGSTOP) never hangs a job silently: the
agent says so at once, /healthz shows it, every 30 s it says that only
stopped workers keep the job alive, and a SIGCONT lets the job finish."""
import json
import os
import re
import signal
import threading
import time
import urllib.error
import urllib.request

from harness import TempDirTest, clean_env, end, read_pids, start, wait_for


class Paused(TempDirTest):
    def healthz(self, port):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:  # unhealthy answers 503, with the same body
            return json.load(e)

    def test_a_stopped_worker_is_reported_and_resumes(self):
        worker = self.script("w.sh", f"""
if [ "$RANK" = 1 ]; then echo $$ > {self.dir}/pid.1; kill -STOP $$; sleep 1; fi
echo "rank $RANK done"
""")
        p = start(["--standalone", "--nproc-per-node=2", "--no-python", "--health-port=0",
                   "--health-host=127.0.0.1", worker], env=clean_env())
        err = []
        reader = threading.Thread(target=lambda: err.extend(p.stderr), daemon=True)
        reader.start()
        try:
            wait_for(lambda: any("was stopped by SIGSTOP" in l for l in err), timeout=20,
                     what="the agent to report the stopped worker")
            port = int(re.search(r"health endpoint on http://[^ ]*:(\d+)/", "".join(err)).group(1))
            health = self.healthz(port)
            self.assertEqual(health["state"], "UNHEALTHY", health)
            self.assertEqual([w["state"] for w in health["workers"]], ["succeeded", "paused"], health)
            wait_for(lambda: any("only stopped workers keep the job alive: rank 1" in l for l in err), timeout=45,
                     what="the 30 s reminder")
            os.kill(read_pids(self.dir, "pid.")[0], signal.SIGCONT)
            self.assertEqual(p.wait(timeout=20), 0, "".join(err))
            reader.join(timeout=10)
            text = "".join(err)
            self.assertIn("rank 1 (local_rank 1, pid", text)
            self.assertIn("continued", text)
        finally:
            end(p)
