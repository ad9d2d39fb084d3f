package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// ---- S3 (versitygw) ----

// newS3Faults injects faults into the gateway scripts/versitygw.sh started
// in c.s3Dir: one process, so a signal to its PID pauses or kills it all;
// its objects are files that survive a kill.
func newS3Faults(d *driver) (storeFaults, error) {
	s, env, err := newScriptServer(d, serverSpec{store: "s3", flag: "s3", dir: d.c.s3Dir,
		script: filepath.Join(d.c.s3Scripts, "versitygw.sh"), proc: "versitygw",
		pidVar: "LEADERRUN_TEST_S3_PID", addrVar: "LEADERRUN_TEST_S3_ENDPOINT", addrIs: "endpoint"})
	if err != nil {
		return nil, err
	}
	o := s3Object{s3.New(s3.Options{
		BaseEndpoint: aws.String(env["LEADERRUN_TEST_S3_ENDPOINT"]), Region: "us-east-1", UsePathStyle: true,
		Credentials:                credentials.NewStaticCredentialsProvider(env["LEADERRUN_TEST_S3_ACCESS_KEY"], env["LEADERRUN_TEST_S3_SECRET_KEY"], ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		RetryMaxAttempts:           1,
	}), "chaos/lease/" + d.c.name}
	return &serverFaults{scriptServer: s, keyKinds: []string{"key_delete", "key_edit"}, key: objectKeyFault(d, o)}, nil
}

// s3Object is the lease's object in the gateway.
type s3Object struct {
	client *s3.Client
	key    string
}

func (o s3Object) get(ctx context.Context) (io.ReadCloser, error) {
	out, err := o.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("leases"), Key: aws.String(o.key)})
	if err != nil {
		return nil, err
	}
	return out.Body, nil
}

func (o s3Object) put(ctx context.Context, b []byte) error {
	_, err := o.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("leases"), Key: aws.String(o.key), Body: bytes.NewReader(b)})
	return err
}

func (o s3Object) del(ctx context.Context) error {
	_, err := o.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("leases"), Key: aws.String(o.key)})
	return err
}
