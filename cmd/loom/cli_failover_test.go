package main

import (
	"net"
	"strings"
	"testing"
)

// deadAddr returns a loopback address where nothing answers.
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing answers there now
	return addr
}

// $LOOM_ADDR and -addr take several addresses; the CLI reaches a server
// that answers among them.
func TestCLIWithSeveralAddresses(t *testing.T) {
	live, dead := startWidgetServer(t), deadAddr(t)
	c := newCLI(t, dead+","+live)
	file := writeFile(t, "widgets.yaml", widgetsYAML)
	c.ok("apply", "-f", file)
	for i := 0; i < 3; i++ { // the list is shuffled: try both orders
		if out := c.ok("read", "-addr", live+", "+dead, "clitest.v1.Widget", "a", "-o", "name"); !strings.Contains(out, "/a") {
			t.Fatalf("read printed %q, want widget a", out)
		}
	}
	_, errOut, code := c.run("read", "-addr", live+",,"+dead, "clitest.v1.Widget", "a")
	if code != 2 || !strings.Contains(errOut, "-addr") {
		t.Errorf("-addr with an empty entry: exit %d, stderr %q; want exit 2 naming -addr", code, errOut)
	}
}
