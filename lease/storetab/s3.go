package storetab

import "time"

// s3 is the S3 store: an object per lease in a bucket, polled.
var s3 = Row{
	Name:       "S3",
	Schemes:    []string{"s3"},
	Form:       "s3://BUCKET[/PREFIX]",
	Program:    "leaderrun-s3",
	Package:    "github.com/leaderrun/leaderrun/lease/s3lease",
	Expires:    true,
	MinTTL:     time.Second,
	TTLUnit:    time.Millisecond,
	Poll:       time.Second,
	Step:       400 * time.Millisecond,
	SecretVars: []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"},
}
