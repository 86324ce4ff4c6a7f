<?php
// A real memcached client (PHP's memcached extension, libmemcached
// underneath) for the Go tests to drive.
//
//   php client.php nodes HOST:PORT[,HOST:PORT...]
//
// Debian's php-cli and php-memcached, set up as its users set up a pool:
// OPT_LIBKETAMA_COMPATIBLE (consistent hashing, DISTRIBUTION_CONSISTENT,
// ketama's MD5 points made from each server's "host:port" as written, so
// from names, not addresses) over a static list; libmemcached resolves each
// name with the system resolver when it connects. The options are those
// sync/api/v1alpha1/README.md (stable names) gives PHP users.
//
// It speaks test/clients/node/client.mjs's protocol: one JSON command a
// line on stdin, one JSON answer a line on stdout:
//
//   {"op":"set","prefix":"k","n":300,"size":100}   -> {"op":"set","ok":300,"errors":0}
//   {"op":"set","prefix":"k","n":300,"value":"v2"} -> the same, every value "v2"
//   {"op":"get","prefix":"k","n":300}              -> {"op":"get","hits":290,"misses":10,"errors":0,"stale":0}
//   {"op":"get","prefix":"k","n":300,"expect":"v2"} -> the same, stale counting the hits whose value is not "v2"
//   {"op":"get","prefix":"k","n":300,"expect":"v2","previous":"v1"} -> the same, and previous counting the stale hits whose value is "v1"
//   {"op":"nodes"}                                 -> {"op":"nodes","nodes":["cache-0...:11211",...]}
//   {"op":"quit"}                                  -> exits

function emit(array $o): void
{
    fwrite(STDOUT, json_encode($o) . "\n");
    fflush(STDOUT);
}

if ($argc !== 3 || $argv[1] !== 'nodes') {
    fwrite(STDERR, "usage: client.php nodes HOST:PORT[,HOST:PORT...]\n");
    exit(2);
}

$m = new Memcached();
$m->setOption(Memcached::OPT_LIBKETAMA_COMPATIBLE, true);
// Timeouts as a web application sets them: a request must not hang on a
// Pod that is gone (libmemcached then retries it after OPT_RETRY_TIMEOUT,
// 2 s by default, and answers its keys with an error meanwhile).
$m->setOption(Memcached::OPT_CONNECT_TIMEOUT, 500);       // ms
$m->setOption(Memcached::OPT_SEND_TIMEOUT, 500000);       // µs
$m->setOption(Memcached::OPT_RECV_TIMEOUT, 500000);       // µs
$m->setOption(Memcached::OPT_POLL_TIMEOUT, 500);          // ms
// libmemcached keeps the address it resolved a name to and reconnects to
// it (connect.cc, network_connect: it looks the name up again only once
// every address it has failed), so when a leaving Pod's memcached stops,
// the next request connects to that Pod's old address and fails. By
// default that one failure puts the server in timeout
// (OPT_SERVER_TIMEOUT_LIMIT 0; server.hpp,
// memcached_mark_server_for_timeout) for OPT_RETRY_TIMEOUT, 2 s counted in
// whole seconds: its keys answer "SERVER HAS FAILED AND IS DISABLED UNTIL
// TIMED RETRY" for 2 to 3 s. With 2, the request after it looks the name
// up again and reaches the successor; a server that fails twice in a row
// is still put in timeout.
$m->setOption(Memcached::OPT_SERVER_TIMEOUT_LIMIT, 2);
$servers = [];
foreach (explode(',', $argv[2]) as $spec) {
    $i = strrpos($spec, ':');
    $servers[] = [substr($spec, 0, $i), (int) substr($spec, $i + 1)];
}
if (!$m->addServers($servers)) {
    fwrite(STDERR, "addServers: " . $m->getResultMessage() . "\n");
    exit(2);
}

while (($line = fgets(STDIN)) !== false) {
    $cmd = json_decode($line, true);
    switch ($cmd['op']) {
        case 'set':
            $value = array_key_exists('value', $cmd) ? $cmd['value'] : str_repeat('v', ($cmd['size'] ?? 0) ?: 100);
            $ok = $errors = 0;
            for ($i = 0; $i < $cmd['n']; $i++) {
                if ($m->set($cmd['prefix'] . $i, $value)) {
                    $ok++;
                } else {
                    $errors++;
                }
            }
            emit(['op' => 'set', 'ok' => $ok, 'errors' => $errors]);
            break;
        case 'get':
            $hits = $misses = $errors = $stale = $previous = 0;
            $expect = $cmd['expect'] ?? null;
            $before = $cmd['previous'] ?? null;
            for ($i = 0; $i < $cmd['n']; $i++) {
                $v = $m->get($cmd['prefix'] . $i);
                switch ($m->getResultCode()) {
                    case Memcached::RES_SUCCESS:
                        $hits++;
                        if ($expect !== null && $v !== $expect) {
                            $stale++;
                            if ($before !== null && $v === $before) {
                                $previous++;
                            }
                        }
                        break;
                    case Memcached::RES_NOTFOUND:
                        $misses++;
                        break;
                    default:
                        $errors++;
                }
            }
            emit(['op' => 'get', 'hits' => $hits, 'misses' => $misses, 'errors' => $errors, 'stale' => $stale, 'previous' => $previous]);
            break;
        case 'nodes':
            $nodes = [];
            foreach ($m->getServerList() as $s) {
                $nodes[] = $s['host'] . ':' . $s['port'];
            }
            emit(['op' => 'nodes', 'nodes' => $nodes]);
            break;
        case 'quit':
            $m->quit();
            exit(0);
        default:
            fwrite(STDERR, "unknown op {$cmd['op']}\n");
            exit(2);
    }
}
