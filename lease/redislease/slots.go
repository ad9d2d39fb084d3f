package redislease

import (
	"strconv"

	"github.com/leaderrun/leaderrun/lease"
)

// Slots (lease.Request.Slots above 1). Each slot of lease NAME is a lease of
// its own: slot 0 is leaderrun:{NAME} itself, slot k is leaderrun:{NAME}~k
// (with its channel leaderrun:{NAME}~k:released). The hash tag stays NAME,
// so every slot's record lives in the hash slot of NAME's fencing counter,
// leaderrun:{NAME}:token, which all of them mint from in the acquire
// script: tokens strictly increase across the slots of NAME, on a single
// server and on a Cluster alike. A lease taken without slots uses the keys
// it always did.

// tagged is name as it appears in its keys: {NAME} for a lease (or slot
// 0), {NAME}~k for slot k.
func tagged(name string) string {
	if base, k, ok := lease.ParseSlotName(name); ok {
		return "{" + base + "}~" + strconv.Itoa(k)
	}
	return "{" + name + "}"
}

// tokenDomain is the lease whose counter name's tokens come from: the
// lease itself, for a slot the lease it is a slot of.
func tokenDomain(name string) string {
	base, _, _ := lease.ParseSlotName(name)
	return base
}
