package lease

// HerdFront exports herdFront to the external tests.
const HerdFront = herdFront

// URandom is Random's fallback where getrandom(2) is missing.
var URandom = urandom
