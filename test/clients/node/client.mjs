// A real memcached client (npm memcache) for the Go tests to drive.
//
//   node client.mjs discover HOST:PORT POLL_MS   Auto Discovery from a configuration endpoint
//   node client.mjs nodes HOST:PORT[,HOST:PORT...]  a fixed server list (a proxy, say)
//
// It reads one JSON command a line on stdin and writes one JSON line on
// stdout per event and per answer:
//
//   {"op":"set","prefix":"k","n":300,"size":100}  -> {"op":"set","ok":300,"errors":0,"stuck":0}
//   {"op":"set","prefix":"k","n":300,"value":"v2"} -> the same, every value "v2"
//   {"op":"get","prefix":"k","n":300}             -> {"op":"get","hits":290,"misses":10,"errors":0,"stuck":0,"stale":0,"previous":0}
//   {"op":"get","prefix":"k","n":300,"expect":"v2"} -> the same, stale counting the hits whose value is not "v2"
//   {"op":"get","prefix":"k","n":300,"expect":"v2","previous":"v1"} -> the same, and previous counting the stale hits whose value is "v1"
//   {"op":"nodes"}                                -> {"op":"nodes","nodes":["10.0.0.1:11211",...]}
//   {"op":"quit"}                                 -> exits
//
// and, with discover, {"event":"config","version":N,"nodes":[...]} once the
// client applied a configuration (its node list matches it), and
// {"event":"error","message":"..."} for a failed poll.
//
// Each set and get is given OP_DEADLINE_MS: one that has not settled by
// then is counted an error, and in "stuck" too, and told as it happens:
//
//   {"event":"stuck","command":"get","key":"k7","node":"10.0.0.3:11211","connected":false,"in_ring":false}
//
// node being the server the key hashed to when the operation began, and
// whether it is connected and still in the client's ring now. (An event
// names no "op": Client.Do takes the next line with its op for the
// answer.)
//
// The library bounds every wait it makes by its socket's idle timeout
// (timeout: 2000, connecting included), so an operation settles within a
// few seconds, or never: memcache 1.10.0 (the newest on npm as of this
// writing) leaves an operation pending forever when Auto Discovery
// removes the node it is connecting to. In its dist/index.mjs:
//
//   - Memcache.get (line 2350) and set (2511) call getNodesByKey (2837),
//     which awaits node.connect() for a node whose connection went, as
//     one to an ended Pod has: every get of its keys reconnects.
//   - MemcacheNode.connect (500) settles its promise only on the socket's
//     "connect", "error" (542: reject while not connected) or "timeout"
//     (554) event; its "close" handler (548) rejects the queued commands,
//     not the connection's promise.
//   - Memcache.applyClusterConfig (3052) removes a node the new
//     configuration lacks with removeNode (2246), which calls
//     MemcacheNode.disconnect (564): socket.destroy() with no error.
//     Node emits no "error" for a socket destroyed while it connects (the
//     refused or unreachable connect is dropped, the socket being
//     destroyed), and destroy clears the idle timer: only "close" comes.
//
// So when the poll that drops a node lands while a get is connecting to
// it, which an ended Pod's keys make likely (each fails at once and the
// next reconnects), that get's promise never settles, and a loop awaiting
// it never ends (TestStableNamesThroughARollout, a Pod killed without
// grace, once in 16 runs under load). Any application awaiting the
// library without a deadline of its own would hang the same way; with
// one, it sees an error, which is what this client counts. The stuck
// promise holds nothing else up: the node is out of the ring, and no
// command of it is queued.
import { Memcache } from "memcache";
import readline from "node:readline";

const [mode, target, poll] = process.argv.slice(2);
const emit = (o) => process.stdout.write(JSON.stringify(o) + "\n");

let client;
if (mode === "discover") {
  client = new Memcache({
    nodes: [],
    timeout: 2000,
    autoDiscover: { enabled: true, configEndpoint: target, pollingInterval: Number(poll) },
  });
} else if (mode === "nodes") {
  client = new Memcache({ nodes: target.split(","), timeout: 2000 });
} else {
  console.error("usage: client.mjs discover HOST:PORT POLL_MS | nodes LIST");
  process.exit(2);
}

const idOf = (n) => `${n.ip || n.hostname}:${n.port}`;
const same = (a, b) => a.length === b.length && [...a].sort().join() === [...b].sort().join();

// Reports a configuration once the client's node list is the one it names:
// applyClusterConfig adds and removes nodes after the update event.
async function applied(config) {
  const want = config.nodes.map(idOf);
  for (let i = 0; i < 200 && !same(client.nodeIds, want); i++) {
    await new Promise((r) => setTimeout(r, 10));
  }
  emit({ event: "config", version: config.version, nodes: want, applied: same(client.nodeIds, want) });
}

client.on("autoDiscover", (config) => applied(config));
client.on("autoDiscoverUpdate", (config) => applied(config));
client.on("autoDiscoverError", (err) => emit({ event: "error", message: String(err && err.message ? err.message : err) }));
client.on("error", () => {}); // counted per command below

await client.connect();

const value = (size) => "v".repeat(size);

// OP_DEADLINE_MS is five times the library's timeout, above the longest an
// operation can take and settle (a connection timing out, then a command
// waiting out the idle timeout), with room for a loaded machine.
const OP_DEADLINE_MS = 10000;
const STUCK = Symbol("stuck");

// bounded runs op (a set or a get of key) and returns what it returns, or
// STUCK once OP_DEADLINE_MS passed, telling which node it waited on.
async function bounded(op, key, run) {
  const [node] = client.hash.getNodesByKey(key);
  let timer;
  const deadline = new Promise((resolve) => {
    timer = setTimeout(resolve, OP_DEADLINE_MS, STUCK);
  });
  try {
    const r = await Promise.race([run(), deadline]);
    if (r === STUCK) {
      emit({ event: "stuck", command: op, key, node: node?.id, connected: node?.isConnected(), in_ring: client.nodes.includes(node) });
    }
    return r;
  } finally {
    clearTimeout(timer);
  }
}
const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const cmd = JSON.parse(line);
  switch (cmd.op) {
    case "set": {
      let ok = 0, errors = 0, stuck = 0;
      for (let i = 0; i < cmd.n; i++) {
        const key = `${cmd.prefix}${i}`;
        try {
          const r = await bounded("set", key, () => client.set(key, cmd.value ?? value(cmd.size || 100)));
          if (r === STUCK) {
            errors++;
            stuck++;
          } else if (r) ok++;
          else errors++;
        } catch {
          errors++;
        }
      }
      emit({ op: "set", ok, errors, stuck });
      break;
    }
    case "get": {
      let hits = 0, misses = 0, errors = 0, stuck = 0, stale = 0, previous = 0;
      for (let i = 0; i < cmd.n; i++) {
        const key = `${cmd.prefix}${i}`;
        try {
          const v = await bounded("get", key, () => client.get(key));
          if (v === STUCK) {
            errors++;
            stuck++;
          } else if (v === undefined || v === null) misses++;
          else {
            hits++;
            if (cmd.expect !== undefined && String(v) !== cmd.expect) {
              stale++;
              if (cmd.previous !== undefined && String(v) === cmd.previous) previous++;
            }
          }
        } catch {
          errors++;
        }
      }
      emit({ op: "get", hits, misses, errors, stuck, stale, previous });
      break;
    }
    case "nodes":
      emit({ op: "nodes", nodes: client.nodeIds });
      break;
    case "quit":
      await client.disconnect();
      process.exit(0);
  }
}
