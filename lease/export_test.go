package lease

// HerdFront exports herdFront to the external tests.
const HerdFront = herdFront
