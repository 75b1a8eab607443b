#!/usr/bin/env python3
"""Compares the counters `gpuxray run --kernel-metrics` measured (an `analyze --format json` report's
results.kernel_metrics) with Nsight Compute's for the same kernels (`ncu --csv --page raw --metrics ...`),
metric by metric: the median over each kernel's profiled launches on both sides, within a tolerance
(5 % by default; values both below an absolute floor count as equal). Used by scripts/gpu-check.sh.

  kernel_metrics_vs_ncu.py REPORT.json KERNEL_REGEX NCU.csv [--tolerance-pct 5] [--figures FILE PREFIX]
  kernel_metrics_vs_ncu.py --self-test

Prints one line per metric and `RESULT PASS|FAIL`; exit 0 when every compared metric agrees, 1 when
one does not, 2 when a side has no such kernel.
"""
import csv
import io
import json
import re
import statistics
import sys

# The trace fields and the CUPTI metric (the same name ncu takes) each holds: docs/kernel-metrics.md.
FIELDS = {
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "tensor_pipe_pct": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "l2_bytes": "lts__t_bytes.sum",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    "l1_bytes": "l1tex__t_bytes.sum",
    "l1_hit_rate_pct": "l1tex__t_sector_hit_rate.pct",
    "shared_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "local_load_bytes": "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
    "local_store_bytes": "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",
    "gpu_duration_ns": "gpu__time_duration.sum",
}
# Below these both sides are "nothing": a relative difference of noise means nothing.
FLOORS = {"pct": 1.0, "bytes": 1 << 20, "wavefronts": 1000, "ns": 2000}
# ncu reports some of them in scaled units.
SCALE = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "nsecond": 1, "usecond": 1e3, "msecond": 1e6,
         "%": 1, "": 1}


def floor_of(field):
    for suffix, floor in (("_pct", FLOORS["pct"]), ("_bytes", FLOORS["bytes"]), ("_ns", FLOORS["ns"])):
        if field.endswith(suffix):
            return floor
    return FLOORS["wavefronts"]


def ours(report, pattern):
    results = report.get("results", {}).get("kernel_metrics")
    if results is None:
        return None
    matching = [k for k in results["kernels"] if re.search(pattern, k["name"])]
    if not matching:
        return None
    # The kernel with the most measured launches (several may match a loose pattern).
    best = max(matching, key=lambda k: k["launches"])
    return best["name"], best["launches"], {f: best["metrics"].get(f) for f in FIELDS}


def theirs(csv_text, pattern):
    lines = [line for line in csv_text.splitlines() if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 3:
        return None
    header, units, data = rows[0], rows[1], rows[2:]
    name_column = header.index("Kernel Name")
    data = [r for r in data if re.search(pattern, r[name_column])]
    if not data:
        return None
    values = {}
    for field, metric in FIELDS.items():
        if metric not in header:
            values[field] = None
            continue
        column = header.index(metric)
        scale = SCALE.get(units[column], 1)
        numbers = []
        for r in data:
            try:
                numbers.append(float(r[column].replace(",", "")) * scale)
            except ValueError:
                pass
        values[field] = statistics.median(numbers) if numbers else None
    return data[0][name_column], len(data), values


def compare(mine, ncu, tolerance_pct, figures=None, prefix=""):
    failures = 0
    for field in FIELDS:
        a, b = mine.get(field), ncu.get(field)
        if a is None or b is None:
            print(f"  {field:24s} gpuxray={a} ncu={b}: not compared (one side did not measure it)")
            continue
        floor = floor_of(field)
        if abs(a) < floor and abs(b) < floor:
            verdict, diff = "same (both below %g)" % floor, 0.0
        else:
            diff = 100.0 * abs(a - b) / max(abs(b), floor)
            verdict = "ok" if diff <= tolerance_pct else "DIFFERS"
            failures += verdict != "ok"
        print(f"  {field:24s} gpuxray={a:.6g} ncu={b:.6g} diff={diff:.2f} % {verdict}")
        if figures is not None:
            figures.write(f"{prefix}{field}.diff_pct={diff:.3f}\n")
    return failures


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    report_path, pattern, csv_path = argv[1:4]
    tolerance = 5.0
    figures, prefix = None, ""
    rest = argv[4:]
    while rest:
        if rest[0] == "--tolerance-pct":
            tolerance, rest = float(rest[1]), rest[2:]
        elif rest[0] == "--figures":
            figures, prefix, rest = open(rest[1], "a"), rest[2], rest[3:]
        else:
            print(f"kernel_metrics_vs_ncu.py: unknown argument {rest[0]}", file=sys.stderr)
            return 2
    with open(report_path) as f:
        mine = ours(json.load(f), pattern)
    with open(csv_path) as f:
        ncu = theirs(f.read(), pattern)
    if mine is None or ncu is None:
        print(f"no kernel matching {pattern!r} in {'the report' if mine is None else 'ncu output'}")
        return 2
    print(f"{mine[0][:80]}: {mine[1]} launches measured by gpuxray, {ncu[1]} by ncu")
    failures = compare(mine[2], ncu[2], tolerance, figures, prefix)
    # Counters whose launch the loader did not find: the correlation id of the launch call is not
    # the one the kernel record carries.
    with open(report_path) as f:
        orphans = json.load(f)["results"]["kernel_metrics"]["launches_not_found"]
    if orphans:
        print(f"  {orphans} measured launches have no kernel record with their correlation id")
        failures += 1
    print(f"RESULT {'PASS' if failures == 0 else 'FAIL'}: {failures} metrics differ by more than {tolerance} %")
    return 0 if failures == 0 else 1


def self_test():
    metrics = {f: (100.0 + i) if f.endswith("_pct") else 1e9 * (i + 1) for i, f in enumerate(FIELDS)}
    metrics["local_load_bytes"] = 0.0
    report = {"results": {"kernel_metrics": {"kernels": [
        {"name": "xray_scale", "launches": 3, "metrics": metrics}]}}}
    names = list(FIELDS.values())
    header = ['"ID"', '"Kernel Name"'] + [f'"{n}"' for n in names]
    units = ['""', '""'] + ['"%"' if n.endswith("pct") else '"byte"' for n in names]
    def row(i, scale):
        values = [metrics[f] * scale for f in FIELDS]
        return [f'"{i}"', '"xray_scale"'] + [f'"{v}"' for v in values]
    text = "==PROF== Connected\n" + "\n".join(",".join(r) for r in (header, units, row(0, 1.01), row(1, 1.02), row(2, 0.99)))
    mine = ours(report, "^xray_scale$")
    ncu = theirs(text, "^xray_scale$")
    assert mine and ncu and ncu[1] == 3, (mine, ncu)
    assert compare(mine[2], ncu[2], 5.0) == 0
    far = "\n".join(",".join(r) for r in (header, units, row(0, 1.2)))
    assert compare(mine[2], theirs(far, "xray")[2], 5.0) > 0
    assert theirs(text, "gemm") is None and ours(report, "gemm") is None
    print("self-test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
