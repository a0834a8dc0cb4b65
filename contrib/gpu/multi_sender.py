#!/usr/bin/env python3
"""Several senders into one relay across GPUs, end to end through pxn (UCT
puts of GPU memory, every byte checked), on the GPU machine.

Processes are ucx_pxn_peer (the tests' driver) on emulated nodes and rails:
senders on node 0, rails A, C, E, ... (GPU 0); the relay of rail B on node 0
and the target on node 1 rail B (GPU 1 where there are two GPUs; rail index
modulo the GPUs, as in the tests). Inner transport cuda_ipc. For 1..N
senders, each puts --bytes of its own GPU buffer into its own region of the
target's buffer in --chunk operations, all at once; the aggregate is all
bytes over the time until the last sender is done.

  python3 contrib/gpu/multi_sender.py --peer gpu-carry/build/test/apps/ucx_pxn_peer
"""
import argparse, os, select, subprocess, sys, time

RAILS = "ABCDEFGH"


class Peer:
    def __init__(self, peer, node, rail, group, gpus, env_extra):
        env = dict(os.environ)
        env.update({"UCX_PXN_NODE_ID": f"node{node}",
                    "UCX_PXN_GROUP": f"{group}-node{node}",
                    "UCX_PXN_NET_TLS": "cuda_ipc",
                    "UCX_PXN_RAIL_MAP": f"cuda:rail{rail}",
                    "UCX_PXN_CUDA_DEVICE": str(RAILS.index(rail) % gpus)})
        env.update(env_extra)
        self.p = subprocess.Popen([peer, "pxn_cuda_ipc", "pxn", "cuda"], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, bufsize=1)
        if self.receive(60) != "ready":
            sys.exit(f"peer node{node}/rail{rail} did not start")

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def receive(self, timeout):
        ready, _, _ = select.select([self.p.stdout], [], [], timeout)
        return self.p.stdout.readline().strip() if ready else ""

    def call(self, line, timeout=120):
        self.send(line)
        return self.receive(timeout)

    def quit(self):
        self.send("quit")
        self.p.wait(30)


def counters(peer):
    words = peer.call("counters").split()[1:]
    return dict(w.split("=") for w in words)


def run(args, senders_n, gpus):
    group = f"ms{os.getpid()}x{senders_n}"
    size = senders_n * args.bytes
    relay = Peer(args.peer, 0, "B", group, gpus, {})
    target = Peer(args.peer, 1, "B", group, gpus, {})
    info = target.call("info").split()
    alloc = target.call(f"alloc {size} cuda").split()
    senders = []
    for i in range(senders_n):
        s = Peer(args.peer, 0, "ACEG"[i], group, gpus, {})
        assert s.call(f"alloc {size} cuda").startswith("alloc")
        assert s.call("fill 41") == "ok"
        assert s.call(f"connect {info[1]} {info[2]}") == "ok"
        senders.append(s)
    # warm-up: routes, rkeys, IPC handles
    for i, s in enumerate(senders):
        r = s.call(f"put zcopy {alloc[1]} {alloc[2]} {args.chunk} {args.chunk} {i * args.bytes}")
        assert r.startswith("done Success"), r
    start = time.monotonic()
    for i, s in enumerate(senders):
        s.send(f"put zcopy {alloc[1]} {alloc[2]} {args.bytes} {args.chunk} {i * args.bytes}")
    results = [s.receive(300) for s in senders]
    wall = time.monotonic() - start
    ok = all(r.startswith("done Success") for r in results)
    check = target.call(f"check 41 0 {size}")
    relay_c = counters(relay)
    for p in senders + [target, relay]:
        p.quit()
    per = [args.bytes / (int(r.split()[2]) / 1e9) / 1e9 for r in results if ok]
    return ok and check == "ok", size / wall / 1e9, per, relay_c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True)
    ap.add_argument("--max-senders", type=int, default=3, choices=range(1, 5))
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--chunk", type=int, default=8 << 20)
    args = ap.parse_args()
    gpus = int(subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                              text=True).stdout.count("GPU "))
    print(f"{gpus} GPUs; senders on GPU 0 (rails A, C, E), relay and target of "
          f"rail B on GPU {1 % gpus}; {args.bytes >> 20} MiB per sender in "
          f"{args.chunk >> 20} MiB puts")
    print("senders  aggregate GB/s  per sender GB/s        verified  relayed")
    failed = False
    for n in range(1, args.max_senders + 1):
        ok, agg, per, rc = run(args, n, gpus)
        failed |= not ok
        print(f"{n:7d}  {agg:14.1f}  {' '.join(f'{p:.1f}' for p in per):21s}  "
              f"{'ok' if ok else 'FAILED':8s}  {rc.get('relayed_bytes', '?')} bytes")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
