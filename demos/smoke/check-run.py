"""Checks one `demo330 --live --json` run of the smoke script and prints what the model did.

Usage: check-run.py EXIT_CODE STDOUT. Exits 1 if the run did not end correctly.
"""

import json
import sys

KEEPS_TEXT = {"Completed", "Incomplete"}


def main() -> int:
    code, stdout = int(sys.argv[1]), sys.argv[2]
    if code == 1:
        print(f"    provider error (exit 1), no outcome: {'ok' if not stdout.strip() else 'unexpected stdout'}")
        return 0 if not stdout.strip() else 1
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError:
        print(f"    FAIL: exit {code} without one JSON object on stdout: {stdout!r}")
        return 1
    status, events, text = report["status"], report["events"], report["text"]
    print(f"    status {status} (exit {code}), text {text!r}")
    for event in events:
        print(f"      {event['kind']:<18} {event['name']:<15} {event['count']}")
    problems = []
    if code != (0 if status == "Completed" else 2):
        problems.append(f"exit code {code} does not match status {status}")
    limits = {"ModelCall": report["limits"]["model_calls"], "ToolCall": report["limits"]["tool_calls"]}
    if report.get("progress"):
        print(f"    progress {report['progress']}")
    if report.get("detail"):
        print(f"    detail {report['detail']}")
    for kind, limit in limits.items():
        admitted = sum(1 for event in events if event["kind"] == kind)
        if admitted > limit:
            problems.append(f"{admitted} {kind} events exceed the limit {limit}")
    if text is not None and status not in KEEPS_TEXT:
        problems.append(f"text kept under {status}")
    for problem in problems:
        print(f"    FAIL: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
