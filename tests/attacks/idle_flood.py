"""The battery's idle-connection flood, by hand: N idle HTTP/2 connections from 127.0.0.1
(preface + SETTINGS, then silence but for answering the server's PINGs), /healthz timed from 127.0.0.2 meanwhile, and how many are closed
after the idle time.

    python3 tests/attacks/idle_flood.py PORT N IDLE_SECONDS
    # against `wasmrpc serve --listen 127.0.0.1:PORT --idle-timeout-s IDLE_SECONDS`
"""
import asyncio
import socket
import statistics
import sys
import time

PORT = int(sys.argv[1]); N = int(sys.argv[2]); IDLE = float(sys.argv[3])
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
opened = refused = closed = 0

async def one():
    global opened, refused, closed
    try:
        r, w = await asyncio.open_connection("127.0.0.1", PORT)
    except OSError:
        refused += 1; return
    w.write(PREFACE); await w.drain()
    first = True
    while True:
        try:
            data = await r.read(65536)
        except OSError:
            data = b""
        if first:
            first = False
            if data.startswith(b"HTTP/1.1 503"):
                refused += 1; w.close(); return
            opened += 1
        if not data:
            closed += 1; w.close(); return
        # answer a PING (type 6, no ACK flag) with its ACK
        i = 0
        while i + 9 <= len(data):
            ln = int.from_bytes(data[i:i+3], "big"); t = data[i+3]; fl = data[i+4]
            if t == 6 and not fl & 1:
                w.write(b"\x00\x00\x08\x06\x01\x00\x00\x00\x00" + data[i+9:i+17])
            i += 9 + ln

def healthz_ms():
    s = socket.socket(); s.bind(("127.0.0.2", 0)); t = time.perf_counter()
    s.connect(("127.0.0.1", PORT)); s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    ok = s.recv(100).startswith(b"HTTP/1.1 200"); s.close()
    return (time.perf_counter() - t) * 1000, ok

async def main():
    t0 = time.time()
    tasks = [asyncio.create_task(one()) for _ in range(N)]
    await asyncio.sleep(min(3, IDLE / 2))
    lat = [healthz_ms() for _ in range(20)]
    print(f"after {time.time()-t0:.1f} s: opened {opened}, refused {refused}, closed {closed}; "
          f"/healthz from 127.0.0.2: all 200 {all(ok for _, ok in lat)}, median {statistics.median(l for l, _ in lat):.2f} ms, max {max(l for l, _ in lat):.2f} ms")
    await asyncio.wait(tasks, timeout=IDLE + 15)
    print(f"after {time.time()-t0:.1f} s: opened {opened}, refused {refused}, closed {closed}")
asyncio.run(main())
