//go:build cluster && !linux && !windows

package clustertest

import "syscall"

// sysProcAttr puts a child in a process group of its own, so it can be
// killed with everything it started.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
