package runner

import "fmt"

// mayStart asks cfg.MayStart, if set, whether the child may still start.
func mayStart(cfg Config) error {
	if cfg.MayStart == nil {
		return nil
	}
	if err := cfg.MayStart(); err != nil {
		return fmt.Errorf("%s not started: %w", cfg.Args[0], err)
	}
	return nil
}
