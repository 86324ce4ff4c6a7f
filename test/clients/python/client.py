"""A real memcached client (pymemcache's HashClient) for the Go tests to drive.

    /usr/bin/python3 client.py nodes HOST:PORT[,HOST:PORT...]

Debian's python3-pymemcache, run by Debian's own /usr/bin/python3 (the
interpreter it is installed for). HashClient is set up as its users set it
up: a static list of (host, port), rendezvous hashing on "host:port" as
written (so on names, not addresses), each name resolved by the system
resolver when a connection is made. The timeouts are client.mjs's (2 s).
retry_timeout=0 is what sync/api/v1alpha1/README.md (stable names) gives
HashClient users: when a leaving Pod's memcached stops, the request in
flight on its connection fails with ECONNRESET, a socket.error, which
HashClient answers by skipping the server for retry_timeout (1 s by
default: every get of its keys returns the default, a miss, without
trying; pymemcache 3.5.2's client/hash.py, _safely_run_func and
_mark_failed_server). Its name already points at the successor, which the
next connection reaches: with 0 the next request reconnects at once.
retry_attempts (2) still marks a server that keeps failing dead. Sets
are noreply, pymemcache's default (default_noreply): "ok" counts the sets
written to a socket, not those memcached answered.

It speaks test/clients/node/client.mjs's protocol: one JSON command a line
on stdin, one JSON answer a line on stdout:

  {"op":"set","prefix":"k","n":300,"size":100}   -> {"op":"set","ok":300,"errors":0}
  {"op":"set","prefix":"k","n":300,"value":"v2"} -> the same, every value "v2"
  {"op":"get","prefix":"k","n":300}              -> {"op":"get","hits":290,"misses":10,"errors":0,"stale":0}
  {"op":"get","prefix":"k","n":300,"expect":"v2"} -> the same, stale counting the hits whose value is not "v2"
  {"op":"get","prefix":"k","n":300,"expect":"v2","previous":"v1"} -> the same, and previous counting the stale hits whose value is "v1"
  {"op":"nodes"}                                 -> {"op":"nodes","nodes":["cache-0...:11211",...]}
  {"op":"quit"}                                  -> exits

nodes are the servers HashClient hashes over now, as it names them: a
server it marked dead (after retry_attempts failures) leaves the list until
dead_timeout passes, and its keys go to the others meanwhile.
"""

import json
import sys

from pymemcache.client.hash import HashClient


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def server(spec):
    host, port = spec.rsplit(":", 1)
    return (host, int(port))


def main(argv):
    if len(argv) != 2 or argv[0] != "nodes":
        sys.stderr.write("usage: client.py nodes HOST:PORT[,HOST:PORT...]\n")
        return 2
    client = HashClient([server(s) for s in argv[1].split(",")], connect_timeout=2, timeout=2, retry_timeout=0)
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "set":
            value = cmd["value"] if "value" in cmd else "v" * (cmd.get("size") or 100)
            ok = errors = 0
            for i in range(cmd["n"]):
                try:
                    if client.set("%s%d" % (cmd["prefix"], i), value):
                        ok += 1
                    else:
                        errors += 1
                except Exception:
                    errors += 1
            emit({"op": "set", "ok": ok, "errors": errors})
        elif op == "get":
            hits = misses = errors = stale = previous = 0
            expect, before = cmd.get("expect"), cmd.get("previous")
            for i in range(cmd["n"]):
                try:
                    v = client.get("%s%d" % (cmd["prefix"], i))
                    if v is None:
                        misses += 1
                    else:
                        hits += 1
                        if expect is not None and v.decode() != expect:
                            stale += 1
                            if before is not None and v.decode() == before:
                                previous += 1
                except Exception:
                    errors += 1
            emit({"op": "get", "hits": hits, "misses": misses, "errors": errors, "stale": stale, "previous": previous})
        elif op == "nodes":
            emit({"op": "nodes", "nodes": list(client.hasher.nodes)})
        elif op == "quit":
            client.close()
            return 0
        else:
            sys.stderr.write("unknown op %r\n" % op)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
