// Package handoff copies the items of memcached Pods that leave, move
// slots, or lose keys to the slots a scale-up added, to the Pods that take
// their keys, as the Memcached's status asks (status.handoffs, planned by
// the hook; see sync/slots.Handoffs), and reports how far each copy got.
// cmd/memcached-agent/README.md draws the whole hand-off, hook and agent.
//
// A copy lists the source's keys with lru_crawler mgdump, reads each item
// with mg (value, client flags, remaining TTL) and writes it with ms in
// add mode (ME) to its destination, so that an item the destination
// already holds, written there since the Pod took the slot and so newer,
// is never overwritten. Every ms goes whole or not at all: a copy cut
// short leaves both sides valid.
//
// A source that leaves (Replaced, Removed) has its writes forwarded from
// before the dump until its memcached stops (forward.go, and the section
// below): clients that keep their connections write to it until then.
//
// What a hand-off's reason changes is one entry of reasons (reasons.go):
// when an entry asks for a copy, where its items go, whether its source
// leaves (the done marker, forwarding), whether a source that stays loses
// the items copied (Grown), when the copy waits for clients to move to
// the slot's new owner, and whether it empties the Pod it fills first
// (Refill). The Runner reads the entry, never the reason; the README's
// table of reasons says the same, and TestREADMEReasons holds the two
// together.
//
// Two agents follow the same status; a lock item on the source (ms in add
// mode, with a TTL the holder renews) lets one of them copy while the
// other waits, and takes over if the holder dies.
//
// Its timings (the wait for clients to move, the lock's TTL, the catch-up
// before the done marker) are the defaults sync/contract gives, with the
// preStop's and the hook's they must fit in.
//
// # Forwarding a leaving source's writes
//
// The forwarder closes the window the bulk copy leaves open for clients
// that keep their connections (pymemcache's HashClient, libmemcached, the
// npm client given names): they look a slot's name up only when they
// connect, so they keep writing to the leaving Pod until its memcached
// stops, after the copy and its done marker. A write the source takes
// after the copy read its key would never reach the successor, which
// would serve the copied, older value (issue #27).
//
// So, for a hand-off whose source leaves (Replaced, Removed), or whose
// keys' clients are given their new place only once the copy ended
// (Moved, Grown, Refill), a connection to the source asks for `watch
// mutations deletions` before the key dump starts, and every key the
// source logs as stored or deleted from then on is handed on again
// (those the copy's route sends somewhere): read from the source (mg) and
// written to where the bulk copy sends that key in set mode (it is newer
// than anything the copy put there, or than what it read), or, when the
// last event was a deletion or the source no longer holds it, deleted
// there. Keys deleted there while the copy runs are checked again once it
// ends (copyEnded): the copy reads ahead, and its add may land after the
// deletion. It runs while the bulk copy runs (so that what piles up is
// bounded by the lag, not by the copy's length) and after the done
// marker, which waits for it at most maxCatchUp (catchUp), until the
// source's memcached closes the watch (it stopped), the hand-off's entry
// leaves the status, or maxForward passes.
//
// Moved, Grown and Refill sources stay and keep serving their other
// keys: their writes are forwarded until the table gives clients the
// keys' new places and ClientMove passed (removeAfterListed), each to
// where the copy's route sends its key (a key the route leaves on the
// source is not forwarded); a Grown copy's second pass, which deletes
// from its source what it copied, runs once the forwarding stopped, so
// that those deletions are not forwarded.
//
// The race this accepts: a client that moved to the successor writes a
// key there a few milliseconds after the forwarder read the same key's
// older value from the source, and the forwarder's set lands after it;
// the successor keeps the older value. Both writers wrote the key within
// the forwarder's lag, as two clients racing on one key would without a
// hand-off. A forwarded deletion (or a recheck after the copy) may
// likewise delete a value a moved client wrote: a miss, never a value
// older than the last one written.
//
// The source stops while clients still write to it, so the forwarder
// ends behind by whatever it had not read yet (a few milliseconds of
// writes, more on a loaded machine): those keys' last writes died with
// the source, and they are deleted on their destinations (gone, clear),
// a miss rather than the copy's older value. A write memcached's logger
// thread had not handed to the watch when memcached exited (its last
// pass, a millisecond or so while writes come) is not known at all and
// keeps what the successor holds.
//
// What memcached does not log is not forwarded: incr, decr and touch
// (memcached 1.6.45 logs stores and deletions only). A watcher that falls
// behind is told how many events it lost (skipped=N): counted, and those
// keys stay as the bulk copy left them.
package handoff
