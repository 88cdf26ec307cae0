//go:build !linux

package store

import "os"

// fdatasync flushes f; where there is no fdatasync, with fsync (on macOS,
// Go's File.Sync is F_FULLFSYNC).
func fdatasync(f *os.File) error { return f.Sync() }
