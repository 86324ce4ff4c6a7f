package slots

import "github.com/zeebo/xxh3"

// Place returns the slot, of n, that memcached's proxy sends key to with its
// default distribution: XXH3 64 (seed 0) of the key, then jump consistent
// hash over the backends in their order (proxy_jump_hash.c in memcached
// 1.6.45), the backends being the slots in slot order. The agent puts a
// removed slot's items where the proxy will look for them. n must be
// positive.
func Place(key []byte, n int) int {
	return jump(xxh3.Hash(key), n)
}

// jump is memcached's mcplib_dist_jump_hash_get_server, line for line:
// Lamping and Veach's jump consistent hash, with C's double arithmetic and
// its truncation back to an integer.
func jump(hash uint64, buckets int) int {
	b, j := int64(-1), int64(0)
	for j < int64(buckets) {
		b = j
		hash = hash*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((hash>>33)+1)))
	}
	return int(b)
}
