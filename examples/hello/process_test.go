package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomrt/loom/examples/hello/greeting"
	"github.com/loomrt/loom/host"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/remote"
)

// processEnv makes this test binary, run again, one of the processes of
// TestGreeterInItsOwnProcess instead of running the tests: "hello" is the
// host (main's register and name), "greeter" the greeter process
// (cmd/greeter's register and name). Either writes the addresses it bound
// to its standard output as one JSON line, and logs to its standard error.
const processEnv = "HELLO_TEST_PROCESS"

func TestMain(m *testing.M) {
	switch os.Getenv(processEnv) {
	case "hello":
		host.Main(register, host.WithName("hello"), host.WithListening(func(a host.Addrs) { report(a) }))
	case "greeter":
		remote.Main(func(p *remote.Process) error {
			return greeting.RegisterControllers(p.Manager())
		}, remote.WithName("greeter"), remote.WithListening(func(a remote.Addrs) { report(a) }))
	default:
		os.Exit(m.Run())
	}
}

// report writes addrs to standard output, where the test reads them.
func report(addrs any) {
	if err := json.NewEncoder(os.Stdout).Encode(addrs); err != nil {
		fmt.Fprintln(os.Stderr, "reporting the addresses:", err)
		os.Exit(1)
	}
}

// TestGreeterInItsOwnProcess runs the example as two processes: the host
// with -controllers=false, serving the types only, and the greeter
// controller in a process of its own (package remote, as cmd/greeter runs
// it) that connects to it. The greeter greets; on SIGTERM it stops and
// releases its lease, and both exit cleanly.
func TestGreeterInItsOwnProcess(t *testing.T) {
	var served host.Addrs
	hello := startProcess(t, "hello", &served, "-dev", "-controllers=false", "-grpc-addr", "127.0.0.1:0", "-http-addr", "")
	var greeterAddrs remote.Addrs
	greeter := startProcess(t, "greeter", &greeterAddrs, "-addr", served.GRPC, "-http-addr", "127.0.0.1:0")

	ready := time.Now().Add(20 * time.Second)
	for code := 0; code != http.StatusOK; {
		if time.Now().After(ready) {
			t.Fatalf("the greeter was not ready within 20s (last /readyz: %d); its log:\n%s", code, greeter.log)
		}
		if rsp, err := http.Get("http://" + greeterAddrs.HTTP + "/readyz"); err == nil {
			code = rsp.StatusCode
			rsp.Body.Close()
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
	checkGreeter(t, pbresource.NewResourceServiceClient(dial(t, served.GRPC)))
	// The greeter process did the greeting.
	if n := reconciles(t, greeterAddrs.HTTP, greeting.ControllerName); n == 0 {
		t.Errorf("the greeter process reconciled nothing; its log:\n%s", greeter.log)
	}

	greeter.stop(t)
	if !strings.Contains(greeter.log.String(), "leader lease released") {
		t.Errorf("the greeter did not release its lease on SIGTERM; its log:\n%s", greeter.log)
	}
	hello.stop(t)
}

// reconciles returns the successful reconciles of controller that the
// /metrics at addr count.
func reconciles(t *testing.T, addr, controller string) float64 {
	t.Helper()
	rsp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	prefix := `loom_controller_reconcile_total{controller="` + controller + `",result="success"} `
	sc := bufio.NewScanner(rsp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", sc.Text(), err)
			}
			return n
		}
	}
	return 0
}

// childProcess is this test binary run as one of the example's processes.
type childProcess struct {
	name string
	cmd  *exec.Cmd
	log  *syncBuffer
	exit chan struct{} // closed when the process has exited, with err set
	err  error
}

// startProcess runs the process role with args until the test ends (when
// it is killed if still running), and decodes the addresses it reports into
// addrs.
func startProcess(t *testing.T, role string, addrs any, args ...string) *childProcess {
	t.Helper()
	p := &childProcess{name: role, cmd: exec.Command(os.Args[0], args...), log: &syncBuffer{}, exit: make(chan struct{})}
	// Under -race, a process sleeps a second at exit unless told not to.
	p.cmd.Env = append(os.Environ(), processEnv+"="+role, "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	p.cmd.Stderr = p.log
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reported := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(line, addrs)
		}
		reported <- err
		p.err = p.cmd.Wait() // after the read: Wait closes the pipe
		close(p.exit)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exit:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exit
		}
	})
	select {
	case err := <-reported:
		if err != nil {
			t.Fatalf("%s did not report its addresses: %v; its log:\n%s", role, err, p.log)
		}
	case <-p.exit:
		t.Fatalf("%s exited (%v) before reporting its addresses; its log:\n%s", role, p.err, p.log)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not report its addresses within 30s; its log:\n%s", role, p.log)
	}
	return p
}

// stop sends SIGTERM and waits for a clean exit.
func (p *childProcess) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signalling %s: %v", p.name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	select {
	case <-p.exit:
		if p.err != nil {
			t.Fatalf("%s exited with %v after SIGTERM; its log:\n%s", p.name, p.err, p.log)
		}
	case <-ctx.Done():
		t.Fatalf("%s did not exit within 20s of SIGTERM; its log:\n%s", p.name, p.log)
	}
}
