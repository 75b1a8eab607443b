#!/usr/bin/env python3
"""What Holistic Trace Analysis's TraceDiff.compare_traces gives on two PyTorch-profiler traces, by its
rules (HTA 0.6.1, hta/trace_diff.py and hta/common/trace.py's add_iteration), without pandas: every
iteration (ProfilerStep#N) of the one rank of each trace, the last step kept
(include_last_profiler_step=True), use_short_name=False. Prints, per name, the counts and total
durations of the control and the test trace and their difference, for tests/diff_hta_test.cc.

  python3 tests/support/hta_trace_diff_reference.py CONTROL.json.gz TEST.json.gz

HTA's rules used here: times are whole microseconds (ts = ceil(ts), end = floor(ts + dur), dur = end -
ts); a CPU event (no stream) belongs to the step whose [ts, ts + dur) holds its ts; a GPU event
(kernel, gpu_memcpy, gpu_memset, cuda_sync: args.stream set) to the step of the CPU event with its
correlation id; events of no step are left out. Only the categories gpuxray loads as ops
(user_annotation, cuda_runtime, cuda_driver) are printed for the CPU side.
"""
import gzip
import json
import math
import sys
from collections import defaultdict

CPU_CATEGORIES = {"user_annotation", "cuda_runtime", "cuda_driver"}
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_sync"}


def summary(path):
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    steps = []
    for e in events:
        if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#"):
            start = math.ceil(e["ts"])
            steps.append((start, math.floor(e["ts"] + e["dur"]) - start))

    def step_of(ts):
        found = -1
        for i, (start, dur) in enumerate(steps):
            if start <= ts < start + dur:
                found = i
        return found

    cpu_step = {}
    totals = defaultdict(lambda: [0, 0])
    for e in events:
        if e.get("ph") != "X" or "ts" not in e or "dur" not in e:
            continue
        ts = math.ceil(e["ts"])
        dur = math.floor(e["ts"] + e["dur"]) - ts
        args = e.get("args", {})
        if e.get("cat") in GPU_CATEGORIES:
            continue
        step = step_of(ts)
        if "correlation" in args:
            cpu_step[args["correlation"]] = step
        if step >= 0 and e.get("cat") in CPU_CATEGORIES and not e["name"].startswith("ProfilerStep#"):
            totals[("op", e["name"])][0] += 1
            totals[("op", e["name"])][1] += dur
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in GPU_CATEGORIES:
            continue
        args = e.get("args", {})
        if args.get("stream", -1) == -1:
            continue
        if cpu_step.get(args.get("correlation"), -1) < 0:
            continue
        ts = math.ceil(e["ts"])
        dur = math.floor(e["ts"] + e["dur"]) - ts
        totals[("gpu", e["name"])][0] += 1
        totals[("gpu", e["name"])][1] += dur
    return totals


control, test = summary(sys.argv[1]), summary(sys.argv[2])
for key in sorted(set(control) | set(test), key=lambda k: (k[0], -abs(test.get(k, [0, 0])[1] - control.get(k, [0, 0])[1]))):
    c, t = control.get(key, [0, 0]), test.get(key, [0, 0])
    print(f"{key[0]}\t{c[0]}\t{t[0]}\t{c[1]}\t{t[1]}\t{t[0] - c[0]}\t{t[1] - c[1]}\t{key[1]}")
