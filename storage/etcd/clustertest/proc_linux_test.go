//go:build cluster

package clustertest

import "syscall"

// sysProcAttr puts a child in a process group of its own, so it can be
// killed with everything it started, and has the kernel kill it if the test
// process dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
