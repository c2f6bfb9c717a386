"""Prints the side-by-side table of the load reports in a folder (<peer>.n<N>.json)."""

import glob
import json
import os
import sys

NAMES = {"loopbound": "loopbound", "agent_framework": "Microsoft Agent Framework", "pydantic_ai": "Pydantic AI"}


def main(folder: str) -> None:
    reports = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            report = json.load(f)
        if "runs" in report and "peer" in report:
            reports.append(report)
    reports.sort(key=lambda r: (r["runs"], r["peer"] != "loopbound", r.get("journal") or "", r["peer"]))
    base = {r["runs"]: r for r in reports if r["peer"] == "loopbound" and not r.get("journal")}
    print("| N | framework | completed | memory per waiting run | added latency p50 / p99 per call "
          "| start to 1st request p99 | CPU per run | throughput | peak RSS | memory, CPU vs loopbound |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    empty = {"p50_us": float("nan"), "p99_us": float("nan")}
    for r in reports:
        for key in ("memory_per_waiting_run_kib", "cpu_per_run_us", "throughput_runs_per_s", "peak_rss_mib"):
            r.setdefault(key, float("nan"))
        r.setdefault("added_latency_us", empty)
        r.setdefault("start_to_first_request_us", empty)
        name = NAMES.get(r["peer"], r["peer"]) + (f" (journal: {r['journal']})" if r.get("journal") else "")
        lat, first = r["added_latency_us"], r["start_to_first_request_us"]
        ref = base.get(r["runs"])
        if ref is None or r is ref:
            ratio = "1×" if r is ref else "n/a"
        else:
            mem = r["memory_per_waiting_run_kib"] / max(ref["memory_per_waiting_run_kib"], 1e-9)
            cpu = r["cpu_per_run_us"] / max(ref["cpu_per_run_us"], 1e-9)
            ratio = f"{mem:.1f}×, {cpu:.1f}×"
        status = f"{r['completed']}/{r['runs']}" + ("" if not r["failures"] else " FAILED")
        print(f"| {r['runs']:,} | {name} | {status} | {r['memory_per_waiting_run_kib']:.1f} KiB "
              f"| {lat['p50_us'] / 1000:.2f} / {lat['p99_us'] / 1000:.2f} ms | {first['p99_us'] / 1000:.1f} ms "
              f"| {r['cpu_per_run_us']:,.0f} µs | {r['throughput_runs_per_s']:,.0f} runs/s "
              f"| {r['peak_rss_mib']:.0f} MiB | {ratio} |")
    journaled = [r for r in reports if r.get("journal_effect_us")]
    for r in journaled:
        e = r["journal_effect_us"]
        print(f"\nloopbound journaled on {r['journal']} at N = {r['runs']:,}: {r['throughput_runs_per_s']:,.0f} runs/s, "
              f"effect (its two commits) p50 {e['p50_us'] / 1000:.2f} ms, p99 {e['p99_us'] / 1000:.2f} ms "
              f"over {e['count']:,} effects")
    for r in reports:
        for failure in r["failures"][:3]:
            print(f"\n{r['peer']} at N = {r['runs']:,}: {failure}")


if __name__ == "__main__":
    main(sys.argv[1])
