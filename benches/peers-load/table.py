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

    def plain(r, http2):
        return r["peer"] == "loopbound" and not r.get("journal") and bool(r.get("http2_connections")) == http2

    reports.sort(key=lambda r: (r["runs"], r["peer"] != "loopbound", r.get("journal") or "",
                                bool(r.get("http2_connections")), r["peer"]))
    base = {r["runs"]: r for r in reports if plain(r, False)}
    base_h2 = {r["runs"]: r for r in reports if plain(r, True)}
    spread = sorted({r.get("release_over_ms") or 0 for r in reports})
    if spread != [0]:
        print(f"First calls released over {', '.join(f'{w:.0f}' for w in spread)} ms; loopbound's runs each watched.\n")
    print("| N | framework | completed | memory per waiting run | added latency p50 / p99 per call "
          "| start to 1st request p99 | CPU per run | throughput | peak RSS | memory, CPU vs loopbound |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    empty = {"p50_us": float("nan"), "p99_us": float("nan")}
    for r in reports:
        for key in ("memory_per_waiting_run_kib", "cpu_per_run_us", "throughput_runs_per_s", "peak_rss_mib"):
            r.setdefault(key, float("nan"))
        r.setdefault("added_latency_us", empty)
        r.setdefault("start_to_first_request_us", empty)
        name = NAMES.get(r["peer"], r["peer"]) + (f" (journal: {r['journal']})" if r.get("journal") else "") \
            + (f" (HTTP/2 × {r['http2_connections']})" if r.get("http2_connections") else "")
        lat, first = r["added_latency_us"], r["start_to_first_request_us"]
        ref = base.get(r["runs"])
        def against(ref):
            mem = r["memory_per_waiting_run_kib"] / max(ref["memory_per_waiting_run_kib"], 1e-9)
            cpu = r["cpu_per_run_us"] / max(ref["cpu_per_run_us"], 1e-9)
            return f"{mem:.1f}×, {cpu:.1f}×"

        if ref is None or r is ref:
            ratio = "1×" if r is ref else "n/a"
        else:
            ratio = against(ref)
            h2 = base_h2.get(r["runs"])
            if r["peer"] != "loopbound" and h2 is not None:
                ratio += f" (HTTP/2: {against(h2)})"
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
