"""A child for tests/bench/test_forked_children.py: `python -m tests.bench.child_probe WHAT`
prints what a child can see of its process as its last stdout line, fails, or hangs."""

from __future__ import annotations

import json
import os
import sys
import threading

if __name__ == "__main__":
    what = sys.argv[1]
    if what == "fail":
        raise ValueError("the probe was told to fail")
    if what == "hang":
        threading.Event().wait()
    marked = hasattr(json, "probe_mark")  # json: preloaded by the zygote in the tests
    json.probe_mark = True  # type: ignore[attr-defined]
    print("noise before the result")
    facts = {"pid": os.getpid(), "argv": sys.argv[1:], "marked_before": marked}
    print(json.dumps(facts | {"cwd": os.getcwd(), "hashseed": os.environ.get("PYTHONHASHSEED")}))
