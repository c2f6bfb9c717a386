"""Added latency per model call measured on the wire, from a loopback capture of a load run.

    tcpdump -i lo -w cap.pcap -s 0 -B 65536 "tcp port PORT" &
    load --runs 10000 --watch --latency-ms 3000 --release-over-ms 9000 --server http://127.0.0.1:PORT/v1
    python3 wire_gaps.py cap.pcap PORT

For each reply that carries a run's tool call (`call_<run>_<n>`), the gap is the time from its
packet to the first packet of the run's next request (`run=<run>` in its body), by the kernel's
capture timestamps: no process's scheduling is inside it. Gaps are split by whether the next
request went out on the connection the reply came on, another pooled one, or a new one.
"""

import collections
import re
import struct
import sys


def packets(path):
    data = open(path, "rb").read()
    nano = struct.unpack("<I", data[:4])[0] == 0xA1B23C4D
    link = struct.unpack("<I", data[20:24])[0]
    offset = 24
    while offset + 16 <= len(data):
        seconds, fraction, length, _ = struct.unpack("<IIII", data[offset : offset + 16])
        offset += 16
        frame = data[offset : offset + length]
        offset += length
        ip = frame[14 if link == 1 else 0 :]
        if len(ip) < 20 or ip[0] >> 4 != 4:
            continue
        tcp = ip[(ip[0] & 15) * 4 :]
        source, destination = struct.unpack(">HH", tcp[:4])
        yield seconds + fraction / (1e9 if nano else 1e6), source, destination, tcp[13], tcp[(tcp[12] >> 4) * 4 :]


def main(path, port):
    replies, requests, opened = {}, collections.defaultdict(list), {}
    for time, source, destination, flags, payload in packets(path):
        if destination == port and flags & 2:
            opened[source] = time
        if not payload:
            continue
        if destination == port and payload.startswith(b"POST /v1/chat"):
            found = re.search(rb"run=([A-Za-z0-9_-]+)", payload)
            if found:
                requests[found.group(1)].append((time, source))
        elif source == port:
            for found in re.finditer(rb"call_([A-Za-z0-9-]+)_(\d)", payload):
                replies.setdefault((found.group(1), found.group(2)), (time, destination))
    gaps = collections.defaultdict(list)
    for (run, _), (time, connection) in replies.items():
        later = [request for request in requests[run] if request[0] > time]
        if not later:
            continue
        sent, used = min(later)
        kind = "same connection" if used == connection else "new connection" if opened.get(used, 0) > time else "another pooled connection"
        gaps[kind].append((sent - time) * 1e6)
        gaps["all"].append((sent - time) * 1e6)
    for kind, values in sorted(gaps.items()):
        values.sort()
        at = lambda p: values[min(len(values) - 1, int(p * len(values)))]
        slow = sum(1 for value in values if value >= 500) / len(values)
        print(f"{kind}: {len(values)} gaps, p50 {at(.5):.0f} µs, p90 {at(.9):.0f} µs, p99 {at(.99):.0f} µs, max {values[-1]:.0f} µs, {slow:.1%} at 500 µs or more")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
