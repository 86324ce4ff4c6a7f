// A real memcached client (npm memcache) for the Go tests to drive.
//
//   node client.mjs discover HOST:PORT POLL_MS   Auto Discovery from a configuration endpoint
//   node client.mjs nodes HOST:PORT[,HOST:PORT...]  a fixed server list (a proxy, say)
//
// It reads one JSON command a line on stdin and writes one JSON line on
// stdout per event and per answer:
//
//   {"op":"set","prefix":"k","n":300,"size":100}  -> {"op":"set","ok":300,"errors":0}
//   {"op":"set","prefix":"k","n":300,"value":"v2"} -> the same, every value "v2"
//   {"op":"get","prefix":"k","n":300}             -> {"op":"get","hits":290,"misses":10,"errors":0,"stale":0}
//   {"op":"get","prefix":"k","n":300,"expect":"v2"} -> the same, stale counting the hits whose value is not "v2"
//   {"op":"get","prefix":"k","n":300,"expect":"v2","previous":"v1"} -> the same, and previous counting the stale hits whose value is "v1"
//   {"op":"nodes"}                                -> {"op":"nodes","nodes":["10.0.0.1:11211",...]}
//   {"op":"quit"}                                 -> exits
//
// and, with discover, {"event":"config","version":N,"nodes":[...]} once the
// client applied a configuration (its node list matches it), and
// {"event":"error","message":"..."} for a failed poll.
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
const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const cmd = JSON.parse(line);
  switch (cmd.op) {
    case "set": {
      let ok = 0, errors = 0;
      for (let i = 0; i < cmd.n; i++) {
        try {
          if (await client.set(`${cmd.prefix}${i}`, cmd.value ?? value(cmd.size || 100))) ok++;
          else errors++;
        } catch {
          errors++;
        }
      }
      emit({ op: "set", ok, errors });
      break;
    }
    case "get": {
      let hits = 0, misses = 0, errors = 0, stale = 0, previous = 0;
      for (let i = 0; i < cmd.n; i++) {
        try {
          const v = await client.get(`${cmd.prefix}${i}`);
          if (v === undefined || v === null) misses++;
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
      emit({ op: "get", hits, misses, errors, stale, previous });
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
