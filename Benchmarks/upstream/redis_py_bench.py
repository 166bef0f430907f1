"""Pipelined GETs through redis-py against one Redis server, the counterpart of
upstream-bench (main.swift beside this file). Prints one line of JSON like it."""
import argparse
import json
import resource
import time

import redis


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=6379)
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--pipeline", type=int, default=32)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--protocol", type=int, default=3)
    args = parser.parse_args()
    client = redis.Redis(host="127.0.0.1", port=args.port, protocol=args.protocol)
    client.set("bench:key", b"v" * args.value_size)
    for _ in range(200):
        pipe = client.pipeline(transaction=False)
        for _ in range(args.pipeline):
            pipe.get("bench:key")
        pipe.execute()
    rounds = max(1, args.requests // args.pipeline)
    cpu_before = cpu_seconds()
    start = time.perf_counter()
    for _ in range(rounds):
        pipe = client.pipeline(transaction=False)
        for _ in range(args.pipeline):
            pipe.get("bench:key")
        replies = pipe.execute()
        assert len(replies) == args.pipeline and len(replies[0]) == args.value_size
    seconds = time.perf_counter() - start
    cpu = cpu_seconds() - cpu_before
    total = rounds * args.pipeline
    print(json.dumps({"client": f"redis-py-resp{args.protocol}", "requests": total, "seconds": seconds,
                      "rps": total / seconds, "client_cpu_us": cpu / total * 1e6}))


if __name__ == "__main__":
    main()
