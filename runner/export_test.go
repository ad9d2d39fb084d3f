package runner

// Abandon closes leaderrun's end of the guard's socket without a disarm, as
// leaderrun's death would, and waits for the guard to exit. Tests only.
func (g *Guard) Abandon() {
	g.mu.Lock()
	g.disarmed = true // the guard's exit is expected: Died stays open
	g.mu.Unlock()
	close(g.quit)
	g.conn.Close()
	_ = g.cmd.Wait()
	g.wg.Wait()
}

// Armed is closed once Arm has sent the child's group to the guard.
func (g *Guard) Armed() <-chan struct{} { return g.armed }
