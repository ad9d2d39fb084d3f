package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// azBenchEnv returns the environment for leaderrun against a fresh container
// on the Azurite of LEADERRUN_TEST_AZURITE (scripts/bench-azure.sh starts one).
func azBenchEnv(b *testing.B, query string) []string {
	ep := strings.TrimRight(os.Getenv("LEADERRUN_TEST_AZURITE"), "/")
	if ep == "" {
		b.Skip("LEADERRUN_TEST_AZURITE is not set; scripts/bench-azure.sh starts Azurite")
	}
	return append(azEnv(azDevKey), "LEADERRUN_STORE="+azStoreURL(ep, azContainer(), query))
}

// BenchmarkAzureHandover: clean handover on Azurite with the default poll
// interval (1s, jittered ±25%) and with ?poll=200ms.
func BenchmarkAzureHandover(b *testing.B) {
	b.Run("default-poll", func(b *testing.B) { benchHandover(b, azBenchEnv(b, "")) })
	b.Run("poll-200ms", func(b *testing.B) { benchHandover(b, azBenchEnv(b, "poll=200ms")) })
}

// BenchmarkAzureStartToChild measures an uncontended run on Azurite from
// starting leaderrun to the child's first instruction (it prints the time),
// and, from leaderrun's own -v JSON log, the part spent in Acquire (from the
// "timing" line, logged once the store is open, to "acquired": one
// TryAcquire = acquire lease + read + write metadata) and from "acquired"
// to the child's start. The blob exists already (the common case).
func BenchmarkAzureStartToChild(b *testing.B) {
	env := azBenchEnv(b, "")
	run := func() (total, acquire, toChild time.Duration) {
		cmd := exec.Command(lrBin, "-v", "--log-format", "json", "--name", "startup", "--", "date", "+%s%N")
		cmd.Env = append(os.Environ(), env...)
		var stderr lockedBuffer
		cmd.Stderr = &stderr
		t0 := time.Now()
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("%v: %s", err, stderr.String())
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		child := time.Unix(0, ns)
		at := map[string]time.Time{}
		for _, l := range strings.Split(stderr.String(), "\n") {
			var m struct {
				Time time.Time
				Msg  string
			}
			if json.Unmarshal([]byte(l), &m) == nil {
				switch {
				case m.Msg == "timing":
					at["timing"] = m.Time
				case strings.HasSuffix(m.Msg, " acquired"):
					at["acquired"] = m.Time
				}
			}
		}
		if at["timing"].IsZero() || at["acquired"].IsZero() {
			b.Fatalf("no timing/acquired lines in %s", stderr.String())
		}
		return child.Sub(t0), at["acquired"].Sub(at["timing"]), child.Sub(at["acquired"])
	}
	run() // creates the container and the blob
	var total, acq, toChild []time.Duration
	for i := 0; i < b.N; i++ {
		t, a, c := run()
		total, acq, toChild = append(total, t), append(acq, a), append(toChild, c)
	}
	reportPercentiles(b, total, "start-to-child")
	reportPercentiles(b, acq, "acquire")
	reportPercentiles(b, toChild, "acquired-to-child")
}
