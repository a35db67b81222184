//go:build unix

package host

import "syscall"

// fdLimit returns the process's limit on open file descriptors (the soft
// RLIMIT_NOFILE, which Go raises to the hard one at start), or 0 when it
// cannot be read.
func fdLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return r.Cur
}
