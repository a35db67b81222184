//go:build cluster

package clustertest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is a child process the test started: in a process group of its
// own, its output in a file.
type proc struct {
	name  string
	cmd   *exec.Cmd
	log   string         // file with its standard error (and output)
	stdin io.WriteCloser // closing it ends an etcdmember started with -stdin-lifetime
	done  chan struct{}  // closed once it has exited
	err   error          // its exit status, once done
	ended time.Time      // when it was seen to exit
}

// start runs bin with args, its output going to a log file in dir. The
// process and its group are killed when the test ends, whatever happened.
func start(t *testing.T, dir, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	out, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout = out
	p.cmd.Stderr = out
	p.cmd.SysProcAttr = sysProcAttr()
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		p.ended = time.Now()
		out.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

// kill ends the process group with SIGKILL and waits for the process.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// stop asks the process to end (SIGTERM) and waits up to timeout before
// killing it. It returns the exit error, or an error if it had to kill.
func (p *proc) stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = p.stdin.Close()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", p.name, timeout)
	}
}

// signal sends sig to the process group.
func (p *proc) signal(sig syscall.Signal) {
	if !p.exited() {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// output returns what the process has logged so far.
func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// tail returns the last lines of the output, for failure messages.
func (p *proc) tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.output(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("--- last %d lines of %s (%s):\n%s", len(lines), p.name, p.log, strings.Join(lines, "\n"))
}

// logLine is one JSON log line of a loom server (hclog's JSON format).
type logLine struct {
	Time    time.Time
	Message string
	Module  string
	Fields  map[string]any
}

// logLines parses the JSON lines of p's log; other lines are skipped.
func (p *proc) logLines() []logLine {
	var out []logLine
	sc := bufio.NewScanner(bytes.NewReader([]byte(p.output())))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		l := logLine{Fields: m}
		l.Message, _ = m["@message"].(string)
		l.Module, _ = m["@module"].(string)
		if ts, ok := m["@timestamp"].(string); ok {
			l.Time, _ = time.Parse(time.RFC3339Nano, ts)
		}
		out = append(out, l)
	}
	return out
}

// int64Field returns a numeric field of a log line.
func (l logLine) int64Field(name string) int64 {
	switch v := l.Fields[name].(type) {
	case float64:
		return int64(v)
	case string:
		var n int64
		fmt.Sscan(v, &n)
		return n
	}
	return 0
}

func (l logLine) stringField(name string) string {
	s, _ := l.Fields[name].(string)
	return s
}

// poll calls cond every few milliseconds until it returns nil or the
// deadline passes; then it returns cond's last error.
func poll(deadline time.Time, cond func() error) error {
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
	}
}

// freePorts returns n loopback ports that were free a moment ago, all
// different.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// repoRoot returns the repository root: the directory with go.work above
// this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.work above %s: the cluster test builds the binaries from the repository's workspace", dir)
		}
	}
}

// raceEnabled reports whether go can build with the race detector here
// (it needs cgo).
func raceEnabled(t *testing.T) bool {
	out, err := exec.Command("go", "env", "CGO_ENABLED").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	return strings.TrimSpace(string(out)) == "1"
}

// build compiles the main packages (paths relative to the repository root)
// into dir, in parallel, with the given build flags, and returns the
// binaries' paths by package.
func build(t *testing.T, dir string, flags []string, pkgs ...string) map[string]string {
	t.Helper()
	root := repoRoot(t)
	out := make(map[string]string)
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for _, pkg := range pkgs {
		bin := filepath.Join(dir, filepath.Base(pkg))
		out[pkg] = bin
		wg.Go(func() {
			cmd := exec.Command("go", append(append([]string{"build", "-o", bin}, flags...), pkg)...)
			cmd.Dir = root
			if b, err := cmd.CombinedOutput(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("go build %s: %v\n%s", pkg, err, b))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}
