package runner

// Abandon closes leaderrun's end of the guard's socket without a disarm, as
// leaderrun's death would, and waits for the guard to exit. Tests only.
func (g *Guard) Abandon() {
	g.mu.Lock()
	g.disarmed = true // the guard's exit is expected: Died stays open
	g.mu.Unlock()
	close(g.quit)
	g.conn.Close()
	reap(g.pid)
	g.wg.Wait()
}

// Armed is closed once Arm has sent the child's group to the guard.
func (g *Guard) Armed() <-chan struct{} { return g.armed }

// CloseOwnerEnd closes leaderrun's end of the guard's socket without a
// disarm, as leaderrun's death would, and returns at once; WaitExit then
// waits for the guard to exit. Tests only.
func (g *Guard) CloseOwnerEnd() {
	g.mu.Lock()
	g.disarmed = true // the guard's exit is expected: Died stays open
	g.mu.Unlock()
	close(g.quit)
	g.conn.Close()
}

// WaitExit waits for the guard process and the Guard's goroutines to end
// after CloseOwnerEnd. Tests only.
func (g *Guard) WaitExit() {
	reap(g.pid)
	g.wg.Wait()
}
