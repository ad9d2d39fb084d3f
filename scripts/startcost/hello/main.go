// Command hello is the Go hello-world that the start-up benchmark measures leaderrun
// --version against: the runtime's own start-up and nothing else.
package main

import "os"

func main() { os.Stdout.WriteString("hello\n") }
