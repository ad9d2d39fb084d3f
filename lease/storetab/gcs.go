package storetab

import "time"

// gcs is the Google Cloud Storage store: an object per lease in a bucket,
// polled.
var gcs = Row{
	Name:    "GCS",
	Schemes: []string{"gs"},
	Form:    "gs://BUCKET[/PREFIX]",
	Program: "leaderrun-gcs",
	Package: "github.com/leaderrun/leaderrun/lease/gcslease",
	Expires: true,
	MinTTL:  time.Second,
	TTLUnit: time.Millisecond,
	Poll:    time.Second,
	Step:    400 * time.Millisecond,
}
