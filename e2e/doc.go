// Package e2e holds leaderrun's black-box tests and benchmarks: they build
// the programs once (TestMain), run them as users do, from the repository
// root, against real stores (the file store, redis-server, PostgreSQL,
// etcd and Azurite) started by the project's scripts on 127.0.0.1, and read
// only what a user sees:
// exit codes, stdout, stderr and the processes left behind. One file per
// store or theme; the README's own examples are run by readme_test.go.
package e2e
