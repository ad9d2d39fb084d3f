package leasetest

// SecretLike reports whether s is worth checking for in output when a fuzz
// target plants it as a password, key or signature: long enough (8 to 128
// bytes) that it cannot appear by chance in a fixed message, and
// alphanumeric, so swapping it for another string of the same kind keeps a
// URL's or connection string's shape.
func SecretLike(s string) bool {
	if len(s) < 8 || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
