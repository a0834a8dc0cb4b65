#!/usr/bin/env python3
"""NIXL notification latency: a ping-pong of NIXL's standalone notifications
(nixl_agent.send_notif, UCP active messages in NIXL's UCX backend) between
two agents, each busy-polling get_new_notifs (no progress thread: the poll
progresses UCX). Used by contrib/nixl_check.sh --railonly (docs/nixl.md).

    nixl_notify_lat.py --target --port P [--iters N] [--warmup W]
    nixl_notify_lat.py --initiator ADDR --port P [--iters N] [--warmup W]

The two exchange their agents' metadata over one TCP connection (target
listens on P, initiator connects to ADDR:P): the out-of-band channel, not
NIXL's transport. Then the initiator sends W + N notifications one at a
time, each after the target's answer to the previous one, and times each
round trip (send_notif to the answer seen by get_new_notifs). It prints

    nixl_notify_lat: iters=N one_way_us p50=.. p90=.. p99=.. (round trip / 2)

and the target "nixl_notify_lat: target answered W+N". NIXL's python
package (nixl, or nixl_cu12 of a build from source) on PYTHONPATH.
"""
import argparse
import select
import socket
import struct
import sys
import time

try:
    from nixl import nixl_agent, nixl_agent_config
except ImportError:
    from nixl_cu12 import nixl_agent, nixl_agent_config


def send_blob(sock, blob):
    sock.sendall(struct.pack("!Q", len(blob)) + blob)


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("out-of-band peer closed")
        buf += chunk
    return buf


def recv_blob(sock):
    (n,) = struct.unpack("!Q", recv_exact(sock, 8))
    return recv_exact(sock, n)


def wait_notif(agent, peer, deadline):
    """Polls (and so progresses) until a notification from peer arrives."""
    while True:
        notifs = agent.get_new_notifs()
        if notifs.get(peer):
            return len(notifs[peer])
        if time.monotonic() > deadline:
            sys.exit("nixl_notify_lat: no notification from %s in time" % peer)


def percentile(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))]


def main():
    parser = argparse.ArgumentParser()
    role = parser.add_mutually_exclusive_group(required=True)
    role.add_argument("--target", action="store_true")
    role.add_argument("--initiator", metavar="ADDR")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--iters", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds for the whole run")
    args = parser.parse_args()
    deadline = time.monotonic() + args.timeout
    name, peer = ("target", "initiator") if args.target else ("initiator", "target")

    agent = nixl_agent(name, nixl_agent_config(enable_prog_thread=False,
                                               backends=["UCX"]))
    if args.target:
        listener = socket.create_server(("", args.port))
        listener.settimeout(args.timeout)
        sock, _ = listener.accept()
        listener.close()
    else:
        sock = socket.create_connection((args.initiator, args.port),
                                        timeout=args.timeout)
    sock.settimeout(args.timeout)
    send_blob(sock, agent.get_agent_metadata())
    added = agent.add_remote_agent(recv_blob(sock))
    if (added.decode() if isinstance(added, bytes) else added) != peer:
        sys.exit("nixl_notify_lat: the peer is not the %s" % peer)
    send_blob(sock, b"ready")   # both have each other's metadata
    recv_blob(sock)

    total = args.warmup + args.iters
    if args.target:
        answered = 0
        while answered < total:
            for _ in range(wait_notif(agent, peer, deadline)):
                agent.send_notif(peer, b"pong")
                answered += 1
        # Until the initiator saw the last answer, progress on: an
        # application that sends a notification and then only blocks may
        # hold it back (a transport may want the sender's progress)
        sock.setblocking(False)
        while not select.select([sock], [], [], 0)[0]:
            agent.get_new_notifs()
            if time.monotonic() > deadline:
                sys.exit("nixl_notify_lat: the initiator did not finish in time")
        print("nixl_notify_lat: target answered %d" % answered)
        return
    rtt_ns = []
    for i in range(total):
        start = time.perf_counter_ns()
        agent.send_notif(peer, b"ping")
        wait_notif(agent, peer, deadline)
        if i >= args.warmup:
            rtt_ns.append(time.perf_counter_ns() - start)
    send_blob(sock, b"done")
    one_way = sorted(t / 2e3 for t in rtt_ns)
    print("nixl_notify_lat: iters=%d one_way_us p50=%.1f p90=%.1f p99=%.1f "
          "(round trip / 2)" % (len(one_way), percentile(one_way, 0.5),
                                percentile(one_way, 0.9), percentile(one_way, 0.99)))


if __name__ == "__main__":
    main()
